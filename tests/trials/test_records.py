"""TrialRecord: one shape (every key, nulls included), scores applied the same way by both drivers, unknown cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from anchorage.costs import Usage
from anchorage.trials import Phase, Reason, TrialRecord
from anchorage.trials.costing import NO_MODEL_SOURCE, protocol_cost, total_usage, trial_cost
from anchorage.trials.records import TIMING_FIELDS, UnreadableRecord, parse_record
from score_records import score_record


def _record() -> TrialRecord:
    record = TrialRecord(name="t", entry="e", task="smoke-inventory", seed=0, driver="local")
    record.end(Phase.SUCCEEDED, Reason.COMPLETED)
    return record


def test_every_field_is_written_even_when_unknown() -> None:
    data = _record().to_json()
    assert set(data) == {f.alias or name for name, f in TrialRecord.model_fields.items()}
    assert data["cost_usd"] is None and data["score"] is None and data["kind"] == "TrialRecord"
    assert set(_record().comparable()) == set(data) - set(TIMING_FIELDS)


def test_records_refuse_hand_made_keys() -> None:
    with pytest.raises(ValidationError):
        TrialRecord.model_validate({**_record().to_json(), "cost_unknown": "typo of cost_unknown_reason"})


def test_a_score_names_its_profile_and_a_missing_artifact_is_the_models_failure() -> None:
    record = _record()
    record.apply_score(score_record(raw=0.9, o_eval=0.9, bo_eval=0.5, gradable=True, artifact="/x/a.json",
                                    profile="paper", profile_ref="paper@1", scorer_version="s1"), "artifacts/a.json")
    assert (record.phase, record.scoring_profile, record.versions.scorer) == (Phase.SUCCEEDED, "paper@1", "s1")
    assert record.score is not None and record.score.o_eval == 0.9 and record.artifact is not None
    empty = _record()
    empty.apply_score(score_record(error="missing artifact x"), None)
    assert (empty.phase, empty.reason) == (Phase.FAILED, Reason.NO_ARTIFACT)


@pytest.mark.parametrize(("usage", "reason"), [
    (None, "could not be read"),
    ({"cost_usd": 0.2, "unpriced_models": ["m"]}, "no price"),
    ({"cost_usd": 0.2, "unmetered_requests": 2}, "could not be metered"),
])
def test_unknown_cost_is_none_with_a_reason_never_zero(usage: dict[str, object] | None, reason: str) -> None:
    cost = trial_cost(usage, calls_models=True)
    assert cost.usd is None and cost.unknown_reason is not None and reason in cost.unknown_reason


def test_known_costs() -> None:
    assert trial_cost(None, calls_models=False).usd == 0.0
    assert trial_cost({"cost_usd": 0.25}, calls_models=True).usd == 0.25
    assert trial_cost(None, calls_models=True, cost_per_run_usd=1.5).usd == 1.5


def _call(requests: int, cost: float, **extra: object) -> dict[str, object]:
    return {"requests": requests, "input_tokens": 10 * requests, "output_tokens": 3 * requests, "cost_usd": cost,
            "by_model": {"m": {"requests": requests, "cost_usd": cost}}, "call": "001-x", **extra}


def test_a_protocol_steps_usage_is_the_sum_of_its_accounts() -> None:
    total = total_usage([_call(1, 0.1), _call(2, 0.2, unpriced_models=["x"]), _call(1, 0.3, unpriced_models=["x", "y"])])
    assert (total["requests"], total["input_tokens"], total["output_tokens"]) == (4, 40, 12)
    assert total["cost_usd"] == pytest.approx(0.6) and total["unpriced_models"] == ["x", "y"]
    assert total["by_model"]["m"]["requests"] == 4 and total["cost_known"] is False
    one = Usage(requests=2, input_tokens=20, output_tokens=6, cost_usd=0.2, unpriced_models=["x"],
                by_model={"m": Usage(requests=2, cost_usd=0.2)})
    assert total_usage([one.to_dict()]) == one.to_dict(), "the sum of one account is that account"

def test_a_protocol_steps_cost_follows_the_trials_rule() -> None:
    known = protocol_cost([_call(1, 0.1), _call(1, 0.2)])
    assert known["cost_usd"] == pytest.approx(0.3) and known["cost_unknown_reason"] is None
    assert known["usage"]["requests"] == 2
    unpriced = protocol_cost([_call(1, 0.1, unpriced_models=["mock-verifier"])])
    assert unpriced["cost_usd"] is None and "mock-verifier" in unpriced["cost_unknown_reason"]
    unmetered = protocol_cost([_call(1, 0.1, unmetered_requests=1)])
    assert unmetered["cost_usd"] is None and "could not be metered" in unmetered["cost_unknown_reason"]
    unread = protocol_cost(None, unreadable="the gateway was gone")
    assert (unread["cost_usd"], unread["usage"], unread["cost_unknown_reason"]) == (None, None, "the gateway was gone")
    nothing = protocol_cost([])
    assert (nothing["cost_usd"], nothing["cost_source"]) == (0.0, NO_MODEL_SOURCE)


def test_a_finished_record_this_version_cannot_read_is_refused_never_rerun_over() -> None:
    finished = _record().to_json()
    assert parse_record(json.dumps(finished).encode(), "x/trial.json") == _record()
    later = {**finished, "a_later_field": 1, "versions": {**finished["versions"], "anchorage": "99.0"}}
    with pytest.raises(UnreadableRecord) as refused:
        parse_record(json.dumps(later).encode(), "runs/c/t/trial.json")
    message = str(refused.value)
    assert "runs/c/t/trial.json" in message and "a_later_field" in message and "99.0" in message
    assert "--runs-dir" in message
    unfinished = {**later, "phase": Phase.RUNNING.value}
    assert parse_record(json.dumps(unfinished).encode(), "x") is None  # runs again, as an unfinished trial does
    assert parse_record(b"{not json", "x") is None


def test_the_local_engine_refuses_a_finished_record_of_another_version_as_an_input_error(tmp_path: Path) -> None:
    from anchorage.errors import InputError
    from anchorage.runtime.local.trials import read_record

    assert read_record(tmp_path) is None  # no record: the trial runs
    (tmp_path / "trial.json").write_text(json.dumps({**_record().to_json(), "a_later_field": 1}))
    with pytest.raises(InputError, match=r"trial\.json"):
        read_record(tmp_path)
