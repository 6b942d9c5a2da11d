"""The gateway's hot-path JSON accepts and refuses what the standard library does (orjson, json as fallback)."""

from __future__ import annotations

import json
import math

import pytest

from anchorage.gateway import fastjson


@pytest.mark.parametrize("fast", [True, False], ids=["orjson", "json-only"])
def test_same_bodies_accepted_and_refused_as_json(fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not fast:
        monkeypatch.setattr(fastjson, "_fast", None)
    body = b'{"model": "m", "messages": [{"role": "user", "content": "h\\u00e9"}], "max_tokens": 5}'
    assert fastjson.loads(body) == json.loads(body)
    assert math.isnan(fastjson.loads(b'{"temperature": NaN}')["temperature"])  # json takes it: so does the gateway
    for bad in (b"{", b"", b"[1,]", b'{"a": 1} x'):
        with pytest.raises(ValueError):
            fastjson.loads(bad)
    forced = {"model": "m", "stream": True, "stream_options": {"include_usage": True}, "n": 2**70}
    assert json.loads(fastjson.dumps(forced)) == forced  # beyond orjson's 64 bits: json writes it
