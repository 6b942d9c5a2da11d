"""anchorage compare: per-cell differences over seeds — paired over matched seeds only, Welch otherwise, BH-adjusted;
delta and its CI from the same samples; a verdict only past the practical threshold, its sign always the CI's
(hypothesis); float noise is no difference; two copies of one run differ nowhere, a known shift is found; the
CLI's exit codes and --json shape on two real runs."""

from __future__ import annotations

import json
import math
import random
import shutil
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import anchorage_cli

from anchorage.campaigns.comparison import ALL_TASKS, MIN_EFFECT, VERDICTS, compare, compare_cell


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
    assert t1.test == "paired-t" and t1.paired == 4 and t1.seeds_a == [0, 1, 2, 3]
    assert t1.delta == pytest.approx(statistics.fmean(b_vals) - statistics.fmean(a_vals))
    assert t1.p == pytest.approx(_paired_t_p(a_vals, b_vals))
    assert t1.ci95 is not None and t1.ci95[0] < t1.delta < t1.ci95[1]
    assert t1.verdict == "B higher"
    t2 = by_task["t2"]
    assert t2.test == "welch-t" and t2.paired == 0 and (t2.n_a, t2.n_b) == (3, 3)
    assert t2.p is not None and t2.p > 0.05 and t2.verdict in ("inconclusive", "no difference")
    assert ALL_TASKS not in by_task   # t2's seeds differ between runs: no seed has both tasks in both runs
    assert all(c.q is not None and c.q >= c.p for c in result.cells if c.p is not None)   # BH never lowers p


def test_delta_and_ci_come_from_the_matched_seeds_only() -> None:
    """A has seeds 0-3, B seeds 0-1 and 7: the paired test uses seeds 0 and 1, and so do the means and delta
    (not a mean over every seed of A against one over every seed of B); the unmatched seeds are counted."""
    a = {0: 0.1, 1: 0.2, 2: 0.9, 3: 0.95}
    b = {0: 0.3, 1: 0.5, 7: 0.0}
    cell = compare_cell("m", "t", a, b)
    assert cell.test == "paired-t" and cell.paired == 2 and (cell.n_a, cell.n_b) == (2, 2)
    assert (cell.mean_a, cell.mean_b) == (pytest.approx(0.15), pytest.approx(0.4))
    assert cell.delta == pytest.approx(0.25) == pytest.approx(cell.mean_b - cell.mean_a)
    assert cell.unmatched_a == [2, 3] and cell.unmatched_b == [7]
    assert "2 matched seeds" in cell.note and "2 seed(s) of A" in cell.note
    assert cell.ci95 is not None and cell.ci95[0] <= cell.delta <= cell.ci95[1]


def test_float_noise_is_no_difference() -> None:
    """The issue's case: BO-Eval computed in another order differs by ~5e-18 on some seeds; a t-test on that
    noise gave p 2.6e-08 and 'B lower' against a CI of [+0.0000, +0.0000]."""
    a = {0: 0.1, 1: -0.05, 2: 0.02}
    b = {0: 0.1 - 5.2e-18, 1: -0.05 - 5.2e-18, 2: 0.02}
    cell = compare_cell("mock", "crop", a, b)
    assert cell.identical and cell.delta == 0.0 and cell.p is None and cell.verdict == "no difference"


def test_too_few_seeds_and_no_spread_are_said_not_guessed() -> None:
    one = compare([_record("m", "t", 0, 0.1)], None, [_record("m", "t", 0, 0.9)], None)
    assert one.cells[0].test == "none" and one.cells[0].p is None and "too few seeds" in one.cells[0].note
    assert one.cells[0].verdict == "untested"
    same = compare([_record("m", "t", s, 0.4) for s in (0, 1)], None, [_record("m", "t", s, 0.4) for s in (0, 1)], None)
    assert same.cells[0].p is None and same.cells[0].note == "identical on every matched seed"
    assert same.cells[0].verdict == "no difference"
    shifted = compare_cell("m", "t", {0: 0.1, 1: 0.5}, {0: 0.3, 1: 0.7})
    assert shifted.p is None and "no spread to test" in shifted.note and shifted.verdict == "untested"


