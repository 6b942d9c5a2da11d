"""The paper table of a campaign (``anchorage report RUN --table latex|csv``): one row per (entry, task) cell and one
per entry over all tasks, with what a reader needs to judge the numbers.

Per row: the number of scored seeds ``n``; O-Eval and Robust BO-Eval (against the board's one F) as mean, sample
standard deviation (ddof = 1) and a 95 % confidence interval of the mean (Student's t with n − 1 degrees of
freedom; none with a single seed); the cost per seed and in total (a lower bound, marked ``≥``/``cost_is_lower_bound``,
when some trial's cost is unknown); the scoring profile and the price snapshot of the trials behind it. The
"(all tasks)" row of an entry is the leaderboard's: the per-seed means over the tasks, then their mean, std and CI.
A cell without a scored trial is a row with ``n`` = 0 and no numbers ("—"), never a zero. Pure; the board comes
from :mod:`anchorage.campaigns.aggregation`.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from anchorage.campaigns.aggregation import Leaderboard, TrialResult, robust_bo
from anchorage.report.tables import MISSING, fixed
from anchorage.text import readable

ALL_TASKS = "(all tasks)"
FORMATS = ("latex", "csv")


@dataclass(frozen=True)
class Summary:
    """mean, sample std and the 95 % t interval of a list of per-seed values (None when there are none)."""

    n: int
    mean: float | None
    std: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        from scipy.stats import t as student

        n = len(values)
        if not n:
            return cls(0, None, None, None, None)
        mean = statistics.fmean(values)
        if n == 1:
            return cls(1, mean, 0.0, None, None)
        std = statistics.stdev(values)
        half = float(student.ppf(0.975, n - 1)) * std / math.sqrt(n)
        return cls(n, mean, std, mean - half, mean + half)


@dataclass(frozen=True)
class PaperRow:
    entry: str
    task: str
    o_eval: Summary
    bo_eval: Summary
    cost_per_seed_usd: float | None
    cost_total_usd: float
    cost_is_lower_bound: bool
    profile: str
    price_snapshot: str


def paper_rows(records: Sequence[Mapping[str, Any]], board: Leaderboard) -> list[PaperRow]:
    """The table's rows in the board's order: each entry's tasks, then its "(all tasks)" row."""
    by_cell: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        by_cell[(str(record.get("entry")), str(record.get("task")))].append(record)
    rows: list[PaperRow] = []
    for row in board.rows:
        mine: list[Mapping[str, Any]] = []
        for task in board.tasks:
            cell = by_cell.get((row.entry, task), [])
            mine += cell
            scored = [r for r in cell if r.get("phase") != "InfrastructureFailed"]
            results = [TrialResult.from_record(dict(r)) for r in scored]
            f_value = (board.f_by_task.get(task) or {}).get("F")
            bo = [robust_bo(r, f_value) for r in results] if f_value is not None else []
            rows.append(_row(row.entry, task, [r.o_eval for r in results], bo, cell, len(results)))
        bo_seeds = [s.bo_eval for s in row.per_seed if s.bo_eval is not None]
        rows.append(_row(row.entry, ALL_TASKS, [s.o_eval for s in row.per_seed], bo_seeds, mine, row.seeds,
                         per_seed=[s.cost_usd for s in row.per_seed]))
    return rows


def _row(entry: str, task: str, o_values: list[float], bo_values: list[float], records: Sequence[Mapping[str, Any]],
         seeds: int, per_seed: list[float] | None = None) -> PaperRow:
    results = [TrialResult.from_record(dict(r)) for r in records]
    scored = [r for r in results if r.scored]
    costs = per_seed if per_seed is not None else [r.cost_usd for r in scored]
    profiles = sorted({str(r.get("scoring_profile")) for r in records if r.get("scoring_profile")})
    snapshots = sorted({str((r.get("versions") or {}).get("price_snapshot")) for r in records
                        if (r.get("versions") or {}).get("price_snapshot")})
    return PaperRow(entry, task, Summary.of(o_values), Summary.of(bo_values),
                    statistics.fmean(costs) if costs and seeds else None, math.fsum(r.cost_usd for r in results),
                    any(not r.cost_known for r in results), ", ".join(profiles) or MISSING,
                    ", ".join(snapshots) or "none (no model called)")


