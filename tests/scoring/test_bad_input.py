"""Bad input never crashes the scorer: each case is a record (or an InputError) that says what was wrong."""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from anchorage.errors import InputError
from anchorage.scoring import MAX_ARTIFACT_BYTES, ScoreRecord, score_artifact

from .conftest import TaskFactory

METRICS = [
    {"path": "r.x", "oracle_value": 2.0, "direction": "higher_is_better"},
    {"path": "r.y", "oracle_value": 0.5, "direction": "target_value", "domain": "unit_interval"},
]
EXPECTED = {"r": {"x": 2.0, "y": 0.5}}


@pytest.fixture
def task(make_task: TaskFactory) -> Path:
    return make_task(METRICS, EXPECTED)


def assert_ungradable(record: ScoreRecord, error_part: str) -> None:
    assert record.gradable is False
    assert record.error is not None and error_part in record.error
    assert (record.raw, record.o_eval, record.bo_eval) == (0.0, 0.0, -1.0)
    assert [m.status for m in record.metrics] == ["missing", "missing"]
    json.dumps(record.to_dict(), allow_nan=False)


@pytest.mark.parametrize(
    ("text", "error_part"),
    [("{not json", "not valid JSON"), ("", "not valid JSON"), ("[1, 2, 3]", "an array"),
     ('"just a string"', "str"), ("42", "int"), ("null", "NoneType"), ('{"a": 1} trailing', "not valid JSON")],
    ids=["invalid", "empty", "array", "string", "number", "null", "trailing"],
)
def test_unreadable_artifacts_are_ungradable(task: Path, write_json: Callable[..., Path], text: str,
                                            error_part: str) -> None:
    assert_ungradable(score_artifact(task, write_json(text)), error_part)


def test_invalid_utf8(task: Path, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"r": {"x": "\xff\xfe"}}')
    assert_ungradable(score_artifact(task, path), "not UTF-8")


def test_utf8_bom_is_accepted(task: Path, tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(EXPECTED).encode())
    assert score_artifact(task, path).raw == 1.0


