"""Operator-wide settings, applied at kopf startup, and the operator's own configuration.

Registered by importing ``anchorage.controller``. Hygiene: kopf's progress and diff-base live under
our annotation prefix ``anchorage.dev/``, the finalizer is ``anchorage.dev/finalizer``, only events
at WARNING and above are posted to the API, and a single replica is active at a time through
namespaced peering (``KopfPeering`` named ``anchorage``; without the peering CRD the operator runs
standalone and says so). The :class:`~anchorage.runtime.kubejobs.OperatorConfig` comes from the
environment variable ``ANCHORAGE_OPERATOR_CONFIG`` (JSON), which ``anchorage operator`` sets.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

import kopf

from anchorage.runtime.kubejobs import OperatorConfig

PREFIX = "anchorage.dev"
FINALIZER = f"{PREFIX}/finalizer"
CONFIG_ENV = "ANCHORAGE_OPERATOR_CONFIG"


@functools.cache
def config() -> OperatorConfig:
    """The operator's configuration (``ANCHORAGE_OPERATOR_CONFIG``, JSON; defaults otherwise)."""
    raw = os.environ.get(CONFIG_ENV)
    return OperatorConfig.model_validate_json(raw) if raw else OperatorConfig()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Storage prefixes, finalizer, event level, peering and watch timeouts."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration")
    settings.persistence.finalizer = FINALIZER
    settings.posting.level = logging.WARNING
    settings.peering.name = "anchorage"
    settings.peering.mandatory = False
    settings.peering.clusterwide = False
    settings.watching.server_timeout = int(os.environ.get("ANCHORAGE_WATCH_TIMEOUT", "300"))
    settings.watching.client_timeout = settings.watching.server_timeout + 30
    settings.queueing.error_delays = (1, 1, 2, 3, 5, 8)
    settings.networking.error_backoffs = (0.2, 0.5, 1, 2, 3, 5)
    settings.execution.max_workers = int(os.environ.get("ANCHORAGE_WORKERS", "8"))
