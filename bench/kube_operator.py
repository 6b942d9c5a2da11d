"""Operator load benchmark: a campaign of trivial trials against the real control plane and the cluster fake,
each measured side by side with that cluster's raw create throughput (and the kopf floor) in the same run.

    .venv/bin/python bench/kube_operator.py --trials 10000 --parallelism 200 --kopf-floor [--cluster real|fake|both]

(named ``kube_operator.py``, not ``operator.py``: a script folder holding ``operator.py`` would shadow the
standard library's ``operator`` module for every script run from it)

Pods are simulated (the tests' ``simulated_pods``: nothing runs; the store receives what the pod programs
would write) — on the real control plane by the node agent in simulate mode, a real Node the scheduler
binds the pods to, with the real Job controller, garbage collector and TTL controller at work; on the fake
by its kubelet. The real control plane runs with a batch cluster's settings (``controlplane.BATCH``: the
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
         "--gateway-url", "http://127.0.0.1:9/v1"],
        env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def _floor(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(REPO / "bench" / "kopf_floor.py"), "bench"], env=env,
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


def _audited(audit: Path, skip: int) -> collections.Counter[str]:
    """The operator's requests in the API server's audit log after its first ``skip`` lines, as "VERB plural[/sub]"."""
    verbs = {"create": "POST", "patch": "PATCH", "update": "PUT", "delete": "DELETE", "get": "GET", "list": "GET",
             "watch": "WATCH", "deletecollection": "DELETE"}
    counts: collections.Counter[str] = collections.Counter()
    with audit.open() as lines:
        for number, line in enumerate(lines):
            if number < skip:
                continue
            entry = json.loads(line)
            if entry.get("stage") != "ResponseComplete" or entry["user"]["username"] != OPERATOR_USER:
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


def report(run: Run, parallelism: int) -> None:
    m = run.measured
    total = m.total
    verbs: collections.Counter[str] = collections.Counter()
    for kind, n in run.kinds.items():
        verbs[kind.split()[0]] += n
    writes = sum(verbs[v] for v in ("POST", "PATCH", "PUT", "DELETE"))
    events = sum(n for kind, n in run.kinds.items() if kind.split()[0] == "POST" and kind.endswith(" events"))
    rate = total / m.elapsed
    print(f"[{run.cluster}] trials: {total} (parallelism {parallelism}, simulated pods), wall {m.elapsed:.1f} s")
    if run.settings:
        print(f"  cluster settings: {run.settings}")
    print("  API requests per trial by verb: " + ", ".join(f"{v} {n / total:.2f}" for v, n in sorted(verbs.items())))
    print(f"  API writes per trial: {writes / total:.2f}, of which Events {events / total:.2f} (goal ≤ 8)")
    print("    by resource: " + ", ".join(f"{k} {n / total:.2f}" for k, n in run.kinds.most_common(12)))
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
    for name in (["fake", "real"] if args.cluster == "both" else [args.cluster]):
        folder = root / name
        folder.mkdir()
        report((run_fake if name == "fake" else run_real)(args, folder), args.parallelism)


if __name__ == "__main__":
    main()
