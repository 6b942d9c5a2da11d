"""Comparing two runs: per entry and task (and per entry over all tasks), the difference, its 95 % CI and a verdict.

Pure (scipy for the tests); called by ``anchorage compare RUN_A RUN_B``. Inputs are the two runs' finished
trial records; only scored trials count (an infrastructure failure is no seed). For each cell present in both:

* the values per seed — O-Eval as scored; Robust BO-Eval recomputed against *each run's own* F
  (:func:`anchorage.campaigns.aggregation.board_f`, the board's one definition);
* **the samples**: when at least two seeds are in both runs (seed k of A with seed k of B — the same seed of
  the same entry and task), the **matched seeds only** (a paired t-test; seeds of one run without a partner
  are left out and counted in ``unmatched_a``/``unmatched_b``); else, with two or more seeds on each side,
  every seed of each (Welch's t-test); else no test ("too few seeds");
* ``mean_a``, ``mean_b``, ``delta`` = mean(B) − mean(A) and the 95 % confidence interval of ``delta`` are all
  computed from those same samples (paired: the mean of the per-seed differences and the t interval of that
  mean; Welch: the difference of the means and Welch's interval);
* differences smaller than :data:`NOISE` are float noise (two computations of the same score in another
  order) and count as zero;
* ``p`` of that test and ``q``: Benjamini–Hochberg adjusted p-values over every tested cell of the
  comparison (many cells are compared at once);
* the **verdict** (:meth:`CellComparison.verdict`): ``B higher`` / ``B lower`` only when the CI excludes 0,
  ``q`` < :data:`ALPHA` and ``|delta|`` ≥ the stated practical threshold (``min_effect``, 0.01 by default: one
  hundredth of the metric's unit); its sign is the CI's. ``no difference`` when the samples are identical up
  to float noise or the whole CI lies within ± the threshold; ``below threshold`` when significant but
  smaller than the threshold; ``inconclusive`` otherwise; ``untested`` when no test applies.

Per entry, "all tasks" compares the per-seed means over the tasks both runs scored for that entry.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from anchorage.campaigns.aggregation import TrialResult, board_f, robust_bo

METRICS = ("o_eval", "bo_eval")
ALL_TASKS = "(all tasks)"
ALPHA = 0.05
MIN_EFFECT = 0.01
"""The default practical threshold: a difference smaller than this (in the metric's unit) is never a verdict."""
NOISE = 1e-9
"""Per-seed differences (and sides' spreads) below this are float noise: treated as exactly zero."""
VERDICTS = ("B higher", "B lower", "no difference", "below threshold", "inconclusive", "untested")


@dataclass
class CellComparison:
    """One (entry, task) cell compared between run A and run B."""

    entry: str
    task: str
    seeds_a: list[int]              # every scored seed of A
    seeds_b: list[int]
    test: str                       # paired-t | welch-t | none
    n_a: int                        # samples of A the numbers below use (paired: the matched seeds)
    n_b: int
    paired: int                     # seeds both runs scored
    mean_a: float
    mean_b: float
    delta: float                    # mean_b - mean_a over the same samples
    min_effect: float = MIN_EFFECT
    p: float | None = None
    q: float | None = None          # Benjamini–Hochberg over the comparison's tested cells
    ci95: tuple[float, float] | None = None
    identical: bool = False         # the samples are equal up to float noise
    unmatched_a: list[int] = field(default_factory=list)   # seeds of A left out of a paired test
    unmatched_b: list[int] = field(default_factory=list)
    note: str = ""

    @property
    def verdict(self) -> str:
        """One of :data:`VERDICTS` (see the module docstring); the sign of a higher/lower verdict is the CI's."""
        if self.identical:
            return "no difference"
        if self.ci95 is None or self.p is None:
            return "untested"
        low, high = self.ci95
        if -self.min_effect < low and high < self.min_effect:
            return "no difference"
        significant = (low > 0 or high < 0) and self.q is not None and self.q < ALPHA
        if not significant:
            return "inconclusive"
        if abs(self.delta) < self.min_effect:
            return "below threshold"
        return "B higher" if low > 0 else "B lower"


@dataclass
class Comparison:
    run_a: str
    run_b: str
    metric: str
    min_effect: float = MIN_EFFECT
    cells: list[CellComparison] = field(default_factory=list)
    only_a: list[tuple[str, str]] = field(default_factory=list)
    only_b: list[tuple[str, str]] = field(default_factory=list)

    @property
    def method(self) -> str:
        return ("paired t-test over the seeds both runs scored (>= 2 matched seeds; unmatched seeds left out and "
                "counted), else Welch's t-test over every seed (>= 2 each); mean A, mean B, delta and its 95% CI "
                "from the same samples; differences below 1e-9 are float noise (zero); q: Benjamini-Hochberg over "
                f"the tested cells. Verdict 'B higher'/'B lower' only when the CI excludes 0, q < {ALPHA} and "
                f"|delta| >= {self.min_effect:g} (the practical threshold); 'no difference' when identical or the "
                f"CI lies within +-{self.min_effect:g}")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["method"] = self.method
        for cell, raw in zip(self.cells, out["cells"], strict=True):
            raw["verdict"] = cell.verdict
        return out


def _values(results: Iterable[TrialResult], baseline: str | None, metric: str) -> dict[tuple[str, str], dict[int, float]]:
    """(entry, task) → seed → the metric's value of the scored trial (BO-Eval only where the board's F is defined)."""
    scored = [r for r in results if r.scored]
    f_by_task = board_f(scored, baseline)
    cells: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for r in scored:
        if metric == "o_eval":
            cells[(r.entry, r.task)][r.seed] = r.o_eval
            continue
        f_value = f_by_task.get(r.task, {}).get("F")
        if f_value is not None:
            cells[(r.entry, r.task)][r.seed] = robust_bo(r, f_value)
    return cells


def _per_entry(cells: Mapping[tuple[str, str], dict[int, float]], tasks: set[str]) -> dict[str, dict[int, float]]:
    """entry → seed → mean over ``tasks`` (only seeds scored on every one of them)."""
    out: dict[str, dict[int, float]] = {}
    for entry in sorted({e for e, _ in cells}):
        mine = {t: cells[(entry, t)] for t in tasks if (entry, t) in cells}
        if not mine or len(mine) < len(tasks):
            continue
        seeds = set.intersection(*(set(v) for v in mine.values()))
        out[entry] = {s: statistics.fmean(v[s] for v in mine.values()) for s in sorted(seeds)}
    return out


def _denoise(value: float) -> float:
    return 0.0 if abs(value) < NOISE else value


def _flat(values: list[float]) -> bool:
    return max(values) - min(values) < NOISE


def compare_cell(entry: str, task: str, a: Mapping[int, float], b: Mapping[int, float], *,
                 min_effect: float = MIN_EFFECT) -> CellComparison:
    """One cell: its samples, delta, CI and test (see the module docstring); ``q`` is set by :func:`compare`."""
    from scipy import stats

    common = sorted(set(a) & set(b))
    if len(common) >= 2:
        xs, ys = [a[s] for s in common], [b[s] for s in common]
        diffs = [_denoise(y - x) for x, y in zip(xs, ys, strict=True)]
        cell = _cell(entry, task, a, b, "paired-t", xs, ys, statistics.fmean(diffs), min_effect)
        cell.paired = len(common)
        cell.unmatched_a, cell.unmatched_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        if cell.unmatched_a or cell.unmatched_b:
            cell.note = (f"paired over the {len(common)} matched seeds; left out: {len(cell.unmatched_a)} seed(s) of A, "
                         f"{len(cell.unmatched_b)} of B without a partner")
        cell.identical = all(d == 0 for d in diffs)
        if cell.identical:
            cell.delta = 0.0
            return _noted(cell, "identical on every matched seed")
        if _flat(diffs):
            return _noted(cell, f"every matched seed differs by {diffs[0]:+.6g}: no spread to test")
        result = stats.ttest_1samp(diffs, 0.0)
        return _tested(cell, result)
    if len(a) >= 2 and len(b) >= 2:
        xs, ys = list(a.values()), list(b.values())
        cell = _cell(entry, task, a, b, "welch-t", xs, ys, _denoise(statistics.fmean(ys) - statistics.fmean(xs)),
                     min_effect)
        cell.paired = len(common)
        cell.identical = _flat(xs) and _flat(ys) and cell.delta == 0
        if cell.identical:
            return _noted(cell, "both sides hold the same constant value")
        if _flat(xs) and _flat(ys):
            return _noted(cell, "both sides are constant: no spread to test")
        with warnings.catch_warnings():
            if _flat(xs) or _flat(ys):  # Welch's test is exact with one constant side (its variance 0); scipy warns
                warnings.filterwarnings("ignore", "Precision loss occurred in moment calculation", RuntimeWarning)
            result = stats.ttest_ind(ys, xs, equal_var=False)
        return _tested(cell, result)
    xs, ys = list(a.values()), list(b.values())
    cell = _cell(entry, task, a, b, "none", xs, ys, _denoise(statistics.fmean(ys) - statistics.fmean(xs)), min_effect)
    cell.paired = len(common)
    cell.identical = _flat(xs + ys)
    return _noted(cell, "identical values" if cell.identical else
                  "too few seeds to test (two matched seeds, or two seeds on each side, are needed)")


def _cell(entry: str, task: str, a: Mapping[int, float], b: Mapping[int, float], test: str, xs: list[float],
          ys: list[float], delta: float, min_effect: float) -> CellComparison:
    return CellComparison(entry, task, sorted(a), sorted(b), test, len(xs), len(ys), 0, statistics.fmean(xs),
                          statistics.fmean(ys), delta, min_effect)


def _noted(cell: CellComparison, note: str) -> CellComparison:
    cell.note = f"{note}; {cell.note}" if cell.note else note
    return cell


def _tested(cell: CellComparison, result: Any) -> CellComparison:
    p = float(result.pvalue)
    try:
        low, high = result.confidence_interval(0.95)
    except (AttributeError, ValueError):
        return cell
    if math.isfinite(p) and math.isfinite(low) and math.isfinite(high):
        cell.p, cell.ci95 = p, (float(low), float(high))
    return cell


def compare(records_a: list[dict[str, Any]], baseline_a: str | None, records_b: list[dict[str, Any]],
            baseline_b: str | None, *, metric: str = "o_eval", run_a: str = "A", run_b: str = "B",
            min_effect: float = MIN_EFFECT) -> Comparison:
    """Every cell of both runs compared (see the module docstring)."""
    from scipy import stats

    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}")
    if not (math.isfinite(min_effect) and min_effect >= 0):
        raise ValueError("min_effect must be a finite number >= 0")
    results_a = [TrialResult.from_record(r) for r in records_a]
    results_b = [TrialResult.from_record(r) for r in records_b]
    cells_a, cells_b = _values(results_a, baseline_a, metric), _values(results_b, baseline_b, metric)
    out = Comparison(run_a, run_b, metric, min_effect)
    out.only_a = sorted(set(cells_a) - set(cells_b))
    out.only_b = sorted(set(cells_b) - set(cells_a))
    common = sorted(set(cells_a) & set(cells_b))
    out.cells = [compare_cell(e, t, cells_a[(e, t)], cells_b[(e, t)], min_effect=min_effect) for e, t in common]
    for entry in sorted({e for e, _ in common}):
        tasks = {t for e, t in common if e == entry}
        a, b = _per_entry(cells_a, tasks).get(entry), _per_entry(cells_b, tasks).get(entry)
        if a and b:
            out.cells.append(compare_cell(entry, ALL_TASKS, a, b, min_effect=min_effect))
    tested = [c for c in out.cells if c.p is not None]
    if tested:
        adjusted = stats.false_discovery_control([c.p for c in tested], method="bh")
        for cell, q in zip(tested, adjusted, strict=True):
            cell.q = float(q)
    return out
