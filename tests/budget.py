"""Where a test run's time goes, and the workers' grouping: a pytest plugin (``tests/conftest.py`` loads it).

* With pytest-xdist (``make test`` runs two workers, ``--dist loadgroup``), every test that uses the real cluster (the
  ``cluster`` marker, or the ``real_cluster`` fixture) joins one group, so one worker starts the session's cluster
  once and runs them all while the other worker runs the rest; such a test without a timeout of its own gets
  :data:`CLUSTER_TIMEOUT`.
* At the end, the time per test folder (setup + call + teardown, summed over the workers) and the tests over
  :data:`SLOW_SEC` that carry no ``slow`` marker — each long test must say why it is long (``pytest.mark.slow`` with a
  one-line reason beside it), so the budget stays readable. The 25 slowest tests come from ``--durations=25``.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

SLOW_SEC = 30.0
#: A real-cluster test's timeout, its fixtures included: the first of them starts the session's cluster (images
#: built when their content changed, nodes, store, chart: minutes on two cores).
CLUSTER_TIMEOUT = 2400
_by_folder: collections.Counter[str] = collections.Counter()
_by_test: collections.Counter[str] = collections.Counter()
_marked_slow: set[str] = set()


def _group(item: pytest.Item, name: str) -> None:
    """Put ``item`` in xdist group ``name`` under ``--dist loadgroup``. pytest-xdist (3.8, the newest) groups by the
    ``@name`` suffix its own hook writes to ``Item._nodeid``, which pytest 9 no longer reads (a node's id is ``_id``):
    without this every worker would start its own session cluster. The suffix is written here, where pytest reads it."""
    item.add_marker(pytest.mark.xdist_group(name))
    if getattr(item.config.option, "loadgroup", False) and not item.nodeid.endswith(f"@{name}"):
        from _pytest.nodeid import coerce_node_id

        item._id = coerce_node_id(f"{item.nodeid}@{name}")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the group marks to schedule
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        uses_cluster = item.get_closest_marker("cluster") is not None or "real_cluster" in getattr(
            item, "fixturenames", ())
        if uses_cluster:
            _group(item, "cluster")
            if item.get_closest_marker("timeout") is None:  # the first one also waits for the cluster to start
                item.add_marker(pytest.mark.timeout(CLUSTER_TIMEOUT))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    parts = Path(path).parts
    folder = "/".join(parts[:2]) if len(parts) > 2 else parts[0]
    _by_folder[folder] += report.duration
    _by_test[report.nodeid] += report.duration
    if "slow" in report.keywords:
        _marked_slow.add(report.nodeid)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _by_folder:
        return
    write = terminalreporter.write_line
    terminalreporter.section("time per test folder (setup + call + teardown, all workers)")
    for folder, seconds in sorted(_by_folder.items(), key=lambda kv: -kv[1]):
        write(f"  {seconds:8.1f} s  {folder}")
    write(f"  {sum(_by_folder.values()):8.1f} s  in all")
    unmarked = sorted(((s, n) for n, s in _by_test.items() if s > SLOW_SEC and n not in _marked_slow), reverse=True)
    if unmarked:
        terminalreporter.section(f"tests over {SLOW_SEC:.0f} s without a slow marker (add one, with its reason)")
        for seconds, nodeid in unmarked:
            write(f"  {seconds:8.1f} s  {nodeid}")
