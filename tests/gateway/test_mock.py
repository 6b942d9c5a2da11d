"""The mock upstream: deterministic, labelled, JSON artifacts that follow a schema, canned replies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anchorage.errors import InputError
from anchorage.gateway.mock import MockConfig, MockUpstream, ReplyRule, default_reply

SCHEMA = {"type": "object", "properties": {
    "speed": {"type": "number", "minimum": 1, "maximum": 2},
    "count": {"type": "integer", "minimum": 3, "maximum": 5},
    "prob": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1}, "minItems": 4},
    "ok": {"type": "boolean"}, "mode": {"enum": ["a", "b"]},
}}


def test_default_reply_is_deterministic_per_model_seed_prompt() -> None:
    assert default_reply("m", 0, "p") == default_reply("m", 0, "p")
    assert len({default_reply("m", 0, "p"), default_reply("m", 1, "p"), default_reply("n", 0, "p"),
                default_reply("m", 0, "q")}) == 4
    assert default_reply("m", 0, "p").startswith("[mock reply")


def test_output_schema_prompt_gets_a_conforming_json_object() -> None:
    prompt = f"Write the artifact. output_schema: {json.dumps(SCHEMA)} Thanks."
    for seed in range(20):
        value = json.loads(default_reply("m", seed, prompt))
        assert 1 <= value["speed"] <= 2 and 3 <= value["count"] <= 5 and isinstance(value["count"], int)
        assert len(value["prob"]) == 4 and all(0 <= p <= 1 for p in value["prob"])
        assert isinstance(value["ok"], bool) and value["mode"] in ("a", "b")


def test_output_schema_example_object_is_varied() -> None:
    prompt = 'output_schema example: {"q1": {"value": 100.0, "n": 10, "label": "x"}}'
    value = json.loads(default_reply("m", 3, prompt))
    assert 80 <= value["q1"]["value"] <= 120 and value["q1"]["label"] == "x"
    assert json.loads(default_reply("m", 0, "output_schema (see above)"))["note"] == "mock"


def test_canned_replies_by_marker() -> None:
    mock = MockUpstream(MockConfig(replies=[ReplyRule(marker="[[verdict]]", reply='{"verdict": "accept"}')]))
    answer = mock.answer({"model": "judge", "messages": [{"role": "user", "content": "x [[verdict]] y"}]})
    assert answer.text == '{"verdict": "accept"}' and answer.model == "judge-mock"


def test_mock_config_from_yaml(tmp_path: Path) -> None:
    path = tmp_path / "mock.yaml"
    path.write_text("replies: [{marker: M, reply: R}]\nreasoning_billed_separately: true\n")
    assert MockConfig.load(path).replies[0].reply == "R"
    path.write_text("nonsense: 1\n")
    with pytest.raises(InputError, match="mock config"):
        MockConfig.load(path)


def test_task_output_schema_template_is_filled_within_scored_ranges(tasks_dir: Path) -> None:
    schemas = sorted(tasks_dir.glob("*/environment/data/output_schema.json"))
    if not schemas:
        pytest.skip(f"no task output_schema.json under {tasks_dir}")
    template = json.loads(schemas[0].read_text())
    value = json.loads(default_reply("m", 1, f"Write the artifact following output_schema: {json.dumps(template)}"))
    assert set(value) == {k for k in template if not k.startswith("$")}
    for path, field in template.get("$scored_fields", {}).items():
        if path.startswith("$") or not isinstance(field, dict) or "range" not in field:
            continue
        node: object = value
        for part in path.replace("]", "").replace("[", ".").split("."):
            node = node[int(part)] if isinstance(node, list) else node[part]  # type: ignore[index]
        low, high = field["range"]
        assert isinstance(node, int | float) and (low is None or node >= low) and (high is None or node <= high)


def test_start_mock_serves_labelled_models() -> None:
    import urllib.request

    from anchorage.gateway.mock import MOCK_HEADER, start_mock

    with start_mock() as running, urllib.request.urlopen(running.url + "/v1/models", timeout=5) as response:
        assert response.headers[MOCK_HEADER] == "1"
        assert json.loads(response.read())["data"][0]["id"].endswith("-mock")
