"""A no-op kopf operator watching what ``anchorage.controller`` reacts to, with its kopf settings.

The operator observes the Jobs and ScoringRuns it creates with its own watcher (``anchorage.controller.watching``)
and only Trials and campaigns through kopf; this floor keeps kopf watching all of them, as the operator did before.

``bench/kube_operator.py --kopf-floor`` runs it next to the real operator: its CPU is kopf's own cost of
receiving and processing the campaign's watch events (parsing, per-object memories, loggers, handler
invocation) — the floor under the operator's CPU per trial, whatever the handlers do. Its handlers live in
a registry of their own, with the operator's filters (Jobs: only events of ended ones, ``jobends.ENDED_JOBS``)
and an async index as the operator's; the settings are the operator's (``anchorage.controller.settings.apply``).
On exit it prints how many events reached its handlers, by resource (the bench reads that line).
Importing that module registers the real handlers in kopf's default registry, which this script does not
run (the import's cost is part of the real operator's startup too).

    python bench/kopf_floor.py NAMESPACE...
"""

from __future__ import annotations

import collections
import json
import logging
import sys
from typing import Any

import kopf

from anchorage.controller import settings as operator_settings
from anchorage.controller.jobends import ENDED_JOBS
from anchorage.manifests import API_GROUP, API_VERSION
from anchorage.runtime.kube.jobs import LABEL_CAMPAIGN, LABEL_ROLE, MANAGED_BY

REGISTRY = kopf.OperatorRegistry()
#: Watch events that reached the handlers, by resource (an ended Job's events reach one of the two Job handlers).
EVENTS: collections.Counter[str] = collections.Counter()
EVENTS_LINE = "kopf-floor events:"


@kopf.on.login(registry=REGISTRY)
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """As kopf's default registry does: credentials through the kubernetes client (the kubeconfig)."""
    return kopf.login_via_client(**kwargs)


@kopf.on.startup(registry=REGISTRY)
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    operator_settings.apply(settings)
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)


@kopf.index(API_GROUP, API_VERSION, "trials", labels={LABEL_CAMPAIGN: kopf.PRESENT}, registry=REGISTRY)
async def trials_by_campaign(name: str, namespace: str | None, labels: kopf.Labels, status: kopf.Status,
                             **_: Any) -> dict[tuple[str | None, str], tuple[str, Any]]:
    return {(namespace, labels[LABEL_CAMPAIGN]): (name, status.get("phase"))}


@kopf.on.event(API_GROUP, API_VERSION, "trials", registry=REGISTRY)
@kopf.on.event(API_GROUP, API_VERSION, "scoringruns", registry=REGISTRY)
@kopf.on.event("batch", "v1", "jobs", labels={LABEL_ROLE: "trial", **MANAGED_BY}, **ENDED_JOBS, registry=REGISTRY)
@kopf.on.event("batch", "v1", "jobs", labels={LABEL_ROLE: "verifier", **MANAGED_BY}, **ENDED_JOBS, registry=REGISTRY)
async def noop(resource: kopf.Resource, **_: Any) -> None:
    """Nothing but counting: only kopf's own work per event remains."""
    EVENTS[resource.plural] += 1


@kopf.on.cleanup(registry=REGISTRY)
async def report(**_: Any) -> None:
    """One line the bench reads: handler invocations, per resource."""
    print(f"{EVENTS_LINE} {json.dumps(EVENTS)}", flush=True)


if __name__ == "__main__":
    kopf.configure(log_format=kopf.LogFormat.PLAIN)
    kopf.run(registry=REGISTRY, standalone=True, namespaces=sys.argv[1:] or ["bench"], clusterwide=False)
