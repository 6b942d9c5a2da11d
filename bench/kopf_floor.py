"""A no-op kopf operator watching what ``anchorage.controller`` watches, with its kopf settings.

``bench/kube_operator.py --kopf-floor`` runs it next to the real operator: its CPU is kopf's own cost of
receiving and processing the campaign's watch events (parsing, per-object memories, loggers, handler
invocation) — the floor under the operator's CPU per trial, whatever the handlers do. (Not importing
``anchorage.controller``: that would register the real handlers; the settings below mirror
``anchorage.controller.settings``.)
"""

from __future__ import annotations

import logging
from typing import Any, cast

import kopf

API_GROUP, API_VERSION = "anchorage.dev", "v1alpha1"
JOB_LABELS = {"app.kubernetes.io/managed-by": "anchorage"}


class _CampaignsOnlyDiffBase(kopf.AnnotationsDiffBaseStorage):
    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        if body.get("kind") != "VerificationCampaign":
            return cast(kopf.BodyEssence, None)
        return super().build(body=body, extra_fields=extra_fields)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="anchorage.dev")
    settings.persistence.diffbase_storage = _CampaignsOnlyDiffBase(prefix="anchorage.dev",
                                                                   key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)


@kopf.index(API_GROUP, API_VERSION, "trials", labels={"anchorage.dev/campaign": kopf.PRESENT})
def trials_by_campaign(name: str, namespace: str | None, labels: kopf.Labels, status: kopf.Status,
                       **_: Any) -> dict[tuple[str | None, str], tuple[str, Any]]:
    return {(namespace, labels["anchorage.dev/campaign"]): (name, status.get("phase"))}


@kopf.on.event(API_GROUP, API_VERSION, "trials")
@kopf.on.event(API_GROUP, API_VERSION, "scoringruns")
@kopf.on.event("batch", "v1", "jobs", labels={"anchorage.dev/role": "trial", **JOB_LABELS})
@kopf.on.event("batch", "v1", "jobs", labels={"anchorage.dev/role": "verifier", **JOB_LABELS})
async def noop(**_: Any) -> None:
    """Nothing: only kopf's own work per event remains."""
