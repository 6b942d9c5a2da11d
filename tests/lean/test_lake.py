"""Lean itself: the Feasibility library and generated packages build with `lake` (skipped without it),
and build errors map back to theorems and JSON paths (parser tested on a hand-written SAMPLE)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from anchorage.invariants.exact import loads_exact
from anchorage.lean.generation import generate_package
from anchorage.lean.runner import build, lake_path, parse_build_errors
from invariants.anchors import TASKS, anchor, anchor_path

SLUG = "cumcm-2024-a-dragon-dance"


def _require_lake() -> None:
    if lake_path() is None:
        pytest.skip("lake not on PATH: Lean build not run; the Python exact checker ran")


def test_build_errors_map_to_theorems_and_paths(tmp_path: Path) -> None:
    package = generate_package(TASKS / SLUG, anchor(SLUG), tmp_path / "pkg")
    identity = next(t for t in package.theorems if t.obligation.name == "q5_head_ratio_identity")
    # SAMPLE lake output in Lean 4's `file:line:col: error: message` shape (hand-written).
    sample = (f"✖ [2/3] Building Obligations.DragonDance\n"
              f"error: ././././Obligations/DragonDance.lean:{identity.last_line}:4: decide failed: "
              f"proposition is false\nerror: build failed\n")
    (error,) = parse_build_errors(sample, package)
    assert error.theorem == "DragonDance.q5_head_ratio_identity"
    assert error.paths == ("experiment_result.q5.max_head_speed_mps", "experiment_result.q5.max_speed_ratio_when_head_1mps")


@pytest.mark.lean
def test_feasibility_library_builds(repo_root: Path) -> None:
    _require_lake()
    lake = lake_path()
    assert lake is not None
    proc = subprocess.run([lake, "build"], cwd=repo_root / "lean", capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.lean
def test_anchor_package_builds_and_mutant_fails(tmp_path: Path) -> None:
    _require_lake()
    if not anchor_path(SLUG).is_file():
        pytest.skip("dragon anchor missing")
    ok = build(generate_package(TASKS / SLUG, anchor(SLUG), tmp_path / "ok"))
    assert ok.ran and ok.ok, ok.output
    data = anchor(SLUG)
    data["experiment_result"]["q5"]["max_head_speed_mps"] = loads_exact("1.406276")
    bad = build(generate_package(TASKS / SLUG, data, tmp_path / "bad"))
    assert not bad.ok and bad.failed_theorems() == {"DragonDance.q5_head_ratio_identity"}
    shutil.rmtree(tmp_path / "bad", ignore_errors=True)
