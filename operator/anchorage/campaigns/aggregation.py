"""From finished trials to the leaderboard (Table 7) and the per-task table — pure, shared by both drivers.

Called by the local engine at the end of a run, by ``anchorage report`` and by the operator's campaign
handler. Inputs are the trial records (``trial.json`` dicts, see :class:`TrialResult`); nothing is
read from disk here.

Decisions (also in docs/design-notes.md, "Local engine"):

* **F** (the zero point of Robust BO-Eval) for a task is the *mean raw panel score of the baseline
  entry over its scored seeds on that task*; without a baseline entry (or when all its trials on the
  task failed for infrastructure reasons) it is the F the scorer took from the task's configuration.
  Per-seed pairing would tie seed k of one entry to seed k of another for no reason.
* BO-Eval is recomputed here from (raw, O, F) with the scorer's own formula; a missing, ungradable or
  hard-gated artifact is −1 regardless of F. O-Eval does not depend on F and is taken as scored.
* Per entry and seed, O-Eval and BO-Eval are averaged over the tasks; the leaderboard shows their
  mean ± **sample** standard deviation (ddof = 1) over seeds (0 with a single seed).
* ``Art.`` is the mean over seeds of the number of tasks with a gradable artifact; cost is the mean
  over seeds of the summed trial costs. A record whose ``cost_usd`` is null (its usage could not be read,
  a model had no price, or the gateway relayed requests it could not meter) adds only its metered part
  (``usage.cost_usd``, often 0) to the sum and is counted in ``costs_unknown``, its unmetered requests in
  ``unmetered_requests``: such a row's cost is a lower bound ("≥ $X, N requests unmetered"). The board
  counts both over the whole campaign too (infrastructure failures included) and says the cost is incomplete
  in one sentence (:func:`cost_note`), shown by every view of the board and the operator's campaign status.
* ``InfrastructureFailed`` trials are never scored: they are counted apart per entry, and an entry
  with such a hole (or a seed that lacks a task) is flagged ``incomplete``; its means are over the cells
  that exist. **Ranking** (:data:`RANKING_RULE`, stated in every leaderboard): entries are ordered by a
  lower bound that counts each missing cell of an entry — (task, seed) pairs of its seeds with no scored
  trial — as O-Eval 0 and Robust BO-Eval −1, then by that bound's BO-Eval, complete entries first on a
  tie. A complete entry's bound is its mean, so failing on purpose (an unscored seed instead of a bad
  one) never lifts an entry above a complete one.
* ``verification.panel``: per entry, the scored trials the panel judged and how many of their submitted
  solutions it confirmed (``Confirmed`` column, shown only when some trial has a panel record);
  ``verification.cbu``: the mean utility over the trials that have one (``CBU`` column, likewise).
* The per-task table holds, per task and entry, the mean over seeds; when no cell is missing its
  column means equal the leaderboard means exactly (same numbers, summed in the other order).
* **Profile**: every board names the scoring profile of its records (``profile``, ``name@version``);
  records scored under different profiles are never averaged silently — the board says ``mixed: ...``.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from anchorage.scoring.profiles import get_profile
from anchorage.scoring.rewards import bo_eval
from anchorage.trials.phases import Phase

INFRA_PHASE = str(Phase.INFRASTRUCTURE_FAILED)
RANKING_RULE = ("Ranked by O-Eval, then Robust BO-Eval; an incomplete entry (unscored seeds or tasks, marked "
                "'incomplete') is ranked by a lower bound that counts each missing cell as O-Eval 0 and BO-Eval -1, "
                "so fewer scored seeds never rank it above a complete entry; complete entries first on a tie.")


@dataclass(frozen=True)
class TrialResult:
    """The part of a trial record the leaderboard needs."""

    entry: str
    task: str
    seed: int
    phase: str
    reason: str | None
    gradable: bool
    raw: float
    oracle_raw: float
    config_baseline_raw: float
    o_eval: float
    hard_gate_failed: bool
    cost_usd: float
    panel_outcome: str | None = None   # verification.panel: confirmed | refuted | abstained | undecided | missing
    cbu_utility: float | None = None   # verification.cbu: the solution's consequence-based utility
    cost_known: bool = True            # False when the record's cost_usd is null (usage not readable)
    unmetered_requests: int = 0        # requests the gateway relayed without usage (then cost_known is False)
    profile: str = "paper@1"           # the scoring profile (name@version) of the record's score

    @property
    def scored(self) -> bool:
        return self.phase != INFRA_PHASE

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> TrialResult:
        score = record.get("score") or {}
        return cls(
            entry=str(record["entry"]), task=str(record["task"]), seed=int(record["seed"]),
            phase=str(record["phase"]), reason=record.get("reason"),
            gradable=bool(score.get("gradable", False)), raw=float(score.get("raw") or 0.0),
            oracle_raw=float(score.get("oracle_raw") or 0.0),
            config_baseline_raw=float(score.get("baseline_raw") or 0.0),
            o_eval=float(score.get("o_eval") or 0.0), hard_gate_failed=bool(score.get("hard_gate_failed", False)),
            cost_usd=_known_part(record),
            panel_outcome=(record.get("panel") or {}).get("outcome"),
            cbu_utility=_number((record.get("cbu") or {}).get("utility")),
            cost_known=not ("cost_usd" in record and record["cost_usd"] is None),
            unmetered_requests=int((record.get("usage") or {}).get("unmetered_requests") or 0),
            profile=_profile_ref(record),
        )


def _profile_ref(record: dict[str, Any]) -> str:
    """``name@version`` of the profile that scored the record (records from before profiles: ``paper``)."""
    score = record.get("score") or {}
    ref = score.get("profile_ref")
    if isinstance(ref, str) and ref:
        return ref
    name = record.get("scoring_profile") or score.get("profile") or "paper"
    return get_profile(str(name)).ref


def _known_part(record: dict[str, Any]) -> float:
    """A record's cost, or for an unknown one the part the gateway metered (a lower bound; 0 when none)."""
    if record.get("cost_usd") is not None:
        return float(record["cost_usd"])
    metered = (record.get("usage") or {}).get("cost_usd")
    return float(metered) if isinstance(metered, int | float) and not isinstance(metered, bool) else 0.0


