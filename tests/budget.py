"""Where a test run's time goes, and the workers' grouping: a pytest plugin (``tests/conftest.py`` loads it).

* With pytest-xdist (``make test`` runs two workers, ``--dist loadgroup``), every test that uses the real cluster (the
  ``cluster`` marker, or the ``real_cluster`` fixture) joins one group, so one worker starts the session's cluster
  once and runs them all while the other worker runs the rest.
* At the end, the time per test folder (setup + call + teardown, summed over the workers) and the tests over
  :data:`SLOW_SEC` that carry no ``slow`` marker — each long test must say why it is long (``pytest.mark.slow`` with a
  one-line reason beside it), so the budget stays readable. The 25 slowest tests come from ``--durations=25``.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

SLOW_SEC = 30.0
_by_folder: collections.Counter[str] = collections.Counter()
_by_test: collections.Counter[str] = collections.Counter()
_marked_slow: set[str] = set()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        uses_cluster = item.get_closest_marker("cluster") is not None or "real_cluster" in getattr(
            item, "fixturenames", ())
        if uses_cluster:
            item.add_marker(pytest.mark.xdist_group("cluster"))


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
