"""``score_artifact(..., lean=True)`` (``verification.lean``, ``anchorage score --lean``) fills the
record's ``obligations{}`` from the Lean obligation layer, consistently with the gates: the same
exact data, the same hard failures, and a record that says which checker ran."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.lean.lake_on_path import install_fake_lake
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.invariants.exact import load_exact
from anchorage.lean.discrimination import MUTATIONS, set_leaf
from anchorage.scoring import score_artifact

from .conftest import TaskFactory

TASKS = Path(__file__).resolve().parents[2] / "tasks"
DRAGON = "cumcm-2024-a-dragon-dance"
DRAGON_ANCHOR = TASKS / DRAGON / "tests" / "expected_result.json"
IDENTITY_MUTATION = next(m for m in MUTATIONS if m.form == "identity")
METRICS = [{"path": "x", "oracle_value": 1.0, "direction": "lower_is_better"}]
INVARIANTS = "namespace: T\ninvariants:\n  - {name: x_le_one, form: range, path: x, hi: 1}\n" \
             "  - {name: y_pos, form: sign, path: y, op: \">\", severity: warning}\n"


@pytest.fixture
def dragon_anchor() -> Path:
    if not DRAGON_ANCHOR.is_file():
        pytest.skip(f"dragon anchor missing: {DRAGON_ANCHOR}")
    return DRAGON_ANCHOR


@pytest.fixture
def no_lake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


def _mutant(path: Path) -> Path:
    """The dragon anchor with the discrimination suite's identity mutation, Decimals written as numbers."""
    mutated, _ = set_leaf(load_exact(DRAGON_ANCHOR), IDENTITY_MUTATION.path, IDENTITY_MUTATION.number)
    text = json.dumps(mutated, default=lambda d: "__D" + str(d) + "D__").replace('"__D', "").replace('D__"', "")
    path.write_text(text, encoding="utf-8")
    return path


def test_anchor_records_every_obligation_proved(dragon_anchor: Path, no_lake: None) -> None:
    record = score_artifact(TASKS / DRAGON, dragon_anchor, lean=True)
    ob = record.to_dict()["obligations"]
    assert ob["total"] == ob["proved"] == ob["proved_by_python"] > 0
    assert (ob["failed"], ob["missing"], ob["unconfirmed"], ob["failed_hard"]) == (0, 0, 0, [])
    assert ob["checker"] == "python" and ob["lean"]["requested"] and not ob["lean"]["ran"]
    assert "lake not on PATH" in ob["lean"]["reason"]
    assert ob["gates_applied"] and ob["agrees_with_gates"] and not record.hard_gate_failed
    invariant_gates = [g for g in record.gates if g.form != "replay"]
    assert len(invariant_gates) == ob["total"]


def test_without_lean_the_record_has_no_obligations(dragon_anchor: Path) -> None:
    assert score_artifact(TASKS / DRAGON, dragon_anchor).obligations == {}


def test_failed_hard_obligations_are_the_hard_gates(tmp_path: Path, dragon_anchor: Path, no_lake: None) -> None:
    record = score_artifact(TASKS / DRAGON, _mutant(tmp_path / "mutant.json"), lean=True, profile="strict")
    ob = record.obligations
    hard_invariants = sorted(g.name for g in record.gates if g.hard_error and g.form != "replay")
    assert "q5_head_ratio_identity" in ob["failed_hard"]
    assert sorted(ob["failed_hard"]) == hard_invariants and ob["agrees_with_gates"]
    assert record.hard_gate_failed and record.bo_eval == -1.0 and "q5_head_ratio_identity" in record.penalty
    assert ob["failed"] >= len(ob["failed_hard"]) and ob["proved"] == ob["total"] - ob["failed"] - ob["missing"]


def test_gates_off_says_nothing_was_penalised(tmp_path: Path, dragon_anchor: Path, no_lake: None) -> None:
    record = score_artifact(TASKS / DRAGON, _mutant(tmp_path / "mutant.json"), lean=True, gates=False)
    assert record.obligations["failed_hard"] and not record.obligations["gates_applied"]
    assert "agrees_with_gates" not in record.obligations and not record.hard_gate_failed and record.gates == []


