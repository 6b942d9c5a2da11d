"""classify / with_score / should_retry: the one place a trial's phase is decided."""

from __future__ import annotations

import pytest

from anchorage.trials import AttemptEnd, Outcome, Phase, Reason, classify, should_retry, with_score
from score_records import gate, score_record

CASES = [
    ("clean exit", AttemptEnd(exit_code=0), Phase.SUCCEEDED, Reason.COMPLETED),
    ("non-zero exit", AttemptEnd(exit_code=3), Phase.FAILED, Reason.AGENT_ERROR),
    ("no exit status", AttemptEnd(exit_code=None), Phase.FAILED, Reason.AGENT_ERROR),
    ("timeout", AttemptEnd(timed_out=True, timeout_sec=5), Phase.FAILED, Reason.TIMEOUT),
    ("oom", AttemptEnd(exit_code=137, oom_killed=True), Phase.FAILED, Reason.OOM),
    ("oversized", AttemptEnd(exit_code=0, oversized=True, result_bytes=9, result_max_bytes=1),
     Phase.FAILED, Reason.OVERSIZED_RESULT),
    ("cli missing", AttemptEnd(agent_problem="no codex"), Phase.FAILED, Reason.AGENT_ERROR),
    ("replay", AttemptEnd(replayed="replayed x"), Phase.SUCCEEDED, Reason.COMPLETED),
    ("launcher", AttemptEnd(exit_code=0, launcher_failure="bwrap: no"), Phase.INFRASTRUCTURE_FAILED, Reason.SANDBOX_ERROR),
    ("gateway", AttemptEnd(gateway_failure="none"), Phase.INFRASTRUCTURE_FAILED, Reason.GATEWAY_ERROR),
    ("storage", AttemptEnd(exit_code=0, storage_failure="upload"), Phase.INFRASTRUCTURE_FAILED, Reason.STORAGE_ERROR),
]


@pytest.mark.parametrize(("end", "phase", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classify(end: AttemptEnd, phase: Phase, reason: Reason) -> None:
    outcome = classify(end)
    assert (outcome.phase, outcome.reason) == (phase, reason)


@pytest.mark.parametrize("code", [1, 2, 125, 126, 127, 137, 255, -9, None])
def test_the_agents_exit_code_never_makes_an_infrastructure_failure(code: int | None) -> None:
    assert classify(AttemptEnd(exit_code=code)).phase is Phase.FAILED


def test_no_artifact_after_scoring() -> None:
    ok = Outcome(Phase.SUCCEEDED, Reason.COMPLETED)
    assert with_score(ok, score_record(error="missing artifact x")).reason is Reason.NO_ARTIFACT
    assert with_score(ok, score_record(gradable=True, artifact="a.json")) == ok
    failed = Outcome(Phase.FAILED, Reason.TIMEOUT)
    assert with_score(failed, score_record()) == failed


def test_only_infrastructure_failures_are_retried_and_only_as_often_as_asked() -> None:
    infra = Outcome(Phase.INFRASTRUCTURE_FAILED, Reason.SANDBOX_ERROR)
    assert should_retry(infra, 1, 1) and not should_retry(infra, 2, 1) and not should_retry(infra, 1, 0)
    assert not should_retry(Outcome(Phase.FAILED, Reason.AGENT_ERROR), 1, 5)


def test_a_scored_trial_names_what_the_scorer_found_wrong() -> None:
    ok = Outcome(Phase.SUCCEEDED, Reason.COMPLETED)
    gates = [gate("bit", "failed"), gate("pitch", "failed", "warning"), gate("speed", "passed")]
    hard = with_score(ok, score_record(gradable=True, artifact="a.json", hard_gate_failed=True, gates=gates,
                                       penalty="hard gate failed: bit (R = 0, O-Eval 0, BO-Eval -1)", profile_ref="paper@1"))
    assert (hard.phase, hard.reason) == (Phase.SUCCEEDED, Reason.COMPLETED)   # still scored, not the phase's business
    assert hard.message == ("hard gate failed: bit (R = 0, O-Eval 0, BO-Eval -1); "
                            "1 gate(s) failed as warnings under paper@1: pitch")
    bad = with_score(ok, score_record(artifact="a.json", error="invalid JSON at line 1"))
    assert bad.message == "ungradable: invalid JSON at line 1"
    clean = with_score(ok, score_record(gradable=True, artifact="a.json", gates=gates[2:]))
    assert clean == ok and clean.message == ""
    kept = Outcome(Phase.SUCCEEDED, Reason.COMPLETED, "replayed artifact")
    assert with_score(kept, score_record(gradable=True, artifact="a.json", gates=gates)) == kept
