"""Trials end to end through the engine: each outcome is a recorded state, never an engine crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anchorage.campaigns.documents import load_documents
from anchorage.errors import InputError
from anchorage.manifests import VerificationCampaign
from anchorage.runtime.local import interpreter, sandbox
from anchorage.runtime.local.engine import campaign_lock, run_campaign
from anchorage.runtime.local.trials import LocalRuntime
from anchorage.tasks import load_task, resolve_task
from anchorage.trials.agents.oracle import IMPORTED_ANCHOR_LABEL
from engine.conftest import campaign_yaml

pytestmark = pytest.mark.sandbox


def _run(path: Path, runs: Path, mechanism: sandbox.Mechanism, gateway: object = None) -> dict[str, dict]:
    campaign = load_documents(path)[0].resource
    assert isinstance(campaign, VerificationCampaign)
    runtime = LocalRuntime(mechanism=mechanism, base_dir=path.parent, gateway=gateway)  # type: ignore[arg-type]
    outcome = run_campaign(campaign, runs, runtime)
    return {r.entry: r.to_json() for r in outcome.records}


def test_outcomes_are_recorded_states(mechanism: sandbox.Mechanism, write_manifest, tmp_path: Path,  # type: ignore[no-untyped-def]
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANCHORAGE_CACHE", str(tmp_path / "no-clis"))  # codex is not installed there
    entries = """\
    - name: crash
      agent: {kind: command, command: ["/bin/sh", "-c", "echo boom >&2; exit 3"]}
    - name: silent
      agent: {kind: command, command: ["/bin/true"]}
    - name: sleeper
      agent: {kind: command, command: ["/bin/sleep", "60"]}
    - name: hog
      agent: {kind: command, command: ["python3", "-c", "x = [bytearray(2**24) for _ in range(10**4)]"]}
    - name: bulky
      agent: {kind: command, command: ["/bin/sh", "-c", "head -c 300000 /dev/zero > /root/results/big.bin"]}
    - name: codex
      agent: {kind: codex, model: gpt-5.5}
    - name: nogw
      agent: {kind: mock}"""
    limits = "  limits: {agentTimeoutSec: 2, memoryMB: 128, resultMaxBytes: 100000}\n"
    records = _run(write_manifest(campaign_yaml("states", entries, extra=limits)), tmp_path / "runs", mechanism)
    got = {entry: (r["phase"], r["reason"]) for entry, r in records.items()}
    assert got == {
        "crash": ("Failed", "agent_error"), "silent": ("Failed", "no_artifact"), "sleeper": ("Failed", "timeout"),
        "hog": ("Failed", "oom"), "bulky": ("Failed", "oversized_result"), "codex": ("InfrastructureFailed", "sandbox_error"),
        "nogw": ("InfrastructureFailed", "gateway_error"),
    }
    assert "not installed" in records["codex"]["message"]  # the platform's, with the install command
    assert "anchorage agents install codex" in records["codex"]["message"]
    for entry in ("crash", "silent", "sleeper", "hog", "bulky"):
        assert records[entry]["score"]["bo_eval"] == -1.0, entry
    assert records["nogw"]["score"] is None and records["codex"]["score"] is None  # never scored
    folder = tmp_path / "runs" / "states" / records["crash"]["name"]
    assert (folder / "agent" / "stderr.log").read_text().strip() == "boom"
    delivered = (folder / "agent" / "prompt.txt").read_text()
    assert delivered == load_task(resolve_task("smoke-inventory")).instruction
    assert "harbor-canary" not in delivered


def test_oracle_and_replays_are_labelled(mechanism: sandbox.Mechanism, write_manifest, tmp_path: Path,  # type: ignore[no-untyped-def]
                                        imported_anchor_task: Path) -> None:
    entries = """\
    - name: oracle
      agent: {kind: oracle}
    - name: replay
      agent: {kind: replay, artifact: "REPO/tasks/{task}/tests/expected_result.json"}""".replace("REPO", str(Path.cwd()))
    text = campaign_yaml("labels", entries, tasks=f"[smoke-inventory, {imported_anchor_task}]")
    records = _run(write_manifest(text), tmp_path / "runs", mechanism)
    outcome = json.loads((tmp_path / "runs" / "labels" / "campaign.json").read_text())
    assert len(outcome["trials"]) == 4
    trials = [json.loads((tmp_path / "runs" / "labels" / t / "trial.json").read_text()) for t in outcome["trials"]]
    by = {(t["entry"], t["task"]): t for t in trials}
    smoke = by[("oracle", "smoke-inventory")]
    assert smoke["phase"] == "Succeeded" and smoke["score"]["o_eval"] == pytest.approx(1.0)
    assert smoke["sandbox"]["mechanism"] == mechanism
    reward = json.loads((tmp_path / "runs" / "labels" / smoke["name"] / "verifier" / "reward.json").read_text())
    assert reward["reward"] == pytest.approx(1.0)
    imported = by[("oracle", imported_anchor_task.name)]
    assert imported["agent"]["label"] == IMPORTED_ANCHOR_LABEL and imported["replay"]["label"] == IMPORTED_ANCHOR_LABEL
    assert by[("replay", "smoke-inventory")]["agent"]["label"] == "replay"
    assert by[("replay", "smoke-inventory")]["score"]["o_eval"] == pytest.approx(1.0)
    assert records  # the run returned its records


def test_second_concurrent_run_is_refused(tmp_path: Path) -> None:
    with campaign_lock(tmp_path / "c"), pytest.raises(InputError) as caught, campaign_lock(tmp_path / "c"):
        pass
    assert "already running campaign c" in str(caught.value) and "resumes" in str(caught.value)


def test_changed_manifest_is_not_mixed_into_a_run(mechanism: sandbox.Mechanism, write_manifest, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    entries = '    - name: a\n      agent: {kind: command, command: ["/bin/true"]}'
    _run(write_manifest(campaign_yaml("pin", entries)), tmp_path / "runs", mechanism)
    changed = entries.replace("/bin/true", "/bin/false")
    with pytest.raises(InputError) as caught:   # an entry's agent changed: old and new trials would be mixed
        _run(write_manifest(campaign_yaml("pin", changed)), tmp_path / "runs", mechanism)
    assert "different spec: entry 'a' changed" in str(caught.value) and "new metadata.name" in str(caught.value)


def test_mock_agent_reaches_the_real_gateway_and_is_metered(  # type: ignore[no-untyped-def]
    mechanism: sandbox.Mechanism, write_manifest, tmp_path: Path
) -> None:
    from anchorage.runtime.local.gatewaystart import start_local_gateway

    entries = "    - name: mock\n      agent: {kind: mock, model: mock-model}"
    local = start_local_gateway()
    try:
        records = _run(write_manifest(campaign_yaml("mocked", entries, seeds=1)), tmp_path / "runs", mechanism,
                       gateway=local.gateway)
    finally:
        local.stop()
    record = records["mock"]
    assert record["phase"] == "Succeeded", record
    assert record["agent"]["label"].startswith("mock")
    assert record["usage"]["requests"] == 1 and record["usage"]["input_tokens"] > 0
    assert record["score"]["gradable"] is True


def test_an_upstream_that_reports_no_usage_leaves_the_cost_unknown_up_to_the_leaderboard(  # type: ignore[no-untyped-def]
    mechanism: sandbox.Mechanism, write_manifest, tmp_path: Path
) -> None:
    """Unknown is not zero, end to end: the gateway records the request as unmetered, trial.json has
    ``cost_usd: null`` with the reason, and the leaderboard shows the row's cost as a lower bound."""
    from anchorage.report.pages import leaderboard_table
    from anchorage.report.tables import to_markdown
    from anchorage.runtime.local.gatewaystart import start_local_gateway

    silent = tmp_path / "mock.yaml"
    silent.write_text("report_usage: false\n")  # a provider that never reports token usage
    entries = "    - name: mock\n      agent: {kind: mock, model: mock-model}"
    path = write_manifest(campaign_yaml("unmetered", entries, seeds=1))
    campaign = load_documents(path)[0].resource
    assert isinstance(campaign, VerificationCampaign)
    local = start_local_gateway(mock_replies=silent)
    try:
        outcome = run_campaign(campaign, tmp_path / "runs", LocalRuntime(mechanism=mechanism, base_dir=path.parent,
                                                                        gateway=local.gateway))
    finally:
        local.stop()
    [record] = [r.to_json() for r in outcome.records]
    assert record["phase"] == "Succeeded", record
    assert record["cost_usd"] is None and "metered" in record["cost_unknown_reason"]
    assert record["usage"]["unmetered_requests"] == 1 and record["usage"]["input_tokens"] == 0
    on_disk = json.loads(next((tmp_path / "runs").rglob("trial.json")).read_text())
    assert on_disk["cost_usd"] is None and on_disk["usage"]["unmetered_requests"] == 1
    [row] = outcome.board.rows
    assert (row.costs_unknown, row.unmetered_requests) == (1, 1)
    assert "≥ 0.0000, 1 request(s) unmetered" in to_markdown(outcome.board)
    # the campaign's total, and the board says its cost is incomplete (the report's Markdown and HTML too)
    assert (outcome.board.costs_unknown, outcome.board.unmetered_requests) == (1, 1)
    assert outcome.board.cost_note == ("cost incomplete: 1 trial cost(s) unknown, 1 request(s) unmetered by the gateway; "
                                       "the costs shown are lower bounds")
    assert "**Cost incomplete: 1 trial cost(s) unknown" in to_markdown(outcome.board)
    html = leaderboard_table(outcome.board, lambda _: None)
    assert "cost incomplete: 1 trial cost(s) unknown, 1 request(s) unmetered" in html


