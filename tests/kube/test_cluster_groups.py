"""The real-cluster tests' two groups (``tests/budget.py``): each group's tests are scheduled on one worker, which
starts one session cluster for them, and the two groups on two workers; the second group's table names real modules
that use the cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import budget

REPO = Path(__file__).resolve().parents[2]


def test_the_second_groups_modules_exist_and_use_the_cluster() -> None:
    for path in sorted(budget.SECOND_CLUSTER):
        source = (REPO / path).read_text()
        assert "pytest.mark.cluster" in source or "real_cluster" in source, f"{path} runs no real-cluster test"


def test_under_loadgroup_each_cluster_test_joins_its_group_and_the_rest_none() -> None:
    second = "tests/kube/test_real_node_loss.py"
    first = "tests/kube/test_real_node.py"
    pure = "tests/kube/test_builders.py"
    assert second in budget.SECOND_CLUSTER and first not in budget.SECOND_CLUSTER
    listed = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                             "--dist", "loadgroup", second, first, pure],
                            cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    ids = [line for line in listed.stdout.splitlines() if "::" in line]
    assert listed.returncode == 0 and ids, listed.stdout + listed.stderr
    for nodeid in ids:
        module = nodeid.split("::", 1)[0]
        expected = {second: "@cluster-2", first: "@cluster", pure: None}[module]
        if expected is None:
            assert "@cluster" not in nodeid, nodeid
        else:
            assert nodeid.endswith(expected), nodeid


FAKE_CLUSTER_TEST = """
import json, os
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("n", range({count}))
def test_where(n: int) -> None:
    with Path(os.environ["WHERE"]).open("a") as out:
        out.write(json.dumps([Path(__file__).stem, n, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")
"""


def _make_test_workers() -> list[str]:
    """pytest's worker options as ``make test`` gives them (the Makefile's ``PYTEST_WORKERS``)."""
    [line] = [line for line in (REPO / "Makefile").read_text().splitlines() if line.startswith("PYTEST_WORKERS ?=")]
    return line.split("?=", 1)[1].split()


def test_make_tests_workers_run_each_group_on_one_worker_and_the_two_groups_on_two(tmp_path: Path) -> None:
    """What ``make test`` runs (its ``PYTEST_WORKERS``, ``--dist loadgroup``) on stand-ins of a first- and a
    second-group module (the same paths, tests that only say where they ran) and pure tests: one worker per group,
    two workers in all."""
    kube = tmp_path / "tests" / "kube"
    kube.mkdir(parents=True)
    (tmp_path / "tests" / "conftest.py").write_text('pytest_plugins = ["budget"]\n')
    (kube / "test_real_node_loss.py").write_text(FAKE_CLUSTER_TEST.replace("{count}", "6"))
    (kube / "test_real_node.py").write_text(FAKE_CLUSTER_TEST.replace("{count}", "6"))
    (kube / "test_pure.py").write_text(FAKE_CLUSTER_TEST.replace("{count}", "12").replace(
        "pytestmark = pytest.mark.cluster", ""))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    cluster: uses the real cluster\n")
    where = tmp_path / "where.jsonl"
    env = {**os.environ, "WHERE": str(where), "PYTHONPATH": str(REPO / "tests")}
    options = _make_test_workers()
    assert "loadgroup" in options and int(options[options.index("-n") + 1]) >= 3, options
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *options, "tests"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = [json.loads(line) for line in where.read_text().splitlines()]
    workers = {module: {w for m, _, w in ran if m == module} for module in {m for m, _, _ in ran}}
    assert len(ran) == 24
    first, second = workers["test_real_node"], workers["test_real_node_loss"]
    assert len(first) == 1 and len(second) == 1 and first != second, workers
