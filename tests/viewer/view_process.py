"""``anchorage view`` run as a user runs it, a process of its own, and its pages read over HTTP (the viewer of a
runs folder in ``test_sources.py``, of an S3 store in ``tests/engine/test_commands_on_s3.py``)."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator


@contextlib.contextmanager
def anchorage_view(source: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, str]]:
    """``anchorage view SOURCE --port 0`` for the block (terminated after it): its URL and the line it said it in."""
    process = subprocess.Popen([sys.executable, "-c", "from anchorage.cli import main; main()", "view", source,
                                "--port", "0"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        url = re.search(r"http://\S+/", line)
        assert url, line
        yield url.group(0), line
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


def page_when_up(url: str, seconds: float = 30) -> str:
    """The page at ``url``, asked for again every 0.2 s while its server does not answer yet, ``seconds`` at most."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return str(response.read().decode())
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.2)