def test_infrastructure_failures_are_retried_only_as_configured(  # type: ignore[no-untyped-def]
    mechanism: sandbox.Mechanism, write_manifest, tmp_path: Path
) -> None:
    entries = """\
    - name: nogw
      agent: {kind: mock}
    - name: crash
      agent: {kind: command, command: ["/bin/false"]}"""
    records = _run(write_manifest(campaign_yaml("retry", entries, extra="  retries: {infrastructure: 2}\n")),
                   tmp_path / "runs", mechanism)
    assert records["nogw"]["attempt"] == 3 and len(records["nogw"]["previous_attempts"]) == 2
    assert records["crash"]["attempt"] == 1 and records["crash"]["previous_attempts"] == []  # a model's own failure


def test_near_miss_artifact_is_recovered_and_recorded(  # type: ignore[no-untyped-def]
    mechanism: sandbox.Mechanism, write_manifest, tmp_path: Path
) -> None:
    source = Path.cwd() / "tasks" / "smoke-inventory" / "tests" / "expected_result.json"
    agent = {"kind": "command", "env": {"ARTIFACT": source.read_text()},
             "command": ["/bin/sh", "-c", 'printf %s "$ARTIFACT" > /root/results/smoke-inventory-result.json']}
    text = campaign_yaml("recover", "    - name: hyphen\n      agent: " + json.dumps(agent))
    record = _run(write_manifest(text), tmp_path / "runs", mechanism)["hyphen"]
    assert record["phase"] == "Succeeded", record
    assert record["artifact"]["recovered_from"] and "smoke-inventory-result.json" in record["artifact"]["recovered_from"]
    assert record["score"]["o_eval"] > 0.99


def test_an_interpreter_without_the_agents_stack_is_the_platforms_failure(  # type: ignore[no-untyped-def]
    mechanism: sandbox.Mechanism, write_manifest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox offers agents the engine's interpreter: without the ``agent-stack`` extra (here pandas hidden from
    it) the oracle's reproduction could not run, and that is never the agent's zero."""
    real_find_spec = interpreter.importlib.util.find_spec
    monkeypatch.setattr(interpreter.importlib.util, "find_spec",
                        lambda name, *a: None if name == "pandas" else real_find_spec(name, *a))
    interpreter.missing_stack.cache_clear()
    try:
        entries = """\
    - name: oracle
      agent: {kind: oracle}"""
        records = _run(write_manifest(campaign_yaml("nostack", entries)), tmp_path / "runs", mechanism)
    finally:
        interpreter.missing_stack.cache_clear()
    record = records["oracle"]
    assert (record["phase"], record["reason"], record["score"]) == ("InfrastructureFailed", "sandbox_error", None)
    assert "lacks pandas" in record["message"] and "anchorage-operator[agent-stack]" in record["message"]


def test_make_venv_gives_agents_the_whole_stack() -> None:
    interpreter.missing_stack.cache_clear()
    assert interpreter.missing_stack() is None
