"""Every runnable reproduction (``tasks/*/solution/solve.sh``) through ``anchorage oracle``, and its comparison.

For each task with a reproduction: ``anchorage oracle`` succeeds in the sandbox within the task's limits
and leaves nothing but its artifact; the artifact equals the committed ``solution/reproduced_result.json``
within the numerical tolerances ``solution/comparison.json`` declares per field (1e-6 relative for every
field it does not list; the ``volatile`` paths, such as CPU timings, are not compared —
``anchorage.scoring.rerun``); no value inside those tolerances changes what the scorer decides (a machine
whose last digits differ can never flip a score); ``solution/comparison.json`` carries the figures the
scorer computes now, a verdict that follows from them and, for a disagreement, its explanation; the anchor
table of ``tasks/README.md`` is current.

The oracle runs are slow (seconds to minutes each) and marked ``slow``; each run is cached under
``${ANCHORAGE_CACHE:-~/.cache/anchorage}/oracle/<task>-<key>/`` where the key hashes the solution's code,
the task's data, the scorer version, the library versions and the processor — so CI runs a reproduction once
per change to any of them, and the comparison checks (cheap) run every time.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from anchorage.scoring.reproduction import COMPUTED_KEYS, check_disagreement, compare, outcome, scorer_reads
from anchorage.scoring.rerun import RunTolerances, Tolerance, band_flips, declared
from anchorage.tasks.profiles import load_profiles

from .reproduction import oracle_run, run_reproduction, value_at

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
SLUGS = sorted(p.parent.parent.name for p in TASKS.glob("*/solution/solve.sh"))
ORACLE_TIMEOUT = 3600
"""Per test, for a cache miss on a loaded machine: a reproduction may take up to 10 minutes on two idle cores."""


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def tolerances(slug: str) -> RunTolerances:
    """The run tolerances ``solution/comparison.json`` declares, validated against the committed result."""
    solution = TASKS / slug / "solution"
    return declared(read_json(solution / "comparison.json"), read_json(solution / "reproduced_result.json"),
                    f"tasks/{slug}/solution/comparison.json")


def task_toml(slug: str) -> dict[str, Any]:
    return tomllib.loads((TASKS / slug / "task.toml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module", params=SLUGS)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    slug: str = request.param
    return slug, oracle_run(TASKS / slug, tmp_path_factory.mktemp(slug))


@pytest.mark.slow   # a cache miss runs every reproduction in the sandbox: 1 s to 10 min each
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


@pytest.mark.slow   # shares the sandboxed runs of the test above
@pytest.mark.timeout(ORACLE_TIMEOUT)
def test_oracle_writes_nothing_but_its_artifact(run: tuple[str, dict[str, Any]]) -> None:
    """Only the artifact (and the result templates the statement asks for, listed as ``supplementary``)."""
    slug, result = run
    declared = read_json(TASKS / slug / "solution" / "comparison.json").get("supplementary", [])
    assert result["outputs"] == sorted([f"{slug}_result.json", *declared])
    assert result["solution_unchanged"], "the run changed files of solution/ (bound read-only: it must not)"


@pytest.mark.slow   # shares the sandboxed runs of the test above
@pytest.mark.timeout(ORACLE_TIMEOUT)
def test_artifact_equals_the_committed_reproduced_result(run: tuple[str, dict[str, Any]]) -> None:
    """Within the declared tolerances: this machine's BLAS kernels and optimisers may move the last digits."""
    slug, result = run
    solution = TASKS / slug / "solution"
    assert (solution / "reproduced_result.json").is_file(), \
        f"commit the run's artifact: .venv/bin/python tools/anchor_table.py --run {slug}"
    differences = tolerances(slug).differences(result["artifact"], read_json(solution / "reproduced_result.json"))
    assert not differences, (f"{slug}: the run differs from solution/reproduced_result.json beyond the tolerances "
                             f"of solution/comparison.json: {[str(d) for d in differences[:10]]}")


@pytest.mark.parametrize("slug", SLUGS)
def test_no_value_within_the_declared_tolerances_changes_what_is_scored(slug: str) -> None:
    """What is scored lands on the same side of every anchor and gate on any machine: across the declared
    band of every number the scorer reads (panel metrics and toleranced gate inputs), the scorer's verdict
    under every profile — gradable, metric status, within the anchor's tolerance or beyond it, gate status,
    the comparison's verdict — is the committed result's."""
    committed = read_json(TASKS / slug / "solution" / "reproduced_result.json")
    task = str(TASKS / slug)
    flips = band_flips(committed, tolerances(slug), lambda data: outcome(task, data), scorer_reads(task, committed))
    assert not flips, f"{slug}: a run within the tolerances of solution/comparison.json would be scored " \
                      f"differently: {flips}"


RERUN_SLUG = "cumcm-2025-b-sic-thickness"
"""A cheap reproduction (~10 s) whose digits depend on the BLAS kernel: its baseline is an ill-conditioned
sparse solve, so the fringe period moves in the 7th digit from one kernel to another."""


def other_numerics() -> dict[str, str]:
    """Another BLAS kernel (x86-64: OpenBLAS's SSE3 Prescott kernels instead of the processor's own) and two
    BLAS/OpenMP threads where the oracle pins one."""
    env = {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
    if platform.machine() in ("x86_64", "AMD64"):
        env["OPENBLAS_CORETYPE"] = "Prescott"
    return env


@pytest.mark.slow   # runs the SiC reproduction (~10 s idle, ~40 s on a loaded 2-core machine) on a cache miss
@pytest.mark.timeout(ORACLE_TIMEOUT)
def test_a_rerun_on_another_blas_kernel_and_thread_count_lands_within_the_tolerances(tmp_path: Path) -> None:
    """The last digits move (else the test says it perturbed nothing), the run still agrees within the declared
    tolerances, and the scorer decides everything as for the committed run."""
    task = TASKS / RERUN_SLUG
    artifact, _ = run_reproduction(task, tmp_path / "results", env=other_numerics(), timeout=1200)
    committed = read_json(task / "solution" / "reproduced_result.json")
    exact = RunTolerances({(): Tolerance(0.0, 0.0)}, tolerances(RERUN_SLUG).volatile)
    moved = exact.differences(artifact, committed)
    if not moved:
        pytest.skip("this machine's kernels gave the committed digits exactly: nothing was perturbed")
    differences = tolerances(RERUN_SLUG).differences(artifact, committed)
    assert not differences, [str(d) for d in differences]
    assert outcome(str(task), artifact) == outcome(str(task), committed), [str(d) for d in moved]


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
