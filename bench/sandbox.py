"""Benchmark of the local engine: sandbox overhead and engine overhead per trial, measured side by side.

Run: ``.venv/bin/python bench/sandbox.py [--trials 200] [--repeat 30]``. Prints

1. the wall time of a trivial agent (``/bin/true``) started bare with ``subprocess.run`` and started
   in the full sandbox (namespaces, binds, cgroup limits, rlimits, supervision), medians over
   ``--repeat`` runs, and their difference (goal ≤ 30 ms);
2. the engine's overhead per trial over a ``--trials``-trial campaign of the same trivial agent on the
   smoke task (parallelism 1): total wall time minus the time spent inside the sandboxes, divided by
   the number of trials (goal ≤ 20 ms). This covers planning, folder setup, prompt delivery, in-process
   scoring, the atomic trial record and aggregation.

``--before REV`` adds a side-by-side comparison of the sandbox overhead with the code of a git revision
(``git archive REV operator``): ``--rounds`` rounds, each running ``--repeat / --rounds`` trivial agents
bare and sandboxed with this tree's code and with REV's, in rotated order, each in a fresh interpreter
— so both versions see the same load. The figure is median(sandboxed) − median(bare) per version.
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
    inside = sum(r.durations.agent_sec or 0.0 for r in outcome.records)
    assert len(outcome.records) == trials, "use a --trials that is a multiple of ceil(trials / 100)"
    return wall, inside


_PROBE = r"""
import json, subprocess, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from anchorage.runtime.local import sandbox
scratch, repeat, mechanism = Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
results, logs = scratch / "results", scratch / "logs"
results.mkdir(parents=True)
logs.mkdir()
limits = sandbox.SandboxLimits(timeout_sec=30, cpus=1, memory_mb=512, pids=256, result_max_bytes=10**6)
spec = sandbox.SandboxSpec(argv=["/bin/true"], results_dir=results, logs_dir=logs, limits=limits)
sandbox.run(spec, mechanism=mechanism)
bare, box = [], []
for _ in range(repeat):
    t = time.perf_counter(); subprocess.run(["/bin/true"], check=True); bare.append(time.perf_counter() - t)
    t = time.perf_counter(); r = sandbox.run(spec, mechanism=mechanism); box.append(time.perf_counter() - t)
    assert r.exit_code == 0, r
print(json.dumps({"bare": bare, "box": box}))
"""


def side_by_side(before: str, rounds: int, repeat: int, mechanism: sandbox.Mechanism, scratch: Path) -> dict[str, float]:
    """Sandbox overhead (ms) of this tree and of revision ``before``, measured in alternating rounds."""
    old = scratch / "before"
    old.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", before, "operator"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
    trees = {"now": REPO / "operator", f"before ({before})": old / "operator"}
    samples: dict[str, dict[str, list[float]]] = {name: {"bare": [], "box": []} for name in trees}
    per_round = max(1, repeat // rounds)
    for index in range(rounds):
        order = list(trees) if index % 2 == 0 else list(reversed(trees))
        for name in order:
            done = subprocess.run([sys.executable, "-c", _PROBE, str(trees[name]), str(scratch / f"r{index}-{len(name)}"),
                                   str(per_round), mechanism], check=True, capture_output=True, text=True)
            got = json.loads(done.stdout.strip().splitlines()[-1])
            for key in ("bare", "box"):
                samples[name][key] += got[key]
    return {name: _median_ms(s["box"]) - _median_ms(s["bare"]) for name, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--before", help="git revision to compare the sandbox overhead with, side by side")
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds of the --before comparison")
    args = parser.parse_args()
    mechanism = sandbox.detect_mechanism()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        sandboxed(3, mechanism, scratch / "warm") if (scratch / "warm").mkdir() is None else None
        bare_ms = _median_ms(bare(args.repeat))
        box_ms = _median_ms(sandboxed(args.repeat, mechanism, scratch / "box") if (scratch / "box").mkdir() is None else [])
        wall, inside = engine(args.trials, mechanism, scratch)
        compared = side_by_side(args.before, args.rounds, args.repeat, mechanism, scratch) if args.before else {}
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
    for name, value in compared.items():
        print(f"side by side, sandbox overhead, {name:20s}: {value:8.2f} ms per trial")
    report["side_by_side_overhead_ms"] = {name: round(value, 2) for name, value in compared.items()}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
