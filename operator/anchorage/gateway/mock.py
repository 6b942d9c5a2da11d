"""A deterministic mock model provider (aiohttp), clearly labelled as a mock in every response.

Used by tests, the benchmark, the demo (``anchorage gateway --mock``) and the verification engineer's
scripted verdicts. It speaks OpenAI chat completions and responses (streamed and not) and Anthropic
messages, and it is *labelled*: every response carries the header ``x-anchorage-mock: 1`` and the
model id gets the suffix ``-mock``.

What it answers (first rule that applies):

1. a scripted failure queued with :meth:`MockUpstream.fail` (429 storms with ``Retry-After`` and/or
   ``reset_seconds``, 500s) — consumed one per request;
2. a canned reply whose ``marker`` occurs in the prompt (``MockConfig.replies``, in order);
3. when the prompt mentions ``output_schema``: a JSON object. If a JSON object follows the word
   ``output_schema`` in the prompt, the reply follows it with plausible numbers: a JSON Schema
   (``minimum``/``maximum`` and enums respected), a type template like the tasks'
   ``output_schema.json`` (``"number"`` leaves, inside the ranges its ``$scored_fields`` gives), or an
   example object (its numbers varied by ±20 %); otherwise a small generic result object;
4. otherwise a short text reply.

Replies 3 and 4 are deterministic per (model, seed, prompt): a SHA-256 of the three seeds the
generator (``seed`` is the request's ``seed`` field, 0 when absent).

Usage is deterministic too: tokens = ⌈UTF-8 bytes / 4⌉ of the prompt and of the reply; cached input
= ⌊input × ``cached_ratio``⌋; reasoning tokens from the reasoning effort (``none`` 0, ``minimal`` 16,
``low`` 64, ``medium`` 256, ``high`` 1024, ``xhigh`` 2048; ``default_reasoning_tokens`` without
one). With ``reasoning_billed_separately`` the completion counter excludes reasoning (the SPEC §3
provider quirk the cost adjustment exists for); otherwise it includes it, as OpenAI does. A request's
output cap (chat ``max_completion_tokens`` / ``max_tokens``, responses ``max_output_tokens``, messages
``max_tokens``) is honoured like a provider does: reasoning, then the reply, are cut to fit it (finish
reason ``length``). Chat streams report usage only when ``stream_options.include_usage`` is set — then,
as OpenAI's do, every chunk carries ``"usage": null`` and a last chunk with ``choices: []`` the figures.
``report_usage: false`` makes an upstream that never reports usage (no ``usage`` anywhere). Anthropic's
``POST /v1/messages/count_tokens`` answers the prompt's ``input_tokens``.

:meth:`MockUpstream.cut_streams` drops the connection of the next streams after their first chunk.
A prompt containing ``[[hold:NAME]]`` makes a stream pause after its first chunk until
:meth:`MockUpstream.release` is called with NAME (tests of unbuffered pass-through).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import math
import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from anchorage.errors import InputError

MOCK_HEADER = "x-anchorage-mock"
MODEL_SUFFIX = "-mock"
CREATED = 1_767_225_600  # a fixed timestamp: responses are byte-for-byte reproducible
EFFORT_TOKENS = {"none": 0, "minimal": 16, "low": 64, "medium": 256, "high": 1024, "xhigh": 2048}
HOLD_SECONDS = 30.0


class ReplyRule(BaseModel):
    """A canned reply used when ``marker`` occurs in the prompt."""

    model_config = ConfigDict(extra="forbid")

    marker: str = Field(min_length=1)
    reply: str


class MockConfig(BaseModel):
    """How the mock behaves (all deterministic)."""

    model_config = ConfigDict(extra="forbid")

    replies: list[ReplyRule] = Field(default_factory=list)
    cached_ratio: float = Field(default=0.25, ge=0, le=1)
    default_reasoning_tokens: int = Field(default=0, ge=0)
    reasoning_billed_separately: bool = False
    stream_chunk_chars: int = Field(default=24, ge=1)
    chunk_delay_seconds: float = Field(default=0.0, ge=0)
    reply_delay_seconds: float = Field(default=0.0, ge=0, description="wait this long before answering (a model "
                                       "thinking: keeps requests in flight together)")
    expected_api_key: str | None = Field(default=None, description="401 unless requests carry this key")
    report_usage: bool = Field(default=True, description="false: never report token usage (a provider that "
                               "does not; the gateway then records its requests as unmetered)")

    @classmethod
    def load(cls, path: str | Path) -> MockConfig:
        try:
            return cls.model_validate(yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {})
        except (OSError, yaml.YAMLError, ValueError) as exc:
            raise InputError(f"mock config {path} is invalid: {exc}",
                             hint="keys: replies[{marker, reply}], cached_ratio, reasoning_billed_separately, ...") \
                from exc


@dataclass(frozen=True)
class Failure:
    """One scripted failed answer."""

    status: int
    retry_after: float | None = None
    reset_seconds: float | None = None


@dataclass(frozen=True)
class Seen:
    """What the mock recorded about a request (for tests: which key arrived, which body)."""

    path: str
    authorization: str | None
    api_key: str | None
    body: dict[str, Any]
    query: str = ""


def count_tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4)


OUTPUT_CAP_KEYS = ("max_completion_tokens", "max_output_tokens", "max_tokens")


def output_cap(body: dict[str, Any]) -> int | None:
    """The request's output cap (the first of :data:`OUTPUT_CAP_KEYS` it sets), or None."""
    for key in OUTPUT_CAP_KEYS:
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(part) for part in content)
    if isinstance(content, dict):
        return _text_of(content.get("text", content.get("content", "")))
    return ""


