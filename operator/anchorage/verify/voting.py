"""Asymmetric voting with pigeonhole early exit, as a pure state machine (seed 002, step 5; SPEC §7).

A solution is **confirmed** by ``confirm`` HOLDS votes and **refuted** by ``refute`` HOLE FOUND votes
out of at most ``verifiers`` fresh-context verifiers (UNCLEAR counts for neither). The machine only
answers two questions, given the votes so far and how many verifiers are still running:

* :func:`decide` — is the outcome settled (``CONFIRMED``, ``REFUTED``, ``UNDECIDED`` when neither
  threshold can be reached any more), or still ``PENDING``?
* :func:`to_launch` — how many more verifiers to start now.

Launch policy. Launching is capped by the *pigeonhole bound*: with ``h`` HOLDS and ``f`` HOLE FOUND
so far, at most ``(confirm − h) + (refute − f) − 1`` further decisive votes can arrive before one
threshold is reached, so verifiers in flight beyond that bound carry no information (``inflight ≥
confirm + refute − 1`` at the start) and are never launched. Within the bound three policies:

* ``"staggered"`` (default): never more verifiers in flight than the HOLE FOUND votes still needed to
  refute (``refute − f``), topped up as verdicts arrive, towards the wave's target below. So the seed's
  saving happens whatever the order of arrival: two early HOLE FOUND refute after two calls and the
  remaining three are never launched; four HOLDS confirm and the 5th is never launched; "3 HOLDS + 0 HOLE:
  launch 1 more". Once one HOLE FOUND is in, verifiers go one at a time (a second would refute, so a
  second call in flight could be wasted) — where the seed's wave launches 2 after "2 HOLDS + 1 HOLE".
* ``"wave"`` (the seed's description): when nothing is in flight, launch just enough verifiers to confirm
  if they all say HOLDS (``confirm − h``) — or, once confirmation is out of reach, to refute
  (``refute − f``) — and wait for that wave. With 5 verifiers and 4/2: a wave of 4; four HOLDS confirm
  (the 5th is saved); two HOLE FOUND refute; 3 HOLDS + 1 HOLE launch one more ("3 HOLDS + 0 HOLE:
  launch 1 more"; "2 HOLDS + 1 HOLE: launch 2 more", as the seed describes).
* ``"eager"``: keep the pigeonhole bound filled at all times (lowest latency, fewest savings).

``max_parallel`` caps the verifiers in flight (1 = strictly sequential, the cheapest).

When ``verifiers ≤ confirm + refute − 1`` (every preset) the two thresholds cannot both be reached,
so stopping early never changes the outcome compared with running every verifier — the tests check
this over every verdict sequence. With more verifiers the first threshold reached wins.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Literal

from anchorage.errors import InputError
from anchorage.verify.verdicts import Kind

Policy = Literal["staggered", "wave", "eager"]


class Outcome(StrEnum):
    PENDING = "pending"
    CONFIRMED = "confirmed"
    REFUTED = "refuted"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Thresholds:
    """Panel size and the asymmetric thresholds."""

    verifiers: int
    confirm: int
    refute: int

    def __post_init__(self) -> None:
        if self.verifiers < 1 or self.confirm < 1 or self.refute < 1:
            raise InputError(f"verifiers, confirm and refute must be ≥ 1 (got {self.verifiers}, {self.confirm}, "
                             f"{self.refute})", hint="e.g. --verifiers 5 --confirm 4 --refute 2")
        if self.confirm > self.verifiers or self.refute > self.verifiers:
            raise InputError(f"confirm={self.confirm} and refute={self.refute} must not exceed verifiers="
                             f"{self.verifiers}: the threshold could never be reached",
                             hint="raise --verifiers or lower the thresholds")

    @property
    def order_independent(self) -> bool:
        """True when both thresholds can never be reached together (the outcome ignores arrival order)."""
        return self.verifiers <= self.confirm + self.refute - 1


@dataclass(frozen=True)
class Tally:
    """Votes received so far and verifiers launched (``inflight`` = launched − answered)."""

    holds: int = 0
    holes: int = 0
    unclear: int = 0
    launched: int = 0

    @property
    def answered(self) -> int:
        return self.holds + self.holes + self.unclear

    @property
    def inflight(self) -> int:
        return self.launched - self.answered

    def launch(self, count: int) -> Tally:
        return replace(self, launched=self.launched + count)

    def record(self, kind: Kind) -> Tally:
        if self.inflight <= 0:
            raise ValueError("a verdict arrived but no verifier was in flight")
        if kind is Kind.HOLDS:
            return replace(self, holds=self.holds + 1)
        if kind is Kind.HOLE_FOUND:
            return replace(self, holes=self.holes + 1)
        return replace(self, unclear=self.unclear + 1)


def decide(thresholds: Thresholds, tally: Tally) -> Outcome:
    """The settled outcome, or PENDING while some further vote could still change it."""
    if tally.holds >= thresholds.confirm:
        return Outcome.CONFIRMED
    if tally.holes >= thresholds.refute:
        return Outcome.REFUTED
    still_possible = thresholds.verifiers - tally.answered
    if tally.holds + still_possible < thresholds.confirm and tally.holes + still_possible < thresholds.refute:
        return Outcome.UNDECIDED
    return Outcome.PENDING


def pigeonhole_bound(thresholds: Thresholds, tally: Tally) -> int:
    """The most further decisive votes that can arrive before a threshold is reached."""
    return (thresholds.confirm - tally.holds) + (thresholds.refute - tally.holes) - 1


def to_launch(thresholds: Thresholds, tally: Tally, *, policy: Policy = "staggered",
              max_parallel: int | None = None) -> int:
    """How many verifiers to start now (0 once the outcome is settled or enough are in flight)."""
    if decide(thresholds, tally) is not Outcome.PENDING or (policy == "wave" and tally.inflight > 0):
        return 0
    budget = thresholds.verifiers - tally.launched
    reachable = tally.holds + budget + tally.inflight >= thresholds.confirm
    if policy == "eager":
        wanted = pigeonhole_bound(thresholds, tally)
    else:
        wanted = thresholds.confirm - tally.holds if reachable else thresholds.refute - tally.holes
    if policy == "staggered":   # two early HOLE FOUND must find nothing else launched
        wanted = min(wanted, thresholds.refute - tally.holes)
    wanted = min(wanted, pigeonhole_bound(thresholds, tally))
    if max_parallel is not None:
        wanted = min(wanted, max_parallel)
    return max(0, min(budget, wanted - tally.inflight))


def final_outcome(thresholds: Thresholds, kinds: list[Kind]) -> Outcome:
    """The outcome of running every verifier and counting (first threshold reached, in order)."""
    tally = Tally()
    for kind in kinds:
        tally = tally.launch(1).record(kind)
        outcome = decide(thresholds, tally)
        if outcome in (Outcome.CONFIRMED, Outcome.REFUTED):
            return outcome
    return Outcome.UNDECIDED
