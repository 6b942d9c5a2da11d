"""JSON on the gateway's hot path: orjson, with the standard library for what orjson refuses.

Used by the request handlers (:mod:`anchorage.gateway.server`: a request's body, a whole JSON answer, a
forced ``stream_options``) and the stream usage reader (:mod:`anchorage.gateway.usage`: the events that
carry usage). orjson (a dependency) parses a chat answer several times faster than :mod:`json`; what it
refuses but :mod:`json` accepts (``NaN``, ``Infinity``) is handed to :mod:`json`, so the gateway accepts
the same bodies. Two differences remain, both in values no provider accepts: integers beyond 64 bits are
read as floats, and a body the gateway re-serialises (a chat stream's forced ``stream_options``) carries
``NaN`` as ``null``. Where orjson is not installed (an environment made before it became a dependency)
the standard library does all of it.
"""

from __future__ import annotations

import importlib
import json
from types import ModuleType
from typing import Any


def _orjson() -> ModuleType | None:
    try:
        return importlib.import_module("orjson")
    except ImportError:
        return None


_fast = _orjson()


def loads(data: bytes) -> Any:
    """Parse ``data`` like :func:`json.loads` (raises :class:`ValueError` on what is not JSON)."""
    if _fast is not None:
        try:
            return _fast.loads(data)
        except ValueError:  # orjson.JSONDecodeError; NaN, Infinity are accepted by json, the rest raises there too
            pass
    return json.loads(data)


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON bytes."""
    if _fast is not None:
        try:
            return bytes(_fast.dumps(value))
        except TypeError:  # (orjson.JSONEncodeError is one) e.g. an integer beyond 64 bits made by hand
            pass
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
