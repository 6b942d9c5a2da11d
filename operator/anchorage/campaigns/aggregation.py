"""From finished trials to the leaderboard (Table 7) and the per-task table — pure, shared by both drivers.

Called by the local engine at the end of a run, by ``anchorage report`` and by the operator's campaign
handler. Inputs are the trial records (``trial.json`` dicts, see :class:`TrialResult`); nothing is
read from disk here.

Decisions (also in docs/design-notes.md, "Local engine"):

* **F** (the zero point of Robust BO-Eval) has **one definition per board** (:func:`f_rule`, printed on every
  board): with a baseline entry, F for a task is the *mean raw panel score of the baseline entry over its
  scored seeds on that task* — and where the baseline has no scored seed on a task, that task's Robust
  BO-Eval is **not computed** (``—``, the F table says why), never silently taken against another F; without a
  baseline entry, F is each task's configured baseline endpoint (the F the scorer used). Per-seed pairing
  would tie seed k of one entry to seed k of another for no reason. A trial's own score record keeps the
  BO-Eval the scorer computed against the configuration's F; pages that show both label them.
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
* ``InfrastructureFailed`` and ``Cancelled`` trials (deleted before their end) are never scored: they are counted
  apart per entry (:attr:`Row.infrastructure_failed`, :attr:`Row.cancelled`). **Nothing is invented**:
  an entry or a cell without a scored trial has no score (``None``; "—" on every board) and a reason
  (:attr:`Row.no_score`, :attr:`Leaderboard.missing`: how many trials failed for the platform and why, or that
  the planned trials have not run). Cells are counted against the **plan** when the caller passes it
  (``planned``: every (entry, task, seed) of the campaign), else against the tasks × seeds the records show;
  an entry with fewer scored cells than planned is flagged ``incomplete``; its means are over the cells
  that exist. **Ranking** (:data:`RANKING_RULE`, stated in every leaderboard): entries are ordered by a
  lower bound that counts each missing cell of an entry — (task, seed) pairs of its seeds with no scored
  trial — as O-Eval 0 and Robust BO-Eval −1, then by that bound's BO-Eval, complete entries first on a
  tie. A complete entry's bound is its mean, so failing on purpose (an unscored seed instead of a bad
  one) never lifts an entry above a complete one.
* **Cost**: per entry the mean over scored seeds (``cost_per_seed_usd``) and the total of all its trials
  (``total_cost_usd``, infrastructure failures included: their tokens were spent); the campaign's total on
  every board (:attr:`Leaderboard.total_cost_usd`; a lower bound when :attr:`Leaderboard.cost_note` says so).
* ``verification.panel``: per entry, the scored trials the panel judged and how many of their submitted
  solutions it confirmed (``Confirmed`` column, shown only when some trial has a panel record);
  ``verification.cbu``: the mean utility over the trials that have one (``CBU`` column, likewise).
* The per-task table holds, per task and entry, the mean over seeds; when no cell is missing its
  column means equal the leaderboard means exactly (same numbers, summed in the other order).
* **Profile**: every board names the scoring profile of its records (``profile``, ``name@version``);
  records scored under different profiles are never averaged silently — the board says ``mixed: ...``.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from anchorage.scoring.profiles import PAPER, get_profile
from anchorage.scoring.rewards import bo_eval
from anchorage.trials.phases import UNSCORED, Phase

if TYPE_CHECKING:  # annotations only: aggregating plain records loads neither model
    from anchorage.scoring.records import ScoreRecord
    from anchorage.trials.records import TrialRecord

INFRA_PHASE = str(Phase.INFRASTRUCTURE_FAILED)
CANCELLED_PHASE = str(Phase.CANCELLED)
_UNSCORED = frozenset(str(p) for p in UNSCORED)
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
    message: str = ""                  # the record's message (an infrastructure failure's says why and the fix)

    @property
    def scored(self) -> bool:
        return self.phase not in _UNSCORED

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
            profile=_profile_ref(record), message=str(record.get("message") or ""),
        )

    @classmethod
    def of(cls, record: TrialRecord) -> TrialResult:
        """:meth:`from_record` of a record read as the model (this version's ``trial.json``): the same result."""
        score, usage = record.score, record.usage or {}
        metered = usage.get("cost_usd")
        cost = record.cost_usd if record.cost_usd is not None else _number(metered) or 0.0
        return cls(
            entry=record.entry, task=record.task, seed=record.seed, phase=record.phase.value,
            reason=None if record.reason is None else record.reason.value,
            gradable=bool(score and score.gradable), raw=float((score and score.raw) or 0.0),
            oracle_raw=float((score and score.oracle_raw) or 0.0),
            config_baseline_raw=float((score and score.baseline_raw) or 0.0),
            o_eval=float((score and score.o_eval) or 0.0), hard_gate_failed=bool(score and score.hard_gate_failed),
            cost_usd=float(cost), panel_outcome=(record.panel or {}).get("outcome"),
            cbu_utility=_number((record.cbu or {}).get("utility")), cost_known=record.cost_usd is not None,
            unmetered_requests=int(usage.get("unmetered_requests") or 0),
            profile=_ref(record.scoring_profile or PAPER.name), message=record.message or "",
        )

    @classmethod
    def unrecorded(cls, entry: str, task: str, seed: int, phase: str) -> TrialResult:
        """A planned trial without a record (none stored, or not one this version reads): ``phase``, nothing
        scored, no cost."""
        return cls(entry=entry, task=task, seed=seed, phase=phase, reason=None, gradable=False, raw=0.0,
                   oracle_raw=0.0, config_baseline_raw=0.0, o_eval=0.0, hard_gate_failed=False, cost_usd=0.0,
                   profile=_ref(PAPER.name))

    @classmethod
    def rescored(cls, entry: str, task: str, seed: int, score: ScoreRecord | None, profile: str) -> TrialResult:
        """An artifact a ScoringRun rescored (phase ``Succeeded``, no cost): the scorer's numbers from ``score``
        (None: it has no score record — ungradable, O-Eval 0); ``profile``: the run's profile name, for a record
        that does not name its own ``name@version``."""
        def number(value: float | None) -> float:
            return float(value or 0.0)
        ref = score.profile_ref if score is not None else None
        if not (isinstance(ref, str) and ref):
            ref = _ref(profile or (score.profile if score is not None else "") or PAPER.name)
        if score is None:
            return replace(cls.unrecorded(entry, task, seed, Phase.SUCCEEDED.value), profile=ref)
        return cls(entry=entry, task=task, seed=seed, phase=Phase.SUCCEEDED.value, reason=None,
                   gradable=bool(score.gradable), raw=number(score.raw), oracle_raw=number(score.oracle_raw),
                   config_baseline_raw=number(score.baseline_raw), o_eval=number(score.o_eval),
                   hard_gate_failed=bool(score.hard_gate_failed), cost_usd=0.0, profile=ref)


def _profile_ref(record: dict[str, Any]) -> str:
    """``name@version`` of the profile that scored the record (records from before profiles: ``paper``)."""
    score = record.get("score") or {}
    ref = score.get("profile_ref")
    if isinstance(ref, str) and ref:
        return ref
    name = record.get("scoring_profile") or score.get("profile") or PAPER.name
    return _ref(str(name))


@functools.lru_cache(maxsize=64)
def _ref(name: str) -> str:
    return get_profile(name).ref


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
    bo_eval: float | None     # None: no task of this seed has a defined F
    artifacts: int
    cost_usd: float
    tasks: int


@dataclass(frozen=True)
class Row:
    """One leaderboard entry; a mean is None (shown "—") when the entry has no scored trial — ``no_score`` says why."""

    entry: str
    seeds: int
    tasks: int
    artifacts_mean: float | None
    o_eval_mean: float | None
    o_eval_std: float | None
    bo_eval_mean: float | None
    bo_eval_std: float | None
    cost_per_seed_usd: float | None
    per_seed: list[SeedScore]
    infrastructure_failed: int
    incomplete: bool
    panel_trials: int = 0      # scored trials judged by verification.panel
    panel_confirmed: int = 0   # ... whose submitted solution the panel confirmed
    cbu_mean: float | None = None   # mean consequence-based utility over the trials that have one
    costs_unknown: int = 0          # scored trials whose cost could not be read (cost_per_seed_usd: a lower bound)
    cells_scored: int = 0           # (task, seed) cells with a scored trial
    cells_expected: int = 0         # the entry's planned cells (tasks × seeds)
    rank_o_eval: float = 0.0        # the ranking's O-Eval: the mean, missing cells counted as 0
    rank_bo_eval: float = -1.0      # the ranking's BO-Eval: the mean, missing cells counted as −1
    unmetered_requests: int = 0     # requests of its scored trials that the gateway could not meter
    total_cost_usd: float = 0.0     # every trial of the entry, infrastructure failures included (known parts)
    no_score: str | None = None     # why the entry has no score at all (None when it has one)
    cancelled: int = 0              # trials deleted before their end (no score; not counted in the means)

    @property
    def scored(self) -> bool:
        return self.o_eval_mean is not None


@dataclass(frozen=True)
class Cell:
    o_eval: float
    bo_eval: float | None     # None: F is undefined on this task (see the board's f_by_task)
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
    f_rule: str = ""               # :func:`f_rule`: the board's one definition of F, printed on it
    missing: dict[str, dict[str, str]] = field(default_factory=dict)   # task -> entry -> why no scored trial
    total_cost_usd: float = 0.0    # every trial of the campaign (known parts; a lower bound when cost_note says so)
    cells_planned: int = 0         # (entry, task, seed) cells of the plan (or of the records when no plan is known)
    cells_scored: int = 0          # ... with a scored trial

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

    def cell_reason(self, task: str, entry: str, metric: str = "o_eval") -> str | None:
        """Why a per-task cell shows "—" (None when it has a value)."""
        cell = self.per_task.get(task, {}).get(entry)
        if cell is None:
            return self.missing.get(task, {}).get(entry) or "no scored trial"
        if metric == "bo_eval" and cell.bo_eval is None:
            return str(self.f_by_task.get(task, {}).get("source") or "F is undefined on this task")
        return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _std(values: list[float]) -> float | None:
    # Sample std over seeds; a single seed has no spread to estimate, reported as 0; no seed: no value.
    if not values:
        return None
    return statistics.stdev(values) if len(values) > 1 else 0.0


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def f_rule(baseline: str | None) -> str:
    """The board's one definition of F, in the words every board prints."""
    if baseline:
        return (f"F (the zero point of Robust BO-Eval) for each task = the mean raw panel score of the baseline entry "
                f"'{baseline}' over its scored seeds on that task; where '{baseline}' has no scored seed, that task's "
                "Robust BO-Eval is not computed (—)")
    return ("F (the zero point of Robust BO-Eval) for each task = the task configuration's baseline endpoint "
            "(baseline_endpoint.panel_score); the campaign names no baseline entry")


def board_f(results: list[TrialResult], baseline: str | None) -> dict[str, dict[str, Any]]:
    """Per task: F (None when undefined under :func:`f_rule`) and where it came from."""
    by_task: dict[str, list[TrialResult]] = defaultdict(list)
    for result in results:
        if result.scored:
            by_task[result.task].append(result)
    out: dict[str, dict[str, Any]] = {}
    for task, items in sorted(by_task.items()):
        if not baseline:
            out[task] = {"F": items[0].config_baseline_raw,
                         "source": "task configuration (baseline_endpoint.panel_score)"}
            continue
        base = [r.raw for r in items if r.entry == baseline]
        if base:
            out[task] = {"F": statistics.fmean(base),
                         "source": f"campaign baseline '{baseline}' (mean raw of {len(base)} seeds)"}
        else:
            out[task] = {"F": None, "source": f"undefined: the baseline entry '{baseline}' has no scored trial on "
                                              "this task, so its Robust BO-Eval is not computed"}
    return out


def robust_bo(result: TrialResult, f_value: float) -> float:
    """Robust BO-Eval of one trial against F (−1 for a missing/ungradable/hard-gated artifact)."""
    if not result.gradable or result.hard_gate_failed:
        return -1.0
    value, _ = bo_eval(result.raw, result.oracle_raw, f_value)
    return value


REASON_LIMIT = 600
"""Characters of an infrastructure failure's message a board quotes as the reason (it ends with the fix)."""

Planned = tuple[str, str, int]
"""A planned cell: (entry, task, seed)."""


def leaderboard(results: list[TrialResult], baseline: str | None,
                planned: Iterable[Planned] | None = None) -> Leaderboard:
    """Table 7 and the per-task table from the finished trials (``planned``: the campaign's cells, when known)."""
    plan = sorted(set(planned)) if planned is not None else None
    f_by_task = board_f(results, baseline)
    tasks = sorted({r.task for r in results} | {t for _, t, _ in plan or []})
    entries = sorted({r.entry for r in results} | {e for e, _, _ in plan or []})
    bo: dict[int, float | None] = {}
    for r in results:
        if r.scored:
            f_value = f_by_task[r.task]["F"]
            bo[id(r)] = None if f_value is None else robust_bo(r, f_value)
    by_entry: dict[str, list[TrialResult]] = defaultdict(list)
    by_cell: dict[tuple[str, str], list[TrialResult]] = defaultdict(list)
    for r in results:
        by_entry[r.entry].append(r)
        by_cell[(r.task, r.entry)].append(r)
    planned_cells: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for e, t, s in plan or []:
        planned_cells[e].add((t, s))
    rows = []
    for entry in entries:
        mine = by_entry[entry]
        cells = (planned_cells[entry] if plan is not None
                 else {(t, s) for t in tasks for s in {r.seed for r in mine}})
        rows.append(_row(entry, mine, bo, len(tasks), cells, f_by_task))
    rows.sort(key=lambda row: (-row.rank_o_eval, -row.rank_bo_eval, row.incomplete, row.entry))
    per_task = {task: _cells([by_cell[(task, e)] for e in entries], bo) for task in tasks}
    planned_tasks = {(e, t) for e, t, _ in plan or []}
    missing = {task: {entry: _why_missing(by_cell[(task, entry)], (entry, task) in planned_tasks)
                      for entry in entries if entry not in per_task[task]} for task in tasks}
    profiles = sorted({r.profile for r in results if r.scored})
    profile = profiles[0] if len(profiles) == 1 else ("mixed: " + ", ".join(profiles) if profiles else "paper@1")
    unknown = sum(1 for r in results if not r.cost_known)
    unmetered = sum(r.unmetered_requests for r in results)
    return Leaderboard(rows=rows, tasks=tasks, per_task=per_task, baseline=baseline, f_by_task=f_by_task,
                       profile=profile, costs_unknown=unknown, unmetered_requests=unmetered,
                       cost_note=cost_note(unknown, unmetered), f_rule=f_rule(baseline),
                       missing={t: m for t, m in missing.items() if m},
                       total_cost_usd=math.fsum(r.cost_usd for r in results),
                       cells_planned=sum(row.cells_expected for row in rows),
                       cells_scored=sum(row.cells_scored for row in rows))


def cost_note(costs_unknown: int, unmetered_requests: int) -> str | None:
    """The campaign's cost is incomplete: what the board, the report and the campaign's status say (None: complete).

    One wording for both drivers; the counts cover every trial of the campaign, infrastructure failures too."""
    if not costs_unknown and not unmetered_requests:
        return None
    parts = [f"{costs_unknown} trial cost(s) unknown"] if costs_unknown else []
    if unmetered_requests:
        parts.append(f"{unmetered_requests} request(s) unmetered by the gateway")
    return f"cost incomplete: {', '.join(parts)}; the costs shown are lower bounds"


def _why_missing(mine: list[TrialResult], planned: bool) -> str:
    """Why an entry (or one of its cells) has no scored trial: its infrastructure failures, or not run yet."""
    unscored = [r for r in mine if not r.scored]
    infra = [r for r in unscored if r.phase == INFRA_PHASE]
    cancelled = len(unscored) - len(infra)
    if not infra:
        if cancelled:
            return f"no scored trial: {cancelled} Cancelled (deleted before their end)"
        if mine:
            return "no scored trial"
        return "not run yet (planned, no finished trial)" if planned else "no trial of this entry here"
    reasons: dict[str, int] = defaultdict(int)
    for r in infra:
        reasons[str(r.reason or "unknown")] += 1
    counts = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
    message = next((r.message for r in infra if r.message), "")
    first = message.strip().splitlines()[0] if message.strip() else ""
    if len(first) > REASON_LIMIT:
        first = first[:REASON_LIMIT - 3] + "..."
    also = f", {cancelled} Cancelled" if cancelled else ""
    return f"no scored trial: {len(infra)} InfrastructureFailed ({counts}){also}" + (f" — {first}" if first else "")


def _row(entry: str, mine: list[TrialResult], bo: dict[int, float | None], n_tasks: int,
         cells: set[tuple[str, int]], f_by_task: dict[str, dict[str, Any]]) -> Row:
    scored = [r for r in mine if r.scored]
    seeds = sorted({r.seed for r in mine} | {s for _, s in cells})
    per_seed: list[SeedScore] = []
    by_seed: dict[int, list[TrialResult]] = defaultdict(list)
    for r in scored:
        by_seed[r.seed].append(r)
    for seed in seeds:
        here = by_seed.get(seed)
        if not here:
            continue
        bos = [v for v in (bo[id(r)] for r in here) if v is not None]
        per_seed.append(SeedScore(
            seed=seed, o_eval=statistics.fmean(r.o_eval for r in here), bo_eval=_mean(bos),
            artifacts=sum(1 for r in here if r.gradable), cost_usd=math.fsum(r.cost_usd for r in here),
            tasks=len(here),
        ))
    o_values = [s.o_eval for s in per_seed]
    bo_values = [s.bo_eval for s in per_seed if s.bo_eval is not None]
    cancelled = sum(1 for r in mine if r.phase == CANCELLED_PHASE)
    infra = len(mine) - len(scored) - cancelled
    utilities = [r.cbu_utility for r in scored if r.cbu_utility is not None]
    done = {(r.task, r.seed) for r in scored}
    expected = len(cells | done)
    missing = expected - len(done)
    f_cells = {(t, s) for t, s in cells | done if f_by_task.get(t, {}).get("F") is not None}
    f_missing = len(f_cells - done)
    f_sum = math.fsum(v for v in (bo[id(r)] for r in scored) if v is not None)
    return Row(
        entry=entry, seeds=len(per_seed), tasks=n_tasks,
        artifacts_mean=_mean([float(s.artifacts) for s in per_seed]),
        o_eval_mean=_mean(o_values), o_eval_std=_std(o_values),
        bo_eval_mean=_mean(bo_values), bo_eval_std=_std(bo_values),
        cost_per_seed_usd=_mean([s.cost_usd for s in per_seed]),
        per_seed=per_seed, infrastructure_failed=infra,
        incomplete=missing > 0 or infra > 0 or cancelled > 0, cancelled=cancelled,
        panel_trials=sum(1 for r in scored if r.panel_outcome is not None),
        panel_confirmed=sum(1 for r in scored if r.panel_outcome == "confirmed"),
        cbu_mean=statistics.fmean(utilities) if utilities else None,
        costs_unknown=sum(1 for r in scored if not r.cost_known),
        unmetered_requests=sum(r.unmetered_requests for r in scored),
        cells_scored=expected - missing, cells_expected=expected,
        rank_o_eval=math.fsum(r.o_eval for r in scored) / expected if expected else 0.0,
        rank_bo_eval=(f_sum - f_missing) / len(f_cells) if f_cells else -1.0,
        total_cost_usd=math.fsum(r.cost_usd for r in mine),
        no_score=None if scored else _why_missing(mine, bool(cells)),
    )


def _cells(groups: list[list[TrialResult]], bo: dict[int, float | None]) -> dict[str, Cell]:
    """A task's cells: per entry (each group is one entry's trials on the task), its scored trials' means."""
    cells: dict[str, Cell] = {}
    for group in groups:
        mine = [r for r in group if r.scored]
        if mine:
            bos = [v for v in (bo[id(r)] for r in mine) if v is not None]
            cells[mine[0].entry] = Cell(statistics.fmean(r.o_eval for r in mine),
                                        _mean(bos) if len(bos) == len(mine) else None, len(mine))
    return dict(sorted(cells.items()))