def test_200mb_file_is_rejected_by_size_before_reading(task: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as handle:      # sparse: 200 MB apparent size, almost nothing on disk
        handle.truncate(200 * 1024 * 1024)
    real_open = pathlib.Path.open

    def guarded_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == big:
            raise AssertionError("the scorer opened a file it should have rejected by size")
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", guarded_open)
    record = score_artifact(task, big)
    assert_ungradable(record, "too large")
    assert str(200 * 1024 * 1024) in (record.error or "") and str(MAX_ARTIFACT_BYTES) in (record.error or "")


def test_file_just_over_the_limit(task: Path, tmp_path: Path) -> None:
    path = tmp_path / "over.json"
    with path.open("wb") as handle:
        handle.truncate(MAX_ARTIFACT_BYTES + 1)
    assert_ungradable(score_artifact(task, path), "too large")


def test_deep_nesting(task: Path, write_json: Callable[..., Path]) -> None:
    deep = '{"r": ' + "[" * 10_000 + "]" * 10_000 + "}"
    assert_ungradable(score_artifact(task, write_json(deep)), "nested too deeply")


def test_deep_nesting_below_the_parser_limit_is_scored(task: Path, write_json: Callable[..., Path]) -> None:
    doc = '{"r": {"x": 2.0, "y": 0.5}, "junk": ' + "[" * 500 + "]" * 500 + "}"
    record = score_artifact(task, write_json(doc))
    assert record.gradable and record.raw == 1.0


def test_nan_and_infinity_leaves(task: Path, write_json: Callable[..., Path]) -> None:
    record = score_artifact(task, write_json('{"r": {"x": NaN, "y": Infinity}}'))
    assert record.gradable
    assert [(m.status, m.reward) for m in record.metrics] == [("non_numeric", 0.0), ("non_numeric", 0.0)]
    assert all("not finite" in m.reason for m in record.metrics)
    text = json.dumps(record.to_dict(), allow_nan=False)   # the record itself stays strict JSON
    assert '"nan"' in text and '"inf"' in text
    assert record.raw == 0.0 and record.bo_eval == 0.0   # gradable: R = F = 0 (no baseline endpoint)


def test_strings_where_numbers_belong(task: Path, write_json: Callable[..., Path]) -> None:
    record = score_artifact(task, write_json({"r": {"x": "about two", "y": "0.5"}}))
    x, y = record.metrics
    assert (x.status, x.reward) == ("non_numeric", 0.0) and "about two" in x.reason
    assert (y.status, y.reward, y.number) == ("scored", 1.0, 0.5) and "coerced" in y.reason
    assert record.raw == pytest.approx(0.5)


def test_booleans_nulls_and_containers(task: Path, write_json: Callable[..., Path]) -> None:
    record = score_artifact(task, write_json({"r": {"x": True, "y": None}}))
    assert [m.status for m in record.metrics] == ["non_numeric", "missing"]
    record = score_artifact(task, write_json({"r": {"x": [2.0], "y": {"v": 0.5}}}))
    assert [m.status for m in record.metrics] == ["non_numeric", "non_numeric"]


def test_empty_object_is_gradable_with_zero(task: Path, write_json: Callable[..., Path]) -> None:
    record = score_artifact(task, write_json({}))
    assert record.gradable and record.raw == 0.0
    assert all(m.status == "missing" and m.reward == 0.0 for m in record.metrics)


def test_missing_artifact_is_minus_one(task: Path, tmp_path: Path) -> None:
    empty = tmp_path / "results"
    empty.mkdir()
    record = score_artifact(task, empty)
    assert_ungradable(record, "missing artifact")
    assert_ungradable(score_artifact(task, tmp_path / "nowhere" / "x.json"), "missing artifact")


def test_directory_named_like_the_artifact(task: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    (results / f"{task.name}_result.json").mkdir(parents=True)
    record = score_artifact(task, results)
    assert record.gradable is False and record.bo_eval == -1.0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_is_not_read(task: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    assert_ungradable(score_artifact(task, fifo), "not a regular file")


def test_missing_config_is_an_input_error(make_task: TaskFactory, write_json: Callable[..., Path]) -> None:
    root = make_task(METRICS, EXPECTED)
    (root / "tests" / "score_config.json").unlink()
    with pytest.raises(InputError, match=r"score_config\.json is missing") as info:
        score_artifact(root, write_json(EXPECTED))
    assert info.value.hint


@pytest.mark.parametrize(
    ("config", "message"),
    [("{oops", "not valid JSON"), (json.dumps({"metrics": []}), "metrics"),
     (json.dumps({"metrics": [{"path": "a..b", "oracle_value": 1}]}), "path"),
     (json.dumps({"metrics": [{"path": "a", "oracle_value": float("nan")}]}), "oracle_value"),
     (json.dumps({"metrics": [{"path": "a"}]}), "oracle_value"),
     (json.dumps({"metrics": [{"path": "a", "oracle_value": 1, "direction": "up"}]}), "direction"),
     (json.dumps({"metrics": [{"path": "a", "oracle_value": 1,
                               "normalization_mode": "baseline_to_outstanding_target_minmax"}]}), "baseline_value")],
    ids=["syntax", "no-metrics", "bad-path", "nan-anchor", "no-anchor", "bad-direction", "minmax-no-baseline"],
)
def test_invalid_config_is_an_input_error(make_task: TaskFactory, write_json: Callable[..., Path], config: str,
                                          message: str) -> None:
    root = make_task(METRICS, EXPECTED)
    (root / "tests" / "score_config.json").write_text(config, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        score_artifact(root, write_json(EXPECTED))


def test_config_changes_are_picked_up(make_task: TaskFactory, write_json: Callable[..., Path]) -> None:
    root = make_task(METRICS, EXPECTED)
    artifact = write_json({"r": {"x": 2.0, "y": 0.5}})
    assert score_artifact(root, artifact).raw == 1.0
    changed = [dict(METRICS[0], oracle_value=4.0), METRICS[1]]
    (root / "tests" / "score_config.json").write_text(json.dumps({"metrics": changed, "pad": "x" * 10}))
    assert score_artifact(root, artifact).metrics[0].anchor == 4.0
