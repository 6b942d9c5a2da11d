"""Operator load benchmark: a campaign of trivial trials against the real control plane and the cluster fake,
each measured side by side with that cluster's raw create throughput (and the kopf floor) in the same run.

    .venv/bin/python bench/kube_operator.py --trials 10000 --parallelism 200 --kopf-floor [--cluster real|fake|both]

(named ``kube_operator.py``, not ``operator.py``: a script folder holding ``operator.py`` would shadow the
standard library's ``operator`` module for every script run from it)

Pods are simulated (the tests' ``simulated_pods``: nothing runs; the store receives what the pod programs
would write) — on the real control plane by the simulated node (``simulatednode``), a real Node the scheduler
binds the pods to, with the real Job controller, garbage collector and TTL controller at work; on the fake
by its kubelet. ``--nodes real`` (with ``--cluster real``) runs the campaign on two **real nodes** instead
(kubelet, containerd, CNI, kube-router; Anchorage's images from the cluster's registry, the S3 store as a pod):
the chart is installed as a user installs it, so the operator is a pod and its figures come from its container's
cgroup (CPU: ``cpuacct``) and process (peak RSS: ``VmHWM``); the trials are real pods of the agent image running
``true``. The real control plane runs with a batch cluster's settings (``controlplane.BATCH``: the
controllers' and the scheduler's API rates and the Job controller's workers raised; etcd unsynced, its data on
tmpfs), printed with its figures. The figures are the operator's own: API requests per trial by verb (on the real server
from its audit log, where only the operator authenticates as ``anchorage-bench-operator``; on the fake from
its request log), operator CPU ms per trial (``wait4`` rusage of the operator process, startup included and
also shown separately) and peak RSS (``/proc``'s ``VmHWM``), and the campaign's trial throughput as a ratio of raw
``POST`` throughput of Trial objects by one client (the kubernetes Python client). Goals: ≤ 8 API writes per
trial, operator CPU ≤ 1.25× the kopf floor of the same run, ≤ 300 MB RSS. ``--protocols`` adds
``verification.panel`` and ``.cbu`` to the campaign (simulated protocol pods: each step one more Job and token
Secret per trial, so the writes goal does not apply to such a run).

``--kopf-floor`` also runs ``bench/kopf_floor.py`` during the campaign: a no-op kopf operator watching
the same objects with the same kopf settings. Its CPU per trial is kopf's own cost of the campaign's
watch events, the floor under the operator's figure (the operator itself observes the Jobs and ScoringRuns it
creates with its own watcher, ``anchorage.controller.watching``, not kopf; the floor still has kopf watch all of
them, Trials, ScoringRuns and Jobs), and it counts the events that reach its handlers
(both processes share the machine, so the wall time and the throughput ratio of such a run are not
comparable with a run without it). Beside it: each process's idle 8 s run (its startup, so both CPU figures can be
read without it) and the operator's CPU split into its main thread (kopf's event loop) and the rest (the
handlers' worker threads) next to the floor's event loop; ``--profile FILE`` samples both with py-spy.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from simulated_pods import anchorage_pod  # noqa: E402  (the tests' simulated pods: what the pod programs write)


def _raw_create_rate(kubeconfig: Path, count: int) -> float:
    import kubernetes

    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    api = kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(configuration))
    body: dict[str, Any] = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial",
                            "spec": {"task": "smoke-inventory", "agent": {"kind": "command", "command": ["true"]}}}
    start = time.perf_counter()
    for i in range(count):
        api.create_namespaced_custom_object("anchorage.dev", "v1alpha1", "raw", "trials",
                                            {**body, "metadata": {"name": f"raw-{i}"}})
    return count / (time.perf_counter() - start)


#: ``--protocols``: the operator mints the steps' tokens (no gateway runs: the simulated pods call nothing, the
#: steps' costs are unknown for want of an admin token).
PROTOCOL_ENV = {"ANCHORAGE_GATEWAY_TOKEN_SECRET": "bench-token-secret"}


def _operator(env: dict[str, str], store: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "anchorage"), "operator", "--store", f"file://{store}",
         "--task-source", str(REPO / "tasks"), "--standalone", "--log-format", "plain", "-n", "bench",
         "--no-require-enforcement",  # the simulated node and the fake enforce no NetworkPolicy
         "--gateway-url", "http://127.0.0.1:9/v1"],
        env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def _floor(env: dict[str, str], log: Path, namespaces: tuple[str, ...] = ("bench",)) -> subprocess.Popen[bytes]:
    """The kopf floor watching ``namespaces`` (the campaign's and its Jobs')."""
    return subprocess.Popen([sys.executable, str(REPO / "bench" / "kopf_floor.py"), *namespaces], env=env,
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)


def _floor_events(log: Path) -> dict[str, int]:
    """The floor's count of watch events by resource (the line it prints on exit), {} when absent."""
    if not log.exists():
        return {}
    for line in log.read_text(errors="replace").splitlines():
        if "kopf-floor events:" in line:
            counts: dict[str, int] = json.loads(line.split("kopf-floor events:", 1)[1])
            return counts
    return {}


