"""JSON on the gateway's hot path: orjson, with the standard library for what orjson refuses.

Used by the request handlers (:mod:`anchorage.gateway.server`: a request's body, a whole JSON answer, a
forced ``stream_options``) and the stream usage reader (:mod:`anchorage.gateway.usage`: the events that
carry usage). orjson parses a chat answer several times faster than :mod:`json`; what it refuses but
:mod:`json` accepts (``NaN``, ``Infinity``) is handed to :mod:`json`, so the gateway accepts the same
bodies. Two differences remain, both in values no provider accepts: integers beyond 64 bits are read as
floats, and a body the gateway re-serialises (a chat stream's forced ``stream_options``) carries ``NaN``
as ``null``.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(data: bytes) -> Any:
    """Parse ``data`` like :func:`json.loads` (raises :class:`ValueError` on what is not JSON)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)  # NaN, Infinity: accepted by json; anything else raises ValueError here too


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON bytes."""
    try:
        return orjson.dumps(value)
    except TypeError:  # (orjson.JSONEncodeError is one) e.g. an integer beyond 64 bits made by hand
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
