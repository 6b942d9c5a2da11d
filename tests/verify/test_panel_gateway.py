"""End to end: the panel through the real gateway and the labelled mock model (SPEC §7 "must show").

A sound solution is confirmed, a flawed one refuted after two HOLE FOUND (then repaired by a revision and
confirmed on the re-vote, or left refuted when revisions are off), an unfixable one abstains with what was
proven. Each writes its JSON record; the requests the mock received show the context isolation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.gateway.mock import prompt_of
from anchorage.verify.panel import run_panel
from anchorage.verify.prompts import Problem
from anchorage.verify.settings import PanelSettings

from .conftest import MockGateway


def _problem(data_dir: Path, name: str) -> tuple[Problem, str]:
    folder = data_dir / "panel"
    return (Problem(name, (folder / f"{name}.md").read_text()), (folder / f"{name}.solution.md").read_text())


def _save(record: dict[str, Any], path: Path) -> dict[str, Any]:
    path.write_text(json.dumps(record, indent=2))
    loaded: dict[str, Any] = json.loads(path.read_text())   # the record is plain JSON
    return loaded


def _verifier_prompts(mock_gateway: MockGateway) -> list[str]:
    return [prompt_of(s.body) for s in mock_gateway.mock.seen if "role=verifier" in prompt_of(s.body)]


def test_sound_solution_is_confirmed(mock_gateway: MockGateway, data_dir: Path, tmp_path: Path) -> None:
    problem, solution = _problem(data_dir, "odd-sum")
    record = _save(run_panel(problem, solution, mock_gateway.client, PanelSettings()).to_dict(), tmp_path / "r.json")
    assert record["status"] == "confirmed" and record["mock_model"] is True
    vote = record["rounds"][0]["vote"]
    assert vote["counts"]["HOLDS"] == 4 and vote["launched"] == 4 and vote["saved"] == 1   # the 5th never launched
    assert "Induction on n" in record["final_solution"]
    assert mock_gateway.gateway.usage(mock_gateway.trial).requests == 4                   # billed to the token
    prompts = _verifier_prompts(mock_gateway)
    assert len(prompts) == 4
    for prompt in prompts:   # the verifier never sees the solver's trace
        assert "<think>" not in prompt and "telescoping (k²" not in prompt and "Let me try" not in prompt
        assert "Self-verification" not in prompt and "forgot the base case" not in prompt
    assert all(len(s.body["messages"]) == 2 for s in mock_gateway.mock.seen)               # fresh conversations


def test_flawed_solution_refuted_after_two_holes_then_revised(mock_gateway: MockGateway, data_dir: Path,
                                                              tmp_path: Path) -> None:
    problem, solution = _problem(data_dir, "flawed-bound")
    record = _save(run_panel(problem, solution, mock_gateway.client, PanelSettings()).to_dict(), tmp_path / "r.json")
    first, second = record["rounds"]
    assert first["vote"]["outcome"] == "refuted"
    assert [b["verdict"]["kind"] for b in first["vote"]["ballots"]] == ["HOLE FOUND", "HOLE FOUND"]
    assert first["vote"]["ballots"][0]["verdict"]["fixable"] is True
    assert second["revision"] == "revised" and second["vote"]["outcome"] == "confirmed"
    assert record["status"] == "confirmed" and "1 − 1/(n+1)" in record["final_solution"]
    assert "First attempt" not in json.dumps(record)                       # the false start was cleaned away
    reviser = [prompt_of(s.body) for s in mock_gateway.mock.seen if "role=reviser" in prompt_of(s.body)]
    assert len(reviser) == 1 and "the cancellation is asserted" in reviser[0]   # the reviser gets the hole report
    for prompt in _verifier_prompts(mock_gateway):                             # verifiers never see other verdicts
        assert "the cancellation is asserted" not in prompt and "HOLE FOUND\n\n**If" not in prompt


def test_flawed_solution_stays_refuted_without_revisions(mock_gateway: MockGateway, data_dir: Path) -> None:
    problem, solution = _problem(data_dir, "flawed-bound")
    settings = PanelSettings(max_revisions=0, max_parallel=1)
    record = run_panel(problem, solution, mock_gateway.client, settings).to_dict()
    assert record["status"] == "refuted"
    assert record["rounds"][0]["vote"]["launched"] == 2 and record["calls"] == 2   # sequential: 3 calls saved


def test_unfixable_solution_abstains_with_what_was_proven(mock_gateway: MockGateway, data_dir: Path,
                                                          tmp_path: Path) -> None:
    problem, solution = _problem(data_dir, "unfixable")
    record = _save(run_panel(problem, solution, mock_gateway.client, PanelSettings()).to_dict(), tmp_path / "r.json")
    assert record["status"] == "abstained" and record["final_solution"] is None
    abstention = record["abstention"]
    assert abstention["verdict"] == "no confident solution" and abstention["declared_by"] == "reviser"
    assert "n/log²(2n)" in abstention["what_was_proven"]
    assert "Goldbach" in abstention["where_it_breaks"]
    assert "#4" in abstention["unresolved_holes"][0]
    assert [r["revision"] for r in record["rounds"]] == ["", "abstained"]


@pytest.mark.parametrize(("name", "status", "code"), [("odd-sum", "confirmed", 0), ("unfixable", "abstained", 1)])
def test_cli_panel_with_the_mock(data_dir: Path, tmp_path: Path, name: str, status: str, code: int) -> None:
    folder = data_dir / "panel"
    out = tmp_path / "record.json"
    done = CliRunner().invoke(app, ["verify", "panel", "--problem", str(folder / f"{name}.md"), "--solution",
                                    str(folder / f"{name}.solution.md"), "--mock-replies", str(folder / "replies.yaml"),
                                    "--tier", "medium", "-o", str(out)])
    assert done.exit_code == code, done.output
    assert json.loads(out.read_text())["status"] == status
    assert "MOCK MODEL" in done.output


def test_cli_panel_needs_a_gateway(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANCHORAGE_GATEWAY_URL", raising=False)
    folder = data_dir / "panel"
    done = CliRunner().invoke(app, ["verify", "panel", "--problem", str(folder / "odd-sum.md"), "--solution",
                                    str(folder / "odd-sum.solution.md")])
    assert done.exit_code != 0 and "no model gateway given" in str(done.exception)
