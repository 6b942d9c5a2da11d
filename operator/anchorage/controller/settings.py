"""Operator-wide settings, applied at kopf startup, and the operator's own configuration.

Registered by importing ``anchorage.controller``. Hygiene: kopf's progress and diff-base live under
our annotation prefix ``anchorage.dev/``, the finalizer is ``anchorage.dev/finalizer``, only events
at WARNING and above are posted to the API (kopf's per-call INFO lines of the watch-event handlers
are logged only with ``--verbose``), and a single replica is active at a time through
namespaced peering (``KopfPeering`` named ``anchorage`` in each served namespace; an operator serving every
namespace, ``kopf.run(clusterwide=True)``, peers through the ``ClusterKopfPeering`` named ``anchorage``: kopf's own
setting from ``kopf.run`` is kept; without the peering CRD the operator runs standalone and says so). The
:class:`~anchorage.runtime.kube.jobs.OperatorConfig` comes from the
environment variable ``ANCHORAGE_OPERATOR_CONFIG`` (JSON), which ``anchorage operator`` sets.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any, cast

import kopf

from anchorage.gctuning import tune_gc
from anchorage.runtime.kube.jobs import OperatorConfig
from anchorage.runtime.kube.pod import open_store
from anchorage.store.base import ArtifactStore

PREFIX = "anchorage.dev"
FINALIZER = f"{PREFIX}/finalizer"
CONFIG_ENV = "ANCHORAGE_OPERATOR_CONFIG"


@functools.cache
def config() -> OperatorConfig:
    """The operator's configuration (``ANCHORAGE_OPERATOR_CONFIG``, JSON; defaults otherwise)."""
    raw = os.environ.get(CONFIG_ENV)
    return OperatorConfig.model_validate_json(raw) if raw else OperatorConfig()


@functools.cache
def _store_at(uri: str) -> ArtifactStore:
    return open_store(uri)


def store() -> ArtifactStore:
    """The artifact store of :func:`config`, opened once per process (an S3 store's client is thread-safe)."""
    return _store_at(config().store_uri)


class CampaignsOnlyDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff-base annotation storage, with the object's essence built for VerificationCampaigns only.

    kopf builds an "essence" (a deep copy of the body without metadata and status) on every watch event
    of every watched kind, to detect changes for create/update/field handlers. Only campaigns have such
    handlers; Trials, ScoringRuns and Jobs are handled through watch events, an index and timers, and
    copying their bodies was a fifth of the operator's CPU. For them there is no essence (kopf's own
    callers accept None: no diff-base, no change detected; a timer's ``idle`` then counts from the
    object's first sighting).
    """

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        if body.get("kind") != "VerificationCampaign":
            return cast(kopf.BodyEssence, None)
        return super().build(body=body, extra_fields=extra_fields)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Storage prefixes, finalizer, event level, peering and watch timeouts (:func:`apply`)."""
    apply(settings)


def apply(settings: kopf.OperatorSettings) -> None:
    """Set the operator's kopf settings (also used by ``bench/kopf_floor.py``, the no-op operator)."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = CampaignsOnlyDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration")
    settings.persistence.finalizer = FINALIZER
    settings.posting.level = logging.WARNING
    settings.peering.name = "anchorage"
    settings.peering.mandatory = False
    settings.watching.server_timeout = int(os.environ.get("ANCHORAGE_WATCH_TIMEOUT", "300"))
    settings.watching.client_timeout = settings.watching.server_timeout + 30
    settings.queueing.error_delays = (1, 1, 2, 3, 5, 8)
    settings.networking.error_backoffs = (0.2, 0.5, 1, 2, 3, 5)
    settings.execution.max_workers = int(os.environ.get("ANCHORAGE_WORKERS", "8"))
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("kopf.objects").addFilter(_quiet_event_handlers)
    tune_gc()  # see anchorage.gctuning: every watch event allocates thousands of short-lived objects


#: kopf handlers called on every watch event of every Trial (ScoringRuns and Jobs: ``controller.watching``).
EVENT_HANDLERS = frozenset({"trial_event"})


def _quiet_event_handlers(record: logging.LogRecord) -> bool:
    """Drop kopf's "Handler 'x' succeeded." INFO lines of :data:`EVENT_HANDLERS` (unless ``--verbose``).

    Several per trial, a good part of the operator's CPU at scale; other handlers' lines, warnings and
    errors stay.
    """
    msg = record.msg
    if record.levelno != logging.INFO or not isinstance(msg, str) or not msg.startswith("Handler '"):
        return True
    return msg[9:msg.find("'", 9)] not in EVENT_HANDLERS