def prompt_of(body: dict[str, Any]) -> str:
    """All prompt text of a chat, responses or messages request, in order."""
    parts = [_text_of(body.get("system", "")), _text_of(body.get("instructions", ""))]
    parts += [_text_of(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict)]
    parts.append(_text_of(body.get("input", "")))
    return "\n".join(p for p in parts if p)


def _effort(body: dict[str, Any]) -> str | None:
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and isinstance(reasoning.get("effort"), str):
        return str(reasoning["effort"])
    effort = body.get("reasoning_effort")
    return effort if isinstance(effort, str) else None


# ----- deterministic content ---------------------------------------------------------------------


def _schema_instance(schema: Any, rng: random.Random, depth: int = 0) -> Any:
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return _schema_instance(schema[key][0], rng, depth + 1)
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), "null") if isinstance(kind, list) else kind
    if kind == "object" or (kind is None and isinstance(schema.get("properties"), dict)):
        props = schema.get("properties") or {}
        return {name: _schema_instance(sub, rng, depth + 1) for name, sub in props.items()}
    if kind == "array":
        low, high = int(schema.get("minItems", 3)), int(schema.get("maxItems", 5))
        return [_schema_instance(schema.get("items", {}), rng, depth + 1) for _ in range(min(max(low, 1), high))]
    if kind in ("number", "integer"):
        return _number(schema, rng, integer=kind == "integer")
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "string":
        return "mock"
    return None


def _number(schema: dict[str, Any], rng: random.Random, *, integer: bool) -> float | int:
    low = float(schema.get("minimum", schema.get("exclusiveMinimum", 0)))
    high = float(schema.get("maximum", schema.get("exclusiveMaximum", max(low, 0) + 100)))
    if integer:
        return rng.randint(math.ceil(low), max(math.floor(high), math.ceil(low)))
    value = low + (high - low) * (0.05 + 0.9 * rng.random())  # strictly inside: exclusive bounds hold
    return round(value, 4)


TYPE_WORDS = ("number", "integer", "string", "boolean")


