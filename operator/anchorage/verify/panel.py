"""The adversarial verification panel (seed 002, steps 2–7; SPEC §7): solve, clean, vote, revise, abstain.

Called by ``anchorage verify panel`` (on files) and meant for a campaign's ``verification.panel``.
:func:`run_panel` takes one solution through:

1. **clean** it (:func:`anchorage.verify.cleaning.clean_solution`);
2. **vote**: fresh-context verifiers, launched as :mod:`anchorage.verify.voting` says (asymmetric
   thresholds, pigeonhole early exit; verdicts counted in arrival order; verifiers not yet started when the
   outcome settles are never started). In the large tier a confirmation is followed by the pattern sweep:
   one specialised verifier per pattern, each HOLE FOUND counting towards the refutation threshold;
3. on a refutation, **revise** from the hole reports (the reviser sees problem + cleaned solution + hole
   reports only) and vote again on the cleaned revision — up to ``max_revisions`` rounds. A revision that
   still carries inline ``[GAP: …]`` markers is not put to the vote (the verifiers would only re-find the
   declared gap): the next reviser gets the gaps as hole reports;
4. **calibrated abstention** when the reviser declares the hole fundamental (``no confident solution``)
   or the rounds run out: the record keeps what was tried, what WAS proven and where it breaks.

With ``max_revisions = 0`` the panel only judges ("is this proof correct?"): the status is the vote's
outcome. :func:`solve_and_verify` adds the solver stage: N parallel solvers (one starting angle each),
each cleaned output screened by one fresh verifier, the best (HOLDS before UNCLEAR before HOLE FOUND,
then solver order) goes to the panel.

Every model call is an isolated run through a :class:`~anchorage.verify.models.ModelClient`; an
infrastructure failure of a verifier call is recorded and counts as UNCLEAR (never as a vote).
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from anchorage.errors import InfrastructureError
from anchorage.verify.cleaning import CleanedSolution, clean_solution
from anchorage.verify.models import Completion, Message, ModelClient
from anchorage.verify.prompts import Pattern, Problem, PromptSet, RevisionInput, VerifierInput, load_prompts
from anchorage.verify.settings import PanelSettings
from anchorage.verify.verdicts import Kind, Verdict, parse_verdict
from anchorage.verify.voting import Outcome, Tally, Thresholds, decide, to_launch

_NO_CONFIDENT = re.compile(r"verdict\W*\s*no confident solution", re.IGNORECASE)
_ABSTAIN_SECTION = re.compile(
    r"^[ \t#>*_-]*(?P<name>what was tried|what was proven|where it breaks)[ \t*_]*[:：]?[ \t*_]*(?P<body>.*?)"
    r"(?=^[ \t#>*_-]*(?:what was tried|what was proven|where it breaks)[ \t*_]*[:：]?|\Z)",
    re.IGNORECASE | re.MULTILINE | re.DOTALL,
)


@dataclass
class Ballot:
    """One verifier call and its parsed verdict."""

    index: int
    role: str
    verdict: Verdict
    model: str = ""
    mock: bool = False
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "role": self.role, "verdict": self.verdict.to_dict(), "model": self.model,
                "mock": self.mock, "error": self.error}


@dataclass
class VoteRecord:
    """One vote on one cleaned solution."""

    solution: CleanedSolution
    thresholds: Thresholds
    outcome: Outcome = Outcome.PENDING
    ballots: list[Ballot] = field(default_factory=list)
    launched: int = 0
    sweep: list[Ballot] = field(default_factory=list)

    @property
    def holes(self) -> list[Verdict]:
        return [b.verdict for b in [*self.ballots, *self.sweep] if b.verdict.kind is Kind.HOLE_FOUND]

    def to_dict(self) -> dict[str, Any]:
        counts = {str(k): sum(b.verdict.kind is k for b in self.ballots) for k in Kind}
        return {"solution": self.solution.summary(), "outcome": str(self.outcome),
                "thresholds": {"verifiers": self.thresholds.verifiers, "confirm": self.thresholds.confirm,
                               "refute": self.thresholds.refute},
                "launched": self.launched, "saved": self.thresholds.verifiers - self.launched, "counts": counts,
                "ballots": [b.to_dict() for b in self.ballots], "pattern_sweep": [b.to_dict() for b in self.sweep]}


@dataclass
class Round:
    """A vote, or a revision that was not voted on (it left GAP markers), and what the reviser did."""

    number: int
    vote: VoteRecord | None
    revision: str = ""   # "revised" | "abstained" | "gaps left" | ""
    solution: CleanedSolution | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.number, "vote": self.vote.to_dict() if self.vote else None,
                "revision": self.revision, "solution": self.solution.summary() if self.solution else None}


@dataclass
class PanelRecord:
    """The panel's record for one problem: status, every round, the final text or the abstention."""

    problem: Problem
    settings: PanelSettings
    status: str = "pending"    # confirmed | abstained | refuted | undecided
    rounds: list[Round] = field(default_factory=list)
    final: CleanedSolution | None = None
    abstention: dict[str, Any] = field(default_factory=dict)
    calls: int = 0
    mock: bool = False
    screening: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"problem": self.problem.id, "status": self.status,
                "settings": self.settings.model_dump(mode="json", by_alias=True),
                "thresholds": self.settings.thresholds().__dict__, "calls": self.calls,
                "mock_model": self.mock, "screening": self.screening,
                "rounds": [r.to_dict() for r in self.rounds],
                "final_solution": self.final.text if self.final else None, "abstention": self.abstention or None}


