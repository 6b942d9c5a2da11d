"""The upload sidecar waits for the store: a trial pod reaches it only after its agent ended (the operator's label
opens the policy), so the sidecar waits as long as it takes until SIGTERM (the agent's end), then ``--reach-seconds``
at most, and says which store did not answer."""

from __future__ import annotations

import socket
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from anchorage.errors import AnchorageError
from anchorage.runtime.kube import pod


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