def test_the_scorer_hands_exact_decimals_to_gates_and_obligations(
        make_task: TaskFactory, write_json: Callable[..., Path], no_lake: None) -> None:
    """1.0000000000000000001 reads as the float 1.0 (the metric is scored with it) but exceeds 1 exactly."""
    root = make_task(METRICS, {"x": 1.0, "y": 1}, invariants=INVARIANTS)
    record = score_artifact(root, write_json('{"x": 1.0000000000000000001, "y": 0.5}'), lean=True, profile="strict")
    assert record.metrics[0].number == 1.0 and record.raw_before_gates == 1.0
    gate = {g.name: g for g in record.gates}["x_le_one_range"]
    assert gate.hard_error and gate.values == {"x": "1.0000000000000000001"}
    assert record.hard_gate_failed and record.obligations["failed_hard"] == ["x_le_one_range"]
    assert record.obligations["agrees_with_gates"] and record.obligations["proved"] == 1
    on_bound = score_artifact(root, write_json('{"x": 1.0000000000000000000, "y": 0.5}'), lean=True, profile="strict")
    assert not on_bound.hard_gate_failed and on_bound.obligations["failed"] == 0


def test_ungradable_artifact_lists_obligations_as_missing(make_task: TaskFactory, write_json: Callable[..., Path],
                                                         no_lake: None) -> None:
    root = make_task(METRICS, {"x": 1.0, "y": 1}, invariants=INVARIANTS)
    record = score_artifact(root, write_json("{not json"), lean=True)
    ob = record.obligations
    assert not record.gradable and ob["total"] == ob["missing"] == 2 and "ungradable" in ob["note"]


def test_task_without_invariants(make_task: TaskFactory, write_json: Callable[..., Path]) -> None:
    root = make_task(METRICS, {"x": 1.0})
    ob = score_artifact(root, write_json({"x": 0.5}), lean=True).obligations
    assert ob["total"] == 0 and "no tests/invariants.yaml" in ob["note"]


FAKE_LAKE = f"""#!{sys.executable}
# FAKE lake for this test (not Lean): `lake build` succeeds.
import sys
sys.exit(0 if sys.argv[1:2] == ["build"] else 2)
"""


def test_with_lake_on_path_the_checker_is_python_plus_lean(tmp_path: Path, dragon_anchor: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_lake(monkeypatch, tmp_path / "bin", FAKE_LAKE)
    ob = score_artifact(TASKS / DRAGON, dragon_anchor, lean=True).obligations
    assert ob["checker"] == "python+lean" and ob["lean"]["ran"] and ob["lean"]["ok"]
    assert ob["proved_by_lean"] == ob["proved"] == ob["total"] > 0 and ob["disagreements"] == 0


def test_cli_lean_flag(dragon_anchor: Path, no_lake: None) -> None:
    result = CliRunner().invoke(app, ["score", "--task", str(TASKS / DRAGON), str(dragon_anchor), "--json", "--lean"])
    assert result.exit_code == 0, result.output
    ob = json.loads(result.output)["obligations"]
    assert ob["checker"] == "python" and ob["total"] == ob["proved"] > 0
    plain = CliRunner().invoke(app, ["score", "--task", str(TASKS / DRAGON), str(dragon_anchor), "--json"])
    assert json.loads(plain.output)["obligations"] == {}


def test_campaign_with_verification_lean_records_obligations_in_score_json(tmp_path: Path, repo_root: Path) -> None:
    """Engine level: ``verification: {lean: true}`` reaches the scorer; each trial's score.json has the counts."""
    from anchorage.campaigns.documents import load_documents
    from anchorage.errors import InfrastructureError
    from anchorage.manifests import VerificationCampaign
    from anchorage.runtime.local import sandbox
    from anchorage.runtime.local.engine import run_campaign
    from anchorage.runtime.local.trials import LocalRuntime

    try:
        mechanism = sandbox.detect_mechanism()
    except InfrastructureError as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")
    artifact = repo_root / "tasks" / "{task}" / "tests" / "expected_result.json"
    manifest = tmp_path / "campaign.yaml"
    manifest.write_text(f"""\
apiVersion: anchorage.dev/v1alpha1
kind: VerificationCampaign
metadata: {{name: lean-on}}
spec:
  tasks: [smoke-inventory]
  verification: {{lean: true}}
  entries:
    - name: replay
      agent: {{kind: replay, artifact: "{artifact}"}}
""", encoding="utf-8")
    campaign = load_documents(manifest)[0].resource
    assert isinstance(campaign, VerificationCampaign) and campaign.spec.verification.lean
    run_campaign(campaign, tmp_path / "runs", LocalRuntime(mechanism=mechanism, base_dir=tmp_path))
    scores = list((tmp_path / "runs" / "lean-on").glob("*/score.json"))
    assert len(scores) == 1
    ob = json.loads(scores[0].read_text(encoding="utf-8"))["obligations"]
    assert ob["total"] == ob["proved_by_python"] > 0 and ob["failed"] == 0 and ob["agrees_with_gates"]
    assert ob["checker"] in ("python", "python+lean") and ob["lean"]["requested"]
