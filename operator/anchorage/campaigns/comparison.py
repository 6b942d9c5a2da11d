"""Comparing two runs: per entry and task (and per entry over all tasks), the difference and its significance
over seeds.

Pure (scipy for the tests); called by ``anchorage compare RUN_A RUN_B``. Inputs are the two runs' finished
trial records; only scored trials count (an infrastructure failure is no seed). For each cell present in both:

* the values per seed — O-Eval as scored; Robust BO-Eval recomputed against *each run's own* F
  (:func:`anchorage.campaigns.aggregation.robust_bo`, as its leaderboard does);
* ``delta`` = mean(B) − mean(A);
* the test: **paired** t-test over the seeds both runs have (seed k of A with seed k of B — the same seed of
  the same entry and task) when at least two pair up; else Welch's t-test when each side has two or more; else
  none ("too few seeds"). Differences without spread (every pair differs by the same amount, or both sides
  constant) have no p-value: the record says so rather than inventing 0 or 1;
* a 95 % confidence interval of ``delta`` (t-based, of the same test) and ``q``: Benjamini–Hochberg adjusted
  p-values over every tested cell of the comparison (many cells are compared at once).

Per entry, "all tasks" compares the per-seed means over the tasks both runs scored for that entry.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from anchorage.campaigns.aggregation import TrialResult, baseline_f, robust_bo

METRICS = ("o_eval", "bo_eval")
ALL_TASKS = "(all tasks)"
ALPHA = 0.05


@dataclass
class CellComparison:
    """One (entry, task) cell compared between run A and run B."""

    entry: str
    task: str
    seeds_a: list[int]
    seeds_b: list[int]
    mean_a: float
    mean_b: float
    delta: float
    test: str                       # paired-t | welch-t | none
    n: int                          # pairs (paired) or the smaller side (welch)
    p: float | None = None
    q: float | None = None          # Benjamini–Hochberg over the comparison's tested cells
    ci95: tuple[float, float] | None = None
    note: str = ""

    @property
    def verdict(self) -> str:
        if self.q is None:
            return "untested"
        if self.q >= ALPHA:
            return "no significant difference"
        return "B higher" if self.delta > 0 else "B lower"


@dataclass
class Comparison:
    run_a: str
    run_b: str
    metric: str
    cells: list[CellComparison] = field(default_factory=list)
    only_a: list[tuple[str, str]] = field(default_factory=list)
    only_b: list[tuple[str, str]] = field(default_factory=list)
    method: str = ("paired t-test over the seeds both runs have (>= 2 pairs), else Welch's t-test (>= 2 seeds each); "
                   "q: Benjamini-Hochberg over the tested cells; significant when q < 0.05")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for cell, raw in zip(self.cells, out["cells"], strict=True):
            raw["verdict"] = cell.verdict
        return out


def _values(results: Iterable[TrialResult], baseline: str | None, metric: str) -> dict[tuple[str, str], dict[int, float]]:
    """(entry, task) → seed → the metric's value of the scored trial."""
    scored = [r for r in results if r.scored]
    f_by_task = baseline_f(scored, baseline)
    cells: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for r in scored:
        value = r.o_eval if metric == "o_eval" else robust_bo(r, f_by_task[r.task]["F"])
        cells[(r.entry, r.task)][r.seed] = value
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


def compare_cell(entry: str, task: str, a: Mapping[int, float], b: Mapping[int, float]) -> CellComparison:
    from scipy import stats

    mean_a, mean_b = statistics.fmean(a.values()), statistics.fmean(b.values())
    cell = CellComparison(entry, task, sorted(a), sorted(b), mean_a, mean_b, mean_b - mean_a, "none", 0)
    common = sorted(set(a) & set(b))
    if len(common) >= 2:
        diffs = [b[s] - a[s] for s in common]
        cell.test, cell.n = "paired-t", len(common)
        if len(set(diffs)) == 1:
            cell.note = ("identical on every paired seed" if diffs[0] == 0 else
                         f"every pair differs by {diffs[0]:+.6g}: no spread to test")
            return cell
        result = stats.ttest_rel([b[s] for s in common], [a[s] for s in common])
        cell.p = float(result.pvalue)
        cell.ci95 = _ci(result)
        if len(common) < len(a) or len(common) < len(b):
            cell.note = f"paired over the {len(common)} seeds both have; the means use every seed"
        return cell
    if len(a) >= 2 and len(b) >= 2:
        cell.test, cell.n = "welch-t", min(len(a), len(b))
        if len(set(a.values())) == 1 and len(set(b.values())) == 1:
            cell.note = "both sides are constant: no spread to test"
            return cell
        result = stats.ttest_ind(list(b.values()), list(a.values()), equal_var=False)
        cell.p = float(result.pvalue)
        cell.ci95 = _ci(result)
        return cell
    cell.note = "too few seeds to test (two pairs, or two seeds on each side, are needed)"
    return cell


def _ci(result: Any) -> tuple[float, float] | None:
    try:
        low, high = result.confidence_interval(0.95)
    except (AttributeError, ValueError):
        return None
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return float(low), float(high)


def compare(records_a: list[dict[str, Any]], baseline_a: str | None, records_b: list[dict[str, Any]],
            baseline_b: str | None, *, metric: str = "o_eval", run_a: str = "A", run_b: str = "B") -> Comparison:
    """Every cell of both runs compared (see the module docstring)."""
    from scipy import stats

    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}")
    results_a = [TrialResult.from_record(r) for r in records_a]
    results_b = [TrialResult.from_record(r) for r in records_b]
    cells_a, cells_b = _values(results_a, baseline_a, metric), _values(results_b, baseline_b, metric)
    out = Comparison(run_a, run_b, metric)
    out.only_a = sorted(set(cells_a) - set(cells_b))
    out.only_b = sorted(set(cells_b) - set(cells_a))
    common = sorted(set(cells_a) & set(cells_b))
    out.cells = [compare_cell(e, t, cells_a[(e, t)], cells_b[(e, t)]) for e, t in common]
    for entry in sorted({e for e, _ in common}):
        tasks = {t for e, t in common if e == entry}
        a, b = _per_entry(cells_a, tasks).get(entry), _per_entry(cells_b, tasks).get(entry)
        if a and b:
            out.cells.append(compare_cell(entry, ALL_TASKS, a, b))
    tested = [c for c in out.cells if c.p is not None]
    if tested:
        adjusted = stats.false_discovery_control([c.p for c in tested], method="bh")
        for cell, q in zip(tested, adjusted, strict=True):
            cell.q = float(q)
    return out
