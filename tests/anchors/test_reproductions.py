"""Every runnable reproduction (``tasks/*/solution/solve.sh``) through ``anchorage oracle``, and its comparison.

For each task with a reproduction: ``anchorage oracle`` succeeds in the sandbox within the task's limits
and leaves nothing but its artifact; the artifact equals the committed ``solution/reproduced_result.json``
(numbers to 1e-6 relative; the ``volatile`` paths a comparison declares, such as CPU timings, are not
compared); ``solution/comparison.json`` carries the figures the scorer computes now, a verdict that follows
from them and, for a disagreement, its explanation; the anchor table of ``tasks/README.md`` is current.

The oracle runs are slow (seconds to minutes each) and marked ``slow``; each run is cached under
``${ANCHORAGE_CACHE:-~/.cache/anchorage}/oracle/<task>-<key>/`` where the key hashes the solution's code,
the task's data, the scorer version and the library versions — so CI runs a reproduction once per change
to any of them, and the comparison checks (cheap) run every time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from anchorage.scoring.reproduction import COMPUTED_KEYS, check_disagreement, compare
from anchorage.tasks.profiles import load_profiles

from .reproduction import close_enough, oracle_run, value_at

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
SLUGS = sorted(p.parent.parent.name for p in TASKS.glob("*/solution/solve.sh"))
ORACLE_TIMEOUT = 3600
"""Per test, for a cache miss on a loaded machine: a reproduction may take up to 10 minutes on two idle cores."""


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def task_toml(slug: str) -> dict[str, Any]:
    return tomllib.loads((TASKS / slug / "task.toml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module", params=SLUGS)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    slug: str = request.param
    return slug, oracle_run(TASKS / slug, tmp_path_factory.mktemp(slug))


@pytest.mark.slow
@pytest.mark.timeout(ORACLE_TIMEOUT)
def test_oracle_succeeds_in_the_sandbox_within_the_task_limits(run: tuple[str, dict[str, Any]]) -> None:
    slug, result = run
    record = result["record"]
    assert result["exit_code"] == 0 and record["phase"] == "Succeeded", (record.get("reason"), result["stdout"])
    assert record["agent"]["kind"] == "oracle" and "runnable reproduction" in record["agent"]["label"]
    environment, agent = task_toml(slug)["environment"], task_toml(slug)["agent"]
    limits = record["sandbox"]["limits"]
    assert record["sandbox"]["mechanism"] in ("bwrap", "unshare")
    assert limits["cpus"] == environment["cpus"] and limits["memory_mb"] == environment["memory_mb"]
    assert limits["timeout_sec"] == agent["timeout_sec"]
    assert record["durations"]["agent_sec"] < agent["timeout_sec"]
    assert record["score"]["gradable"] is True


@pytest.mark.slow
@pytest.mark.timeout(ORACLE_TIMEOUT)
def test_oracle_writes_nothing_but_its_artifact(run: tuple[str, dict[str, Any]]) -> None:
    """Only the artifact (and the result templates the statement asks for, listed as ``supplementary``)."""
    slug, result = run
    declared = read_json(TASKS / slug / "solution" / "comparison.json").get("supplementary", [])
    assert result["outputs"] == sorted([f"{slug}_result.json", *declared])
    assert result["solution_unchanged"], "the run changed files of solution/ (bound read-only: it must not)"


@pytest.mark.slow
@pytest.mark.timeout(ORACLE_TIMEOUT)
def test_artifact_equals_the_committed_reproduced_result(run: tuple[str, dict[str, Any]]) -> None:
    slug, result = run
    solution = TASKS / slug / "solution"
    assert (solution / "reproduced_result.json").is_file(), \
        f"commit the run's artifact: .venv/bin/python tools/anchor_table.py --run {slug}"
    volatile = frozenset("$." + p for p in read_json(solution / "comparison.json").get("volatile", []))
    differences = close_enough(result["artifact"], read_json(solution / "reproduced_result.json"), volatile=volatile)
    assert not differences, f"{slug}: the run differs from solution/reproduced_result.json: {differences[:10]}"


@pytest.mark.parametrize("slug", SLUGS)
def test_comparison_holds_the_figures_the_scorer_computes_now(slug: str) -> None:
    solution = TASKS / slug / "solution"
    hint = f"run: .venv/bin/python tools/anchor_table.py --compare {slug}"
    assert (solution / "comparison.json").is_file(), hint
    committed = read_json(solution / "comparison.json")
    reproduced = read_json(solution / "reproduced_result.json")
    now = compare(str(TASKS / slug), reproduced).to_dict()
    assert {key: committed.get(key) for key in COMPUTED_KEYS} == {key: now[key] for key in COMPUTED_KEYS}, hint
    for metric in committed["metrics"]:
        if metric["reproduced"] is not None:
            assert metric["reproduced"] == pytest.approx(float(value_at(reproduced, metric["path"])), rel=1e-12)
    assert not check_disagreement(committed)
    assert committed["run_time_sec"] is not None and committed["run_time_sec"] > 0


@pytest.mark.parametrize("slug", SLUGS)
def test_comparison_is_against_the_committed_anchor(slug: str) -> None:
    """A reproduction never replaces the anchor: each compared value is the one of tests/expected_result.json."""
    expected = read_json(TASKS / slug / "tests" / "expected_result.json")
    for metric in read_json(TASKS / slug / "solution" / "comparison.json")["metrics"]:
        assert metric["anchor"] == pytest.approx(float(value_at(expected, metric["path"])), rel=1e-12), metric["path"]


@pytest.mark.parametrize("slug", SLUGS)
def test_an_erratum_is_declared_with_the_figures_of_the_committed_reproduction(slug: str) -> None:
    """A disagreement of kind erratum is an ``errata`` anchor in tests/profiles.yaml (the published anchor stays
    the ``paper`` one); an erratum built on this reproduction quotes its committed figures, not older ones."""
    solution = TASKS / slug / "solution"
    comparison = read_json(solution / "comparison.json")
    errata = load_profiles(TASKS / slug).anchors.errata
    if comparison.get("disagreement", {}).get("kind") == "erratum":
        assert errata, f"{slug}: comparison.json declares an erratum, tests/profiles.yaml has no anchors.errata"
    reproduced = read_json(solution / "reproduced_result.json")
    anchors = {m["path"]: m["anchor"] for m in comparison["metrics"]}
    for erratum in errata:
        if (TASKS / slug / erratum.result).resolve() != (solution / "reproduced_result.json").resolve():
            continue
        for metric in erratum.metrics:
            assert metric.value == pytest.approx(float(value_at(reproduced, metric.path)), rel=1e-6, abs=1e-6), \
                (slug, erratum.id, metric.path)
            assert metric.published == pytest.approx(anchors[metric.path], rel=1e-12), (slug, erratum.id, metric.path)


@pytest.mark.parametrize("slug", SLUGS)
def test_no_reproduction_names_the_answer_key(slug: str) -> None:
    """The code of solution/ names neither tests/ nor the anchor's files (the sandbox does not mount them either:
    ``test_oracle_sandbox.py``); a docstring may point at the project's own tests/anchors/."""
    code = [p for p in sorted((TASKS / slug / "solution").rglob("*")) if p.suffix in (".py", ".sh")]
    assert code, slug
    for path in code:
        text = path.read_text(encoding="utf-8").replace("tests/anchors/", "")
        for name in ("tests/", "expected_result", "score_config", "profiles.yaml"):
            assert name not in text, f"{path.relative_to(TASKS)} names {name}"


def test_the_anchor_marker_follows_the_solution() -> None:
    for task in sorted(p for p in TASKS.iterdir() if (p / "task.toml").is_file()):
        marker = task_toml(task.name).get("metadata", {}).get("anchor")
        runnable = (task / "solution" / "solve.sh").is_file()
        assert marker == ("reproduced" if runnable else "imported"), (task.name, marker, runnable)


def test_anchor_table_is_current() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "anchor_table.py"), "--check"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
