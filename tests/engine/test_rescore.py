"""A campaign scored under two profiles from the same artifacts, without rerunning any agent.

The campaign runs once on the local engine under ``paper`` (the default); ``anchorage rescore RUN --profile
strict`` rescores its artifacts into ``RUN/profiles/strict/``. The dragon answer at the paper's integer-second
values is a scored miss under ``paper`` and a hard-gated zero under ``strict``; the anchor scores 1.0 under
both; the original run folder is left as it was, and ``anchorage report`` labels every table with its profile.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchorage.campaigns.documents import load_documents
from anchorage.cli import app
from anchorage.manifests import VerificationCampaign
from anchorage.runtime.local import sandbox
from anchorage.runtime.local.engine import run_campaign
from anchorage.runtime.local.trials import LocalRuntime
from engine.conftest import campaign_yaml

pytestmark = pytest.mark.sandbox
REPO = Path(__file__).resolve().parents[2]
DRAGON = "cumcm-2024-a-dragon-dance"


def test_two_profiles_two_boards_one_run(mechanism: sandbox.Mechanism, write_manifest, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    answer = json.loads((REPO / "tasks" / DRAGON / "tests" / "expected_result.json").read_text())
    answer["experiment_result"]["q5"].update(max_head_speed_mps=1.406276, max_speed_ratio_when_head_1mps=1.422195)
    paper_values = tmp_path / "paper-values.json"
    paper_values.write_text(json.dumps(answer))
    entries = f"""\
    - name: anchor
      agent: {{kind: replay, artifact: "{REPO}/tasks/{{task}}/tests/expected_result.json"}}
    - name: integer-seconds
      agent: {{kind: replay, artifact: "{paper_values}"}}"""
    path = write_manifest(campaign_yaml("two-profiles", entries, tasks=f"[{DRAGON}]"))
    campaign = load_documents(path)[0].resource
    assert isinstance(campaign, VerificationCampaign) and campaign.spec.scoring.profile == "paper"
    runs = tmp_path / "runs"
    outcome = run_campaign(campaign, runs, LocalRuntime(mechanism=mechanism, base_dir=path.parent))
    run_dir = runs / "two-profiles"
    paper = {row.entry: row for row in outcome.board.rows}
    assert outcome.board.profile == "paper@1"
    assert paper["anchor"].o_eval_mean == 1.0
    assert paper["integer-seconds"].o_eval_mean == pytest.approx(0.4982, abs=1e-4)   # a scored miss, no penalty
    before = {p: p.read_bytes() for p in run_dir.rglob("*.json")}

    result = CliRunner().invoke(app, ["rescore", str(run_dir), "--profile", "strict", "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "scoring profile strict@1" in result.stdout
    strict_dir = run_dir / "profiles" / "strict"
    board = json.loads((strict_dir / "leaderboard.json").read_text())
    rows = {row["entry"]: row for row in board["rows"]}
    assert board["profile"] == "strict@1"
    assert rows["anchor"]["o_eval_mean"] == 1.0 and rows["integer-seconds"]["o_eval_mean"] == 0.0
    assert rows["integer-seconds"]["bo_eval_mean"] == -1.0
    trial = next(p for p in strict_dir.glob("*/score.json") if "integer" in p.parent.name)
    assert "dragon_q5_handle_limit" in json.loads(trial.read_text())["penalty"]
    assert {p: p.read_bytes() for p in run_dir.rglob("*.json") if strict_dir not in p.parents} == before

    markdown = (strict_dir / "leaderboard.md").read_text()
    assert markdown.startswith("# Leaderboard — scoring profile strict@1")
    assert markdown.count("profile strict@1") >= 3              # the board and both per-task tables
    assert "strict@1" in (strict_dir / "leaderboard.csv").read_text().splitlines()[1]
    report = CliRunner().invoke(app, ["report", str(run_dir)])
    assert report.exit_code == 0, report.output
    assert "scoring profile: paper@1" in report.stdout
    html = (run_dir / "report.html").read_text()
    assert html.count("profile paper@1") >= 4                   # every table of the report names the profile
