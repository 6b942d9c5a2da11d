"""Where a test run's time goes, and the workers' grouping: a pytest plugin (``tests/conftest.py`` loads it).

* With pytest-xdist (``make test`` runs four workers, ``--dist loadgroup``: the Makefile's ``PYTEST_WORKERS``),
  every test that uses the real cluster (the ``cluster`` marker, or the ``real_cluster`` fixture) joins one of two
  groups, and each group runs on one worker that starts its own session cluster once (a network slot of its own:
  ``anchorage_devcluster.network``) and runs the group's tests on it, while the other workers run the rest (and the
  cluster workers take pure tests once their group is done). The modules in :data:`SECOND_CLUSTER` form the second
  group: about half of the cluster time, so the two cluster workers end together. Without xdist both groups share one
  cluster. Such a test without a timeout of its own gets :data:`CLUSTER_TIMEOUT`.
* At the end, the time per test folder (setup + call + teardown, summed over the workers), each worker's busy time
  (how even the split was: the busiest worker is the run's critical path) and the tests over
  :data:`SLOW_SEC` (a real-cluster test's setup not counted: the first one's starts its group's cluster) that carry
  no ``slow`` marker — each long test must say why it is long (``pytest.mark.slow`` with a
  one-line reason beside it), so the budget stays readable. The 25 slowest tests come from ``--durations=25``.
* Each test phase's CPU in the process that ran it (the worker, plus the child processes it waited for: the CLIs
  and kubectl runs it started, not the cluster's daemons nor pods) goes beside its duration, and the 15 tests that
  used the most are listed: which tests to make cheaper when the run is CPU-bound. The teardown of a worker's last
  test also ends the session's fixtures (a session cluster's daemons are waited for then, with all the CPU they
  used): it is listed on its own line, as the worker's, not the test's.
* The machine's CPU over the run (from ``/proc/stat``: busy core-seconds of those the run had): near 100 % the run
  is CPU-bound, and only less work (not more workers) makes it shorter. Every test's own durations (setup, call,
  teardown) and worker go to ``test-output/durations.json`` for a closer look.
"""

from __future__ import annotations

import collections
import json
import os
import resource
from collections.abc import Generator
from pathlib import Path

import pytest

SLOW_SEC = 30.0
#: A real-cluster test's timeout, its fixtures included: the first of them starts the session's cluster (images
#: built when their content changed, nodes, store, chart: minutes on two cores).
CLUSTER_TIMEOUT = 2400
#: The real-cluster test modules of the second session cluster (see above): Kueue's, a lost node's, the images'
#: registries', the agent kinds' and the chart's second releases — about half of the cluster time, none of them needing
#: what the first group's modules leave behind. Balanced by the busy time per worker this report prints.
SECOND_CLUSTER = frozenset({
    "tests/kube/test_real_kueue.py", "tests/kube/test_real_node_loss.py", "tests/kube/test_images_on_cluster.py",
    "tests/kube/test_real_agent_kinds.py", "tests/charts/test_chart_real_cluster.py",
})
_by_folder: collections.Counter[str] = collections.Counter()
_by_test: collections.Counter[str] = collections.Counter()
_by_worker: collections.Counter[str] = collections.Counter()
_marked_slow: set[str] = set()
_by_test_cpu: collections.Counter[str] = collections.Counter()
_reports: list[dict[str, object]] = []
_PHASE_CPU = pytest.StashKey[float]()
_ENDS_SESSION = pytest.StashKey[bool]()
_cpu_at_start: list[tuple[float, float]] = []
DURATIONS = Path("test-output/durations.json")