@dataclass(frozen=True)
class SeedScore:
    seed: int
    o_eval: float
    bo_eval: float
    artifacts: int
    cost_usd: float
    tasks: int


@dataclass(frozen=True)
class Row:
    """One leaderboard entry."""

    entry: str
    seeds: int
    tasks: int
    artifacts_mean: float
    o_eval_mean: float
    o_eval_std: float
    bo_eval_mean: float
    bo_eval_std: float
    cost_per_seed_usd: float
    per_seed: list[SeedScore]
    infrastructure_failed: int
    incomplete: bool
    panel_trials: int = 0      # scored trials judged by verification.panel
    panel_confirmed: int = 0   # ... whose submitted solution the panel confirmed
    cbu_mean: float | None = None   # mean consequence-based utility over the trials that have one
    costs_unknown: int = 0          # scored trials whose cost could not be read (cost_per_seed_usd: a lower bound)
    cells_scored: int = 0           # (task, seed) cells with a scored trial
    cells_expected: int = 0         # tasks × the entry's seeds
    rank_o_eval: float = 0.0        # the ranking's O-Eval: the mean, missing cells counted as 0
    rank_bo_eval: float = -1.0      # the ranking's BO-Eval: the mean, missing cells counted as −1
    unmetered_requests: int = 0     # requests of its scored trials that the gateway could not meter


@dataclass(frozen=True)
class Cell:
    o_eval: float
    bo_eval: float
    seeds: int


@dataclass(frozen=True)
class Leaderboard:
    rows: list[Row]
    tasks: list[str]
    per_task: dict[str, dict[str, Cell]]
    baseline: str | None
    f_by_task: dict[str, dict[str, Any]] = field(default_factory=dict)
    std: str = "sample standard deviation over seeds (ddof=1); 0 with one seed"
    ranking: str = RANKING_RULE
    profile: str = "paper@1"       # the scoring profile of every record on the board ("mixed: ..." otherwise)
    costs_unknown: int = 0         # trials of the whole campaign (infrastructure failures too) whose cost is unknown
    unmetered_requests: int = 0    # requests of the whole campaign the gateway relayed without usage
    cost_note: str | None = None   # :func:`cost_note`: the words every view of the board shows when cost is incomplete

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def has_panel(self) -> bool:
        """True when any trial was judged by ``verification.panel`` (the tables then show a Confirmed column)."""
        return any(row.panel_trials for row in self.rows)

    @property
    def has_cbu(self) -> bool:
        """True when any trial has a consequence-based utility (the tables then show a CBU column)."""
        return any(row.cbu_mean is not None for row in self.rows)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _std(values: list[float]) -> float:
    # Sample std over seeds; a single seed has no spread to estimate, reported as 0.
    return statistics.stdev(values) if len(values) > 1 else 0.0


def baseline_f(results: list[TrialResult], baseline: str | None) -> dict[str, dict[str, Any]]:
    """Per task: F and where it came from."""
    by_task: dict[str, list[TrialResult]] = defaultdict(list)
    for result in results:
        if result.scored:
            by_task[result.task].append(result)
    out: dict[str, dict[str, Any]] = {}
    for task, items in sorted(by_task.items()):
        base = [r.raw for r in items if r.entry == baseline]
        if base:
            source = f"campaign baseline '{baseline}' (mean raw of {len(base)} seeds)"
            out[task] = {"F": statistics.fmean(base), "source": source}
        else:
            out[task] = {"F": items[0].config_baseline_raw, "source": "task configuration (baseline_endpoint.panel_score)"}
    return out


