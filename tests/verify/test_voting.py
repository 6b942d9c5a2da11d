"""The voting state machine over every verdict sequence of the 5-verifier 4/2 and 7-verifier 5/3 presets."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence

import pytest

from anchorage.errors import InputError
from anchorage.verify.settings import TIERS, PanelSettings
from anchorage.verify.verdicts import Kind
from anchorage.verify.voting import Outcome, Policy, Tally, Thresholds, decide, to_launch

H, F, U = Kind.HOLDS, Kind.HOLE_FOUND, Kind.UNCLEAR
PRESETS = {"medium-5-4/2": Thresholds(5, 4, 2), "small-7-5/3": Thresholds(7, 5, 3)}


def counted_outcome(thresholds: Thresholds, kinds: Sequence[Kind]) -> Outcome:
    """Oracle, independent of the machine: run every verifier and count."""
    holds, holes = kinds.count(H), kinds.count(F)
    assert not (holds >= thresholds.confirm and holes >= thresholds.refute), "presets cannot reach both"
    if holds >= thresholds.confirm:
        return Outcome.CONFIRMED
    if holes >= thresholds.refute:
        return Outcome.REFUTED
    return Outcome.UNDECIDED


def simulate(thresholds: Thresholds, kinds: Sequence[Kind], *, policy: Policy = "staggered",
             max_parallel: int | None = None, rng: random.Random | None = None) -> tuple[Outcome, int]:
    """Run the machine: verifier i answers kinds[i]; in-flight verifiers finish in launch order or at random."""
    tally, inflight = Tally(), []
    while True:
        for _ in range(to_launch(thresholds, tally, policy=policy, max_parallel=max_parallel)):
            inflight.append(tally.launched)
            tally = tally.launch(1)
        outcome = decide(thresholds, tally)
        if outcome is not Outcome.PENDING:
            return outcome, tally.launched
        assert inflight, f"deadlock: pending with nothing in flight after {tally}"
        index = inflight.pop(rng.randrange(len(inflight)) if rng else 0)
        tally = tally.record(kinds[index])


@pytest.mark.parametrize("policy", ["staggered", "wave", "eager"])
@pytest.mark.parametrize("max_parallel", [None, 1, 2], ids=["unbounded", "sequential", "two"])
@pytest.mark.parametrize("name", list(PRESETS))
def test_early_exit_never_changes_the_outcome(name: str, policy: Policy, max_parallel: int | None,
                                              record_property: Callable[[str, object], None]) -> None:
    thresholds = PRESETS[name]
    sequences = list(itertools.product([H, F, U], repeat=thresholds.verifiers))
    launches = []
    for kinds in sequences:
        outcome, launched = simulate(thresholds, kinds, policy=policy, max_parallel=max_parallel)
        assert outcome == counted_outcome(thresholds, kinds), kinds
        assert launched <= thresholds.verifiers
        launches.append(launched)
    binary = [simulate(thresholds, k, policy=policy, max_parallel=max_parallel)[1]
              for k in itertools.product([H, F], repeat=thresholds.verifiers)]
    clear = [simulate(thresholds, [k] * thresholds.verifiers, policy=policy, max_parallel=max_parallel)[1]
             for k in (H, F)]
    saved = thresholds.verifiers - sum(launches) / len(launches)
    saved_binary = thresholds.verifiers - sum(binary) / len(binary)
    saved_clear = thresholds.verifiers - sum(clear) / len(clear)
    report = (f"{name} policy={policy} max_parallel={max_parallel}: {len(sequences)} sequences, "
              f"average launches saved {saved:.3f} of {thresholds.verifiers} "
              f"({saved_binary:.3f} over the {len(binary)} HOLDS/HOLE-only sequences, "
              f"{saved_clear:.1f} = {100 * saved_clear / thresholds.verifiers:.0f}% on unanimous ones)")
    record_property("average_launches_saved", round(saved, 4))
    record_property("report", report)
    print(report)
    if max_parallel == 1:   # sequential launching always saves something on average
        assert saved > 0, report


@pytest.mark.parametrize("name", list(PRESETS))
def test_outcome_is_independent_of_arrival_order(name: str) -> None:
    thresholds, rng = PRESETS[name], random.Random(7)
    for kinds in itertools.product([H, F, U], repeat=thresholds.verifiers):
        outcome, _ = simulate(thresholds, kinds, policy="eager", rng=rng)
        assert outcome == counted_outcome(thresholds, kinds), kinds


def test_default_policy_realises_the_seed_s_early_exit_saving() -> None:
    """Seed 002, step 5: "2 HOLE FOUND -> refuted, the remaining 3 calls saved; 4 HOLDS -> confirmed, the 5th
    saved" — with the default launch policy and verdicts arriving in any order (no call is in flight then)."""
    five, rng = Thresholds(5, 4, 2), random.Random(11)
    assert PanelSettings().policy == "staggered"
    assert to_launch(five, Tally()) == 2                          # at most the HOLE FOUND needed to refute
    for tail in itertools.product([H, F, U], repeat=3):
        assert simulate(five, (F, F, *tail)) == (Outcome.REFUTED, 2)
        assert simulate(five, (F, F, *tail), rng=rng) == (Outcome.REFUTED, 2)
    for last in (H, F, U):
        assert simulate(five, (H, H, H, H, last)) == (Outcome.CONFIRMED, 4)
    assert to_launch(five, Tally(holds=3, launched=3)) == 1       # "3 HOLDS + 0 HOLE: launch 1 more"
    assert to_launch(five, Tally(holds=2, holes=1, launched=3)) == 1  # one at a time once a HOLE FOUND is in
    wave = [simulate(five, (F, F, H, H, H), policy="wave")[1], simulate(five, (F, F, H, H, H), policy="eager")[1]]
    assert wave == [4, 5]                                         # the other policies had more calls out already


