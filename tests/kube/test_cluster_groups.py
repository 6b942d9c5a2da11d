"""The real-cluster tests' two groups (``tests/budget.py``): each group's tests are scheduled on one worker, which
starts one session cluster for them; the second group's table names real modules that use the cluster."""

from __future__ import annotations

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
