"""The operator's own watch of the objects it creates — its Jobs and ScoringRuns — instead of kopf's.

Registered by importing ``anchorage.controller`` (a kopf startup handler starts it, a cleanup handler stops it).
Six of a trial's eleven watch events are its two Jobs'; only the end of each matters (``Complete`` or ``Failed``
true, :func:`anchorage.controller.jobends.has_ended`), and kopf's per-event machinery (parsing, per-object
memories, loggers, the handler-invocation machinery) cost ~1.5 ms of CPU per event for the other four too. Here an
event costs a JSON parse (orjson) and a few attribute reads; an ended Job goes to the same functions the kopf
handlers called (:func:`anchorage.controller.attempts.on_trial_job`, :func:`~anchorage.controller.finishing.on_protocol_job`,
:func:`anchorage.controller.scoring.on_verifier_job`), which hold the rules. ScoringRuns (two more events per trial,
mostly the operator's own writes) go the same way, every event to :func:`anchorage.controller.scoring.on_run_event`,
one at a time per run (:class:`RunEvents`), the listing included (an unfinished run is checked at startup, as
kopf's listing did). Trials and campaigns — the kinds users create, the campaign's index and timer — stay kopf's.

:class:`Watch`: list, then watch from the list's ``resourceVersion`` with bookmarks, in each namespace the operator
serves (``ANCHORAGE_WATCH_NAMESPACES``, set by ``anchorage operator``; cluster-wide without it, as ``kopf run``
without ``-n``) — the Jobs only in the trials namespace when there is one —, with the label selector the Jobs carry
(``app.kubernetes.io/managed-by=anchorage`` and an
``anchorage.dev/role``). A watch the server ends is resumed from the last version seen (a bookmark's too); 410 Gone
(the version is too old) lists again; a lost connection or an error status is retried with a growing backoff, and so
is a watch the server ended (or answered 410) less than :data:`SHORT_SECONDS` after it began — a server that ends every
watch at once sees a few requests in the first seconds, then one per :data:`BACKOFFS`' last step. Any other exception
(a bug, a body that is not what it should be) is logged with its traceback and the watch resumes after the same
backoff: the task never ends but by cancellation (and an event whose handler raises is logged, and the next one handled).
A connection that brings no byte for :data:`SILENCE_SECONDS` is given up and the watch resumed: the server is asked to
end each watch :data:`SILENCE_SECONDS` − 10 s after it began (bookmarks carry the version), so a live one is never that
silent. Each resumption but the watch's normal end is counted in ``anchorage_operator_watch_restarts_total{kind,cause}``.
A Job
watch's first listing is not dispatched, as kopf's listing never reached the Job handlers: an unfinished Trial's own listing
event repairs it from its Job. A later listing (after 410, or after a peering pause) dispatches the ended Jobs whose
trial or run this process knows is waiting for them (the watched bodies of ``caches.TRIALS`` / ``caches.RUNS``); the
rest is the sweep's and the watchdog's, as before. The requests authenticate with the operator's client
configuration (:class:`anchorage.controller.kube.Client`: token and its refresh, client certificates, CA,
``tls-server-name``, proxy and ``NO_PROXY``, path prefix), one aiohttp session in kopf's event loop.

Peering: a standby operator (kopf paused in favour of a peer) dispatches nothing; :class:`Peering` follows kopf's
pause and resume (kopf says them only in its peering log lines, which it reads), and a resumed watcher lists again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
import kopf
import orjson

from anchorage import metrics
from anchorage.controller import attempts, finishing, kube, pods, policies, scoring
from anchorage.controller.caches import RUNS, TRIALS
from anchorage.controller.jobends import has_ended
from anchorage.controller.peering import PEERING, Peering
from anchorage.controller.settings import config
from anchorage.controller.trialstate import runs_job
from anchorage.manifests import API_GROUP, API_VERSION
from anchorage.runtime.kube import jobs

log = logging.getLogger("anchorage.watching")
Obj = dict[str, Any]
#: Seconds between reconnection attempts after an error or a short end (the last one repeats), as kopf's ``error_backoffs``.
BACKOFFS = (0.2, 0.5, 1.0, 2.0, 3.0, 5.0)
#: A watch (or listing) the server ends sooner than this after it began is a *short end*: the next one backs off.
SHORT_SECONDS = 1.0
#: A watch connection without a byte for this long is given up (the server ends each watch 10 s before it).
SILENCE_SECONDS = 60.0
#: Namespaces the operator serves (comma-separated; empty or unset: cluster-wide).
NAMESPACES_ENV = "ANCHORAGE_WATCH_NAMESPACES"
JOBS_SELECTOR = f"{next(iter(jobs.MANAGED_BY))}={next(iter(jobs.MANAGED_BY.values()))},{jobs.LABEL_ROLE}"
#: The trial pods (``anchorage.controller.pods``): verifier and protocol pods are bounded by their Jobs' deadlines,
#: and every failure of theirs is the platform's already.
PODS_SELECTOR = f"{next(iter(jobs.MANAGED_BY))}={next(iter(jobs.MANAGED_BY.values()))},{jobs.LABEL_ROLE}=trial"
#: ``on_event`` types of listed objects: the first listing, and a later one (after 410 Gone or a pause).
LISTED, RELISTED = "LISTED", "RELISTED"

EventFn = Callable[[str, Obj], None]


class Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""


class Watch:
    """List, then watch, the objects at ``path`` (a collection URL path, e.g. ``/apis/batch/v1/namespaces/x/jobs``)
    matching ``selector``, calling ``on_event(type, obj)`` in the event loop for every object: ``LISTED`` for the
    first listing, ``RELISTED`` for a later one, then the watch's ``ADDED``/``MODIFIED``/``DELETED``.

    ``resource_version``: resume from there instead of listing first (what a restarted watch does with the last
    version it saw). ``timeout``: the seconds the server keeps a watch open (it then ends it; the watch resumes), at
    most ``silence`` − 10; ``silence``: the seconds without a byte after which a watch's connection is given up.
    """

    def __init__(self, client: kube.Client, session: aiohttp.ClientSession, path: str, selector: str,
                 on_event: EventFn, *, timeout: int = 300, resource_version: str = "",
                 silence: float = SILENCE_SECONDS) -> None:
        self.client, self.session, self.path, self.selector = client, session, path, selector
        self.on_event, self.timeout, self.silence = on_event, timeout, silence
        self.kind = path.rstrip("/").rsplit("/", 1)[-1]  # the collection's plural (a metric label)
        self.resource_version = resource_version
        self.listings = 1 if resource_version else 0  # listings so far (a first one, of a fresh watch, is LISTED)
        self.page = 500
        self.relist = False  # list again before the next watch (a resumed peer)

    def _url(self, params: Mapping[str, str]) -> str:
        params = {k: v for k, v in params.items() if v or k != "labelSelector"}
        return f"{self.client.host}{self.client.prefix}{self.path}?{urllib.parse.urlencode(params)}"

    async def _get(self, params: Mapping[str, str], timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        """A GET with the client's credentials (read again once after a 401), proxy and TLS server name."""
        for fresh in (False, True):
            headers = {"Accept": "application/json"}
            token = self.client.authorization(fresh)
            if token:
                headers["Authorization"] = token
            response = await self.session.get(self._url(params), headers=headers, proxy=self.client.proxy(),
                                              server_hostname=self.client.server_hostname(), timeout=timeout)
            if response.status != 401 or fresh:
                return response
            response.release()
        raise AssertionError("unreachable")

    async def _list(self) -> None:
        """List in pages of :attr:`page` objects (a restart among 20,000 Jobs holds one page at a time); the
        watch then starts from the listing's version. An expired continue token (410) lists again from the start."""
        kind = LISTED if self.listings == 0 else RELISTED
        params = {"labelSelector": self.selector, "limit": str(self.page)}
        version = ""
        while True:
            response = await self._get(params, aiohttp.ClientTimeout(total=None, connect=5, sock_read=60))
            async with response:
                if response.status == 410:
                    raise Gone()
                if response.status >= 400:
                    raise kube.ApiError(response.status, (await response.text())[:500])
                listing = orjson.loads(await response.read())
            meta = listing.get("metadata") or {}
            version = version or str(meta["resourceVersion"])
            for item in listing.get("items") or []:
                self._dispatch(kind, item)
            if not meta.get("continue"):
                break
            params = {**params, "continue": str(meta["continue"])}
        self.listings += 1
        self.resource_version = version
        self.relist = False

    async def _watch(self) -> None:
        """One watch request, until the server ends it; raises :class:`Gone` on 410."""
        server_timeout = max(1, min(self.timeout, int(self.silence) - 10))
        params = {"labelSelector": self.selector, "watch": "true", "allowWatchBookmarks": "true",
                  "resourceVersion": self.resource_version, "timeoutSeconds": str(server_timeout)}
        response = await self._get(params, aiohttp.ClientTimeout(total=None, connect=5, sock_read=self.silence))
        async with response:
            if response.status == 410:
                raise Gone()
            if response.status >= 400:
                raise kube.ApiError(response.status, (await response.text())[:500])
            async for line in response.content:
                if not line.strip():
                    continue
                event = orjson.loads(line)
                type_, obj = event.get("type"), event.get("object") or {}
                if type_ == "ERROR":
                    if obj.get("code") == 410:
                        raise Gone()
                    raise kube.ApiError(int(obj.get("code") or 500), str(obj.get("message") or "watch error"))
                version = (obj.get("metadata") or {}).get("resourceVersion")
                if version:
                    self.resource_version = str(version)
                if type_ != "BOOKMARK":
                    self._dispatch(str(type_), obj)
                if self.relist:
                    return

    def _dispatch(self, type_: str, obj: Obj) -> None:
        """``on_event``, with an exception of its logged (the listing or watch goes on with the next object)."""
        try:
            self.on_event(type_, obj)
        except Exception:
            name = (obj.get("metadata") or {}).get("name") if isinstance(obj, dict) else None
            log.exception("handling the %s event of %s in %s failed (the next events are handled; the sweep repairs "
                          "what this one missed)", type_, name or "an object", self.path)

    async def run(self) -> None:
        """Forever: list when there is no version to resume from (or one is asked), watch, resume, back off after a
        failure or a short end. Ends only when cancelled."""
        loop = asyncio.get_running_loop()
        failures = 0  # failures and short ends in a row
        while True:
            started = loop.time()
            cause, problem, error = "", "", None
            try:
                if not self.resource_version or self.relist:
                    await self._list()
                await self._watch()
            except Gone:
                log.info("the watch of %s resumed from a version too old (410 Gone): listing again", self.path)
                self.resource_version = ""
                cause = "gone"
            except aiohttp.SocketTimeoutError:  # (before ClientError: it is one)
                cause, problem = "silence", f"no byte for {self.silence:g} s"
            except (TimeoutError, aiohttp.ClientError, OSError, ValueError, kube.ApiError) as exc:
                cause, problem = "error", str(exc) or type(exc).__name__
            except Exception as exc:  # a bug or an answer of a shape not foreseen: said in full, never the task's end
                cause, problem, error = "unexpected", f"{type(exc).__name__}: {exc}", exc
            short = loop.time() - started < SHORT_SECONDS
            if cause in ("", "gone") and not short:
                failures = 0
                if cause:
                    metrics.OPERATOR_WATCH_RESTARTS.labels(self.kind, cause).inc()
                continue
            delay = BACKOFFS[min(failures, len(BACKOFFS) - 1)]
            failures += 1
            if cause in ("", "gone"):
                cause = "short_end"
                if failures == 3:  # said once per run of short ends
                    log.warning("the server keeps ending the watch of %s at once; backing off (now %.1f s, at most "
                                "%.1f s)", self.path, delay, BACKOFFS[-1])
            elif error is not None:
                log.error("the watch of %s failed unexpectedly (%s); again in %.1f s", self.path, problem, delay,
                          exc_info=error)
            else:
                log.warning("the watch of %s failed (%s); again in %.1f s", self.path, problem, delay)
            metrics.OPERATOR_WATCH_RESTARTS.labels(self.kind, cause).inc()
            await asyncio.sleep(delay)


