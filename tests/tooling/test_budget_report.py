"""``tests/budget.py``'s CPU report: a phase's CPU is its test's, except the teardown that ends the session's fixtures
(a session cluster's daemons are waited for there, with all the CPU they used over the run), which is the worker's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SUITE = '''
import subprocess, sys, time

import pytest

BURN = "import time\\nend = time.process_time() + {seconds}\\nwhile time.process_time() < end: pass"


@pytest.fixture(scope="session")
def daemon():
    child = subprocess.Popen([sys.executable, "-c", BURN.format(seconds=1.5)])
    yield
    child.wait()  # the session's fixture reaps its child: its CPU reaches this process at the session's end


def test_busy():
    subprocess.run([sys.executable, "-c", BURN.format(seconds=0.6)], check=True)


def test_last(daemon):
    pass
'''


def test_the_session_fixtures_cpu_is_the_workers_line_not_the_last_tests(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text('pytest_plugins = ["budget"]\n')
    (tmp_path / "tests" / "test_suite.py").write_text(SUITE)
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
                           "-p", "no:xdist", "tests"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.split("most CPU per test", 1)[1].splitlines()

    def cpu_of(name: str) -> float:
        [line] = [line for line in lines if line.rstrip().endswith(name)]
        return float(line.split()[0])

    assert cpu_of("tests/test_suite.py::test_busy") >= 0.5
    assert cpu_of("main: the session's fixtures, ended") >= 1.4
    assert not [line for line in lines if line.rstrip().endswith("::test_last")
                and float(line.split()[0]) >= 1.0], lines
    records = json.loads((tmp_path / "test-output" / "durations.json").read_text())
    [ended] = [r for r in records if r["ends_session"]]
    assert ended["test"] == "tests/test_suite.py::test_last" and ended["when"] == "teardown"
