"""TrialRecord: one shape (every key, nulls included), scores applied the same way by both drivers, unknown cost."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from anchorage.trials import Phase, Reason, TrialRecord
from anchorage.trials.costing import trial_cost
from anchorage.trials.records import TIMING_FIELDS


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
    record.apply_score({"raw": 0.9, "o_eval": 0.9, "bo_eval": 0.5, "gradable": True, "artifact": "/x/a.json",
                        "profile": "paper", "profile_ref": "paper@1", "scorer_version": "s1"}, "artifacts/a.json")
    assert (record.phase, record.scoring_profile, record.versions.scorer) == (Phase.SUCCEEDED, "paper@1", "s1")
    assert record.score is not None and record.score.o_eval == 0.9 and record.artifact is not None
    empty = _record()
    empty.apply_score({"gradable": False, "artifact": None, "error": "missing artifact x"}, None)
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
