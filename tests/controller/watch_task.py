"""The operator's watch (``anchorage.controller.watching.Watch``) running as a task for the length of an ``async with``
block: against scripted API servers (``test_watch_resilience.py``) and the real control plane
(``tests/kube/test_job_watch.py``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from anchorage.controller import watching


@contextlib.asynccontextmanager
async def running(watch: watching.Watch) -> AsyncIterator[watching.Watch]:
    """Run ``watch`` until the block ends, then cancel it; an error it ended with is raised, and it must not have
    ended of itself (it ends only when cancelled)."""
    task = asyncio.get_running_loop().create_task(watch.run())
    try:
        yield watch
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert task.cancelled()  # it ended by cancellation alone