class Panel:
    """Runs votes and revisions for one problem with one client and one settings object."""

    def __init__(self, problem: Problem, client: ModelClient, settings: PanelSettings | None = None,
                 prompts: PromptSet | None = None) -> None:
        self.problem = problem
        self.client = client
        self.settings = settings or PanelSettings()
        self.prompts = prompts or load_prompts(self.settings.prompts)
        self.record = PanelRecord(problem, self.settings)
        self._lock = threading.Lock()

    # model calls

    def _call(self, messages: list[Message], seed: int, run_id: str) -> Completion:
        with self._lock:
            self.record.calls += 1
        completion = self.client.complete(messages, model=self.settings.model, seed=seed,
                                          temperature=self.settings.temperature, run_id=run_id)
        with self._lock:
            self.record.mock = self.record.mock or completion.mock
        return completion

    def _ballot(self, messages: list[Message], index: int, role: str, digest: str) -> Ballot:
        try:
            completion = self._call(messages, index, f"{self.problem.id}/{digest}/{role}{index}")
        except InfrastructureError as exc:
            verdict = Verdict(Kind.UNCLEAR, reason=f"verifier call failed: {exc.message}")
            return Ballot(index, role, verdict, error=exc.message)
        return Ballot(index, role, parse_verdict(completion.text), completion.model, completion.mock)

    # voting

    def vote(self, solution: CleanedSolution) -> VoteRecord:
        thresholds = self.settings.thresholds()
        record = VoteRecord(solution, thresholds)
        given = VerifierInput(self.problem, solution)
        tally = Tally()
        pool = ThreadPoolExecutor(max_workers=thresholds.verifiers, thread_name_prefix="verifier")
        running: set[Future[Ballot]] = set()
        try:
            while True:
                for _ in range(to_launch(thresholds, tally, policy=self.settings.policy,
                                         max_parallel=self.settings.max_parallel)):
                    running.add(pool.submit(self._ballot, self.prompts.verifier(given), tally.launched, "verifier",
                                            solution.digest))
                    tally = tally.launch(1)
                if decide(thresholds, tally) is not Outcome.PENDING:
                    break
                done, running = wait(running, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: f.result().index):
                    if decide(thresholds, tally) is Outcome.PENDING:
                        record.ballots.append(future.result())
                        tally = tally.record(future.result().verdict.kind)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        record.outcome, record.launched = decide(thresholds, tally), tally.launched
        if record.outcome is Outcome.CONFIRMED and self.settings.sweep:
            self._pattern_sweep(record, given)
        return record

    def _pattern_sweep(self, record: VoteRecord, given: VerifierInput) -> None:
        """Large tier: one specialised verifier per pattern; their HOLE FOUNDs count towards refuting."""
        patterns: list[Pattern] = self.prompts.patterns()
        step = self.settings.max_parallel or len(patterns)
        with ThreadPoolExecutor(max_workers=step, thread_name_prefix="pattern") as pool:
            for start in range(0, len(patterns), step):
                batch = patterns[start:start + step]
                record.sweep += list(pool.map(
                    lambda ip: self._ballot(self.prompts.pattern_verifier(given, ip[1]), ip[0], f"pattern{ip[1].id}",
                                            given.solution.digest), enumerate(batch, start)))
                if len(record.holes) >= record.thresholds.refute:
                    record.outcome = Outcome.REFUTED
                    return

    # revision and abstention

    def revise(self, solution: CleanedSolution, holes: list[Verdict], number: int) -> tuple[str, CleanedSolution]:
        messages = self.prompts.reviser(RevisionInput(self.problem, solution, tuple(holes)))
        reply = self._call(messages, number, f"{self.problem.id}/{solution.digest}/reviser{number}").text
        if _NO_CONFIDENT.search(reply):
            self.record.abstention = {**abstention_sections(reply), "declared_by": "reviser",
                                      "unresolved_holes": [h.hole_report() for h in holes]}
            return "abstained", solution
        revised = clean_solution(reply)
        return ("gaps left" if revised.gaps else "revised"), revised


