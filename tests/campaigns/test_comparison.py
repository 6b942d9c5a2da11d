"""anchorage compare: per-cell differences over seeds, paired where seeds match, Welch otherwise, BH-adjusted;
the CLI's exit codes and --json shape on two real runs."""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path

import pytest
from tests.conftest import anchorage_cli

from anchorage.campaigns.comparison import ALL_TASKS, compare


def _record(entry: str, task: str, seed: int, o_eval: float, phase: str = "Succeeded") -> dict[str, object]:
    return {"name": f"c-{entry}-{task}-s{seed}", "entry": entry, "task": task, "seed": seed, "phase": phase,
            "score": {"gradable": True, "raw": o_eval, "oracle_raw": 1.0, "baseline_raw": 0.0, "o_eval": o_eval}}


def _paired_t_p(a: list[float], b: list[float]) -> float:
    """Two-sided p of the paired t-test, from its definition (t = mean(d) / (sd(d)/sqrt(n)), n-1 dof)."""
    from scipy.stats import t as student

    d = [y - x for x, y in zip(a, b, strict=True)]
    n = len(d)
    t = statistics.fmean(d) / (statistics.stdev(d) / math.sqrt(n))
    return float(2 * student.sf(abs(t), n - 1))


def test_paired_where_seeds_match_welch_where_they_do_not() -> None:
    a_vals, b_vals = [0.2, 0.3, 0.25, 0.35], [0.6, 0.62, 0.7, 0.61]
    records_a = [_record("m", "t1", s, v) for s, v in enumerate(a_vals)]
    records_b = [_record("m", "t1", s, v) for s, v in enumerate(b_vals)]
    records_a += [_record("m", "t2", s, 0.5 + 0.01 * s) for s in (0, 1, 2)]
    records_b += [_record("m", "t2", s, v) for s, v in ((5, 0.49), (6, 0.53), (7, 0.50))]   # no seed in common
    records_a.append(_record("m", "t1", 9, 0.0, "InfrastructureFailed"))         # not a seed: never compared
    result = compare(records_a, None, records_b, None)
    by_task = {c.task: c for c in result.cells}
    t1 = by_task["t1"]
    assert t1.test == "paired-t" and t1.n == 4 and t1.seeds_a == [0, 1, 2, 3]
    assert t1.delta == pytest.approx(statistics.fmean(b_vals) - statistics.fmean(a_vals))
    assert t1.p == pytest.approx(_paired_t_p(a_vals, b_vals))
    assert t1.ci95 is not None and t1.ci95[0] < t1.delta < t1.ci95[1]
    assert t1.verdict == "B higher"
    t2 = by_task["t2"]
    assert t2.test == "welch-t" and t2.p is not None and t2.p > 0.05 and t2.verdict == "no significant difference"
    assert ALL_TASKS not in by_task   # t2's seeds differ between runs: no seed has both tasks in both runs
    assert all(c.q is not None and c.q >= c.p for c in result.cells if c.p is not None)   # BH never lowers p


def test_too_few_seeds_and_no_spread_are_said_not_guessed() -> None:
    one = compare([_record("m", "t", 0, 0.1)], None, [_record("m", "t", 0, 0.9)], None)
    assert one.cells[0].test == "none" and one.cells[0].p is None and "too few seeds" in one.cells[0].note
    same = compare([_record("m", "t", s, 0.4) for s in (0, 1)], None, [_record("m", "t", s, 0.4) for s in (0, 1)], None)
    assert same.cells[0].p is None and same.cells[0].note == "identical on every paired seed"
    assert same.cells[0].verdict == "untested"


def test_bo_eval_is_against_each_runs_own_f() -> None:
    base = [_record("flash", "t", s, 0.2) for s in (0, 1)]
    a = base + [_record("m", "t", s, v) for s, v in ((0, 0.5), (1, 0.6))]
    b = base + [_record("m", "t", s, v) for s, v in ((0, 0.7), (1, 0.9))]
    result = compare(a, "flash", b, "flash", metric="bo_eval")
    cell = next(c for c in result.cells if c.entry == "m" and c.task == "t")
    # gap = 1 - 0.2 = 0.8 ≥ 0.10: BO = (R - F) / gap
    assert cell.mean_a == pytest.approx(statistics.fmean([(0.5 - 0.2) / 0.8, (0.6 - 0.2) / 0.8]))
    assert cell.mean_b == pytest.approx(statistics.fmean([(0.7 - 0.2) / 0.8, (0.9 - 0.2) / 0.8]))


def test_the_cli_compares_two_runs(demo_runs: Path, tmp_path: Path) -> None:
    other = tmp_path / "demo"
    shutil.copytree(demo_runs / "demo", other)
    trial = other / "demo-mock-smoke-inventory-s1" / "trial.json"
    record = json.loads(trial.read_text())
    record["score"]["o_eval"] = 0.9
    trial.write_text(json.dumps(record))
    done = anchorage_cli("compare", str(demo_runs / "demo"), str(other), "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert {"run_a", "run_b", "metric", "cells", "only_a", "only_b", "method"} <= set(out)
    mock = next(c for c in out["cells"] if c["entry"] == "mock" and c["task"] == "smoke-inventory")
    assert mock["test"] == "paired-t" and mock["n"] == 3 and mock["delta"] > 0 and mock["verdict"]
    oracle = next(c for c in out["cells"] if c["entry"] == "oracle" and c["task"] == "smoke-inventory")
    assert oracle["delta"] == 0 and oracle["note"] == "identical on every paired seed"
    table = anchorage_cli("compare", str(demo_runs / "demo"), str(other))
    assert table.returncode == 0 and "paired-t" in table.stdout and "Benjamini-Hochberg" in table.stdout
    bad = anchorage_cli("compare", str(demo_runs / "demo"), str(other), "--metric", "o-eval")
    assert bad.returncode == 2 and "did you mean 'o_eval'" in bad.stderr
    missing = anchorage_cli("compare", str(demo_runs / "demo"), str(tmp_path / "nope"))
    assert missing.returncode == 2
