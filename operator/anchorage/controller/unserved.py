"""Trials, ScoringRuns and campaigns that no operator serves get a Warning Event saying so and how to fix it.

An operator serves the namespaces it is given (``anchorage operator --namespace``, the chart's
``operator.watchNamespaces``) or all of them (``--all-namespaces``, ``operator.clusterWide``). Before this, a Trial
applied anywhere else (``kubectl apply -f examples/trial.yaml`` in ``default``) sat there with no phase and no word,
for ever. *Decision* (issue 26): the operator itself notices such objects — a cluster-wide list and watch of the three
kinds (the chart's ClusterRole ``<fullname>-operator-unserved-<namespace>``: list and watch of them, create of
Events, nothing else) — rather than an admission policy in the chart: a ValidatingAdmissionPolicy's warning is
printed once by ``kubectl apply`` and leaves nothing on the object, and each release's policy would also warn about
the namespaces *another* release serves (a policy knows only its own release's namespaces).

The rule, which holds with several releases in one cluster: an object outside this operator's namespaces is reported
when, :data:`GRACE_SECONDS` after its creation, nothing shows that an operator has picked it up — no ``status.phase``
(a served Trial is ``Running`` within a second, a campaign after its first pass, a lone ScoringRun ``Running`` when its
verifier starts) and no ``anchorage.dev/`` finalizer (both operators' marks). Objects an operator created (label
``app.kubernetes.io/managed-by=anchorage``: a campaign's Trials, a trial's ScoringRun) live beside a served parent and
are left out by the watch's label selector. The Event (reason ``NotServed``) is posted once per object and process
(a restarted operator posts it again), never by a paused peer.
"""

from __future__ import annotations

import asyncio
import calendar
import functools
import logging
import os
import time
import urllib.parse
from collections.abc import Iterable
from typing import Any

import aiohttp
import kopf

from anchorage.controller import kube, watching
from anchorage.controller.caches import Once
from anchorage.controller.peering import PEERING, Peering
from anchorage.manifests import API_GROUP, API_VERSION
from anchorage.runtime.kube import jobs

log = logging.getLogger(__name__)
Obj = dict[str, Any]
#: Seconds after its creation an object outside the served namespaces may wait for an operator before it is reported.
GRACE_SECONDS = float(os.environ.get("ANCHORAGE_UNSERVED_SECONDS", "30"))
#: Report them at all (``anchorage operator --report-unserved``, the default; the chart's ``operator.reportUnserved``).
REPORT_ENV = "ANCHORAGE_REPORT_UNSERVED"
#: What this module lists and watches cluster-wide (the chart's RBAC is derived from it: list and watch).
WATCHED = {plural: (API_GROUP, API_VERSION, plural) for plural in ("trials", "scoringruns", "verificationcampaigns")}
KINDS = {"trials": "Trial", "scoringruns": "ScoringRun", "verificationcampaigns": "VerificationCampaign"}
#: Objects no operator created (a served parent's children are served).
SELECTOR = f"{next(iter(jobs.MANAGED_BY))}!={next(iter(jobs.MANAGED_BY.values()))}"


def picked_up(obj: Obj) -> bool:
    """Whether an operator has acted on the object: a phase in its status, or one of our finalizers."""
    if (obj.get("status") or {}).get("phase"):
        return True
    return any(str(f).startswith("anchorage.dev/") for f in (obj.get("metadata") or {}).get("finalizers") or ())


