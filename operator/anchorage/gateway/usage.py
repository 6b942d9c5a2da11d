"""Read token usage out of provider responses and server-sent-event streams, as they pass.

Called by the gateway's forwarding code: :func:`counts_from_body` on a whole JSON response,
:class:`StreamUsage` fed with each streamed chunk (it never holds the stream back, it only keeps the
bytes of an event until the event is complete). Normalises every provider to the conventions of
:mod:`anchorage.costs` (``input_tokens`` includes cached input).

Where each provider puts its numbers:

* OpenAI chat: ``usage.prompt_tokens``, ``usage.prompt_tokens_details.cached_tokens``,
  ``usage.completion_tokens``, ``usage.completion_tokens_details.reasoning_tokens`` (streams: the
  final chunk when ``stream_options.include_usage`` is set, which the gateway adds).
* OpenAI responses: ``usage.input_tokens``, ``input_tokens_details.cached_tokens``,
  ``output_tokens``, ``output_tokens_details.reasoning_tokens`` (streams: the ``response.completed``
  / ``response.incomplete`` / ``response.failed`` event's ``response.usage``).
* Anthropic messages: ``usage.input_tokens`` (uncached), ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``, ``output_tokens`` (streams: ``message_start`` then cumulative
  ``message_delta``). Thinking tokens are inside ``output_tokens``; cache writes are billed as input.
"""

from __future__ import annotations

import json
from typing import Any

from anchorage.costs import TokenCounts


def _int(mapping: Any, *keys: str) -> int:
    """``mapping[k1][k2]...`` as an int; 0 when any level is missing or not a number."""
    value: Any = mapping
    for key in keys:
        if not isinstance(value, dict):
            return 0
        value = value.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def counts_from_openai_usage(usage: dict[str, Any], *, reasoning_in_output: bool) -> TokenCounts:
    """Chat (``prompt_tokens``...) or responses (``input_tokens``...) usage object."""
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        return TokenCounts(
            input_tokens=_int(usage, "prompt_tokens"),
            cached_input_tokens=_int(usage, "prompt_tokens_details", "cached_tokens"),
            output_tokens=_int(usage, "completion_tokens"),
            reasoning_tokens=_int(usage, "completion_tokens_details", "reasoning_tokens"),
            reasoning_in_output=reasoning_in_output,
        )
    return TokenCounts(
        input_tokens=_int(usage, "input_tokens"),
        cached_input_tokens=_int(usage, "input_tokens_details", "cached_tokens"),
        output_tokens=_int(usage, "output_tokens"),
        reasoning_tokens=_int(usage, "output_tokens_details", "reasoning_tokens"),
        reasoning_in_output=reasoning_in_output,
    )


def counts_from_anthropic_usage(usage: dict[str, Any]) -> TokenCounts:
    cached = _int(usage, "cache_read_input_tokens")
    total_input = _int(usage, "input_tokens") + cached + _int(usage, "cache_creation_input_tokens")
    return TokenCounts(input_tokens=total_input, cached_input_tokens=cached,
                       output_tokens=_int(usage, "output_tokens"))


def counts_from_body(body: Any, *, api: str, reasoning_in_output: bool = True) -> TokenCounts | None:
    """Usage of a whole (non-streamed) JSON response, or None when it reports none."""
    if not isinstance(body, dict) or not isinstance(body.get("usage"), dict):
        return None
    if api == "anthropic":
        return counts_from_anthropic_usage(body["usage"])
    return counts_from_openai_usage(body["usage"], reasoning_in_output=reasoning_in_output)


class StreamUsage:
    """Incremental SSE reader that remembers the usage the stream reports (None until it does)."""

    _TERMINAL_RESPONSE_EVENTS = ("response.completed", "response.incomplete", "response.failed")

    def __init__(self, *, api: str, reasoning_in_output: bool = True) -> None:
        self._api = api
        self._reasoning_in_output = reasoning_in_output
        self._pending = b""
        self._anthropic: dict[str, int] = {}
        self.counts: TokenCounts | None = None

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the stream; complete events that mention usage are parsed.

        The common chunk — whole events, none mentioning usage — costs one substring scan: nothing
        is copied or kept.
        """
        if not self._pending and chunk.endswith(b"\n\n") and b"usage" not in chunk:
            return
        data = self._pending + chunk
        end = max(data.rfind(b"\n\n"), data.rfind(b"\r\n\r\n"))
        if end < 0:
            self._pending = data
            return
        complete, self._pending = data[:end], data[end:].lstrip(b"\r\n")
        if b"usage" in complete:
            for event in complete.replace(b"\r\n", b"\n").split(b"\n\n"):
                if b"usage" in event:
                    self._event(event)

    def finish(self) -> TokenCounts | None:
        """Flush a last event that had no trailing blank line; return the stream's usage."""
        if self._pending.strip() and b"usage" in self._pending:
            self._event(self._pending)
        self._pending = b""
        return self.counts

    def _event(self, event: bytes) -> None:
        lines = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
        try:
            payload = json.loads(b"\n".join(lines)) if lines else None
        except ValueError:
            return
        if isinstance(payload, dict):
            self._payload(payload)

    def _payload(self, payload: dict[str, Any]) -> None:
        if self._api == "anthropic":
            self._anthropic_event(payload)
        elif payload.get("type") in self._TERMINAL_RESPONSE_EVENTS:
            counts = counts_from_body(payload.get("response"), api="openai",
                                      reasoning_in_output=self._reasoning_in_output)
            self.counts = counts or self.counts
        else:
            counts = counts_from_body(payload, api="openai", reasoning_in_output=self._reasoning_in_output)
            self.counts = counts or self.counts

    def _anthropic_event(self, payload: dict[str, Any]) -> None:
        usage = payload.get("usage")
        if payload.get("type") == "message_start" and isinstance(payload.get("message"), dict):
            usage = payload["message"].get("usage")
        if not isinstance(usage, dict):
            return
        for key, value in usage.items():
            if isinstance(value, int) and not isinstance(value, bool):
                self._anthropic[key] = value  # message_delta counters are cumulative: keep the last
        self.counts = counts_from_anthropic_usage(self._anthropic)