#: What an ended Job of each role goes to (the functions the kopf Job handlers were).
HANDLERS: dict[str, Callable[[str, Obj], Awaitable[None]]] = {
    "trial": attempts.on_trial_job, "protocol": finishing.on_protocol_job, "verifier": scoring.on_verifier_job}


def _waited_for(role: str, job: Obj) -> bool:
    """Whether this process knows the Job's trial or run is still waiting for it (a relisted ended Job)."""
    meta = job["metadata"]
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if role == "verifier":
        ns = annotations.get("anchorage.dev/scoring-run-namespace", meta["namespace"])
        run = RUNS.peek(ns, labels.get(jobs.LABEL_SCORING, ""))
        return run is not None and (run.get("status") or {}).get("phase") not in scoring.FINAL
    ns = annotations.get("anchorage.dev/trial-namespace", meta["namespace"])
    trial = TRIALS.peek(ns, labels.get(jobs.LABEL_TRIAL, ""))
    if trial is None:
        return False
    return runs_job(meta["name"], trial) if role == "trial" else \
        (trial.get("status") or {}).get("phase") == "Running"


class JobEvents:
    """The Jobs' events → the lifecycle handlers: only ended Jobs of a known role, each handled in its own task."""

    def __init__(self, peering: Peering = PEERING) -> None:
        self.peering = peering
        self.tasks: set[asyncio.Task[None]] = set()
        self.dispatched = 0

    def __call__(self, type_: str, job: Obj) -> None:
        if self.peering.paused:
            return
        role = (job["metadata"].get("labels") or {}).get(jobs.LABEL_ROLE, "")
        ended = has_ended((job.get("status") or {}).get("conditions"))
        if role == "trial":  # a trial Job without a pod is the pod watch's to explain (controller.pods)
            pods.PODS.job_event(type_, job, ended)
        if type_ in (LISTED, "DELETED") or not ended:
            return
        handler = HANDLERS.get(role)
        if handler is None or (type_ == RELISTED and not _waited_for(role, job)):
            return
        self.dispatched += 1
        task = asyncio.get_running_loop().create_task(self._handle(handler, type_, job))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    @staticmethod
    async def _handle(handler: Callable[[str, Obj], Awaitable[None]], type_: str, job: Obj) -> None:
        try:
            await handler("MODIFIED" if type_ == RELISTED else type_, job)
        except (kopf.TemporaryError, kopf.PermanentError) as exc:
            log.warning("job %s: %s", job["metadata"]["name"], exc)
        except Exception:  # as kopf did for a failing handler: logged, the next event or the sweep tries again
            log.exception("handling the end of job %s failed", job["metadata"]["name"])


