"""The trials namespaces' NetworkPolicies, kept as :func:`anchorage.runtime.kube.jobs.network_policies` builds them.

Who calls it: :mod:`anchorage.controller.launching` and ``finishing`` (protocol Jobs) before a Job goes to a namespace
(:func:`ensure`), the operator's NetworkPolicy watch (:class:`PolicyEvents`, registered by
:mod:`anchorage.controller.watching`) on every event of a policy there, and :mod:`anchorage.controller.enforcement`
before its probe.

:func:`reconcile` makes a namespace's policies what the builder says: a missing one is created, one whose ``spec``
differs (edited by hand, or an older operator's) is replaced, and a policy the operator made (label
``app.kubernetes.io/managed-by=anchorage``) that it no longer builds is deleted — so a deleted or edited policy comes
back within a watch event's delay. The chart renders the same policies (``tests/charts`` compares them), so its
objects are equal and left alone (their labels and Helm's annotations are kept when one is replaced).
Writes: none while the policies are as built.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Mapping
from typing import Any

from anchorage.controller import kube
from anchorage.controller.peering import PEERING
from anchorage.runtime.kube import jobs
from anchorage.runtime.kube.jobs import OperatorConfig

log = logging.getLogger("anchorage.policies")
Obj = dict[str, Any]
MANAGED = ",".join(f"{k}={v}" for k, v in jobs.MANAGED_BY.items())

#: Namespaces whose policies this process has reconciled (and keeps: the watch's events come back here).
KEPT: set[str] = set()
_LOCK = threading.Lock()


def normal(value: Any) -> Any:
    """A policy's spec as the API server keeps it: empty lists and maps and nulls left out (``ingress: []`` is
    stored as no ``ingress``), so a spec read back compares equal to the one built."""
    if isinstance(value, Mapping):
        kept = {k: normal(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [normal(v) for v in value]
    return value


def same(spec: Any, built: Any) -> bool:
    """Whether a policy's ``spec`` is the built one (:func:`normal` forms)."""
    return bool(normal(spec) == normal(built))


def reconcile(namespace: str, config: OperatorConfig) -> list[str]:
    """Make ``namespace``'s trial policies as built; what was done, one line per change ([] when nothing was)."""
    desired = {p["metadata"]["name"]: p for p in jobs.network_policies(namespace, config)}
    done: list[str] = []
    for name, policy in desired.items():
        found = kube.get_network_policy(namespace, name)
        if found is None:
            if kube.create(functools.partial(kube.client().create_namespaced_network_policy, namespace, policy),
                           what=f"create networkpolicy/{name}"):
                done.append(f"created {name}")
        elif not same(found.get("spec"), policy["spec"]):
            meta = found["metadata"]
            replaced = {**policy, "metadata": {**policy["metadata"], "labels": meta.get("labels") or {},
                                               "annotations": meta.get("annotations") or {},
                                               "resourceVersion": meta["resourceVersion"]}}
            if kube.replace_network_policy(replaced):
                done.append(f"restored {name} (its spec had been changed)")
    for stale in kube.list_network_policies(namespace, MANAGED):
        name = stale["metadata"]["name"]
        if name not in desired:
            kube.delete_network_policy(namespace, name)
            done.append(f"deleted {name} (no longer one of the operator's policies)")
    for line in done:
        log.warning("networkpolicies in %s: %s", namespace, line)
    return done


def ensure(namespace: str, config: OperatorConfig) -> None:
    """Reconcile ``namespace`` the first time this process sends a Job there; its watch keeps it from then on."""
    if namespace in KEPT:
        return
    with _LOCK:
        if namespace not in KEPT:
            reconcile(namespace, config)
            KEPT.add(namespace)


class PolicyEvents:
    """NetworkPolicy watch events → :func:`reconcile` of their namespace, when it is one this process keeps and the
    event is about one of its policies (by name, or a stale one of its own) that is not as built. Runs the check in
    the handlers' threads, one at a time per namespace (events during a reconcile are folded into one more)."""

    def __init__(self, config: OperatorConfig | None = None) -> None:
        self.config = config
        self.busy: set[str] = set()
        self.again: set[str] = set()

    def _settings(self) -> OperatorConfig:
        from anchorage.controller.settings import config

        return self.config or config()

    def wanted(self, type_: str, policy: Mapping[str, Any]) -> bool:
        """Whether an event may mean a kept namespace's policies are not as built."""
        meta = policy.get("metadata") or {}
        namespace = meta.get("namespace", "")
        if namespace not in KEPT:
            return False
        desired = {p["metadata"]["name"]: p for p in jobs.network_policies(namespace, self._settings())}
        name = meta.get("name", "")
        if name in desired:
            return type_ == "DELETED" or not same(policy.get("spec"), desired[name]["spec"])
        ours = all((meta.get("labels") or {}).get(k) == v for k, v in jobs.MANAGED_BY.items())
        return ours and type_ != "DELETED"

    def __call__(self, type_: str, policy: Obj) -> None:
        if PEERING.paused or not self.wanted(type_, policy):
            return
        namespace = policy["metadata"]["namespace"]
        if namespace in self.busy:
            self.again.add(namespace)
            return
        self.busy.add(namespace)
        asyncio.get_running_loop().create_task(self._serve(namespace))

    async def _serve(self, namespace: str) -> None:
        try:
            while True:
                self.again.discard(namespace)
                try:
                    await kube.in_thread(reconcile, namespace, self._settings())
                except Exception:  # logged; the next event (or the watch's next listing) tries again
                    log.exception("keeping the networkpolicies of %s failed", namespace)
                if namespace not in self.again:
                    break
        finally:
            self.busy.discard(namespace)