CSV_COLUMNS = ["entry", "task", "n_seeds", "o_eval_mean", "o_eval_std", "o_eval_ci95_low", "o_eval_ci95_high",
               "bo_eval_mean", "bo_eval_std", "bo_eval_ci95_low", "bo_eval_ci95_high", "cost_per_seed_usd",
               "cost_total_usd", "cost_is_lower_bound", "profile", "price_snapshot"]


def to_csv(rows: Sequence[PaperRow]) -> str:
    """Plain numbers at full precision; an empty cell where there is no value."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        values: list[Any] = [r.entry, r.task, r.o_eval.n, r.o_eval.mean, r.o_eval.std, r.o_eval.low, r.o_eval.high,
                             r.bo_eval.mean, r.bo_eval.std, r.bo_eval.low, r.bo_eval.high, r.cost_per_seed_usd,
                             r.cost_total_usd, "true" if r.cost_is_lower_bound else "false", r.profile,
                             r.price_snapshot]
        writer.writerow(["" if v is None else v + 0.0 if isinstance(v, float) else readable(v) if isinstance(v, str)
                         else v for v in values])
    return buffer.getvalue()


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_text(text: str) -> str:
    """Text for a LaTeX table cell (its special characters escaped)."""
    return "".join(_LATEX.get(c, c) for c in readable(text))


def _pm(summary: Summary, sign: bool = False) -> str:
    if summary.mean is None:
        return "--"
    text = f"${fixed(summary.mean, 3, sign=sign)} \\pm {fixed(summary.std, 3)}$"
    if summary.low is None or summary.high is None:
        return text
    return f"{text} [{fixed(summary.low, 3, sign=sign)}, {fixed(summary.high, 3, sign=sign)}]"


def to_latex(rows: Sequence[PaperRow], board: Leaderboard, campaign: str) -> str:
    """A booktabs table (``\\usepackage{booktabs}``) with its caption saying what every number is."""
    lines = [r"\begin{table}[t]", r"\centering", r"\small", r"\begin{tabular}{llrllrll}", r"\toprule",
             r"Entry & Task & $n$ & O-Eval & Robust BO-Eval & Cost/seed (USD) & Profile & Prices \\", r"\midrule"]
    previous = None
    for r in rows:
        if previous is not None and r.entry != previous:
            lines.append(r"\midrule")
        previous = r.entry
        cost = "--" if r.cost_per_seed_usd is None else (
            ("$\\geq$ " if r.cost_is_lower_bound else "") + f"{r.cost_per_seed_usd:.4f}")
        task = r"\emph{all tasks}" if r.task == ALL_TASKS else latex_text(r.task)
        lines.append(f"{latex_text(r.entry)} & {task} & {r.o_eval.n} & {_pm(r.o_eval)} & {_pm(r.bo_eval, True)} & "
                     f"{cost} & {latex_text(r.profile)} & {latex_text(r.price_snapshot)} \\\\")
    total = ("$\\geq$ " if board.cost_note else "") + f"{board.total_cost_usd:.4f}"
    caption = (f"Campaign {campaign}: mean $\\pm$ sample std over $n$ scored seeds [95\\% t interval of the mean]; "
               f"{latex_text(board.f_rule)}. Total cost {total} USD; {board.cells_scored} of {board.cells_planned} "
               "planned cells scored; -- marks a value with no scored trial.")
    lines += [r"\bottomrule", r"\end{tabular}", f"\\caption{{{caption}}}",
              f"\\label{{tab:{latex_text(campaign).replace(' ', '-')}}}", r"\end{table}", ""]
    return "\n".join(lines)


def render(fmt: str, records: Sequence[Mapping[str, Any]], board: Leaderboard, campaign: str) -> str:
    """The table in ``fmt`` (one of :data:`FORMATS`)."""
    rows = paper_rows(records, board)
    return to_latex(rows, board, campaign) if fmt == "latex" else to_csv(rows)