def robust_bo(result: TrialResult, f_value: float) -> float:
    """Robust BO-Eval of one trial against F (−1 for a missing/ungradable/hard-gated artifact)."""
    if not result.gradable or result.hard_gate_failed:
        return -1.0
    value, _ = bo_eval(result.raw, result.oracle_raw, f_value)
    return value


def leaderboard(results: list[TrialResult], baseline: str | None) -> Leaderboard:
    """Table 7 and the per-task table from the finished trials."""
    f_by_task = baseline_f(results, baseline)
    tasks = sorted({r.task for r in results})
    entries = sorted({r.entry for r in results})
    bo = {id(r): robust_bo(r, f_by_task[r.task]["F"]) for r in results if r.scored}
    rows = [_row(entry, [r for r in results if r.entry == entry], bo, len(tasks)) for entry in entries]
    rows.sort(key=lambda row: (-row.rank_o_eval, -row.rank_bo_eval, row.incomplete, row.entry))
    per_task = {task: _cells(task, results, bo) for task in tasks}
    profiles = sorted({r.profile for r in results if r.scored})
    profile = profiles[0] if len(profiles) == 1 else ("mixed: " + ", ".join(profiles) if profiles else "paper@1")
    unknown = sum(1 for r in results if not r.cost_known)
    unmetered = sum(r.unmetered_requests for r in results)
    return Leaderboard(rows=rows, tasks=tasks, per_task=per_task, baseline=baseline, f_by_task=f_by_task,
                       profile=profile, costs_unknown=unknown, unmetered_requests=unmetered,
                       cost_note=cost_note(unknown, unmetered))


def cost_note(costs_unknown: int, unmetered_requests: int) -> str | None:
    """The campaign's cost is incomplete: what the board, the report and the campaign's status say (None: complete).

    One wording for both drivers; the counts cover every trial of the campaign, infrastructure failures too."""
    if not costs_unknown and not unmetered_requests:
        return None
    parts = [f"{costs_unknown} trial cost(s) unknown"] if costs_unknown else []
    if unmetered_requests:
        parts.append(f"{unmetered_requests} request(s) unmetered by the gateway")
    return f"cost incomplete: {', '.join(parts)}; the costs shown are lower bounds"


def _row(entry: str, mine: list[TrialResult], bo: dict[int, float], n_tasks: int) -> Row:
    scored = [r for r in mine if r.scored]
    seeds = sorted({r.seed for r in mine})
    per_seed: list[SeedScore] = []
    for seed in seeds:
        cells = [r for r in scored if r.seed == seed]
        if not cells:
            continue
        per_seed.append(SeedScore(
            seed=seed, o_eval=statistics.fmean(r.o_eval for r in cells),
            bo_eval=statistics.fmean(bo[id(r)] for r in cells),
            artifacts=sum(1 for r in cells if r.gradable), cost_usd=math.fsum(r.cost_usd for r in cells),
            tasks=len(cells),
        ))
    o_values, bo_values = [s.o_eval for s in per_seed], [s.bo_eval for s in per_seed]
    infra = len(mine) - len(scored)
    utilities = [r.cbu_utility for r in scored if r.cbu_utility is not None]
    expected = n_tasks * len(seeds)
    missing = expected - len({(r.task, r.seed) for r in scored})
    return Row(
        entry=entry, seeds=len(per_seed), tasks=n_tasks,
        artifacts_mean=statistics.fmean(s.artifacts for s in per_seed) if per_seed else 0.0,
        o_eval_mean=statistics.fmean(o_values) if o_values else 0.0, o_eval_std=_std(o_values),
        bo_eval_mean=statistics.fmean(bo_values) if bo_values else -1.0, bo_eval_std=_std(bo_values),
        cost_per_seed_usd=statistics.fmean(s.cost_usd for s in per_seed) if per_seed else 0.0,
        per_seed=per_seed, infrastructure_failed=infra,
        incomplete=infra > 0 or any(s.tasks < n_tasks for s in per_seed),
        panel_trials=sum(1 for r in scored if r.panel_outcome is not None),
        panel_confirmed=sum(1 for r in scored if r.panel_outcome == "confirmed"),
        cbu_mean=statistics.fmean(utilities) if utilities else None,
        costs_unknown=sum(1 for r in scored if not r.cost_known),
        unmetered_requests=sum(r.unmetered_requests for r in scored),
        cells_scored=expected - missing, cells_expected=expected,
        rank_o_eval=math.fsum(r.o_eval for r in scored) / expected if expected else 0.0,
        rank_bo_eval=(math.fsum(bo[id(r)] for r in scored) - missing) / expected if expected else -1.0,
    )


def _cells(task: str, results: list[TrialResult], bo: dict[int, float]) -> dict[str, Cell]:
    cells: dict[str, Cell] = {}
    for entry in sorted({r.entry for r in results}):
        mine = [r for r in results if r.task == task and r.entry == entry and r.scored]
        if mine:
            cells[entry] = Cell(statistics.fmean(r.o_eval for r in mine), statistics.fmean(bo[id(r)] for r in mine), len(mine))
    return cells