def _cpu() -> tuple[float, float]:
    """(busy, all) core-seconds the machine has spent since boot, from /proc/stat's first line."""
    fields = [float(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return (sum(fields[:8]) - idle) / ticks, sum(fields[:8]) / ticks


def _own_cpu() -> float:
    """CPU seconds (user + system) of this process and of the children it has waited for."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                   resource.getrusage(resource.RUSAGE_CHILDREN)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                                           pytest.TestReport]:
    """The phase's CPU (since the phase began: :func:`_phase_began`) on its report, which a worker sends on."""
    report = yield
    began = item.stash.get(_PHASE_CPU, None)
    if began is not None:
        report.user_properties.append(("cpu_sec", round(_own_cpu() - began, 3)))
    if call.when == "teardown" and item.stash.get(_ENDS_SESSION, False):
        report.user_properties.append(("ends_session", True))
    return report


def _phase_began(item: pytest.Item) -> None:
    item.stash[_PHASE_CPU] = _own_cpu()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _phase_began(item)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    _phase_began(item)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    _phase_began(item)
    item.stash[_ENDS_SESSION] = nextitem is None  # the session's fixtures end with this teardown


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or a lone session) measures the whole run
        _cpu_at_start.append(_cpu())


def _group(item: pytest.Item, name: str) -> None:
    """Put ``item`` in xdist group ``name`` under ``--dist loadgroup``. pytest-xdist (3.8, the newest) groups by the
    ``@name`` suffix its own hook writes to ``Item._nodeid``, which pytest 9 no longer reads (a node's id is ``_id``):
    without this every worker would start its own session cluster. The suffix is written here, where pytest reads it."""
    item.add_marker(pytest.mark.xdist_group(name))
    option = item.config.option  # a worker has ``loadgroup`` (its own ``dist`` is "no"); a lone session, ``dist``
    if (getattr(option, "loadgroup", False) or getattr(option, "dist", None) == "loadgroup") \
            and not item.nodeid.endswith(f"@{name}"):
        from _pytest.nodeid import coerce_node_id

        item._id = coerce_node_id(f"{item.nodeid}@{name}")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the group marks to schedule
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        uses_cluster = item.get_closest_marker("cluster") is not None or "real_cluster" in getattr(
            item, "fixturenames", ())
        if uses_cluster:
            _group(item, "cluster-2" if item.nodeid.split("::", 1)[0] in SECOND_CLUSTER else "cluster")
            if item.get_closest_marker("timeout") is None:  # the first one also waits for the cluster to start
                item.add_marker(pytest.mark.timeout(CLUSTER_TIMEOUT))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    parts = Path(path).parts
    folder = "/".join(parts[:2]) if len(parts) > 2 else parts[0]
    _by_folder[folder] += report.duration
    node = getattr(report, "node", None)  # under xdist, the controller's reports name the worker that ran them
    worker = node.gateway.id if node is not None else "main"
    properties = dict(report.user_properties)
    ends_session = bool(properties.get("ends_session"))
    # A cluster group's first setup starts its session cluster, and a worker's last teardown ends the session's
    # fixtures: the group's or the worker's time, not the test's.
    if not (report.when == "setup" and "@cluster" in report.nodeid) and not ends_session:
        _by_test[report.nodeid] += report.duration
    _by_worker[worker] += report.duration
    if "slow" in report.keywords:
        _marked_slow.add(report.nodeid)
    cpu = properties.get("cpu_sec")
    if isinstance(cpu, (int, float)):
        _by_test_cpu[f"{worker}: the session's fixtures, ended" if ends_session else report.nodeid] += cpu
    _reports.append({"test": report.nodeid, "when": report.when, "seconds": round(report.duration, 3),
                     "cpu_sec": cpu, "worker": worker, "ends_session": ends_session, "outcome": report.outcome})


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _by_folder:
        return
    write = terminalreporter.write_line
    terminalreporter.section("time per test folder (setup + call + teardown, all workers)")
    for folder, seconds in sorted(_by_folder.items(), key=lambda kv: -kv[1]):
        write(f"  {seconds:8.1f} s  {folder}")
    write(f"  {sum(_by_folder.values()):8.1f} s  in all")
    terminalreporter.section("busy time per worker (the longest is the run's critical path)")
    for worker, seconds in sorted(_by_worker.items()):
        write(f"  {seconds:8.1f} s  {worker}")
    if _cpu_at_start:
        (busy0, all0), (busy1, all1) = _cpu_at_start[0], _cpu()
        write(f"  machine CPU over the run: {busy1 - busy0:.0f} of {all1 - all0:.0f} core-seconds busy "
              f"({100 * (busy1 - busy0) / max(all1 - all0, 1e-9):.0f} %, {os.cpu_count()} cores)")
    if _by_test_cpu:
        terminalreporter.section("most CPU per test (its process and the children it waited for)")
        for nodeid, seconds in _by_test_cpu.most_common(15):
            write(f"  {seconds:8.1f} s  {nodeid}")
        write(f"  {sum(_by_test_cpu.values()):8.1f} s  in all tests")
    DURATIONS.parent.mkdir(exist_ok=True)
    DURATIONS.write_text(json.dumps(_reports, indent=1))
    unmarked = sorted(((s, n) for n, s in _by_test.items() if s > SLOW_SEC and n not in _marked_slow), reverse=True)
    if unmarked:
        terminalreporter.section(f"tests over {SLOW_SEC:.0f} s without a slow marker (add one, with its reason)")
        for seconds, nodeid in unmarked:
            write(f"  {seconds:8.1f} s  {nodeid}")