def test_launch_schedule_follows_the_seed() -> None:
    five = Thresholds(5, 4, 2)
    assert to_launch(five, Tally(), policy="wave") == 4           # wave: enough to confirm if all HOLD
    three_holds = Tally(holds=3, launched=3)
    assert to_launch(five, three_holds, policy="wave") == 1       # "3 HOLDS + 0 HOLE: launch 1 more"
    assert to_launch(five, Tally(holds=2, holes=1, launched=3), policy="wave") == 2  # "2 HOLDS + 1 HOLE: launch 2 more"
    assert decide(five, Tally(holes=2, launched=2)) is Outcome.REFUTED   # 2 HOLE FOUND refute, 3 calls saved
    assert decide(five, Tally(holds=4, launched=4)) is Outcome.CONFIRMED  # 4 HOLDS confirm, the 5th saved
    assert to_launch(five, Tally(holds=3, launched=4), policy="wave") == 0   # a wave is in flight: wait for it
    assert to_launch(five, Tally(holes=1, launched=4), policy="wave") == 0   # ... even after a HOLE FOUND
    assert to_launch(five, Tally(holes=1, launched=4), policy="eager") == 1   # eager tops up to the bound


def test_pigeonhole_bound_caps_eager_launching() -> None:
    five = Thresholds(5, 4, 2)
    assert to_launch(five, Tally(), policy="eager") == 5          # confirm + refute − 1 = 5: all carry information
    assert to_launch(five, Tally(holds=3, launched=3), policy="eager") == 2
    assert to_launch(five, Tally(holds=3, launched=5), policy="eager") == 0   # inflight ≥ bound: nothing more


def test_unreachable_thresholds_settle_as_undecided() -> None:
    five = Thresholds(5, 4, 2)
    tally = Tally(holds=3, unclear=2, launched=5)
    assert decide(five, tally) is Outcome.UNDECIDED
    assert decide(five, Tally(holds=1, unclear=2, launched=4)) is Outcome.PENDING   # 2 HOLE FOUND still possible


def test_tier_presets_match_the_spec() -> None:
    assert {t: (p.solvers, p.verifiers, p.confirm, p.refute) for t, p in TIERS.items()} == {
        "small": (12, 7, 5, 3), "medium": (6, 5, 4, 2), "large": (4, 5, 4, 2)}
    assert TIERS["large"].pattern_sweep and not TIERS["medium"].pattern_sweep
    custom = PanelSettings(tier="small", verifiers=9, confirm=6, refute=3)
    assert custom.thresholds() == Thresholds(9, 6, 3) and custom.solver_count == 12


def test_inconsistent_thresholds_are_rejected_with_a_hint() -> None:
    with pytest.raises(InputError, match="must not exceed verifiers") as info:
        PanelSettings(verifiers=3, confirm=4)
    assert info.value.hint
    with pytest.raises(InputError):
        Thresholds(5, 0, 2)
