"""anchorage score: a bad baseline (F outside [0, 1], F not below the anchor panel's O) and an artifact of another
task are bad input — exit 2 with what, where and the fix — never a score or the model's failure."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO, anchorage_cli

SMOKE = REPO / "tasks" / "smoke-inventory" / "tests" / "expected_result.json"
CROP = REPO / "tasks" / "cumcm-2024-c-crop-planting" / "tests" / "expected_result.json"


def test_a_baseline_outside_zero_one_is_bad_input() -> None:
    for value in ("5", "-7", "nan"):
        done = anchorage_cli("score", "--task", "smoke-inventory", str(SMOKE), "--baseline", value)
        assert done.returncode == 2, (value, done.stdout, done.stderr)
        assert f"--baseline {value}" in done.stderr and "from 0 to 1" in done.stderr and "fix:" in done.stderr


def test_a_baseline_not_below_the_anchor_is_bad_input() -> None:
    done = anchorage_cli("score", "--task", "smoke-inventory", str(SMOKE), "--baseline", "1")
    assert done.returncode == 2 and "is not below the anchor panel's O" in done.stderr
    fine = anchorage_cli("score", "--task", "smoke-inventory", str(SMOKE), "--baseline", "0.3")
    assert fine.returncode == 0, fine.stderr


def test_an_artifact_of_another_task_is_bad_input(tmp_path: Path) -> None:
    named = tmp_path / "cumcm-2024-c-crop-planting_result.json"
    named.write_bytes(CROP.read_bytes())
    done = anchorage_cli("score", "--task", "smoke-inventory", str(named))
    assert done.returncode == 2 and "an artifact of task 'cumcm-2024-c-crop-planting'" in done.stderr
    assert "score it with --task cumcm-2024-c-crop-planting" in done.stderr
    folder = anchorage_cli("score", "--task", "smoke-inventory", str(tmp_path))
    assert folder.returncode == 2 and "holds the result of task 'cumcm-2024-c-crop-planting'" in folder.stderr
    own = tmp_path / "smoke-inventory_result.json"
    own.write_bytes(SMOKE.read_bytes())
    scored = anchorage_cli("score", "--task", "smoke-inventory", str(tmp_path))    # its own file is there too
    assert scored.returncode == 0, scored.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = anchorage_cli("score", "--task", "smoke-inventory", str(empty))
    assert missing.returncode == 1                                     # no artifact at all: the model's failure


def test_help_keeps_the_extras_name() -> None:
    """Rich took "[inspect]" for markup and printed pip install 'anchorage'."""
    done = anchorage_cli("export", "inspect", "--help")
    assert done.returncode == 0 and "anchorage[inspect]" in done.stdout


def test_no_negative_zero_is_ever_printed() -> None:
    from anchorage.report.pages import num
    from anchorage.report.tables import fixed

    assert fixed(-5.2e-18) == "0.0000" and fixed(-5.2e-18, sign=True) == "+0.0000" and fixed(-0.00004) == "0.0000"
    assert fixed(-0.00005) == "-0.0001" and fixed(None) == "—" and num(-1e-17, sign=True) == "+0.0000"
