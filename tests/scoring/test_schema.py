"""The checked-in JSON Schema of score_config.json accepts every reference and repo configuration and
catches the mistakes the scorer's model would let through silently (typos in extension names)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from anchorage.scoring import parse_score_config
from anchorage.scoring.modes import MODES
from anchorage.scoring.schema import SCHEMA_PATH, generate, render
from anchorage.scoring.schema import problems as schema_problems
from anchorage.scoring.schema import schema as score_config_schema
from anchorage.tasks.loading import REPO_TASKS

REPO_CONFIGS = sorted(REPO_TASKS.glob("*/tests/score_config.json")) if REPO_TASKS.is_dir() else []


def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(score_config_schema())


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA_PATH.read_text()))


def test_reference_configs_match_schema_and_model(reference_dir: Path) -> None:
    paths = sorted((reference_dir / "tasks").glob("*/tests/score_config.json"))
    assert len(paths) == 18
    for path in paths:
        raw = json.loads(path.read_text())
        assert list(validator().iter_errors(raw)) == [], path
        parse_score_config(raw, str(path))


@pytest.mark.parametrize("path", REPO_CONFIGS or [None], ids=lambda p: p.parent.parent.name if p else "none")
def test_repo_configs_match_schema(path: Path | None) -> None:
    if path is None:
        pytest.skip(f"no tasks/*/tests/score_config.json under {REPO_TASKS} yet")
    errors = [e.message for e in validator().iter_errors(json.loads(path.read_text()))]
    assert errors == []


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [({"exclude-reason": "x"}, "exclude-reason"), ({"domain": "percent"}, "percent"),
     ({"degeneracy_band": {"relative": 0.1}}, "relative"), ({"range": [0]}, "short"),
     ({"weight": -1}, "minimum"), ({"normalization_mode": "baseline_to_outstanding_target_minmax"}, "baseline_value")],
)
def test_schema_catches_mistakes(extra: dict[str, object], fragment: str) -> None:
    config = {"metrics": [{"path": "a.b", "oracle_value": 1.0, **extra}]}
    messages = " ".join(message for _, message in schema_problems(config))
    assert fragment in messages


def test_checked_in_schema_is_the_generated_one() -> None:
    """No hand-kept twin: the file is what the pydantic models generate (`anchorage dev schemas` writes it)."""
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render(), "run `anchorage dev schemas` and commit the file"


def test_schema_modes_come_from_the_registry() -> None:
    metric = generate()["$defs"]["MetricSpec"]["properties"]["normalization_mode"]
    assert metric["enum"] == list(MODES)
    for name, mode in MODES.items():
        assert name in metric["description"] and mode.formula in metric["description"]


def test_modes_that_need_a_baseline_are_required_to_have_one_by_the_schema_and_the_model() -> None:
    """The schema's "needs baseline_value" rules come from the registry (one per mode that needs one), and the
    model refuses the same configuration."""
    rules = generate()["$defs"]["MetricSpec"]["allOf"]
    required = {rule["if"]["properties"]["normalization_mode"]["const"] for rule in rules}
    assert required == {name for name, mode in MODES.items() if mode.needs_baseline} and required
    for name in required:
        config = {"metrics": [{"path": "a.b", "outstanding_value": 2.0, "normalization_mode": name}]}
        assert any("baseline_value" in message for _, message in schema_problems(config))
        with pytest.raises(Exception, match="baseline_value"):
            parse_score_config(config)


@pytest.mark.parametrize("name", list(MODES))
def test_each_mode_s_tolerance_is_where_a_two_sided_reward_halves(name: str) -> None:
    """``MetricMode.tolerance`` (used by the reproductions' verdicts) agrees with the mode's own reward."""
    spec: dict[str, object] = {"path": "a.b", "oracle_value": 10.0, "outstanding_value": 10.0, "direction": "target_value",
                               "normalization_mode": name, "rel_scale": 0.1, "abs_scale": 0.5}
    if MODES[name].needs_baseline:
        spec["baseline_value"] = 6.0
    metric = parse_score_config({"metrics": [spec]}).metrics[0]
    tolerance = MODES[name].tolerance(metric.anchor, metric)
    if metric.weight == 0:                      # excluded by construction: nothing to normalise by
        return
    assert tolerance is not None and tolerance > 0
    assert MODES[name].reward(metric, metric.anchor + tolerance) == pytest.approx(0.5)
