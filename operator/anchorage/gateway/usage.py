"""Read token usage out of provider responses and server-sent-event streams, as they pass.

Called by the gateway's forwarding code: :func:`counts_from_body` on a whole JSON response,
:class:`StreamUsage` fed with each streamed chunk (it never holds the stream back, it only keeps the
bytes of an event until the event is complete) — or, for a client that did not ask for usage in its
chat stream, :class:`UsageStripper`, which also takes the usage chunk the gateway asked for out of what
the client sees. Normalises every provider to the conventions of :mod:`anchorage.costs`
(``input_tokens`` includes cached input). A stream's usage is *complete* once its final figures went by
(chat: the usage chunk; responses: the terminal event; Anthropic: ``message_delta``): a stream that
ends before that is unmetered, whatever partial figures it showed.

Where each provider puts its numbers:

* OpenAI chat: ``usage.prompt_tokens``, ``usage.prompt_tokens_details.cached_tokens``,
  ``usage.completion_tokens``, ``usage.completion_tokens_details.reasoning_tokens`` (streams: the
  final chunk when ``stream_options.include_usage`` is set, which the gateway always asks for; every
  other chunk then carries ``"usage": null``).
* OpenAI responses: ``usage.input_tokens``, ``input_tokens_details.cached_tokens``,
  ``output_tokens``, ``output_tokens_details.reasoning_tokens`` (streams: the ``response.completed``
  / ``response.incomplete`` / ``response.failed`` event's ``response.usage``).
* Anthropic messages: ``usage.input_tokens`` (uncached), ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``, ``output_tokens`` (streams: ``message_start`` then cumulative
  ``message_delta``). Thinking tokens are inside ``output_tokens``; cache writes are billed as input.
"""

from __future__ import annotations

from typing import Any

from anchorage.costs import TokenCounts
from anchorage.gateway import fastjson


def _int(mapping: Any, *keys: str) -> int:
    """``mapping[k1][k2]...`` as an int; 0 when any level is missing or not a number."""
    value: Any = mapping
    for key in keys:
        if not isinstance(value, dict):
            return 0
        value = value.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def counts_from_openai_usage(usage: dict[str, Any], *, reasoning_in_output: bool) -> TokenCounts:
    """Chat (``prompt_tokens``, ``completion_tokens``) or responses (``input_tokens``, ``output_tokens``) usage
    object; either API keeps the cached and reasoning counts in the ``<name>_details`` object of those two."""
    chat = "prompt_tokens" in usage or "completion_tokens" in usage
    inputs, outputs = ("prompt_tokens", "completion_tokens") if chat else ("input_tokens", "output_tokens")
    return TokenCounts(
        input_tokens=_int(usage, inputs),
        cached_input_tokens=_int(usage, f"{inputs}_details", "cached_tokens"),
        output_tokens=_int(usage, outputs),
        reasoning_tokens=_int(usage, f"{outputs}_details", "reasoning_tokens"),
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


NULL_USAGE = (b'"usage":null', b'"usage": null')


def only_null_usage(chunk: bytes) -> bool:
    """True when every ``"usage"`` key in ``chunk`` has the value null (chat chunks before the last)."""
    return chunk.count(b'"usage"') == chunk.count(NULL_USAGE[0]) + chunk.count(NULL_USAGE[1])


class StreamUsage:
    """Incremental SSE reader that remembers the usage the stream reports (None until it does).

    ``chunks`` counts what it was fed; ``complete`` says whether the stream's final figures went by.
    """

    _TERMINAL_RESPONSE_EVENTS = ("response.completed", "response.incomplete", "response.failed")

    def __init__(self, *, api: str, reasoning_in_output: bool = True) -> None:
        self._api = api
        self._reasoning_in_output = reasoning_in_output
        self._pending = b""
        self._anthropic: dict[str, int] = {}
        self.counts: TokenCounts | None = None
        self.complete = False
        self.chunks = 0

    def feed(self, chunk: bytes) -> bytes:
        """Take the next bytes of the stream; complete events that mention usage are parsed. Returns
        ``chunk`` (what the client gets: all of it).

        The common chunk — whole events, none mentioning usage, or only ``"usage": null`` — costs one or
        three substring scans: nothing is copied or kept.
        """
        self.chunks += 1
        if not self._pending and chunk.endswith(b"\n\n") and (b"usage" not in chunk or only_null_usage(chunk)):
            return chunk
        self._scan(chunk)
        return chunk

    def _scan(self, chunk: bytes) -> None:
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

    def _event(self, event: bytes) -> dict[str, Any] | None:
        """Parse one complete event (its payload is returned, for :class:`UsageStripper`)."""
        payload = event_payload(event)
        if payload is not None:
            self._payload(payload)
        return payload

    def _payload(self, payload: dict[str, Any]) -> None:
        if self._api == "anthropic":
            self._anthropic_event(payload)
        elif payload.get("type") in self._TERMINAL_RESPONSE_EVENTS:
            counts = counts_from_body(payload.get("response"), api="openai",
                                      reasoning_in_output=self._reasoning_in_output)
            self.counts, self.complete = counts or self.counts, self.complete or counts is not None
        else:
            counts = counts_from_body(payload, api="openai", reasoning_in_output=self._reasoning_in_output)
            self.counts, self.complete = counts or self.counts, self.complete or counts is not None

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
        self.complete = self.complete or payload.get("type") == "message_delta"


def event_payload(event: bytes) -> dict[str, Any] | None:
    """The JSON object of one SSE event's ``data:`` lines (None when there is none)."""
    lines = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
    try:
        payload = fastjson.loads(b"\n".join(lines)) if lines else None
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def is_usage_chunk(payload: dict[str, Any]) -> bool:
    """A chat stream's usage-only chunk (``choices: []`` and a usage object): what ``include_usage`` adds."""
    return payload.get("choices") == [] and isinstance(payload.get("usage"), dict)


class UsageStripper:
    """Reads a chat stream's usage like :class:`StreamUsage` and leaves the usage chunk out of what the
    client gets (the client did not ask for it; the gateway did, to bill the request).

    It passes whole events only: the bytes of an event that has not ended yet wait for its end (a few
    bytes at a time; chunks made of whole events, as providers send them, pass at once).
    """

    def __init__(self, reader: StreamUsage) -> None:
        self.reader = reader
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """Take the next bytes; return those to send to the client now."""
        reader = self.reader
        reader.chunks += 1
        data = self._pending + chunk if self._pending else chunk
        lf, crlf = data.rfind(b"\n\n"), data.rfind(b"\r\n\r\n")
        end = max(lf + 2 if lf >= 0 else -1, crlf + 4 if crlf >= 0 else -1)
        if end < 0:
            self._pending = data
            return b""
        complete, self._pending = data[:end], data[end:]
        if b"usage" not in complete or only_null_usage(complete):
            return complete
        kept = []
        for event in complete.replace(b"\r\n", b"\n").split(b"\n\n"):
            if not event:
                continue
            payload = reader._event(event) if b"usage" in event else None
            if payload is None or not is_usage_chunk(payload):
                kept.append(event + b"\n\n")
        return b"".join(kept)

    def finish(self) -> bytes:
        """What is left of an event without a trailing blank line (sent as it is, unless it is the usage chunk)."""
        rest, self._pending = self._pending, b""
        if b"usage" in rest:
            payload = self.reader._event(rest.strip())
            if payload is not None and is_usage_chunk(payload):
                return b""
        return rest
