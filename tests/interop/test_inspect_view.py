"""``inspect view`` (Inspect AI's own viewer, from the ``inspect_ai`` package) opens the demo campaign
exported by ``anchorage export inspect``, in Debian's headless Chromium through Playwright: the log's
summary (task, scorer, mean over seeds), a mock trial's model call in its transcript, its messages and
its score with the failed gates. Screenshots go to ``test-output/viewer/inspect-*.png``, each checked for
content."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import anchorage_cli
from tests.viewer.chromium import chromium, new_page
from tests.viewer.chromium import screenshot as viewer_screenshot

pytest.importorskip("inspect_ai", reason="the inspect extra is not installed (make venv installs it)")
#: The first test also waits for the module's ``inspect view`` to start (Inspect's imports: 10-28 s on a busy
#: two-core machine) and each drives Chromium through Inspect's pages.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def inspect_view(demo_runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    logs = tmp_path_factory.mktemp("inspect-logs")
    done = anchorage_cli("export", "inspect", str(demo_runs / "demo"), "--out", str(logs), "--json")
    assert done.returncode == 0, done.stderr
    files = {Path(p).name.split("_")[2]: Path(p).name for p in json.loads(done.stdout)["logs"]}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = logs.parent / "inspect-view.log"
    with log.open("w") as output:
        server = subprocess.Popen([str(Path(sys.executable).parent / "inspect"), "view", "--log-dir", str(logs),
                                   "--host", "127.0.0.1", "--port", str(port)], stdout=output, stderr=output)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/logs", timeout=5) as answer:
                    listed = json.loads(answer.read())
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"inspect view did not start: {log.read_text()}")
                time.sleep(0.5)
        assert sorted(Path(f["name"]).name for f in listed["files"]) == sorted(files.values())
        yield url, files
    finally:
        server.terminate()
        server.wait(timeout=30)


def screenshot(page: Any, name: str) -> Path:
    """The viewer tests' screenshot check; Inspect's pages are mostly white, so less of them is inked."""
    return viewer_screenshot(page, name, min_inked=0.01)


@pytest.fixture
def page() -> Iterator[Any]:
    errors: list[str] = []
    with chromium() as browser, new_page(browser, errors) as opened:
        yield opened
    assert not errors, f"inspect view reported errors: {errors}"


def test_every_exported_log_is_listed_with_its_model(inspect_view: tuple[str, dict[str, str]], page: Any) -> None:
    """mock and oracle ran the same task: each log has its own task id, so inspect view lists both (it used to
    take one for a retry of the other and hide it), each with a model name (the oracle's was "-")."""
    url, files = inspect_view
    page.goto(f"{url}/")
    page.get_by_text("anchorage/oracle").first.wait_for(timeout=90_000)
    page.get_by_text("mock/mock-model").first.wait_for(timeout=90_000)
    page.get_by_text(f"{len(files)} items", exact=True).first.wait_for(timeout=30_000)   # the list's own count
    assert len(files) == 2 and page.get_by_text("smoke-inventory", exact=True).count() == 2
    screenshot(page, "inspect-logs")
    page.goto(f"{url}/#/tasks/{files['oracle']}")
    page.get_by_text("1 x 3 samples").first.wait_for(timeout=90_000)
    page.get_by_text("experiment_result.total_annual_cost = 6843.674463").first.wait_for(timeout=60_000)   # TARGET
    page.get_by_text('"problem_id": "smoke-inventory"', exact=False).first.wait_for(timeout=60_000)     # ANSWER
    screenshot(page, "inspect-samples")


def test_inspect_view_opens_the_exported_demo(inspect_view: tuple[str, dict[str, str]], page: Any) -> None:
    url, files = inspect_view
    page.goto(f"{url}/#/tasks/{files['mock']}")
    page.get_by_text("1 x 3 samples").first.wait_for(timeout=90_000)        # the dataset line: 3 seeds
    assert page.get_by_text("o_eval").first.is_visible()                    # the scorer
    screenshot(page, "inspect-log")
    page.goto(f"{url}/#/tasks/{files['mock']}/samples/sample/smoke-inventory/1/")
    page.get_by_text("mock/mock-model").first.wait_for(timeout=60_000)
    page.get_by_role("tab", name="Transcript").first.click()
    page.get_by_text(re.compile("model call", re.IGNORECASE)).first.wait_for(timeout=60_000)   # the model event
    screenshot(page, "inspect-transcript")
    page.get_by_role("tab", name="Messages").first.click()
    page.get_by_text("problem_id").first.wait_for(timeout=60_000)           # the model's answer, from the transcript
    screenshot(page, "inspect-messages")
    page.get_by_role("tab", name="Scoring").first.click()
    page.get_by_text("constrained_costs_more_ordering").first.wait_for(timeout=60_000)   # the failed gates
    screenshot(page, "inspect-scoring")
