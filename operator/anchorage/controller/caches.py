"""What the operator holds between events: which keys it acted on (:class:`Once`), what it computed once for the
events of one object (:class:`Memo`: a trial's plan, ``controller.trialstate.task_inputs``), the latest watched body
of each unfinished Trial and ScoringRun (:class:`Latest`: :data:`TRIALS`, :data:`RUNS`), and the lone objects' safety
net (:class:`Watchdog`).

Per process and in memory: a restarted operator starts empty and repairs from the cluster and the store.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

import kopf
from pydantic import ValidationError

from anchorage.controller import enforcement, kube
from anchorage.errors import AnchorageError
from anchorage.runtime.kube import jobs

V = TypeVar("V")


class Once:
    """Keys this process has acted on (the newest ``size``): events repeat, acting twice costs writes."""

    def __init__(self, size: int = 4096) -> None:
        self._seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def first(self, key: str) -> bool:
        """True the first time ``key`` is seen (then it counts as seen)."""
        with self._lock:
            if key in self._seen:
                return False
            self._seen[key] = None
            if len(self._seen) > self._size:
                self._seen.popitem(last=False)
            return True

    def forget(self, key: str) -> None:
        """Act on ``key`` again next time (the action failed)."""
        with self._lock:
            self._seen.pop(key, None)


class Memo(Generic[V]):
    """Values computed once per key (the newest ``size``): what each event of one object would compute again, the
    same for the same key. A computation that raises keeps nothing (the next event tries again)."""

    def __init__(self, size: int = 4096) -> None:
        self._values: collections.OrderedDict[Hashable, V] = collections.OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The value of ``key``: held, else ``compute()``'s (then held)."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        value = compute()  # outside the lock: two threads may compute one key at once, and hold the same value
        with self._lock:
            self._values[key] = value
            if len(self._values) > self._size:
                self._values.popitem(last=False)
        return value


class Latest:
    """The latest watched body of each unfinished object of a kind (the newest ``size``), for the handlers
    that would otherwise GET it: a body the watch delivered is used when it passes the caller's check
    (:meth:`current`), else the object is read from the API. Objects leave when they end, so a campaign
    holds about ``parallelism`` of them (never its 10,000s of finished ones)."""

    def __init__(self, read: Callable[[str, str], dict[str, Any] | None], size: int = 2048) -> None:
        self._read, self._size = read, size
        self._bodies: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def note(self, body: Mapping[str, Any], ended: bool) -> None:
        """An event's body (in kopf's loop): keep it while the object is unfinished, forget it when it ended."""
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        with self._lock:
            if ended:
                self._bodies.pop(key, None)
                return
            self._bodies.pop(key, None)  # re-inserted last: the oldest entry goes first when full
            self._bodies[key] = dict(body)
            if len(self._bodies) > self._size:
                del self._bodies[next(iter(self._bodies))]

    def values(self) -> list[dict[str, Any]]:
        """The held bodies (a copy of the list: the watch changes it meanwhile)."""
        with self._lock:
            return list(self._bodies.values())

    def peek(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The watched body of an unfinished object, if it is held (never read from the API)."""
        with self._lock:
            return self._bodies.get((namespace, name))

    def current(self, namespace: str, name: str, usable: Callable[[Mapping[str, Any]], bool]) -> dict[str, Any] | None:
        """The watched body when ``usable`` accepts it, else the object as ``read`` (the API) has it (None: gone)."""
        with self._lock:
            body = self._bodies.get((namespace, name))
        if body is not None and usable(body):
            return body
        return self._read(namespace, name)


class Watchdog:
    """Every ``interval`` s, check the lone unfinished objects of a kind that had no event for that long.

    The safety net for a launch whose writes failed or a Job event that was lost, which a kopf timer on
    Trials and ScoringRuns used to be — without the timer's cost: kopf keeps the latest body of every
    object of a kind that has a timer (two bodies per campaign trial, most of the operator's memory at
    10,000 trials). Campaign children are swept by their campaign instead (``campaigns.sweep``). Runs
    in kopf's event loop (events report to :meth:`seen`), the checks in the handlers' worker threads;
    ``check(namespace, name)`` says whether the object is still unfinished.
    """

    def __init__(self, what: str, check: Callable[[str, str], bool], interval: float = 10.0) -> None:
        self.what, self.interval, self._check = what, interval, check
        self._due: dict[tuple[str, str], float] = {}
        self._task: asyncio.Task[None] | None = None

    def seen(self, namespace: str, name: str, unfinished: bool) -> None:
        """An event of the object came: check it ``interval`` s from now if it is unfinished, else forget it."""
        if not unfinished:
            self._due.pop((namespace, name), None)
            return
        loop = asyncio.get_running_loop()
        self._due[(namespace, name)] = loop.time() + self.interval
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())

    def note(self, type_: str | None, body: Mapping[str, Any], phase: str | None, final: tuple[str, ...]) -> bool:
        """Whether an event's object has ended (deleted, being deleted, or in a ``final`` phase); lone objects
        (no campaign label: their campaign's sweep covers the others) are passed on to :meth:`seen`."""
        meta = body["metadata"]
        ended = type_ == "DELETED" or bool(meta.get("deletionTimestamp")) or phase in final
        if jobs.LABEL_CAMPAIGN not in (meta.get("labels") or {}):
            self.seen(meta["namespace"], meta["name"], unfinished=not ended)
        return ended

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._due:
            await asyncio.sleep(self.interval / 2)
            for key in [k for k, due in self._due.items() if due <= loop.time()]:
                self._due[key] = loop.time() + self.interval
                try:
                    unfinished = await kube.in_thread(self._check, *key)
                except enforcement.Waiting:
                    continue  # said once, in the trial's status and an Event
                except (kopf.PermanentError, kopf.TemporaryError, AnchorageError, ValidationError) as exc:
                    logging.getLogger(__name__).warning(f"checking {self.what} {key[0]}/{key[1]}: {exc}")
                    continue
                if not unfinished:
                    self._due.pop(key, None)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


#: Unfinished Trials as last watched (the Job's end and the scores' publication read them from here).
TRIALS = Latest(lambda namespace, name: kube.get_custom("trials", namespace, name))
#: Unfinished ScoringRuns as last watched (``scoring.on_run_event`` notes them; the verifier Job's end and the repair
#: path read them).
RUNS = Latest(lambda namespace, name: kube.get_custom("scoringruns", namespace, name))
