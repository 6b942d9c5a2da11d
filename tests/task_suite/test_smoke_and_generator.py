"""The smoke task's oracle and verifier run end to end; the generator reproduces tasks/ and keeps others' files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from anchorage.scoring import score_artifact
from anchorage.tasks import load_task

from .helpers import REPO, TASKS, read_json

SMOKE = TASKS / "smoke-inventory"


def run_smoke_oracle(results: Path) -> Path:
    env = {**os.environ, "ANCHORAGE_DATA_DIR": str(SMOKE / "environment" / "data"), "ANCHORAGE_RESULTS_DIR": str(results)}
    subprocess.run(["bash", str(SMOKE / "solution" / "solve.sh")], env=env, check=True, capture_output=True, timeout=30)
    return results / "smoke-inventory_result.json"


def test_smoke_oracle_reproduces_its_expected_result(tmp_path: Path) -> None:
    artifact = run_smoke_oracle(tmp_path)
    assert read_json(artifact) == read_json(SMOKE / "tests" / "expected_result.json")
    record = score_artifact(load_task(SMOKE), tmp_path).to_dict()
    assert record["o_eval"] == 1.0 and not record["hard_gate_failed"]
    assert len(record["gates"]) == 6 and all(g["status"] == "passed" for g in record["gates"])


def test_smoke_gates_reject_an_overfull_store_room(tmp_path: Path) -> None:
    data = read_json(SMOKE / "tests" / "expected_result.json")
    data["experiment_result"]["space_used_m3"] = 300.0
    artifact = tmp_path / "smoke-inventory_result.json"
    artifact.write_text(json.dumps(data), encoding="utf-8")
    record = score_artifact(load_task(SMOKE), artifact, profile="strict").to_dict()
    assert record["hard_gate_failed"] and record["o_eval"] == 0
    assert [g["name"] for g in record["gates"] if g["hard_error"]] == ["space_within_room_range"]


def test_smoke_answer_is_a_kkt_point(tmp_path: Path) -> None:
    """Independent check of the oracle: the capacity binds and each quantity satisfies its stationarity condition."""
    result = read_json(run_smoke_oracle(tmp_path))["experiment_result"]
    demand = read_json(SMOKE / "tests" / "expected_result.json")["annual_demand"]
    cost, order, space = {"A": 40, "B": 15, "C": 90}, {"A": 120, "B": 80, "C": 200}, {"A": 0.5, "B": 0.2, "C": 1.2}
    lam, q = result["space_multiplier"], result["order_quantities"]
    assert sum(space[p] * q[p] for p in q) == pytest.approx(250, abs=1e-4)
    for p in q:   # d/dQ [D K / Q + h c Q / 2 + lam s Q] = 0
        assert -demand[p] * order[p] / q[p] ** 2 + 0.22 * cost[p] / 2 + lam * space[p] == pytest.approx(0, abs=1e-4)


def test_smoke_verifier_script_writes_the_reward(tmp_path: Path) -> None:
    results, logs = tmp_path / "results", tmp_path / "logs"
    run_smoke_oracle(results)
    env = {**os.environ, "ANCHORAGE_RESULTS_DIR": str(results), "ANCHORAGE_VERIFIER_LOGS": str(logs),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", str(SMOKE / "tests" / "test.sh")], env=env, check=True, capture_output=True, timeout=120)
    reward = read_json(logs / "reward.json")
    assert reward["reward"] == 1.0
    assert read_json(logs / "score.json")["o_eval"] == 1.0


def test_verifier_works_with_only_the_tests_dir_as_in_harbor(tmp_path: Path) -> None:
    """Harbor uploads only tests/ (to /tests): test.sh must still score, gates included."""
    tests = tmp_path / "tests"
    shutil.copytree(SMOKE / "tests", tests)
    results, logs = tmp_path / "results", tmp_path / "logs"
    data = read_json(run_smoke_oracle(results))
    data["experiment_result"]["space_used_m3"] = 300.0   # violates a gate: proves invariants.yaml was found
    (results / "smoke-inventory_result.json").write_text(json.dumps(data), encoding="utf-8")
    env = {**os.environ, "ANCHORAGE_RESULTS_DIR": str(results), "ANCHORAGE_VERIFIER_LOGS": str(logs),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", str(tests / "test.sh")], env=env, check=True, capture_output=True, timeout=120)
    score = read_json(logs / "score.json")   # paper: a project gate is a reported warning
    assert score["profile"] == "paper" and not score["hard_gate_failed"]
    assert [g["name"] for g in score["gates"] if g["status"] == "failed"] == ["space_within_room_range"]
    env["ANCHORAGE_SCORING_PROFILE"] = "strict"
    subprocess.run(["bash", str(tests / "test.sh")], env=env, check=True, capture_output=True, timeout=120)
    score = read_json(logs / "score.json")
    assert score["profile"] == "strict" and score["hard_gate_failed"] and score["raw_before_gates"] == 1.0
    assert read_json(logs / "reward.json")["reward"] == 0.0


def generate(reference: Path, dest: Path, *slugs: str) -> str:
    args = [sys.executable, str(REPO / "tools" / "import_reference.py"), str(reference), "--dest", str(dest)]
    for slug in slugs:
        args += ["--only", slug]
    return subprocess.run(args, check=True, capture_output=True, text=True, timeout=120).stdout


GENERATED = ["instruction.md", "task.toml", "README.md", "environment/Dockerfile", "environment/data/output_schema.json",
             "tests/score_config.json", "tests/expected_result.json", "tests/test.sh", "tests/scoring_table.md",
             "solution/README.md"]


@pytest.mark.parametrize("slug", ["mcm-2024-a-lamprey", "mcm-2025-c-olympic-medals"])
def test_generator_output_equals_the_committed_task(slug: str, reference_dir: Path, tmp_path: Path) -> None:
    generate(reference_dir, tmp_path, slug)
    reproduced = (TASKS / slug / "solution" / "solve.sh").is_file()
    for rel in GENERATED:
        if rel == "solution/README.md" and reproduced:
            continue  # a reproduction's README is written by its owner; the generator only seeds a missing one
        assert (tmp_path / slug / rel).read_bytes() == (TASKS / slug / rel).read_bytes(), rel


def test_generator_keeps_foreign_files_and_a_reproduction_s_anchors(reference_dir: Path, tmp_path: Path) -> None:
    slug = "cumcm-2024-a-dragon-dance"
    generate(reference_dir, tmp_path, slug)
    task = tmp_path / slug
    (task / "tests" / "invariants.yaml").write_text("namespace: Mine\ninvariants: []\n", encoding="utf-8")
    (task / "tests" / "profiles.yaml").write_text("anchors: {paper: {source: corrected, evidence: mine}}\n")
    (task / "solution" / "solve.sh").write_text("#!/bin/sh\necho mine\n", encoding="utf-8")
    expected = read_json(task / "tests" / "expected_result.json")
    expected["experiment_result"]["q5"]["max_head_speed_mps"] = 1.25
    (task / "tests" / "expected_result.json").write_text(json.dumps(expected), encoding="utf-8")
    generate(reference_dir, tmp_path, slug)
    assert (task / "tests" / "invariants.yaml").read_text(encoding="utf-8") == "namespace: Mine\ninvariants: []\n"
    assert "evidence: mine" in (task / "tests" / "profiles.yaml").read_text(encoding="utf-8")
    assert (task / "solution" / "solve.sh").read_text(encoding="utf-8") == "#!/bin/sh\necho mine\n"
    config = read_json(task / "tests" / "score_config.json")
    speed = next(m for m in config["metrics"] if m["path"].endswith("max_head_speed_mps"))
    assert speed["oracle_value"] == 1.25   # a reproduced task's committed expected result wins


def test_generator_writes_the_published_anchor_of_a_published_task(reference_dir: Path, tmp_path: Path) -> None:
    """crop planting: paper scores the published anchor; the reproduction's values live in the erratum only."""
    slug = "cumcm-2024-c-crop-planting"
    generate(reference_dir, tmp_path, slug)
    ours = read_json(tmp_path / slug / "tests" / "expected_result.json")["experiment_result"]["q1"]
    assert (ours["waste_profit_yuan"], ours["discount_profit_yuan"]) == (40418876.72, 58718967.38)


def test_generator_rejects_a_wrong_reference_path(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(REPO / "tools" / "import_reference.py"), str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "not the reference data pack" in result.stderr