def test_one_constant_side_is_tested_without_a_warning() -> None:
    """Welch's test is exact when one side has no spread (hypothesis found scipy's "precision loss" warning for
    such a cell: a warning the CLI printed, an error under the tests' warning filter)."""
    cell = compare_cell("m", "t", {0: 0.0, 1: 0.0, 2: 1.0}, {0: 1.0, 3: 1.0})
    assert cell.test == "welch-t" and cell.delta == pytest.approx(2 / 3)
    assert cell.ci95 is not None and cell.ci95[0] < cell.delta < cell.ci95[1] and cell.p is not None


def test_a_significant_difference_below_the_threshold_is_no_verdict() -> None:
    a = {s: 0.5 + 0.0001 * s for s in range(8)}
    b = {s: v + 0.003 + 0.00001 * (s % 3) for s, v in a.items()}
    cell = compare([_record("m", "t", s, v) for s, v in a.items()], None,
                   [_record("m", "t", s, v) for s, v in b.items()], None).cells[0]
    assert cell.ci95 is not None and cell.ci95[0] > 0 and cell.q is not None and cell.q < 0.05
    assert cell.verdict == "no difference"       # the whole CI lies within ±0.01
    lower = compare([_record("m", "t", s, v) for s, v in a.items()], None,
                    [_record("m", "t", s, v) for s, v in b.items()], None, min_effect=0.001).cells[0]
    assert lower.verdict == "B higher"           # past a smaller stated threshold it is one


def test_bo_eval_is_against_each_runs_own_f() -> None:
    base = [_record("flash", "t", s, 0.2) for s in (0, 1)]
    a = base + [_record("m", "t", s, v) for s, v in ((0, 0.5), (1, 0.6))]
    b = base + [_record("m", "t", s, v) for s, v in ((0, 0.7), (1, 0.9))]
    result = compare(a, "flash", b, "flash", metric="bo_eval")
    cell = next(c for c in result.cells if c.entry == "m" and c.task == "t")
    # gap = 1 - 0.2 = 0.8 ≥ 0.10: BO = (R - F) / gap
    assert cell.mean_a == pytest.approx(statistics.fmean([(0.5 - 0.2) / 0.8, (0.6 - 0.2) / 0.8]))
    assert cell.mean_b == pytest.approx(statistics.fmean([(0.7 - 0.2) / 0.8, (0.9 - 0.2) / 0.8]))


def test_a_known_shift_is_found_and_its_absence_is_not_invented() -> None:
    rng = random.Random(7)
    a = [_record(e, t, s, rng.uniform(0.2, 0.6)) for e in ("x", "y") for t in ("t1", "t2") for s in range(5)]
    same = compare(a, None, [dict(r) for r in a], None)
    assert same.cells and {c.verdict for c in same.cells} == {"no difference"}
    b = [dict(r, score={**r["score"], "o_eval": r["score"]["o_eval"] + 0.2 + rng.uniform(-0.02, 0.02)})  # type: ignore[dict-item]
         if r["entry"] == "x" else dict(r) for r in a]
    shifted = compare(a, None, b, None)
    verdicts = {(c.entry, c.task): c.verdict for c in shifted.cells}
    assert all(verdicts[("x", t)] == "B higher" for t in ("t1", "t2", ALL_TASKS))
    assert all(verdicts[("y", t)] == "no difference" for t in ("t1", "t2", ALL_TASKS))


seeds = st.lists(st.integers(min_value=0, max_value=9), min_size=1, max_size=8, unique=True)
value = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(seeds_a=seeds, seeds_b=seeds, values=st.lists(value, min_size=20, max_size=20), shift=value,
       threshold=st.sampled_from([0.0, MIN_EFFECT, 0.1]))
