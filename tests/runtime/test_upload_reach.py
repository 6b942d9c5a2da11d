"""The upload sidecar waits for the store: a trial pod reaches it only after its agent ended (the operator's label
opens the policy), so the sidecar waits as long as it takes until SIGTERM (the agent's end), then ``--reach-seconds``
at most, and says which store did not answer; its attempts start short and grow, and it sets up its store client
while the main container still runs."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from anchorage.errors import AnchorageError
from anchorage.runtime.kube import pod, resolver
from anchorage.store import open_store


def _store(port: int) -> Any:
    return SimpleNamespace(client=SimpleNamespace(meta=SimpleNamespace(endpoint_url=f"http://127.0.0.1:{port}")))


def test_the_sidecar_waits_for_the_store_then_goes_on() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    term = threading.Event()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def open_later() -> None:  # the policy opens a moment after the agent ended
        time.sleep(0.5)
        listener.bind(("127.0.0.1", port))
        listener.listen(4)

    opener = threading.Thread(target=open_later)
    opener.start()
    started = time.monotonic()
    pod._reach(_store(port), term, limit=1.0, pause=0.1)  # no SIGTERM yet: no bound, it waits
    assert time.monotonic() - started >= 0.4
    opener.join()
    listener.close()


def test_after_sigterm_a_store_that_never_answers_is_named() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    term = threading.Event()
    term.set()
    with pytest.raises(AnchorageError, match=f"127.0.0.1:{port} did not answer within 0.5 s"):
        pod._reach(_store(port), term, limit=0.5, pause=0.1)
    pod._reach(SimpleNamespace(), term, limit=0.5)  # a store on a file system: nothing to reach


def test_attempts_start_short_and_double_to_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """While a policy drops the packets each attempt lasts its whole timeout: the first ones are short, so the upload
    starts within a moment of the policy's opening; the DNS queries of an attempt get the same timeout."""
    tried: list[tuple[float, float]] = []

    def connect(target: tuple[str, int], timeout: float) -> socket.socket:
        tried.append((timeout, resolver._timeout))
        if len(tried) < 6:
            raise TimeoutError("timed out")
        return socket.socket()

    monkeypatch.setattr(socket, "create_connection", connect)
    pod._reach(_store(1), threading.Event(), limit=10.0, pause=0.0)
    assert tried == [(0.25, 0.25), (0.5, 0.5), (1.0, 1.0), (2.0, 2.0), (2.0, 2.0), (2.0, 2.0)]
    assert resolver._timeout == resolver.TIMEOUT


def test_the_sidecar_sets_up_its_store_before_the_main_container_ends(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The S3 client's import and set-up take seconds at the sidecar's CPU share: it does them while the agent runs,
    not after it ended."""
    run, results = tmp_path / "run", tmp_path / "results"
    run.mkdir()
    results.mkdir()
    (results / "answer.json").write_text("{}")
    opened: list[bool] = []

    def opening(uri: str) -> object:
        opened.append((run / "exit-code").exists())
        return open_store(uri)

    monkeypatch.setattr(pod, "open_store", opening)
    monkeypatch.setenv("ANCHORAGE_STORE", (tmp_path / "store").as_uri())
    monkeypatch.setenv("ANCHORAGE_DEST", "trial")
    monkeypatch.delenv(resolver.RESOLVER_ENV, raising=False)
    def main_container() -> None:  # ends once the sidecar has set up its store (or after 10 s)
        deadline = time.monotonic() + 10
        while not opened and time.monotonic() < deadline:
            time.sleep(0.05)
        (run / "exit-code").write_text("0")

    agent = threading.Thread(target=main_container)
    agent.start()
    monkeypatch.setattr(signal, "signal", lambda *_: None)  # the sidecar's SIGTERM handler stays out of pytest
    assert pod.main(["upload", "--wait", str(run), "--put", f"artifacts={results}"]) == 0
    agent.join()
    assert opened == [False], "the store was set up only after the main container ended"
    marker = json.loads((tmp_path / "store" / "trial" / "upload.json").read_text())
    assert marker == {"exit_code": 0, "files": {"artifacts": 1}}
    assert (tmp_path / "store" / "trial" / "artifacts" / "answer.json").read_text() == "{}"