def _profile(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """``--profile``: py-spy samples the operator (and the floor) into ``out`` as collapsed stacks:
    non-blocking (the operator is not paused) and only the thread holding the GIL (Python at work, not waits)."""
    return subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid), "--nonblocking",
                             "--gil", "--format", "raw", "--rate", "200", "-o", str(out.with_suffix(f".{pid}.txt"))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _main_thread_cpu(pid: int) -> float:
    """CPU seconds of the process's main thread so far (kopf's event loop; the other threads are the handlers'
    workers and kopf's thread pool for sync handlers), from ``/proc`` (0 where it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss(pid: int) -> float | None:
    """The process's peak RSS in MB since it started its program (``VmHWM`` in ``/proc``), None where unreadable.

    Not ``wait4``'s ``ru_maxrss``: Linux counts in it the high-water mark of the memory image the child replaced at
    ``exec`` — the bench process's own, forked — so the operator of a ``--cluster both`` run "peaked" at the size
    the bench reached with the in-process fake (777 MB for the real cluster after a 2,000-trial fake run, its idle
    run too)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _stop(proc: subprocess.Popen[bytes]) -> tuple[float, float, float, float]:
    """SIGTERM the operator; (CPU seconds, of which system, peak RSS in MB, of which the main thread before the
    SIGTERM) from its rusage and ``/proc`` (the peak RSS read just before the SIGTERM: :func:`_peak_rss`)."""
    loop = _main_thread_cpu(proc.pid)
    peak = _peak_rss(proc.pid)
    proc.send_signal(signal.SIGTERM)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return usage.ru_utime + usage.ru_stime, usage.ru_stime, peak if peak is not None else usage.ru_maxrss / 1024, loop