def _from_template(example: Any, rng: random.Random, scored: dict[str, Any], path: str = "") -> Any:
    """Fill a type template (``"number"`` leaves, as in the tasks' output_schema.json) or vary an example.

    Numbers fall inside the ``range`` that ``$scored_fields`` gives for their path; keys starting with
    ``$`` are meta keys and are left out; a one-element list template becomes three elements.
    """
    if isinstance(example, dict):
        return {key: _from_template(value, rng, scored, f"{path}.{key}" if path else key)
                for key, value in example.items() if not key.startswith("$")}
    if isinstance(example, list):
        items = example * 3 if len(example) == 1 else example
        return [_from_template(item, rng, scored, f"{path}[{i}]") for i, item in enumerate(items)]
    if isinstance(example, str) and example in TYPE_WORDS:
        return _template_leaf(example, rng, scored.get(path))
    if isinstance(example, bool) or example is None or isinstance(example, str):
        return example
    if isinstance(example, int):
        return round(example * rng.uniform(0.8, 1.2))
    if isinstance(example, float):
        return round(example * rng.uniform(0.8, 1.2), 4)
    return example


def _template_leaf(kind: str, rng: random.Random, field: Any) -> Any:
    if kind == "string":
        return "mock"
    if kind == "boolean":
        return rng.random() < 0.5
    bounds = field.get("range") if isinstance(field, dict) else None
    low = bounds[0] if isinstance(bounds, list) and len(bounds) == 2 and bounds[0] is not None else 0
    high = bounds[1] if isinstance(bounds, list) and len(bounds) == 2 and bounds[1] is not None else None
    schema = {"minimum": low, "maximum": high if high is not None else max(2 * abs(low), 100) + low}
    return _number(schema, rng, integer=kind == "integer")


def _embedded_json(prompt: str) -> Any:
    """The first JSON object after the word ``output_schema``, or None."""
    start = prompt.find("{", prompt.find("output_schema"))
    while start >= 0:
        try:
            return json.JSONDecoder().raw_decode(prompt, start)[0]
        except ValueError:
            start = prompt.find("{", start + 1)
    return None


def json_reply(prompt: str, rng: random.Random) -> str:
    """The JSON artifact answer to a prompt that mentions ``output_schema``."""
    found = _embedded_json(prompt)
    if isinstance(found, dict) and ("properties" in found or found.get("type") == "object"):
        value = _schema_instance(found, rng)
    elif isinstance(found, dict):
        scored = found.get("$scored_fields")
        value = _from_template(found, rng, scored if isinstance(scored, dict) else {})
    else:
        value = {"result": {"value": round(rng.uniform(1, 100), 4), "confidence": round(rng.random(), 4)},
                 "note": "mock"}
    return json.dumps(value, ensure_ascii=False)


def default_reply(model: str, seed: int, prompt: str) -> str:
    digest = hashlib.sha256(f"{model}\x00{seed}\x00{prompt}".encode()).hexdigest()
    rng = random.Random(int(digest[:16], 16))
    if "output_schema" in prompt:
        return json_reply(prompt, rng)
    return f"[mock reply {digest[:12]}] model {model}, seed {seed}: {rng.randint(1, 10**6)} is the answer."


# ----- the app -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One computed reply with its usage numbers."""

    model: str
    text: str
    input_tokens: int
    cached_tokens: int
    text_tokens: int
    reasoning_tokens: int
    ident: str
    cut: bool = False  # the output cap cut the reply (finish reason "length")


