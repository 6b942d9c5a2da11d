"""When to retry an upstream failure and how long to wait (pure helpers of the gateway's forwarder).

A hint from the provider wins over our own backoff: the ``Retry-After`` header (seconds or an HTTP
date), ``retry-after-ms``, or a cooldown in the JSON error body (``reset_seconds``, ``retry_after``,
``retry_after_seconds``, at the top level or inside ``error``). Without a hint the wait is
``base·2^(attempt-1)`` capped at ``max_delay_seconds``. The caller gives up when attempts run out or
when waiting would pass the total time budget — it never sleeps past the budget.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from anchorage.gateway.gatewayconfig import RetryConfig

BODY_HINT_KEYS = ("reset_seconds", "retry_after_seconds", "retry_after")


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return max(float(value), 0.0)
    if isinstance(value, str):
        try:
            return max(float(value.strip().rstrip("s")), 0.0)
        except ValueError:
            return None
    return None


def header_hint(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` / ``Retry-After`` (None: no usable hint)."""
    millis = _seconds(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    raw = headers.get("Retry-After") or headers.get("retry-after")
    if raw is None:
        return None
    seconds = _seconds(raw)
    if seconds is not None:
        return seconds
    try:
        return max(parsedate_to_datetime(raw).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


def body_hint(body: bytes) -> float | None:
    """A cooldown stated in a JSON error body, e.g. ``{"error": {"reset_seconds": 12}}``."""
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return None
    for scope in (data, data.get("error") if isinstance(data, dict) else None):
        if isinstance(scope, dict):
            for key in BODY_HINT_KEYS:
                seconds = _seconds(scope.get(key))
                if seconds is not None:
                    return seconds
    return None


def retry_delay(attempt: int, headers: Mapping[str, str], body: bytes, config: RetryConfig) -> float:
    """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1)."""
    hints = [h for h in (header_hint(headers), body_hint(body)) if h is not None]
    if hints:
        return max(hints)
    return float(min(config.base_delay_seconds * 2 ** (attempt - 1), config.max_delay_seconds))
