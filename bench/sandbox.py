"""Benchmark of the local engine: sandbox overhead and engine overhead per trial, measured side by side.

Run: ``.venv/bin/python bench/sandbox.py [--trials 200] [--repeat 30]``. Prints

1. the wall time of a trivial agent (``/bin/true``) started bare with ``subprocess.run`` and started
   in the full sandbox (namespaces, binds, cgroup limits, rlimits, supervision), medians over
   ``--repeat`` runs, and their difference (goal ≤ 30 ms);
2. the engine's overhead per trial over a ``--trials``-trial campaign of the same trivial agent on the
   smoke task (parallelism 1): total wall time minus the time spent inside the sandboxes, divided by
   the number of trials (goal ≤ 20 ms). This covers planning, folder setup, prompt delivery, in-process
   scoring, the atomic trial record and aggregation.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "operator"))

from anchorage.manifests import VerificationCampaign  # noqa: E402
from anchorage.runtime.local import sandbox  # noqa: E402
from anchorage.runtime.local.engine import run_campaign  # noqa: E402
from anchorage.runtime.local.trials import LocalRuntime  # noqa: E402


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bare(repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(["/bin/true"], check=True)
        samples.append(time.perf_counter() - started)
    return samples


def sandboxed(repeat: int, mechanism: sandbox.Mechanism, scratch: Path) -> list[float]:
    results, logs = scratch / "results", scratch / "logs"
    results.mkdir()
    logs.mkdir()
    limits = sandbox.SandboxLimits(timeout_sec=30, cpus=1, memory_mb=512, pids=256, result_max_bytes=10**6)
    spec = sandbox.SandboxSpec(argv=["/bin/true"], results_dir=results, logs_dir=logs, limits=limits)
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = sandbox.run(spec, mechanism=mechanism)
        samples.append(time.perf_counter() - started)
        assert result.exit_code == 0, result
    return samples


def engine(trials: int, mechanism: sandbox.Mechanism, scratch: Path) -> tuple[float, float]:
    entries = -(-trials // 100)  # a campaign allows at most 100 seeds: split over identical entries
    campaign = VerificationCampaign.model_validate({
        "metadata": {"name": "bench"},
        "spec": {"tasks": ["smoke-inventory"], "seeds": trials // entries, "parallelism": 1,
                 "entries": [{"name": f"true-{i}", "agent": {"kind": "command", "command": ["/bin/true"]}}
                             for i in range(entries)]},
    })
    runtime = LocalRuntime(mechanism=mechanism, base_dir=REPO)
    started = time.perf_counter()
    outcome = run_campaign(campaign, scratch / "runs", runtime)
    wall = time.perf_counter() - started
    inside = sum(r["durations"]["agent_sec"] for r in outcome.records)
    assert len(outcome.records) == trials, "use a --trials that is a multiple of ceil(trials / 100)"
    return wall, inside


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    mechanism = sandbox.detect_mechanism()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        sandboxed(3, mechanism, scratch / "warm") if (scratch / "warm").mkdir() is None else None
        bare_ms = _median_ms(bare(args.repeat))
        box_ms = _median_ms(sandboxed(args.repeat, mechanism, scratch / "box") if (scratch / "box").mkdir() is None else [])
        wall, inside = engine(args.trials, mechanism, scratch)
    overhead_ms = (wall - inside) / args.trials * 1000
    report = {
        "mechanism": mechanism,
        "bare_subprocess_ms": round(bare_ms, 2),
        "sandboxed_ms": round(box_ms, 2),
        "sandbox_overhead_ms": round(box_ms - bare_ms, 2),
        "sandbox_ratio": round(box_ms / bare_ms, 1),
        "campaign_trials": args.trials,
        "campaign_wall_s": round(wall, 2),
        "inside_sandboxes_s": round(inside, 2),
        "engine_overhead_ms_per_trial": round(overhead_ms, 2),
    }
    print(f"trivial agent, bare subprocess      : {bare_ms:8.2f} ms (median of {args.repeat})")
    print(f"trivial agent, sandboxed ({mechanism:7s})  : {box_ms:8.2f} ms (median of {args.repeat})")
    print(f"sandbox overhead                    : {box_ms - bare_ms:8.2f} ms per trial  (goal ≤ 30 ms)")
    print(f"{args.trials}-trial smoke campaign          : {wall:8.2f} s wall, {inside:.2f} s inside sandboxes")
    print(f"engine overhead                     : {overhead_ms:8.2f} ms per trial  (goal ≤ 20 ms)")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