class MockUpstream:
    """The mock provider's state (scripted failures, holds, seen requests) and its aiohttp app."""

    def __init__(self, config: MockConfig | None = None) -> None:
        self.config = config or MockConfig()
        self._lock = threading.Lock()
        self._failures: deque[Failure] = deque()
        self._holds: dict[str, threading.Event] = {}
        self._cuts = 0
        self.seen: deque[Seen] = deque(maxlen=1000)

    # scripting API (thread-safe; call from tests)

    def fail(self, status: int, *, times: int = 1, retry_after: float | None = None,
             reset_seconds: float | None = None) -> None:
        """Answer the next ``times`` requests with ``status`` (and the given cooldown hints)."""
        with self._lock:
            self._failures.extend([Failure(status, retry_after, reset_seconds)] * times)

    def cut_streams(self, times: int = 1) -> None:
        """Abort the connection of the next ``times`` streamed answers after their first chunk."""
        with self._lock:
            self._cuts += times

    def _take_cut(self) -> bool:
        with self._lock:
            if self._cuts:
                self._cuts -= 1
                return True
            return False

    def pending_failures(self) -> int:
        with self._lock:
            return len(self._failures)

    def release(self, name: str) -> None:
        """Let streams held by ``[[hold:NAME]]`` continue."""
        self._hold(name).set()

    def _hold(self, name: str) -> threading.Event:
        with self._lock:
            return self._holds.setdefault(name, threading.Event())

    def _next_failure(self) -> Failure | None:
        with self._lock:
            return self._failures.popleft() if self._failures else None

    # answers

    def answer(self, body: dict[str, Any]) -> Answer:
        model = str(body.get("model", "mock-model"))
        prompt = prompt_of(body)
        seed = body.get("seed") if isinstance(body.get("seed"), int) else 0
        rule = next((r for r in self.config.replies if r.marker in prompt), None)
        text = rule.reply if rule else default_reply(model, int(seed or 0), prompt)
        effort = _effort(body)
        reasoning = EFFORT_TOKENS.get(effort, 0) if effort else self.config.default_reasoning_tokens
        input_tokens = count_tokens(prompt)
        ident = hashlib.sha256(f"{model}\x00{seed}\x00{prompt}".encode()).hexdigest()[:24]
        cap, cut = output_cap(body), False
        if cap is not None:
            if not self.config.reasoning_billed_separately:
                reasoning = min(reasoning, cap)
            room = cap - (0 if self.config.reasoning_billed_separately else reasoning)
            if count_tokens(text) > room:
                text, cut = text.encode("utf-8")[:4 * room].decode("utf-8", "ignore"), True
        return Answer(model + MODEL_SUFFIX, text, input_tokens, int(input_tokens * self.config.cached_ratio),
                      count_tokens(text), reasoning, ident, cut)

    def completion_tokens(self, answer: Answer) -> int:
        return answer.text_tokens + (0 if self.config.reasoning_billed_separately else answer.reasoning_tokens)

    def chat_usage(self, a: Answer) -> dict[str, Any]:
        completion = self.completion_tokens(a)
        return {"prompt_tokens": a.input_tokens, "completion_tokens": completion,
                "total_tokens": a.input_tokens + completion,
                "prompt_tokens_details": {"cached_tokens": a.cached_tokens},
                "completion_tokens_details": {"reasoning_tokens": a.reasoning_tokens}}

    def responses_usage(self, a: Answer) -> dict[str, Any]:
        output = self.completion_tokens(a)
        return {"input_tokens": a.input_tokens, "input_tokens_details": {"cached_tokens": a.cached_tokens},
                "output_tokens": output, "output_tokens_details": {"reasoning_tokens": a.reasoning_tokens},
                "total_tokens": a.input_tokens + output}

    @staticmethod
    def anthropic_usage(a: Answer) -> dict[str, Any]:
        return {"input_tokens": a.input_tokens - a.cached_tokens, "cache_read_input_tokens": a.cached_tokens,
                "cache_creation_input_tokens": 0, "output_tokens": a.text_tokens + a.reasoning_tokens}

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._route(self._chat))
        app.router.add_post("/v1/responses", self._route(self._responses))
        app.router.add_post("/v1/messages", self._route(self._messages))
        app.router.add_post("/v1/messages/count_tokens", self._route(self._count_tokens))
        app.router.add_get("/v1/models", self._models)
        return app

    def _route(self, handler: Any) -> Any:
        async def handle(request: web.Request) -> web.StreamResponse:
            try:
                body = await request.json()
            except ValueError:
                return self._error(400, "invalid_request_error", "mock: body is not JSON")
            if not isinstance(body, dict):
                return self._error(400, "invalid_request_error", "mock: body is not a JSON object")
            self.seen.append(Seen(request.path, request.headers.get("Authorization"),
                                  request.headers.get("x-api-key"), body, request.raw_path.partition("?")[2]))
            refusal = self._refusal(request)
            if refusal is not None:
                return refusal
            answer = self.answer(body)
            if self.config.reply_delay_seconds:
                await asyncio.sleep(self.config.reply_delay_seconds)
            result: web.StreamResponse = await handler(request, body, answer)
            return result

        return handle

    def _refusal(self, request: web.Request) -> web.Response | None:
        expected = self.config.expected_api_key
        given = request.headers.get("x-api-key") or request.headers.get("Authorization", "")[7:]
        if expected is not None and not hmac.compare_digest(given.encode(), expected.encode()):
            return self._error(401, "invalid_api_key", "mock: wrong or missing provider key")
        failure = self._next_failure()
        if failure is None:
            return None
        extra = {} if failure.reset_seconds is None else {"reset_seconds": failure.reset_seconds}
        headers = {} if failure.retry_after is None else {"Retry-After": f"{failure.retry_after:g}"}
        kind = "rate_limit_exceeded" if failure.status == 429 else "server_error"
        return self._error(failure.status, kind, f"mock: scripted {failure.status}", headers, **extra)

    @staticmethod
    def _error(status: int, kind: str, message: str, headers: dict[str, str] | None = None,
               **extra: Any) -> web.Response:
        return web.json_response({"error": {"type": kind, "message": message, **extra}}, status=status,
                                 headers={MOCK_HEADER: "1", **(headers or {})})

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": "mock-model" + MODEL_SUFFIX, "object": "model", "owned_by": "anchorage-mock"}]
        return web.json_response({"object": "list", "data": data}, headers={MOCK_HEADER: "1"})

    # endpoints

    def _usage(self, data: dict[str, Any], usage: dict[str, Any] | None) -> dict[str, Any]:
        """``data`` with its usage, unless this mock reports none."""
        return {**data, "usage": usage} if self.config.report_usage else data

    async def _count_tokens(self, request: web.Request, body: dict[str, Any], a: Answer) -> web.StreamResponse:
        return web.json_response({"input_tokens": a.input_tokens}, headers={MOCK_HEADER: "1"})

    async def _chat(self, request: web.Request, body: dict[str, Any], a: Answer) -> web.StreamResponse:
        finish = "length" if a.cut else "stop"
        if not body.get("stream"):
            return web.json_response(self._usage({
                "id": f"chatcmpl-mock-{a.ident}", "object": "chat.completion", "created": CREATED,
                "model": a.model, "choices": [{"index": 0, "finish_reason": finish,
                                               "message": {"role": "assistant", "content": a.text}}]},
                self.chat_usage(a)), headers={MOCK_HEADER: "1"})
        options = body.get("stream_options")
        with_usage = isinstance(options, dict) and options.get("include_usage") is True and self.config.report_usage
        base: dict[str, Any] = {"id": f"chatcmpl-mock-{a.ident}", "object": "chat.completion.chunk",
                                "created": CREATED, "model": a.model, **({"usage": None} if with_usage else {})}
        events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}]
        events += [{**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                   for piece in self._pieces(a.text)]
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if with_usage:
            events.append({**base, "choices": [], "usage": self.chat_usage(a)})
        frames = [f"data: {json.dumps(e)}\n\n" for e in events] + ["data: [DONE]\n\n"]
        return await self._stream(request, body, frames)

    async def _responses(self, request: web.Request, body: dict[str, Any], a: Answer) -> web.StreamResponse:
        response = {"id": f"resp_mock_{a.ident}", "object": "response", "created_at": CREATED,
                    "model": a.model, "status": "completed",
                    "output": [{"type": "message", "id": f"msg_mock_{a.ident}", "role": "assistant",
                                "status": "completed",
                                "content": [{"type": "output_text", "text": a.text, "annotations": []}]}]}
        response = self._usage(response, self.responses_usage(a))
        if a.cut:
            response |= {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
        if not body.get("stream"):
            return web.json_response(response, headers={MOCK_HEADER: "1"})
        created = self._usage({**response, "status": "in_progress", "output": []}, None)
        events: list[tuple[str, dict[str, Any]]] = [("response.created", {"response": created})]
        events += [("response.output_text.delta", {"output_index": 0, "content_index": 0, "delta": piece})
                   for piece in self._pieces(a.text)]
        events.append(("response.output_text.done", {"output_index": 0, "content_index": 0, "text": a.text}))
        events.append(("response.incomplete" if a.cut else "response.completed", {"response": response}))
        frames = [f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n" for name, data in events]
        return await self._stream(request, body, frames)

    async def _messages(self, request: web.Request, body: dict[str, Any], a: Answer) -> web.StreamResponse:
        usage = self.anthropic_usage(a)
        stop = "max_tokens" if a.cut else "end_turn"
        message = self._usage({"id": f"msg_mock_{a.ident}", "type": "message", "role": "assistant", "model": a.model,
                               "content": [{"type": "text", "text": a.text}], "stop_reason": stop,
                               "stop_sequence": None}, usage)
        if not body.get("stream"):
            return web.json_response(message, headers={MOCK_HEADER: "1"})
        start = self._usage({**message, "content": [], "stop_reason": None}, {**usage, "output_tokens": 1})
        events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start}),
                                                   ("content_block_start", {"index": 0, "content_block":
                                                                            {"type": "text", "text": ""}})]
        events += [("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})
                   for piece in self._pieces(a.text)]
        events += [("content_block_stop", {"index": 0}),
                   ("message_delta", self._usage({"delta": {"stop_reason": stop}},
                                                 {"output_tokens": usage["output_tokens"]})),
                   ("message_stop", {})]
        frames = [f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n" for name, data in events]
        return await self._stream(request, body, frames)

    def _pieces(self, text: str) -> list[str]:
        size = self.config.stream_chunk_chars
        return [text[i:i + size] for i in range(0, len(text), size)] or [""]

    async def _stream(self, request: web.Request, body: dict[str, Any], frames: list[str]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                               MOCK_HEADER: "1"})
        await response.prepare(request)
        hold, cut = self._hold_name(body), self._take_cut()
        for index, frame in enumerate(frames):
            await response.write(frame.encode("utf-8"))
            if cut and request.transport is not None:
                request.transport.abort()  # the provider drops the connection mid-stream
                return response
            if index == 0 and hold is not None:
                await self._wait_for(hold)
            elif self.config.chunk_delay_seconds:
                await asyncio.sleep(self.config.chunk_delay_seconds)
        await response.write_eof()
        return response

    @staticmethod
    def _hold_name(body: dict[str, Any]) -> str | None:
        prompt = prompt_of(body)
        start = prompt.find("[[hold:")
        if start < 0:
            return None
        end = prompt.find("]]", start)
        return prompt[start + 7:end] if end > start else None

    async def _wait_for(self, name: str) -> None:
        event = self._hold(name)
        deadline = time.monotonic() + HOLD_SECONDS
        while not event.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)


class RunningMock:
    """A mock upstream served from a background thread (``url``, the scriptable ``mock``, ``stop()``)."""

    def __init__(self, mock: MockUpstream, server: Any) -> None:
        self.mock = mock
        self._server = server
        self.url: str = server.url

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> RunningMock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_mock(config: MockConfig | None = None, *, host: str = "127.0.0.1", port: int = 0) -> RunningMock:
    """Start a mock upstream on ``host:port`` (0 picks a port) in a background thread."""
    from anchorage.gateway.running import BackgroundServer

    mock = MockUpstream(config)
    return RunningMock(mock, BackgroundServer(mock.app(), host=host, port=port, name="mock-upstream").start())
