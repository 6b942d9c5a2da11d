"""``verification.panel`` on the local engine, end to end: ``anchorage run`` on a campaign of the proof task.

Three replayed solutions of ``examples/proof-panel/tasks/proof-smoke`` and the task's oracle are judged by
the adversarial panel through the real gateway and the labelled mock model's scripted verdicts
(``examples/proof-panel/mock-replies.yaml``), each call in its own sandboxed process with its own token:
the sound solution is confirmed, the flawed one refuted after two HOLE FOUND, the unfixable one abstains —
each with its record in ``score.json`` — and the leaderboard counts the confirmations.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.runtime.local import sandbox
from anchorage.runtime.local.verifying import run_trial_cbu, run_trial_panel, solution_text, summarize
from anchorage.tasks import load_task
from anchorage.verify.cleaning import clean_solution
from anchorage.verify.settings import CbuSettings, PanelSettings

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "proof-panel"
TASKS = DEMO / "tasks"
TASK = TASKS / "proof-smoke"
REPLIES = DEMO / "mock-replies.yaml"


def _replay(kind: str) -> str:
    return f"{{kind: replay, artifact: {DEMO / 'solutions' / kind}}}"


def _campaign(name: str, entries: dict[str, str], panel: str = "{tier: medium, model: mock-verifier}",
              cbu: str | None = None) -> str:
    lines = [f"    - {{name: {entry}, agent: {agent}}}" for entry, agent in entries.items()]
    return (f"apiVersion: anchorage.dev/v1alpha1\nkind: VerificationCampaign\nmetadata: {{name: {name}}}\n"
            f"spec:\n  tasks: [proof-smoke]\n  parallelism: 4\n  entries:\n" + "\n".join(lines) +
            f"\n  verification:\n    panel: {panel}\n" + (f"    cbu: {cbu}\n" if cbu else ""))


DEMO_ENTRIES = {"sound": _replay("sound"), "flawed": _replay("flawed"), "unfixable": _replay("unfixable"),
                "oracle": "{kind: oracle}"}
DEMO_CBU = "{model: mock-solver, rollouts: 2}"


def _run(tmp_path: Path, text: str, *extra: str) -> Any:
    path = tmp_path / "campaign.yaml"
    path.write_text(text)
    return CliRunner().invoke(app, ["run", str(path), "--runs-dir", str(tmp_path / "runs"), "--no-plots",
                                    "--mock-replies", str(REPLIES), *extra])


def _trial(tmp_path: Path, campaign: str, entry: str) -> tuple[dict[str, Any], dict[str, Any], Path]:
    folder = tmp_path / "runs" / campaign / f"{campaign}-{entry}-proof-smoke-s0"
    record = json.loads((folder / "trial.json").read_text())
    score = json.loads((folder / "score.json").read_text())
    return record, score, folder


def _requests(folder: Path) -> dict[str, dict[str, Any]]:
    calls = folder / "verifier" / "panel" / "calls"
    return {p.name: json.loads((p / "request.json").read_text()) for p in sorted(calls.iterdir())}


@pytest.fixture(autouse=True)
def _proof_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANCHORAGE_TASKS", str(TASKS))


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        sandbox.detect_mechanism()
    except Exception as exc:  # any reason the sandbox is missing is a reason to skip
        pytest.skip(f"no sandbox on this machine: {exc}")
    tmp = tmp_path_factory.mktemp("panel")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ANCHORAGE_TASKS", str(TASKS))
        result = _run(tmp, _campaign("pp", DEMO_ENTRIES, cbu=DEMO_CBU))
    assert result.exit_code == 0, result.output
    return tmp


def test_sound_solution_is_confirmed(demo_run: Path) -> None:
    record, score, _ = _trial(demo_run, "pp", "sound")
    panel = score["panel"]
    assert record["phase"] == "Succeeded" and record["panel"]["outcome"] == "confirmed"
    assert panel["outcome"] == panel["status"] == "confirmed" and panel["repaired"] is False
    assert panel["votes"] == [{"round": 0, "outcome": "confirmed", "launched": 4, "HOLDS": 4, "HOLE FOUND": 0,
                               "UNCLEAR": 0}]
    assert panel["calls"] == 4 and panel["revisions"] == 0 and panel["record"]["mock_model"] is True
    assert panel["solution_source"] == "/root/results/solution.md"
    assert panel["usage"]["requests"] == 4            # every call metered by the gateway
    # the mock verifier has no price: the step's cost is unknown with the reason, never a 0 (the record keeps it)
    assert panel["cost_usd"] is None and "mock-verifier" in panel["cost_unknown_reason"]
    assert (record["panel"]["cost_usd"], record["panel"]["cost_unknown_reason"]) == (None, panel["cost_unknown_reason"])
    assert "product of three consecutive integers" in panel["record"]["final_solution"]
    assert score["gradable"] is True and score["o_eval"] == 1.0   # the numeric metric is scored as usual


def test_flawed_solution_is_refuted_after_two_holes(demo_run: Path) -> None:
    record, score, _ = _trial(demo_run, "pp", "flawed")
    panel = score["panel"]
    first = panel["record"]["rounds"][0]["vote"]
    assert record["panel"]["outcome"] == panel["outcome"] == "refuted"
    assert [b["verdict"]["kind"] for b in first["ballots"]] == ["HOLE FOUND", "HOLE FOUND"]
    assert first["outcome"] == "refuted" and first["ballots"][0]["verdict"]["fixable"] is True
    # the panel's reviser repaired it, and the repair (the panel's text, not the agent's) was confirmed
    assert panel["repaired"] is True and panel["status"] == "confirmed" and panel["revisions"] == 1
    assert [v["outcome"] for v in panel["votes"]] == ["refuted", "confirmed"]
    assert "pattern clearly continues" not in panel["record"]["final_solution"]


def test_unfixable_solution_abstains_with_what_was_proven(demo_run: Path) -> None:
    record, score, _ = _trial(demo_run, "pp", "unfixable")
    panel = score["panel"]
    assert record["phase"] == "Succeeded" and panel["outcome"] == panel["status"] == "abstained"
    # the two HOLE FOUND end the first vote after two verifier calls (the seed's saving): 2 + 0 + 1 reviser call
    assert panel["votes"][0]["HOLE FOUND"] == 2 and panel["revisions"] == 1 and panel["calls"] == 3
    abstention = panel["abstention"]
    assert abstention["declared_by"] == "reviser" and abstention["verdict"] == "no confident solution"
    assert "even" in abstention["what_was_proven"] and "factor 3" in abstention["where_it_breaks"]
    assert abstention["unresolved_holes"] and panel["record"]["final_solution"] is None


def test_the_oracle_solution_is_confirmed(demo_run: Path) -> None:
    record, score, _ = _trial(demo_run, "pp", "oracle")
    assert record["sandbox"]["mechanism"] in ("bwrap", "unshare")
    assert score["panel"]["outcome"] == "confirmed" and score["o_eval"] == 1.0


def test_each_call_is_an_isolated_fresh_run(demo_run: Path) -> None:
    _, score, folder = _trial(demo_run, "pp", "sound")
    requests = _requests(folder)
    assert len(requests) == score["panel"]["calls"] == 4          # one folder (one sandboxed process) per call
    for name, request in requests.items():
        messages = request["body"]["messages"]
        assert [m["role"] for m in messages] == ["system", "user"], name     # fresh two-message conversation
        text = json.dumps(messages, ensure_ascii=False)
        assert "Let me try small n" not in text and "<think>" not in text   # the solver's trace never reaches them
        assert json.loads((folder / "verifier/panel/calls" / name / "out" / "reply.json").read_text())["mock"] is True
    _, _, flawed = _trial(demo_run, "pp", "flawed")
    for name, request in _requests(flawed).items():
        text = json.dumps(request["body"]["messages"], ensure_ascii=False)
        if "verifier" in name:   # verifiers never see another verdict; only the reviser gets the hole report
            assert "three cases say nothing about the others" not in text, name
        else:
            assert "three cases say nothing about the others" in text, name


def test_leaderboard_counts_confirmations(demo_run: Path) -> None:
    board = json.loads((demo_run / "runs/pp/leaderboard.json").read_text())
    counts = {row["entry"]: (row["panel_confirmed"], row["panel_trials"]) for row in board["rows"]}
    assert counts == {"sound": (1, 1), "oracle": (1, 1), "flawed": (0, 1), "unfixable": (0, 1)}
    rows = list(csv.DictReader((demo_run / "runs/pp/leaderboard.csv").read_text().splitlines()))
    assert {r["entry"]: (r["panel_confirmed"], r["panel_trials"]) for r in rows} == {
        "sound": ("1", "1"), "oracle": ("1", "1"), "flawed": ("0", "1"), "unfixable": ("0", "1")}
    assert "panel confirmed" in (demo_run / "runs/pp/leaderboard.md").read_text()
    assert {r["entry"]: float(r["cbu_mean"]) for r in rows} == {"sound": 1.0, "oracle": 1.0, "flawed": 0.0,
                                                                "unfixable": 0.0}


def test_cbu_scores_each_solution_by_its_consequences(demo_run: Path) -> None:
    sound_digest = clean_solution((DEMO / "solutions/sound/solution.md").read_text()).digest
    assert sound_digest in REPLIES.read_text()    # the scripted neighbour answers key on this candidate
    record, score, folder = _trial(demo_run, "pp", "sound")
    cbu = score["cbu"]
    assert cbu["outcome"] == "scored" and cbu["utility"] == 1.0 and cbu["candidate"] == sound_digest
    assert [(n["neighbour"], n["accuracy"], n["rollouts"], n["failed_calls"]) for n in cbu["neighbours"]] == [
        ("nb-quintic", 1.0, 2, 0), ("nb-triple", 1.0, 2, 0)]
    assert cbu["calls"] == cbu["usage"]["requests"] == 4 and record["cbu"]["utility"] == 1.0
    calls = {c.name[4:]: json.loads((c / "request.json").read_text()) for c in (folder / "verifier/cbu/calls").iterdir()}
    assert sorted(calls) == ["nb-quintic-r0", "nb-quintic-r1", "nb-triple-r0", "nb-triple-r1"]   # one process each
    assert {name: r["body"]["seed"] for name, r in calls.items()} == {   # the rollout index is the request's seed
        "nb-quintic-r0": 0, "nb-quintic-r1": 1, "nb-triple-r0": 0, "nb-triple-r1": 1}
    _, flawed, _ = _trial(demo_run, "pp", "flawed")
    assert flawed["cbu"]["utility"] == 0.0 and flawed["cbu"]["neighbours"][0]["failed_calls"] == 0


def test_rerun_resumes_without_new_panel_calls(demo_run: Path) -> None:
    before = sorted(p.stat().st_mtime_ns for p in (demo_run / "runs/pp").glob("*/score.json"))
    result = _run(demo_run, _campaign("pp", DEMO_ENTRIES, cbu=DEMO_CBU))
    assert result.exit_code == 0, result.output
    assert "4 resumed" in result.output
    assert sorted(p.stat().st_mtime_ns for p in (demo_run / "runs/pp").glob("*/score.json")) == before


def test_a_model_the_gateway_cannot_serve_is_an_infrastructure_failure(tmp_path: Path, mechanism: str) -> None:
    result = _run(tmp_path, _campaign("nomodel", {"sound": _replay("sound")},
                                      panel="{model: no-such-model, maxRevisions: 0, maxParallel: 1}"))
    assert result.exit_code == 3, result.output   # an infrastructure failure: exit code 3
    record, score, _ = _trial(tmp_path, "nomodel", "sound")
    assert record["phase"] == "InfrastructureFailed" and record["reason"] == "gateway_error"
    assert "every panel verifier call failed" in record["message"]
    ballots = score["panel"]["record"]["rounds"][0]["vote"]["ballots"]
    assert ballots and all(b["error"] and b["verdict"]["kind"] == "UNCLEAR" for b in ballots)


def test_a_trial_without_solution_text_is_recorded_missing(tmp_path: Path, mechanism: str) -> None:
    results = tmp_path / "only-json"
    results.mkdir()
    (results / "proof-smoke_result.json").write_text('{"experiment_result": {"quotient_at_12": 286}}')
    result = _run(tmp_path, _campaign("nosol", {"bare": f"{{kind: replay, artifact: {results}}}"}))
    assert result.exit_code == 0, result.output
    record, score, folder = _trial(tmp_path, "nosol", "bare")
    assert record["phase"] == "Succeeded" and score["panel"]["outcome"] == "missing" and score["panel"]["calls"] == 0
    assert "solution.md" in score["panel"]["reason"] and not (folder / "verifier/panel/calls").exists()


def test_no_gateway_is_an_infrastructure_failure_not_a_verdict(tmp_path: Path) -> None:
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "solution.md").write_text("**Proof**: trivially true.\n")
    outcome = run_trial_panel(load_task(TASK), PanelSettings(), trial="t", entry="e", trial_dir=tmp_path, artifact=None,
                              gateway=None, mechanism="none")
    assert outcome.failure is not None and "needs the model gateway" in outcome.failure


def test_solution_text_falls_back_to_the_artifact_field(tmp_path: Path) -> None:
    artifact = tmp_path / "proof-smoke_result.json"
    artifact.write_text(json.dumps({"solution": "**Proof**: from the artifact.", "experiment_result": {}}))
    text, source = solution_text(load_task(TASK), tmp_path, str(artifact))
    assert text == "**Proof**: from the artifact." and source == "artifact field solution"
    (tmp_path / "solution.md").write_text("**Proof**: from the file.")
    text, source = solution_text(load_task(TASK), tmp_path, str(artifact))
    assert text == "**Proof**: from the file." and source == "/root/results/solution.md"
    (tmp_path / "solution.md").write_text("   \n")
    text, source = solution_text(load_task(TASK), tmp_path, None)
    assert text is None and "empty" in source


@pytest.mark.parametrize(("first", "status", "outcome"), [
    ("confirmed", "confirmed", "confirmed"), ("refuted", "confirmed", "refuted"), ("refuted", "abstained", "abstained"),
    ("refuted", "refuted", "refuted"), ("undecided", "undecided", "undecided"), ("undecided", "abstained", "abstained"),
])
def test_outcome_is_about_the_submitted_solution(first: str, status: str, outcome: str) -> None:
    vote = {"outcome": first, "launched": 4, "counts": {"HOLDS": 0, "HOLE FOUND": 0, "UNCLEAR": 0}, "ballots": []}
    record = {"status": status, "rounds": [{"round": 0, "vote": vote}], "calls": 4, "mock_model": True,
              "abstention": None, "settings": {}, "thresholds": {}}
    summary = summarize(record)
    assert summary["outcome"] == outcome
    assert summary["repaired"] is (first == "refuted" and status == "confirmed")


def test_cbu_without_neighbours_is_recorded_not_failed(tmp_path: Path) -> None:
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "solution.md").write_text("**Proof**: by the KKT conditions.\n")
    outcome = run_trial_cbu(load_task(REPO / "tasks" / "smoke-inventory"), CbuSettings(rollouts=1), trial="t",
                            entry="e", trial_dir=tmp_path, artifact=None, gateway=None, mechanism="none")
    assert outcome.failure is None and outcome.block["outcome"] == "no_neighbours" and outcome.block["calls"] == 0
    assert "tests/cbu_neighbours.json" in outcome.block["reason"]


def test_a_symlink_out_of_the_results_folder_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.md"
    secret.write_text("**Proof**: the host's file.")
    results = tmp_path / "results"
    results.mkdir()
    (results / "solution.md").symlink_to(secret)
    outside = tmp_path / "proof-smoke_result.json"
    outside.write_text(json.dumps({"solution": "**Proof**: outside."}))
    text, source = solution_text(load_task(TASK), results, str(outside))
    assert text is None and "no /root/results/solution.md" in source


def test_unsandboxed_calls_reach_the_gateway_too(tmp_path: Path) -> None:
    from anchorage.runtime.local.gatewaystart import start_local_gateway

    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "solution.md").write_text((DEMO / "solutions/sound/solution.md").read_text())
    local = start_local_gateway(mock_replies=REPLIES)
    try:
        outcome = run_trial_panel(load_task(TASK), PanelSettings(model="mock-verifier", max_parallel=2), trial="u",
                                  entry="e", trial_dir=tmp_path, artifact=None, gateway=local.gateway, mechanism="none")
    finally:
        local.stop()
    assert outcome.failure is None and outcome.block["outcome"] == "confirmed" and outcome.block["calls"] == 4
    assert outcome.block["usage"]["requests"] == 4


def test_a_single_trial_with_a_judging_only_panel(tmp_path: Path, mechanism: str) -> None:
    path = tmp_path / "trial.yaml"
    path.write_text("apiVersion: anchorage.dev/v1alpha1\nkind: Trial\nmetadata: {name: one}\nspec:\n"
                    f"  task: proof-smoke\n  agent: {_replay('flawed')}\n"
                    "  verification:\n    panel: {model: mock-verifier, maxRevisions: 0, maxParallel: 1}\n")
    result = CliRunner().invoke(app, ["run", str(path), "--runs-dir", str(tmp_path / "runs"),
                                      "--mock-replies", str(REPLIES)])
    assert result.exit_code == 0, result.output
    assert "panel: refuted (status refuted, 2 calls)" in result.output   # sequential: 2 HOLE FOUND, 3 saved
    score = json.loads((tmp_path / "runs/one/score.json").read_text())
    assert score["panel"]["revisions"] == 0 and score["panel"]["repaired"] is False
