"""Operator load benchmark: a campaign of trivial trials against the cluster fake, measured side by side
with the fake's raw create throughput in the same run.

    .venv/bin/python bench/kube_operator.py --trials 10000 --parallelism 200

(named ``kube_operator.py``, not ``operator.py``: a script folder holding ``operator.py`` would shadow the
standard library's ``operator`` module for every script run from it)

Pods are simulated (``FakeKubelet(simulate=True)``: nothing runs; the store receives what the pod
programs would write), so the figures are the operator's own: API requests per trial by verb (from
the fake's request log), operator CPU ms per trial and peak RSS (``wait4`` rusage of the operator
process, startup included and also shown separately), and the campaign's trial throughput as a
ratio of raw ``POST`` throughput of Trial objects by one client (the kubernetes Python client).
Goals from issue 4: ≤ 8 API writes per trial, ≤ 5 ms CPU per trial, ≤ 300 MB RSS.

``--kopf-floor`` also runs ``bench/kopf_floor.py`` during the campaign: a no-op kopf operator watching
the same objects with the same kopf settings. Its CPU per trial is kopf's own cost of the campaign's
watch events, the floor under the operator's figure, and it counts the events that reach its handlers
(both processes share the machine, so the wall time and the throughput ratio of such a run are not
comparable with a run without it).
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


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


def _operator(env: dict[str, str], store: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "anchorage"), "operator", "--store", f"file://{store}",
         "--task-source", str(REPO / "tasks"), "--standalone", "--log-format", "plain", "-n", "bench"],
        env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def _floor(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(REPO / "bench" / "kopf_floor.py"), "bench"], env=env,
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)


def _floor_events(log: Path) -> dict[str, int]:
    """The floor's count of watch events by resource (the line it prints on exit), {} when absent."""
    import json

    for line in log.read_text(errors="replace").splitlines():
        if "kopf-floor events:" in line:
            counts: dict[str, int] = json.loads(line.split("kopf-floor events:", 1)[1])
            return counts
    return {}


def _stop(proc: subprocess.Popen[bytes]) -> tuple[float, float, float]:
    """SIGTERM the operator; (CPU seconds, of which system, peak RSS in MB) from its rusage."""
    proc.send_signal(signal.SIGTERM)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return usage.ru_utime + usage.ru_stime, usage.ru_stime, usage.ru_maxrss / 1024


def _campaign(trials: int, parallelism: int) -> str:
    import yaml

    seeds = max(1, trials // 100)
    entries = [{"name": f"e{i}", "agent": {"kind": "command", "command": ["true"]}} for i in range(trials // seeds)]
    return yaml.safe_dump({"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign",
                           "metadata": {"name": "bench", "namespace": "bench"},
                           "spec": {"tasks": ["smoke-inventory"], "seeds": seeds, "parallelism": parallelism,
                                    "entries": entries}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10000, help="campaign size (entries × seeds)")
    parser.add_argument("--parallelism", type=int, default=200)
    parser.add_argument("--raw", type=int, default=500, help="Trial objects created for the raw rate")
    parser.add_argument("--kopf-floor", action="store_true",
                        help="also run a no-op kopf operator on the same objects and print its CPU per trial")
    args = parser.parse_args()

    from anchorage_devcluster.serving import ClusterThread

    sys.path.insert(0, str(REPO / "tests"))
    from simulated_pods import anchorage_pod

    root = Path(tempfile.mkdtemp(prefix="anchorage-bench-"))
    store = root / "runs"
    store.mkdir()
    thread = ClusterThread(root / "kubeconfig", crds_dir=REPO / "crds", writable=(store,), simulate=anchorage_pod,
                           namespaces=("raw", "bench"))
    cluster = thread.__enter__()
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "ANCHORAGE_CAMPAIGN_INTERVAL": "0.5",
           "ANCHORAGE_WORKERS": "16"}
    try:
        raw_rate = _raw_create_rate(cluster.kubeconfig, args.raw)
        idle = _operator(env, store, root / "idle.log")
        time.sleep(8)
        idle_cpu, _, idle_rss = _stop(idle)
        before = collections.Counter(cluster.api.counts)
        floor = _floor(env, root / "floor.log") if args.kopf_floor else None
        proc = _operator(env, store, root / "operator.log")
        subprocess.run(["kubectl", "apply", "-f", "-"], input=_campaign(args.trials, args.parallelism).encode(),
                       env=env, check=True, capture_output=True)
        start = time.perf_counter()
        campaigns = cluster.api.store.resource("anchorage.dev", "verificationcampaigns")
        while True:
            time.sleep(1)
            status = thread.call(lambda: dict(campaigns.objects.get(("bench", "bench"), {}).get("status") or {}))
            if status.get("phase") == "Succeeded":
                break
            print(f"  {status.get('progress', '0/?')} after {time.perf_counter() - start:.0f}s", file=sys.stderr)
        elapsed = time.perf_counter() - start
        cpu, sys_cpu, rss = _stop(proc)
        floor_cpu = _stop(floor)[0] if floor is not None else None
        counts = collections.Counter(cluster.api.counts)
        counts.subtract(before)
    finally:
        thread.__exit__(None, None, None)
    total = int(status["total"])
    verbs: collections.Counter[str] = collections.Counter()
    kinds = +counts  # "VERB plural[/sub]" → requests made while the campaign ran
    for kind, n in kinds.items():
        verbs[kind.split()[0]] += n
    writes = sum(verbs[v] for v in ("POST", "PATCH", "PUT", "DELETE"))
    rate = total / elapsed
    print(f"trials: {total} (parallelism {args.parallelism}, simulated pods), wall {elapsed:.1f} s")
    print("API requests per trial by verb: " + ", ".join(f"{v} {n / total:.2f}" for v, n in sorted(verbs.items())))
    print(f"API writes per trial: {writes / total:.2f} (goal ≤ 8)")
    print("  by resource: " + ", ".join(f"{k} {n / total:.2f}" for k, n in kinds.most_common(12)))
    print(f"operator CPU per trial: {1000 * cpu / total:.2f} ms total, {1000 * (cpu - idle_cpu) / total:.2f} ms "
          f"without startup (idle 8 s run: {idle_cpu:.2f} s CPU; system time {1000 * sys_cpu / total:.2f} ms of the total) "
          "(goal ≤ 5 ms)")
    if floor_cpu is not None:
        print(f"kopf floor (no-op operator on the same objects): {1000 * floor_cpu / total:.2f} ms CPU per trial")
        events = _floor_events(root / "floor.log")
        if events:
            n = sum(events.values())
            print(f"  watch events reaching its handlers (Jobs: only ended ones): {n / total:.2f} per trial ("
                  + ", ".join(f"{k} {v / total:.2f}" for k, v in sorted(events.items()))
                  + ")")
    print(f"operator peak RSS: {rss:.0f} MB (idle run {idle_rss:.0f} MB) (goal ≤ 300 MB)")
    print(f"throughput: {rate:.1f} trials/s; raw Trial create {raw_rate:.1f}/s; ratio {rate / raw_rate:.3f}")


if __name__ == "__main__":
    main()
