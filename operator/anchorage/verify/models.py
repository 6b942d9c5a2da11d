"""How verification protocols talk to models: the :class:`ModelClient` protocol and its HTTP client.

Every judge, solver and reviser call is one *isolated run*: a fresh two-message conversation sent as a
single request, with no history and no shared state between calls. :class:`GatewayClient` sends it to
an OpenAI-compatible ``/v1/chat/completions`` endpoint — in Anchorage always the model gateway
(``anchorage.gateway``), with a per-run bearer token so usage is attributed — using only the standard
library (``urllib``), so this package stays pure (no aiohttp). Tests use the real gateway in front of
the labelled mock upstream (``anchorage.gateway.mock``); any object with a ``complete`` method works.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Protocol

from anchorage.errors import InfrastructureError

Message = dict[str, str]


@dataclass(frozen=True)
class Completion:
    """One model reply with what is worth recording about it."""

    text: str
    model: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    mock: bool = False


class ModelClient(Protocol):
    """Anything that answers one fresh conversation. ``seed`` distinguishes rollouts of the same prompt."""

    def complete(self, messages: list[Message], *, model: str, seed: int | None = None,
                 temperature: float | None = None, run_id: str | None = None) -> Completion: ...


class GatewayClient:
    """OpenAI-compatible chat completions over HTTP (urllib), one request per isolated run."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 600.0) -> None:
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.token = token
        self.timeout = timeout

    def _request(self, body: dict[str, Any], run_id: str | None) -> urllib.request.Request:
        headers = {"content-type": "application/json"}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        if run_id:
            headers["x-anchorage-run"] = run_id
        return urllib.request.Request(f"{self.base_url}/chat/completions", data=json.dumps(body).encode("utf-8"),
                                      headers=headers, method="POST")

    def complete(self, messages: list[Message], *, model: str, seed: int | None = None,
                 temperature: float | None = None, run_id: str | None = None) -> Completion:
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": False}
        if seed is not None:
            body["seed"] = seed
        if temperature is not None:
            body["temperature"] = temperature
        try:
            with urllib.request.urlopen(self._request(body, run_id), timeout=self.timeout) as response:
                payload = json.loads(response.read().decode("utf-8"))
                mock = response.headers.get("x-anchorage-mock") == "1"
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            raise InfrastructureError(f"model call to {self.base_url} failed: HTTP {exc.code}: {detail}",
                                      hint="check the gateway token, the model id and the gateway's upstreams") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise InfrastructureError(f"model call to {self.base_url} failed: {exc}",
                                      hint="is the gateway running at --base-url?") from exc
        return _completion(payload, mock)


def _completion(payload: Any, mock: bool) -> Completion:
    try:
        text = payload["choices"][0]["message"]["content"] or ""
    except (KeyError, IndexError, TypeError) as exc:
        raise InfrastructureError(f"model reply has no choices[0].message.content: {str(payload)[:200]}",
                                  hint="the endpoint must speak OpenAI chat completions") from exc
    model = str(payload.get("model", ""))
    return Completion(str(text), model, dict(payload.get("usage") or {}), mock or model.endswith("-mock"))