def test_the_verdict_always_agrees_with_the_ci(seeds_a: list[int], seeds_b: list[int], values: list[float],
                                                shift: float, threshold: float) -> None:
    a = {s: values[s] for s in seeds_a}
    b = {s: max(-1.0, min(1.0, values[10 + s] * 0.1 + values[s] + shift)) for s in seeds_b}
    results = compare([_record("m", "t", s, v) for s, v in a.items()], None,
                      [_record("m", "t", s, v) for s, v in b.items()], None, min_effect=threshold)
    cell = results.cells[0]
    assert cell.verdict in VERDICTS
    assert cell.delta == pytest.approx(cell.mean_b - cell.mean_a, abs=1e-9)   # from the same samples
    if cell.test == "paired-t":
        matched = sorted(set(a) & set(b))
        assert cell.paired == cell.n_a == cell.n_b == len(matched)
        assert cell.mean_a == pytest.approx(statistics.fmean(a[s] for s in matched))
    if cell.ci95 is not None:
        low, high = cell.ci95
        assert low - 1e-12 <= cell.delta <= high + 1e-12
    if cell.verdict == "B higher":
        assert cell.ci95 is not None and cell.ci95[0] > 0 and cell.delta >= threshold
    if cell.verdict == "B lower":
        assert cell.ci95 is not None and cell.ci95[1] < 0 and cell.delta <= -threshold
    if cell.verdict in ("B higher", "B lower"):
        assert cell.q is not None and cell.q < 0.05
    swapped = compare([_record("m", "t", s, v) for s, v in b.items()], None,
                      [_record("m", "t", s, v) for s, v in a.items()], None, min_effect=threshold).cells[0]
    mirror = {"B higher": "B lower", "B lower": "B higher"}
    assert swapped.verdict == mirror.get(cell.verdict, cell.verdict)     # A vs B is B vs A, mirrored


def test_the_cli_compares_two_runs(demo_runs: Path, tmp_path: Path) -> None:
    other = tmp_path / "demo"
    shutil.copytree(demo_runs / "demo", other)
    same = anchorage_cli("compare", str(demo_runs / "demo"), str(other), "--json")
    assert same.returncode == 0, same.stderr
    assert {c["verdict"] for c in json.loads(same.stdout)["cells"]} == {"no difference"}   # two copies: nowhere
    for seed, shift in ((0, 0.31), (1, 0.29), (2, 0.30)):
        trial = other / f"demo-mock-smoke-inventory-s{seed}" / "trial.json"
        record = json.loads(trial.read_text())
        record["score"]["o_eval"] += shift
        trial.write_text(json.dumps(record))
    done = anchorage_cli("compare", str(demo_runs / "demo"), str(other), "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert {"run_a", "run_b", "metric", "min_effect", "cells", "only_a", "only_b", "method"} <= set(out)
    mock = next(c for c in out["cells"] if c["entry"] == "mock" and c["task"] == "smoke-inventory")
    assert mock["test"] == "paired-t" and mock["paired"] == 3 and mock["delta"] == pytest.approx(0.3)
    assert mock["verdict"] == "B higher" and mock["ci95"][0] > 0
    oracle = next(c for c in out["cells"] if c["entry"] == "oracle" and c["task"] == "smoke-inventory")
    assert oracle["delta"] == 0 and oracle["note"] == "identical on every matched seed"
    assert oracle["verdict"] == "no difference"
    table = anchorage_cli("compare", str(demo_runs / "demo"), str(other))
    assert table.returncode == 0 and "paired-t" in table.stdout and "Benjamini-Hochberg" in table.stdout
    assert "B higher" in table.stdout and "3 matched" in table.stdout and "-0.0000" not in table.stdout
    assert "practical threshold" in table.stdout
    bad = anchorage_cli("compare", str(demo_runs / "demo"), str(other), "--metric", "o-eval")
    assert bad.returncode == 2 and "did you mean 'o_eval'" in bad.stderr
    negative = anchorage_cli("compare", str(demo_runs / "demo"), str(other), "--min-effect", "-1")
    assert negative.returncode == 2 and "--min-effect" in negative.stderr
    missing = anchorage_cli("compare", str(demo_runs / "demo"), str(tmp_path / "nope"))
    assert missing.returncode == 2
