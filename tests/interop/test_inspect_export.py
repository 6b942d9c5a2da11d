"""anchorage export inspect: the demo campaign as Inspect AI eval logs, read back by Inspect's own reader
(``read_eval_log`` and the ``inspect log dump`` command) without errors; infrastructure failures are sample
errors, unknown costs stay unknown; the CLI's exit codes and --json shape."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import anchorage_cli

inspect_log = pytest.importorskip("inspect_ai.log", reason="the inspect extra is not installed (make venv installs it)")


def _export(run: Path, out: Path, *extra: str) -> list[Path]:
    done = anchorage_cli("export", "inspect", str(run), "--out", str(out), "--json", *extra)
    assert done.returncode == 0, done.stderr
    shape = json.loads(done.stdout)
    assert set(shape) == {"campaign", "format", "logs"}
    return [Path(p) for p in shape["logs"]]


def test_the_demo_campaign_opens_in_inspects_reader(demo_runs: Path, tmp_path: Path) -> None:
    files = _export(demo_runs / "demo", tmp_path / "logs")
    assert len(files) == 2 and {p.suffix for p in files} == {".eval"}
    assert len(inspect_log.list_eval_logs(str(tmp_path / "logs"))) == 2
    logs = {log.eval.metadata["entry"]: log for log in map(inspect_log.read_eval_log, map(str, files))}
    mock, oracle = logs["mock"], logs["oracle"]
    assert mock.status == "success" and mock.eval.task == "smoke-inventory" and mock.eval.model == "mock/mock-model"
    assert oracle.eval.model == "anchorage/oracle"                          # never "-" in inspect view
    assert mock.eval.task_id != oracle.eval.task_id and mock.eval.run_id != oracle.eval.run_id   # not "retries"
    records = [json.loads(p.read_text()) for p in sorted((demo_runs / "demo").glob("demo-mock-*/trial.json"))]
    assert [s.metadata["seed"] for s in mock.samples] == [r["seed"] for r in records]
    o_evals = [r["score"]["o_eval"] for r in records]
    assert mock.results is not None
    assert mock.results.scores[0].metrics["mean"].value == pytest.approx(statistics.fmean(o_evals))
    sample = mock.samples[0]
    assert sample.scores is not None and sample.scores["o_eval"].value == pytest.approx(o_evals[0])
    assert sample.scores["o_eval"].explanation == records[0]["message"] and "failed" in records[0]["message"]
    failed_gates = [g["name"] for g in sample.scores["o_eval"].metadata["gates"] if g["status"] == "failed"]
    assert failed_gates and all(name in records[0]["message"] for name in failed_gates)
    assert "Original Contest Problem" in str(sample.input)              # the prompt the agent got
    assert "experiment_result.total_annual_cost = " in str(sample.target)   # the anchors: TARGET
    artifact = (demo_runs / "demo" / records[0]["name"] / records[0]["artifact"]["path"]).read_text()
    assert sample.scores["o_eval"].answer == artifact                   # the scored answer: ANSWER
    board = sample.scores["bo_eval"]
    assert "against its F = " in (board.explanation or "") and "campaign baseline 'mock'" in (board.explanation or "")
    kinds = [e.event for e in sample.events]
    assert kinds[0] == "info" and kinds.count("model") == 1 and kinds[-2:] == ["score", "score"]   # the transcript
    assert sample.messages[-1].role == "assistant" and "problem_id" in sample.messages[-1].text   # the transcript
    calls = [e for e in sample.events if e.event == "model"]
    assert len(calls) == 1 and calls[0].call is not None and calls[0].call.request["messages"]   # the raw request
    assert calls[0].output.completion == sample.messages[-1].text
    usage = sample.model_usage["mock-model"]
    assert usage.input_tokens == records[0]["usage"]["input_tokens"]
    assert usage.total_cost == pytest.approx(records[0]["cost_usd"])
    assert mock.eval.metadata["price_snapshots"] == ["2026-11"] and mock.eval.metadata["scoring_profiles"] == ["paper@1"]
    # Inspect's own command reads it too (what inspect view does per log)
    inspect_cli = Path(sys.executable).parent / "inspect"
    dumped = subprocess.run([str(inspect_cli), "log", "dump", str(files[0])], capture_output=True, text=True,
                            timeout=300, check=False)
    assert dumped.returncode == 0, dumped.stderr
    assert json.loads(dumped.stdout)["eval"]["task"] == "smoke-inventory"


def test_infrastructure_failures_are_errors_and_unknown_costs_stay_unknown(demo_runs: Path, tmp_path: Path) -> None:
    run = tmp_path / "demo"
    shutil.copytree(demo_runs / "demo", run)
    path = run / "demo-mock-smoke-inventory-s2" / "trial.json"
    record = json.loads(path.read_text())
    record.update(phase="InfrastructureFailed", reason="sandbox_error", message="bwrap could not start")
    path.write_text(json.dumps(record))
    path = run / "demo-mock-smoke-inventory-s1" / "trial.json"
    record = json.loads(path.read_text())
    for usage in (record["usage"], record["usage"]["by_model"]["mock-model"]):
        usage.update(cost_known=False, cost_usd=None, cost_unknown_reason="no price for mock-model")
    record.update(cost_usd=None, cost_unknown_reason="no price for mock-model")
    path.write_text(json.dumps(record))
    files = _export(run, tmp_path / "logs", "--format", "json")
    mock = next(inspect_log.read_eval_log(str(p)) for p in files if "_mock_" in p.name)
    by_seed = {s.metadata["seed"]: s for s in mock.samples}
    assert by_seed[2].scores is None and by_seed[2].error is not None and "bwrap" in by_seed[2].error.message
    assert "sandbox_error" in by_seed[2].error.message
    assert by_seed[1].model_usage["mock-model"].total_cost is None and by_seed[1].metadata["cost_usd"] is None
    assert mock.results is not None and mock.results.completed_samples == 2
    assert mock.results.scores[0].unscored_samples == 1 and mock.results.metadata["infrastructure_failures"] == 1


def test_bad_input_exits_2(demo_runs: Path, tmp_path: Path) -> None:
    bad = anchorage_cli("export", "inspect", str(demo_runs / "demo"), "--out", str(tmp_path), "--format", "yaml")
    assert bad.returncode == 2 and "--format" in bad.stderr
    missing = anchorage_cli("export", "inspect", str(tmp_path / "nope"), "--out", str(tmp_path))
    assert missing.returncode == 2 and "not a folder" in missing.stderr


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from anchorage.errors import InputError
    from anchorage.interop.inspect_logs import require_inspect

    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    with pytest.raises(InputError) as caught:
        require_inspect()
    assert "anchorage[inspect]" in (caught.value.hint or "")