def _campaign(trials: int, parallelism: int, protocols: bool = False) -> str:
    import yaml

    seeds = max(1, trials // 100)
    entries = [{"name": f"e{i}", "agent": {"kind": "command", "command": ["true"]}} for i in range(trials // seeds)]
    spec: dict[str, Any] = {"tasks": ["smoke-inventory"], "seeds": seeds, "parallelism": parallelism, "entries": entries}
    if protocols:
        spec["verification"] = {"panel": {"model": "mock-verifier"}, "cbu": {"model": "mock-solver", "rollouts": 2}}
    return yaml.safe_dump({"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign",
                           "metadata": {"name": "bench", "namespace": "bench"}, "spec": spec})


@dataclass
class Measured:
    """The operator's figures of one campaign (and of an idle run before it)."""

    total: int
    elapsed: float
    cpu: float
    sys_cpu: float
    rss: float
    idle_cpu: float
    idle_rss: float
    floor_cpu: float | None
    idle_floor_cpu: float | None = None  # the floor's own idle 8 s run (its startup), beside the operator's
    loop_cpu: float = 0.0  # of ``cpu``: the main thread's (kopf's event loop), the rest is the worker threads'
    floor_loop_cpu: float | None = None


@dataclass
class Run:
    """What one campaign run measured, and on which cluster."""

    cluster: str
    measured: Measured
    kinds: collections.Counter[str]  # "VERB plural[/sub]" → requests while the campaign ran
    raw_rate: float
    floor_events: dict[str, int] = field(default_factory=dict)
    settings: str = ""  # the cluster's throughput settings (the real control plane's)
    run_cpu: float = 0.0  # CPU seconds of everything the run started (cluster, node, operator, floor, clients)
    event_reasons: collections.Counter[str] = field(default_factory=collections.Counter)  # "source/reason" → Events
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)  # "phase/reason" → trials
    failures: list[str] = field(default_factory=list)  # a few infrastructure failures' messages


def _cpu_now() -> float:
    """CPU seconds of this process and of its children that ended (the fake runs in this process)."""
    mine, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def _measure(env: dict[str, str], floor_env: dict[str, str], store: Path, root: Path, args: argparse.Namespace,
             progress: Callable[[], dict[str, Any]]) -> Measured:
    """An idle operator run, then the campaign with the floor beside it (``floor_env``: its credentials)."""
    env = {**env, **PROTOCOL_ENV} if args.protocols else env
    idle = _operator(env, store, root / "idle.log")
    idle_floor = _floor(floor_env, root / "floor-idle.log") if args.kopf_floor else None
    time.sleep(8)
    idle_cpu, _, idle_rss, _ = _stop(idle)
    idle_floor_cpu = _stop(idle_floor)[0] if idle_floor is not None else None
    floor = _floor(floor_env, root / "floor.log") if args.kopf_floor else None
    proc = _operator(env, store, root / "operator.log")
    profilers = [_profile(p.pid, args.profile.with_name(f"{args.profile.name}-{what}"))
                 for p, what in ((proc, "operator"), (floor, "floor")) if p is not None] if args.profile else []
    subprocess.run(["kubectl", "apply", "-f", "-"], input=_campaign(args.trials, args.parallelism, args.protocols).encode(),
                   env=floor_env, check=True, capture_output=True)
    start = time.perf_counter()
    poll = 2.0 if args.trials <= 1000 else 5.0
    while True:
        time.sleep(poll)
        status = progress()
        if status.get("phase") == "Succeeded":
            break
        if proc.poll() is not None:
            raise RuntimeError(f"the operator exited: {(root / 'operator.log').read_text()[-3000:]}")
        print(f"  {status.get('progress', '0/?')} after {time.perf_counter() - start:.0f}s", file=sys.stderr)
    elapsed = time.perf_counter() - start
    cpu, sys_cpu, rss, loop_cpu = _stop(proc)
    floor_cpu, _, _, floor_loop_cpu = _stop(floor) if floor is not None else (None, 0.0, 0.0, None)
    for profiler in profilers:
        profiler.wait(timeout=60)
    return Measured(int(status.get("total") or args.trials), elapsed, cpu, sys_cpu, rss, idle_cpu, idle_rss, floor_cpu,
                    idle_floor_cpu, loop_cpu, floor_loop_cpu)


def run_fake(args: argparse.Namespace, root: Path) -> Run:
    """The campaign against the cluster fake (its request log counts the operator's requests)."""
    from anchorage_devcluster.serving import ClusterThread

    cpu_before = _cpu_now()
    store = root / "runs"
    store.mkdir()
    thread = ClusterThread(root / "kubeconfig", crds_dir=REPO / "crds", writable=(store,), simulate=anchorage_pod,
                           namespaces=("raw", "bench"), authenticate=True)
    cluster = thread.__enter__()
    from anchorage_devcluster import binaries

    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "ANCHORAGE_CAMPAIGN_INTERVAL": "0.5",
           "ANCHORAGE_WORKERS": "16", "PATH": f"{binaries.kube_dir()}:{os.environ.get('PATH', '')}"}
    campaigns = cluster.api.store.resource("anchorage.dev", "verificationcampaigns")
    try:
        raw_rate = _raw_create_rate(cluster.kubeconfig, args.raw)
        before = collections.Counter(cluster.api.counts)
        measured = _measure(env, env, store, root, args, lambda: thread.call(
            lambda: dict(campaigns.objects.get(("bench", "bench"), {}).get("status") or {})))
        counts = collections.Counter(cluster.api.counts)
        counts.subtract(before)
    finally:
        thread.__exit__(None, None, None)
    # the fake counts every client's requests: the campaign's apply and the floor's watches are few
    return Run("fake", measured, +counts, raw_rate, _floor_events(root / "floor.log"), run_cpu=_cpu_now() - cpu_before)


OPERATOR_USER = "anchorage-bench-operator"


def _audited(audit: Path, skip: int, user: str = OPERATOR_USER) -> collections.Counter[str]:
    """``user``'s requests in the API server's audit log after its first ``skip`` lines, as "VERB plural[/sub]"."""
    verbs = {"create": "POST", "patch": "PATCH", "update": "PUT", "delete": "DELETE", "get": "GET", "list": "GET",
             "watch": "WATCH", "deletecollection": "DELETE"}
    counts: collections.Counter[str] = collections.Counter()
    with audit.open() as lines:
        for number, line in enumerate(lines):
            if number < skip:
                continue
            entry = json.loads(line)
            if entry.get("stage") != "ResponseComplete" or entry["user"]["username"] != user:
                continue
            ref = entry.get("objectRef") or {}
            sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
            counts[f"{verbs.get(entry['verb'], entry['verb'])} {ref.get('resource', '-')}{sub}"] += 1
    return counts


def run_real(args: argparse.Namespace, root: Path) -> Run:
    """The campaign against the real control plane with a simulated node (the audit log counts the operator's
    requests: it alone authenticates as ``OPERATOR_USER``)."""
    from anchorage_devcluster import binaries, cluster, controlplane

    found = binaries.find()
    if isinstance(found, str):
        raise SystemExit(f"--cluster real: {found}")
    cpu_before = _cpu_now()
    store = root / "runs"
    store.mkdir()
    shm = Path("/dev/shm")
    etcd_dir = Path(tempfile.mkdtemp(prefix="anchorage-bench-etcd-", dir=shm if shm.is_dir() else None))
    throughput = dataclasses.replace(controlplane.BATCH, etcd_dir=etcd_dir)
    local = cluster.start(root / "plane", found, audit_users=(OPERATOR_USER,), throughput=throughput)
    try:
        local.start_simulated_node("simulated-1", simulate="simulated_pods:anchorage_pod",  # room for every pod
                                   capacity={"pods": str(max(1000, 4 * args.parallelism)), "cpu": "100000",
                                             "memory": "1000Ti", "ephemeral-storage": "1000Ti"},
                                   env={"PYTHONPATH": str(REPO / "tests")})
        cluster.apply_crds(local, REPO / "crds")
        for namespace in ("raw", "bench"):
            local.plane.namespace(namespace)
        operator_config = local.plane.user_kubeconfig(OPERATOR_USER, groups=("system:masters",))
        admin = local.plane.env()
        env = {**local.plane.env(operator_config), "ANCHORAGE_CAMPAIGN_INTERVAL": "0.5", "ANCHORAGE_WORKERS": "16"}
        raw_rate = _raw_create_rate(local.plane.admin_kubeconfig, args.raw)
        audit = local.root / "audit.log"
        skip = sum(1 for _ in audit.open()) if audit.exists() else 0

        def progress() -> dict[str, Any]:
            out = local.plane.kubectl("get", "vc", "bench", "-n", "bench", "-o", "json", check=False)
            return dict(json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}

        measured = _measure(env, admin, store, root, args, progress)
        time.sleep(2)  # the audit backend writes in batches
        counts = _audited(audit, skip)
    finally:
        local.stop()
        shutil.rmtree(etcd_dir, ignore_errors=True)
    return Run("real", measured, counts, raw_rate, _floor_events(root / "floor.log"), throughput.describe(),
               _cpu_now() - cpu_before)


REAL_NODES = ("node-1", "node-2")


@dataclass
class PodProcess:
    """The operator pod's container as this machine sees it: its cgroup (``cpuacct``) and its main process."""

    cgroup: Path
    pid: int

    def cpu(self) -> tuple[float, float]:
        """CPU seconds of the container so far, and of that the system time (``cpuacct.stat`` in USER_HZ)."""
        usage = int((self.cgroup / "cpuacct.usage").read_text()) / 1e9
        ticks = dict(line.split() for line in (self.cgroup / "cpuacct.stat").read_text().splitlines())
        return usage, int(ticks["system"]) / os.sysconf("SC_CLK_TCK")


def _operator_pod(local: Any, namespace: str) -> PodProcess:
    """The release's operator container: its cgroup under its node's cgroup root (the kubelet's cgroupfs layout) and
    the process the runtime started in it."""
    out = local.plane.kubectl("get", "pods", "-n", namespace, "-l", "app.kubernetes.io/component=operator", "-o",
                              "json")
    pods = [p for p in json.loads(out.stdout)["items"] if p["status"].get("phase") == "Running"]
    if len(pods) != 1:
        raise SystemExit(f"--nodes real: expected one running operator pod in {namespace}, found {len(pods)}")
    pod = pods[0]
    ident = next(s["containerID"] for s in pod["status"]["containerStatuses"] if s["name"] == "operator")
    ident = ident.removeprefix("containerd://")
    top = Path("/sys/fs/cgroup/cpuacct", local.real_nodes[pod["spec"]["nodeName"]].cgroup)
    for folder, children, _ in os.walk(top):
        if ident in children:
            cgroup = Path(folder, ident)
            pids = [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
            return PodProcess(cgroup, min(pids))
    raise SystemExit(f"--nodes real: the operator container {ident} has no cgroup under {top}")


def _real_campaign(trials: int, parallelism: int) -> str:
    """The campaign for real nodes: a trivial agent with a small footprint, so the two-core nodes take
    ``parallelism`` pods at once (a task's own 2 CPUs and 8 GiB would fit two trials per node)."""
    import yaml

    doc = yaml.safe_load(_campaign(trials, parallelism))
    doc["spec"]["limits"] = {"cpus": 0.1, "memoryMB": 128, "agentTimeoutSec": 300}
    # the agent writes the task's expected answer, so each trial ends as a normal one does: scored, Succeeded (with
    # `true`, every trial was the agent's no_artifact failure, one Warning Event each)
    answer = json.dumps(json.loads((REPO / "tasks" / "smoke-inventory" / "tests" / "expected_result.json").read_text()))
    command = ["/bin/sh", "-c", f"printf '%s' '{answer}' > /root/results/smoke-inventory_result.json"]
    for entry in doc["spec"]["entries"]:
        entry["agent"]["command"] = command
    return str(yaml.safe_dump(doc))


def run_real_nodes(args: argparse.Namespace, root: Path) -> Run:
    """The campaign on real nodes through the chart's operator pod (``--nodes real``): API requests from the audit
    log (the operator's ServiceAccount), CPU and RSS from its container, the kopf floor on this machine."""
    from anchorage_devcluster import binaries, cli, cluster, realnode, s3server

    found, s3_binary = binaries.find(), s3server.find()
    for problem in (found if isinstance(found, str) else None, s3_binary if isinstance(s3_binary, str) else None,
                    realnode.missing_requirements()):
        if problem:
            raise SystemExit(f"--nodes real: {problem}")
    assert not isinstance(found, str) and not isinstance(s3_binary, str)
    images = cli.build_images()
    cpu_before = _cpu_now()
    local, pushed, store = cluster.bring_up(root / "plane", found, images=images, nodes=REAL_NODES,
                                            s3_binary=Path(s3_binary), audit_groups=("system:serviceaccounts:bench",))
    try:
        cluster.apply_crds(local, REPO / "crds")
        local.plane.namespace("raw")
        cluster.store_secret(local, store, "bench")
        values = cluster.merge_values(cluster.release_values(pushed, store, "bench-trials"),
                                      {"crds": {"enabled": False}, "operator": {"logFormat": "plain"}})
        manifest = cluster.install_chart(local, REPO / "charts" / "anchorage", release="bench", namespace="bench",
                                         values=values)
        cluster.store_secret(local, store, "bench-trials")
        local.plane.kubectl("wait", "--for=condition=Available", "deployment", "--all", "-n", "bench",
                            "--timeout=600s")
        account = next(doc["spec"]["template"]["spec"]["serviceAccountName"] for doc in _documents(manifest)
                       if doc.get("kind") == "Deployment" and "operator" in doc["metadata"]["name"])
        user = f"system:serviceaccount:bench:{account}"
        admin = local.plane.env()
        raw_rate = _raw_create_rate(local.plane.admin_kubeconfig, args.raw)
        operator = _operator_pod(local, "bench")
        watched = ("bench", "bench-trials")
        idle_floor = _floor(admin, root / "floor-idle.log", watched) if args.kopf_floor else None
        idle_start = operator.cpu()[0]
        time.sleep(8)
        idle_cpu = operator.cpu()[0] - idle_start  # the running operator's idle cost, beside the floor's startup
        idle_floor_cpu = _stop(idle_floor)[0] if idle_floor is not None else None
        audit = local.root / "audit.log"
        skip = sum(1 for _ in audit.open()) if audit.exists() else 0
        floor = _floor(admin, root / "floor.log", watched) if args.kopf_floor else None
        before, before_sys = operator.cpu()
        before_loop = _main_thread_cpu(operator.pid)
        subprocess.run(["kubectl", "apply", "-f", "-"], input=_real_campaign(args.trials, args.parallelism).encode(),
                       env=admin, check=True, capture_output=True)
        start = time.perf_counter()
        while True:
            time.sleep(5)
            out = local.plane.kubectl("get", "vc", "bench", "-n", "bench", "-o", "json", check=False)
            status = dict(json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}
            if status.get("phase") in ("Succeeded", "Failed"):
                break
            print(f"  {status.get('progress', '0/?')} after {time.perf_counter() - start:.0f}s", file=sys.stderr)
        elapsed = time.perf_counter() - start
        after, after_sys = operator.cpu()
        loop = _main_thread_cpu(operator.pid) - before_loop
        rss = _peak_rss(operator.pid) or 0.0
        floor_cpu, _, _, floor_loop = _stop(floor) if floor is not None else (None, 0.0, 0.0, None)
        time.sleep(2)  # the audit backend writes in batches
        counts = _audited(audit, skip, user)
        reasons = _event_reasons(local.plane.kubectl, watched)
        outcomes, failures = _outcomes(local.plane.kubectl, "bench")
        if status.get("phase") != "Succeeded":
            raise SystemExit(f"--nodes real: the campaign ended {status.get('phase')}: {status.get('message')}")
        # the operator ran before the campaign: its CPU is the campaign's share (``idle_cpu`` is its 8 s at rest)
        measured = Measured(int(status.get("total") or args.trials), elapsed, after - before, after_sys - before_sys,
                            rss, 0.0, rss, floor_cpu, idle_floor_cpu, loop, floor_loop)
        settings = (f"real nodes {', '.join(REAL_NODES)} (kubelet {binaries.KUBE_VERSION}, containerd, kube-router); "
                    f"the operator a pod (idle: {idle_cpu:.2f} s CPU in 8 s); trials: the agent image writing the answer")
    finally:
        local.stop()
    return Run("real-nodes", measured, counts, raw_rate, _floor_events(root / "floor.log"), settings,
               _cpu_now() - cpu_before, reasons, outcomes, failures)


def _outcomes(kubectl: Any, namespace: str) -> tuple[collections.Counter[str], list[str]]:
    """The campaign's trials by "phase/reason", and the messages of up to five infrastructure failures."""
    out = kubectl("get", "trials", "-n", namespace, "-o", "json", check=False)
    items = json.loads(out.stdout or "{}").get("items") or [] if out.returncode == 0 else []
    found: collections.Counter[str] = collections.Counter()
    failures = []
    for trial in items:
        status = trial.get("status") or {}
        found[f"{status.get('phase')}/{status.get('reason')}"] += 1
        if status.get("phase") == "InfrastructureFailed" and len(failures) < 5:
            failures.append(f"{trial['metadata']['name']}: {status.get('message')}")
    return found, failures


def _event_reasons(kubectl: Any, namespaces: tuple[str, ...]) -> collections.Counter[str]:
    """The Events the operator and kopf posted in ``namespaces``, as "component/reason" → count (which of the
    operator's writes are Events, and why)."""
    found: collections.Counter[str] = collections.Counter()
    for namespace in namespaces:
        out = kubectl("get", "events", "-n", namespace, "-o", "json", check=False)
        if out.returncode != 0:
            continue
        for event in json.loads(out.stdout or "{}").get("items") or []:
            component = (event.get("source") or {}).get("component") or event.get("reportingComponent") or "?"
            if component.startswith(("anchorage", "kopf")):
                found[f"{component}/{event.get('reason')}"] += int(event.get("count") or 1)
    return found


def _documents(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects of an installed release (helm-sdkpy's result: its rendered manifest)."""
    import yaml

    return [doc for doc in yaml.safe_load_all(str(manifest.get("manifest", ""))) if doc]


def report(run: Run, parallelism: int) -> None:
    m = run.measured
    total = m.total
    verbs: collections.Counter[str] = collections.Counter()
    for kind, n in run.kinds.items():
        verbs[kind.split()[0]] += n
    writes = sum(verbs[v] for v in ("POST", "PATCH", "PUT", "DELETE"))
    events = sum(n for kind, n in run.kinds.items() if kind.split()[0] == "POST" and kind.endswith(" events"))
    rate = total / m.elapsed
    pods = "real pods" if run.cluster == "real-nodes" else "simulated pods"
    print(f"[{run.cluster}] trials: {total} (parallelism {parallelism}, {pods}), wall {m.elapsed:.1f} s")
    if run.settings:
        print(f"  cluster settings: {run.settings}")
    print("  API requests per trial by verb: " + ", ".join(f"{v} {n / total:.2f}" for v, n in sorted(verbs.items())))
    print(f"  API writes per trial: {writes / total:.2f}, of which Events {events / total:.2f} (goal ≤ 8)")
    print("    by resource: " + ", ".join(f"{k} {n / total:.2f}" for k, n in run.kinds.most_common(12)))
    if run.outcomes:
        print("  trials by phase/reason: " + ", ".join(f"{k} {n}" for k, n in run.outcomes.most_common()))
        for failure in run.failures:
            print(f"    {failure}")
    if run.event_reasons:
        print("    Events by source/reason: " + ", ".join(f"{k} {n / total:.2f}" for k, n in
                                                        run.event_reasons.most_common(8)))
    print(f"  operator CPU per trial: {1000 * m.cpu / total:.2f} ms total, "
          f"{1000 * (m.cpu - m.idle_cpu) / total:.2f} ms without startup (idle 8 s run: {m.idle_cpu:.2f} s CPU; "
          f"system time {1000 * m.sys_cpu / total:.2f} ms of the total)")
    print(f"    by thread: event loop {1000 * m.loop_cpu / total:.2f} ms, worker threads "
          f"{1000 * (m.cpu - m.loop_cpu) / total:.2f} ms" + (f" (floor: event loop {1000 * m.floor_loop_cpu / total:.2f} "
                                                            f"ms)" if m.floor_loop_cpu is not None else ""))
    if m.floor_cpu is not None:
        print(f"  kopf floor (no-op operator on the same objects): {1000 * m.floor_cpu / total:.2f} ms CPU per "
              f"trial; operator/floor {m.cpu / m.floor_cpu:.2f} (goal ≤ 1.25)")
        if m.idle_floor_cpu is not None:
            print(f"    without startup (each minus its idle 8 s run; floor idle {m.idle_floor_cpu:.2f} s CPU): "
                  f"{1000 * (m.floor_cpu - m.idle_floor_cpu) / total:.2f} ms; operator/floor "
                  f"{(m.cpu - m.idle_cpu) / (m.floor_cpu - m.idle_floor_cpu):.2f}")
        if run.floor_events:
            n = sum(run.floor_events.values())
            print(f"    watch events reaching its handlers (Jobs: only ended ones): {n / total:.2f} per trial ("
                  + ", ".join(f"{k} {v / total:.2f}" for k, v in sorted(run.floor_events.items())) + ")")
    print(f"  operator peak RSS: {m.rss:.0f} MB (idle run {m.idle_rss:.0f} MB) (goal ≤ 300 MB)")
    print(f"  throughput: {rate:.1f} trials/s; raw Trial create {run.raw_rate:.1f}/s; ratio {rate / run.raw_rate:.3f}")
    print(f"  CPU of the whole run (cluster, node, operator, floor, clients; startup included): "
          f"{1000 * run.run_cpu / total:.1f} ms per trial")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10000, help="campaign size (entries × seeds)")
    parser.add_argument("--parallelism", type=int, default=200)
    parser.add_argument("--raw", type=int, default=500, help="Trial objects created for the raw rate")
    parser.add_argument("--cluster", choices=["fake", "real", "both"], default="both",
                        help="the cluster fake, the real control plane (make kube) with a simulated node, or both")
    parser.add_argument("--nodes", choices=["simulated", "real"], default="simulated",
                        help="with --cluster real: the simulated node (default) or two real nodes (kubelet, "
                             "containerd; the chart's operator as a pod, the trials real pods)")
    parser.add_argument("--kopf-floor", action="store_true",
                        help="also run a no-op kopf operator on the same objects and print its CPU per trial")
    parser.add_argument("--protocols", action="store_true",
                        help="trials with verification.panel and .cbu (simulated protocol pods, their own Jobs)")
    parser.add_argument("--profile", type=Path, metavar="FILE",
                        help="sample the operator and the floor with py-spy (pip install py-spy) into "
                             "FILE-operator.<pid>.txt and FILE-floor.<pid>.txt (collapsed stacks; the sampling "
                             "costs the machine CPU, so not for reported figures)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="anchorage-bench-"))
    if args.nodes == "real" and args.cluster != "real":
        parser.error("--nodes real needs --cluster real")
    runners = {"fake": run_fake, "real": run_real_nodes if args.nodes == "real" else run_real}
    for name in (["fake", "real"] if args.cluster == "both" else [args.cluster]):
        folder = root / name
        folder.mkdir()
        report(runners[name](args, folder), args.parallelism)


if __name__ == "__main__":
    main()