class RunEvents:
    """ScoringRuns' events → :func:`anchorage.controller.scoring.on_run_event`, every one (listed ones as ``None``,
    as kopf passed its listing), one at a time per run; events that come while a run's handler runs are
    handled after it, the latest only (as kopf batches an object's events)."""

    def __init__(self, peering: Peering = PEERING,
                 handle: Callable[[str | None, Obj], Awaitable[None]] | None = None) -> None:
        self.peering = peering
        self.handle = handle
        self.busy: set[tuple[str, str]] = set()
        self.pending: dict[tuple[str, str], tuple[str | None, Obj]] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def __call__(self, type_: str, run: Obj) -> None:
        if self.peering.paused:
            return
        meta = run["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        event = (None if type_ in (LISTED, RELISTED) else type_, run)
        if key in self.busy:
            self.pending[key] = event
            return
        self.busy.add(key)
        task = asyncio.get_running_loop().create_task(self._serve(key, event))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _serve(self, key: tuple[str, str], event: tuple[str | None, Obj] | None) -> None:
        handle = self.handle or scoring.on_run_event
        try:
            while event is not None:
                try:
                    await handle(*event)
                except (kopf.TemporaryError, kopf.PermanentError) as exc:
                    log.warning("scoring run %s/%s: %s", *key, exc)
                except Exception:  # as kopf did for a failing handler: logged; the next event or the watchdog retries
                    log.exception("handling scoring run %s/%s failed", *key)
                event = self.pending.pop(key, None)
        finally:
            self.busy.discard(key)


#: What this module lists and watches (group, version, plural): the chart's RBAC grants list and watch on them
#: (``tests/charts/test_chart_rbac.py`` derives the rules from this and kopf's decorators).
WATCHED = {"jobs": ("batch", "v1", "jobs"), "scoringruns": (API_GROUP, API_VERSION, "scoringruns"),
           "pods": ("", "v1", "pods"), "networkpolicies": ("networking.k8s.io", "v1", "networkpolicies")}


def paths(kind: str, namespaces: list[str]) -> list[str]:
    """The collection paths of a :data:`WATCHED` kind: one per namespace, or the cluster-wide one."""
    group, version, plural = WATCHED[kind]
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    if not namespaces:
        return [f"{base}/{plural}"]
    return [f"{base}/namespaces/{ns}/{plural}" for ns in namespaces]


def job_paths(namespaces: list[str]) -> list[str]:
    """The Jobs' collection paths: one per namespace, or the cluster-wide one."""
    return paths("jobs", namespaces)


class Watcher:
    """The running watches of the operator's Jobs, and their session (one per process)."""

    def __init__(self) -> None:
        self.session: aiohttp.ClientSession | None = None
        self.watches: list[Watch] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.events = JobEvents()
        self.runs = RunEvents()
        self.policies = policies.PolicyEvents()

    async def start(self, namespaces: list[str], timeout: int, jobs_namespace: str | None = None) -> None:
        """Watch the Jobs in ``jobs_namespace`` (the trials namespace: the only one they are created in) when given,
        else in ``namespaces`` (all: []), and the ScoringRuns in ``namespaces``."""
        client = kube.client()
        # One connection per watch (a watch holds its connection); large objects within one line.
        # (the TLS settings also check an https:// proxy's certificate, for an http:// server too)
        connector = aiohttp.TCPConnector(ssl=client.tls_context(), limit=0)
        self.session = aiohttp.ClientSession(connector=connector, read_bufsize=2 ** 22, trust_env=False)
        self.watches = [Watch(client, self.session, path, JOBS_SELECTOR, self.events, timeout=timeout)
                        for path in job_paths([jobs_namespace] if jobs_namespace else namespaces)]
        self.watches += [Watch(client, self.session, path, "", self.runs, timeout=timeout)
                         for path in paths("scoringruns", namespaces)]
        # the trial pods and the NetworkPolicies where the pods run: the trials namespace (else every served one)
        trials_namespace = config().trials_namespace
        where = [trials_namespace] if trials_namespace else namespaces
        self.watches += [Watch(client, self.session, path, PODS_SELECTOR, pods.PODS, timeout=timeout)
                         for path in paths("pods", where)]
        self.watches += [Watch(client, self.session, path, "", self.policies, timeout=timeout)
                         for path in paths("networkpolicies", where)]
        loop = asyncio.get_running_loop()
        self.tasks = [loop.create_task(w.run(), name=f"watch {w.path}") for w in self.watches]
        PEERING.resumed[:] = [self._relist]

    def _relist(self) -> None:
        for watch in self.watches:
            watch.relist = True

    async def stop(self) -> None:
        pods.PODS.stop()
        await stop_all(self.tasks, self.session)
        if self.session is not None:
            await asyncio.sleep(0.25)  # aiohttp closes TLS connections in the background


async def stop_all(tasks: list[asyncio.Task[None]], session: aiohttp.ClientSession | None) -> None:
    """Cancel a watcher's ``tasks``, wait for each to end, then close its ``session`` (every watcher stops so)."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if session is not None:
        await session.close()


WATCHER = Watcher()


def namespaces() -> list[str]:
    """The namespaces the operator serves (:data:`NAMESPACES_ENV`), [] for cluster-wide."""
    return [ns for ns in os.environ.get(NAMESPACES_ENV, "").split(",") if ns]


@kopf.on.startup()
async def start_watching(**_: Any) -> None:
    """Start the Jobs' watches with the operator (the server ends each after ``ANCHORAGE_WATCH_TIMEOUT`` s, as
    kopf's watches: ``settings.apply``)."""
    await WATCHER.start(namespaces(), int(os.environ.get("ANCHORAGE_WATCH_TIMEOUT", "300")), config().trials_namespace)


@kopf.on.cleanup()
async def stop_watching(**_: Any) -> None:
    """Stop the Jobs' watches with the operator."""
    await WATCHER.stop()