def _created(meta: Obj) -> float:
    try:
        return float(calendar.timegm(time.strptime(str(meta.get("creationTimestamp")), "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return time.time()


def message(kind: str, namespace: str, served: Iterable[str], operator_namespace: str, grace: float) -> str:
    """The Event's words: what is wrong and the two ways to fix it."""
    mine = sorted(served)
    return (f"no Anchorage operator has picked up this {kind} within {grace:g} s: the operator in namespace "
            f"{operator_namespace} serves only {', '.join(mine)}. Create it in a served namespace "
            f"(kubectl apply -n {mine[0]} -f ...), or add {namespace} to the chart's operator.watchNamespaces (or set "
            "operator.clusterWide=true) and upgrade the release")


class Unserved:
    """The watches' callback (in the event loop) and the timer that reports what stayed unserved."""

    def __init__(self, served: Iterable[str], grace: float = GRACE_SECONDS,
                 peering: Peering = PEERING) -> None:
        self.served = frozenset(served)
        self.grace, self.peering = grace, peering
        self.operator_namespace = os.environ.get("POD_NAMESPACE") or "?"
        self.pending: dict[str, tuple[float, str, Obj]] = {}  # uid → (when due, plural, object)
        self.said = Once()
        self.posted = 0
        self._task: asyncio.Task[None] | None = None

    def on_event(self, plural: str, type_: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        uid, namespace = str(meta.get("uid") or ""), meta.get("namespace")
        if not uid or not namespace or namespace in self.served:
            return
        if type_ == "DELETED" or picked_up(obj) or meta.get("deletionTimestamp"):
            self.pending.pop(uid, None)
            return
        self.pending[uid] = (_created(meta) + self.grace, plural, obj)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self.pending:
            await asyncio.sleep(1.0)
            now = time.time()
            for uid in [u for u, (due, _, _) in self.pending.items() if due <= now]:
                _, plural, obj = self.pending.pop(uid)
                if self.peering.paused or not self.said.first(uid):
                    continue
                await kube.in_thread(self.report, plural, obj)

    def report(self, plural: str, obj: Obj) -> None:
        """Post the NotServed Warning on ``obj`` (best effort, as every Event)."""
        kind = KINDS[plural]
        meta = obj["metadata"]
        body = {**obj, "apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": kind}
        kube.post_event(body, "Warning", "NotServed",
                        message(kind, meta["namespace"], self.served, self.operator_namespace, self.grace))
        self.posted += 1

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


class Reporter:
    """The cluster-wide watches of the three kinds and their session (one per process; started only by an operator
    that serves some namespaces and reports, :func:`start_reporting`)."""

    def __init__(self) -> None:
        self.session: aiohttp.ClientSession | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.unserved: Unserved | None = None

    async def start(self, served: list[str], timeout: int) -> bool:
        """Start watching unless the operator may not list the kinds cluster-wide (said once); whether it started."""
        client = kube.client()
        group, version, plural = WATCHED["trials"]
        query = urllib.parse.urlencode({"labelSelector": SELECTOR, "limit": "1"})
        try:
            await kube.in_thread(client.request, "GET", f"/apis/{group}/{version}/{plural}?{query}")
        except kube.ApiError as exc:
            if exc.status in (401, 403):
                log.warning("the operator may not list Trials in every namespace (%s): Trials, ScoringRuns and "
                            "campaigns outside %s get no NotServed Event (the chart's operator.reportUnserved grants "
                            "it; --no-report-unserved says not to try)", exc.message, ", ".join(served))
                return False
            raise
        self.unserved = Unserved(served)
        connector = aiohttp.TCPConnector(ssl=client.tls_context(), limit=0)
        self.session = aiohttp.ClientSession(connector=connector, read_bufsize=2 ** 22, trust_env=False)
        loop = asyncio.get_running_loop()
        for name, (group, version, plural) in WATCHED.items():
            watch = watching.Watch(client, self.session, f"/apis/{group}/{version}/{plural}", SELECTOR,
                                   functools.partial(self._on, name), timeout=timeout)
            self.tasks.append(loop.create_task(watch.run(), name=f"watch unserved {name}"))
        return True

    def _on(self, plural: str, type_: str, obj: Obj) -> None:
        if self.unserved is not None:
            self.unserved.on_event(plural, type_, obj)

    async def stop(self) -> None:
        await watching.stop_all(self.tasks, None)
        if self.unserved is not None:
            self.unserved.stop()
        if self.session is not None:
            await self.session.close()


REPORTER = Reporter()


def reporting() -> bool:
    """Whether this operator reports unserved objects: it serves some namespaces (not all) and was not told not to."""
    return bool(watching.namespaces()) and os.environ.get(REPORT_ENV, "1") != "0"


@kopf.on.startup()
async def start_reporting(**_: Any) -> None:
    """Start the cluster-wide watches with the operator (when :func:`reporting`)."""
    if reporting():
        await REPORTER.start(watching.namespaces(), int(os.environ.get("ANCHORAGE_WATCH_TIMEOUT", "300")))


@kopf.on.cleanup()
async def stop_reporting(**_: Any) -> None:
    """Stop them with the operator."""
    await REPORTER.stop()
