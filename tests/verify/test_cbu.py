"""Consequence-based utility: averaged over rollouts then neighbours; through the gateway into ranking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.errors import InputError
from anchorage.verify.cbu import Neighbour, utility
from anchorage.verify.prompts import Problem
from anchorage.verify.settings import CbuSettings

from .fakes import ScriptedClient, fail

TARGET = Problem("telescope", "Compute Σ_{k=1}^{n} 1/(k(k+1)).")
NEIGHBOURS = [Neighbour(Problem("nb1", "Compute Σ_{k=1}^{10} 1/(k(k+1))."), "10/11"),
              Neighbour(Problem("nb2", "Compute Σ_{k=1}^{3} 1/(k(k+2))."), "7/12")]
GOOD = "**Method**: partial fractions, telescoping.\n**Proof**: 1/(k(k+1)) = 1/k − 1/(k+1).\n**Answer**: 1 − 1/(n+1)"
BAD = "**Method**: guess.\n**Proof**: looks like 1.\n**Answer**: 1"


def test_utility_averages_rollouts_then_neighbours() -> None:
    def script(user: str, seed: int) -> str:
        if "neighbour=nb1" in user:        # nb1 solved in 3 of 4 rollouts
            return "**Answer**: 10/11" if seed < 3 else "**Answer**: 1"
        return "**Answer**: 0.58333333" if seed == 0 else "**Answer**: 1/2"    # nb2: 1 of 4 (by value)

    result = utility(TARGET, GOOD, NEIGHBOURS, ScriptedClient(script), CbuSettings(rollouts=4))
    assert [n["accuracy"] for n in result["neighbours"]] == [0.75, 0.25]
    assert result["utility"] == pytest.approx(0.5)


def test_failed_calls_are_left_out_and_counted() -> None:
    client = ScriptedClient(lambda user, seed: fail() if seed == 1 else "**Answer**: 10/11")
    result = utility(TARGET, GOOD, NEIGHBOURS[:1], client, CbuSettings(rollouts=3))
    assert result["neighbours"][0] == {"neighbour": "nb1", "accuracy": 1.0, "rollouts": 3, "failed_calls": 1}
    with pytest.raises(InputError, match="no neighbour"):
        utility(TARGET, GOOD, [], client)


def test_exemplar_is_cleaned_and_shown_with_the_neighbour() -> None:
    client = ScriptedClient(lambda user, seed: "**Answer**: 1")
    utility(TARGET, "<think>secret scratch</think>\n" + GOOD, NEIGHBOURS[:1], client, CbuSettings(rollouts=1))
    prompt = client.calls[0][0]
    assert "secret scratch" not in prompt and "1/k − 1/(k+1)" in prompt and "Σ_{k=1}^{10}" in prompt


def test_cli_cbu_through_the_gateway_feeds_rank(tmp_path: Path) -> None:
    # The labelled mock solves the neighbour only when the exemplar carries the telescoping idea.
    (tmp_path / "replies.yaml").write_text(
        "replies:\n"
        "  - {marker: 'partial fractions, telescoping', reply: '**Answer**: 10/11'}\n"
        "  - {marker: 'role=cbu-solver', reply: '**Answer**: 1'}\n")
    (tmp_path / "telescope.md").write_text(TARGET.statement)
    (tmp_path / "good.md").write_text(GOOD)
    (tmp_path / "bad.md").write_text(BAD)
    (tmp_path / "nb.json").write_text(json.dumps([{"id": "nb1", "problem": NEIGHBOURS[0].problem.statement,
                                                   "answer": "10/11"}]))
    out = tmp_path / "scores.json"
    done = CliRunner().invoke(app, ["verify", "cbu", "--problem", str(tmp_path / "telescope.md"), "--candidate",
                                    str(tmp_path / "good.md"), "--candidate", str(tmp_path / "bad.md"), "--neighbours",
                                    str(tmp_path / "nb.json"), "--rollouts", "2", "--mock-replies",
                                    str(tmp_path / "replies.yaml"), "-o", str(out)])
    assert done.exit_code == 0, done.output
    assert json.loads(out.read_text())["scores"] == {"telescope": {"good": 1.0, "bad": 0.0}}
    (tmp_path / "labels.json").write_text(json.dumps({"telescope": {"good": True, "bad": False}}))
    ranked = CliRunner().invoke(app, ["verify", "rank", "--scores", str(out), "--labels", str(tmp_path / "labels.json"),
                                      "--json"])
    assert json.loads(ranked.output)["metrics"]["auc"]["value"] == 1.0
