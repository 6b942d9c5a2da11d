"""Benchmark: obligations generated and checked per second by the exact Python checker.

Runs over every anchor artifact of the 18 benchmark tasks (``tasks/*/tests/expected_result.json``,
else the reference data pack's), repeated, and prints side by side in one run:

* generate + check (compiled invariants, ``Decimal``-parsed artifacts) — the gate path;
* the same from float-parsed artifacts (floats read through ``repr``) — the scorer's input;
* a cold path that re-parses and re-compiles the invariants every time — what caching buys;
* generation plus rendering of the Lean module text (what ``anchorage lean gen`` adds).

Goal (issue 6): ≥ 100,000 obligations/s on the gate path. Run: ``.venv/bin/python bench/lean.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "operator"))

from anchorage.invariants.compiler import compile_invariant, obligations  # noqa: E402
from anchorage.invariants.exact import load_exact  # noqa: E402
from anchorage.invariants.expr import Obligation  # noqa: E402
from anchorage.invariants.spec import InvariantsFile, load_invariants, parse_invariants  # noqa: E402
from anchorage.lean.render import render_module  # noqa: E402

REFERENCE = REPO.parent / "shared" / "reference" / "tasks"


def anchors() -> list[tuple[Path, InvariantsFile, Any, Any, str]]:
    found = []
    for task in sorted(p for p in (REPO / "tasks").iterdir() if p.is_dir()):
        spec = load_invariants(task)
        if spec is None:
            continue
        anchor = task / "tests" / "expected_result.json"
        if not anchor.is_file():
            anchor = REFERENCE / task.name / "tests" / "expected_result.json"
        if anchor.is_file():
            text = (task / "tests" / "invariants.yaml").read_text(encoding="utf-8")
            found.append((task, spec, load_exact(anchor), json.loads(anchor.read_text(encoding="utf-8")), text))
    return found


def check_all(obs: list[Obligation]) -> int:
    checked = 0
    for ob in obs:
        if not ob.skipped:
            ob.holds()
        checked += 1
    return checked


def measure(label: str, repeat: int, step: Any) -> float:
    """Wall-clock and CPU rates (the machine may be shared: CPU time is the steadier figure)."""
    start, cpu_start = time.perf_counter(), time.process_time()
    total = sum(step() for _ in range(repeat))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    rate, cpu_rate = total / elapsed, total / cpu
    print(f"{label:<44} {total:>8} obligations: {elapsed:6.3f} s wall = {rate:>9,.0f} /s;"
          f" {cpu:6.3f} s CPU = {cpu_rate:>9,.0f} /CPU-s")
    return cpu_rate


def main(repeat: int = 200) -> None:
    items = anchors()
    per_round = sum(len(obligations(spec, exact)) for _, spec, exact, _, _ in items)
    print(f"{len(items)} anchor artifacts, {per_round} obligations per round, {repeat} rounds\n")

    def warm_exact() -> int:
        return sum(check_all(obligations(spec, exact)) for _, spec, exact, _, _ in items)

    def warm_float() -> int:
        return sum(check_all(obligations(spec, plain)) for _, spec, _, plain, _ in items)

    def cold() -> int:
        total = 0
        for _, _, exact, _, text in items:
            spec = parse_invariants(text)
            total += sum(check_all(compile_invariant(inv)(exact)) for inv in spec.invariants)
        return total

    def rendered() -> int:
        total = 0
        for _, spec, exact, _, _ in items:
            obs = obligations(spec, exact)
            render_module(spec.namespace, obs, "bench")
            total += len(obs)
        return total

    hot = measure("compiled, Decimal-parsed (gate path)", repeat, warm_exact)
    measure("compiled, float-parsed (repr → exact)", repeat, warm_float)
    slow = measure("cold: parse YAML + compile every time", max(1, repeat // 10), cold)
    measure("generate + render Lean text (no check)", max(1, repeat // 10), rendered)
    print(f"\ncaching speed-up: {hot / slow:.1f}x; goal 100,000 obligations per CPU-second: "
          f"{'met' if hot >= 100_000 else 'NOT met'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Obligations generated and checked per second (Python checker).")
    parser.add_argument("rounds", nargs="?", type=int, default=200, help="rounds over all anchor artifacts")
    main(parser.parse_args().rounds)