def gap_holes(solution: CleanedSolution) -> list[Verdict]:
    """A revision's ``[GAP: …]`` markers as hole reports for the next reviser."""
    return [Verdict(Kind.HOLE_FOUND, location=f"[GAP: {gap}]", pattern="declared gap",
                    why="the reviser marked this step as still open", fixable=None) for gap in solution.gaps]


def abstention_sections(reply: str) -> dict[str, str]:
    """``What was tried`` / ``What WAS proven`` / ``Where it breaks`` of a ``no confident solution`` reply."""
    sections = {"what_was_tried": "", "what_was_proven": "", "where_it_breaks": ""}
    for match in _ABSTAIN_SECTION.finditer(reply):
        key = match.group("name").lower().replace(" ", "_")
        sections[key] = re.sub(r"\s+", " ", match.group("body")).strip(" *_")
    return sections


def run_panel(problem: Problem, solution: str | CleanedSolution, client: ModelClient,
              settings: PanelSettings | None = None, prompts: PromptSet | None = None) -> PanelRecord:
    """Vote on a solution, revise on refutation, abstain when it cannot be made to hold."""
    panel = Panel(problem, client, settings, prompts)
    current = solution if isinstance(solution, CleanedSolution) else clean_solution(solution)
    record = panel.record
    holes: list[Verdict] = []
    for number in range(panel.settings.revisions + 1):
        if number > 0:
            outcome, current = panel.revise(current, holes, number)
            if outcome != "revised":
                record.rounds.append(Round(number, None, outcome, current))
                if outcome == "abstained":
                    break
                holes = gap_holes(current)
                continue
        vote = panel.vote(current)
        record.rounds.append(Round(number, vote, "revised" if number else "", current))
        holes = vote.holes
        if vote.outcome is Outcome.CONFIRMED:
            record.status, record.final = "confirmed", current
            return record
        if not holes:
            break   # undecided without any hole report: nothing for a reviser to work from
    return _conclude(record, panel.settings.revisions, current, holes)


def _conclude(record: PanelRecord, revisions: int, current: CleanedSolution, holes: list[Verdict]) -> PanelRecord:
    last_vote = next((r.vote for r in reversed(record.rounds) if r.vote is not None), None)
    if revisions == 0 and last_vote is not None:
        record.status = str(last_vote.outcome)
        return record
    record.status = "abstained"
    if not record.abstention:
        record.abstention = {
            "verdict": "no confident solution", "declared_by": "panel",
            "what_was_tried": [r.solution.summary()["digest"] for r in record.rounds if r.solution],
            "what_was_proven": current.proof if current.gaps else "",
            "where_it_breaks": "; ".join(h.hole_report().replace("\n", " ") for h in holes) or
            "the panel could not decide (no hole report, no confirmation)",
            "open_gaps": current.gaps,
        }
    record.abstention.setdefault("verdict", "no confident solution")
    return record


# ----- solver stage ---------------------------------------------------------------------------------------

_RANK = {Kind.HOLDS: 0, Kind.UNCLEAR: 1, Kind.HOLE_FOUND: 2}


def solve_and_verify(problem: Problem, client: ModelClient, settings: PanelSettings | None = None,
                     prompts: PromptSet | None = None) -> PanelRecord:
    """N parallel solvers → clean → one screening verifier each → the best candidate goes to the panel."""
    settings = settings or PanelSettings()
    prompts = prompts or load_prompts(settings.prompts)
    screen = Panel(problem, client, settings, prompts)
    angles = prompts.angles()
    jobs = [(i, prompts.solver(problem, angles[i % len(angles)])) for i in range(settings.solver_count)]
    with ThreadPoolExecutor(max_workers=min(8, len(jobs)), thread_name_prefix="solver") as pool:
        outputs = list(pool.map(lambda job: _solve_one(screen, *job), jobs))
    candidates = [(i, c) for i, c in outputs if c is not None and not c.empty]
    screened = [(screen._ballot(prompts.verifier(VerifierInput(problem, c)), i, "screen", c.digest), i, c)
                for i, c in candidates]
    screened.sort(key=lambda item: (_RANK[item[0].verdict.kind], item[1]))
    if not screened:
        record = PanelRecord(problem, settings, status="abstained", calls=screen.record.calls)
        record.abstention = {"verdict": "no confident solution", "declared_by": "solvers",
                             "where_it_breaks": "no solver returned a usable solution"}
        return record
    record = run_panel(problem, screened[0][2], client, settings, prompts)
    record.calls += screen.record.calls
    record.screening = [{"solver": i, "digest": c.digest, "verdict": str(b.verdict.kind)} for b, i, c in screened]
    return record


def _solve_one(panel: Panel, index: int, messages: list[Message]) -> tuple[int, CleanedSolution | None]:
    try:
        return index, clean_solution(panel._call(messages, index, f"{panel.problem.id}/solver{index}").text)
    except InfrastructureError:
        return index, None
