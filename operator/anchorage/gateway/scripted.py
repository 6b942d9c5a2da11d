"""The scripted mock model: a provider that drives real agent CLIs through a per-task script of tool calls.

Started by the local engine (``anchorage run --scripted-model``), by ``anchorage gateway --scripted-model``
and by the real-agent tests; it sits behind the gateway like any upstream. It is a mock and says so
everywhere: every response carries ``x-anchorage-mock: 1``, the model id it reports ends in ``-mock``,
and its texts start with ``[scripted mock]``.

It speaks the three wire formats the agent CLIs use, streamed (server-sent events) and not:

* OpenAI **Responses** (codex): ``response.created`` / ``in_progress``, then per output item
  ``response.output_item.added``, ``content_part.added`` + ``output_text.delta``/``done`` +
  ``content_part.done`` (messages) or ``function_call_arguments.delta``/``done`` (function calls),
  ``response.output_item.done``, and ``response.completed`` with the usage;
* Anthropic **Messages** (claude-code): ``message_start``, ``content_block_start``/``delta``/``stop``
  for text and ``tool_use`` blocks (``input_json_delta``), ``message_delta`` with ``stop_reason`` and
  the output tokens, ``message_stop``; ``/v1/messages/count_tokens`` too;
* OpenAI **Chat Completions** (opencode): ``delta.tool_calls`` chunks, ``finish_reason`` ``tool_calls``
  and a final usage chunk when ``stream_options.include_usage`` is set.

Each turn it finds the CLI's shell tool among the tools the request offers (``exec_command``,
``shell``, ``shell_command``, ``Bash``, ``bash``), reads where the conversation stands
(:func:`anchorage.gateway.scripts.position`) and answers with the next step of the task's script as a
call of that tool — so the CLI really runs the command in its sandbox — or, after the last step, with
the script's final message. Codex's long commands come back as a running session: the model polls it
with ``write_stdin`` until it ends. A request that offers no shell tool (titles, summaries, quota
probes the CLIs make on their own) gets a short text.

Usage is reported as the real APIs do and is deterministic: input = ⌈request bytes / 4⌉, cached input
= ⌊input × ``cached_ratio``⌋ once the conversation has an earlier answer of the model, output =
⌈bytes of the text and arguments / 4⌉ (+ reasoning tokens from the reasoning effort, inside the output
counter). Every answer is recorded in :attr:`ScriptedModel.replies` (what the tests compare with the
trial's record).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from anchorage.gateway.mock import CREATED, EFFORT_TOKENS, MOCK_HEADER, MODEL_SUFFIX, count_tokens, prompt_of
from anchorage.gateway.scripts import Command, ScriptBook, call_id, position, task_slug

LABEL = "[scripted mock]"
SHELL_TOOLS = ("exec_command", "shell_command", "shell", "bash")
POLL_TOOL = "write_stdin"
RUNNING = re.compile(r"Process running with session ID (\d+)")
POLL_MS = 30_000
MAX_TOOL_TIMEOUT_MS = 600_000
CHUNK_CHARS = 64


@dataclass(frozen=True)
class Tool:
    """The CLI's shell tool as the request describes it (name and JSON-schema properties)."""

    name: str
    properties: dict[str, Any]
    required: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    """What the model needs from one request, whatever the API."""

    api: str
    prompt: str
    calls: list[tuple[str, str | None]]
    tools: dict[str, Tool]
    answered_before: bool


@dataclass(frozen=True)
class Turn:
    """The model's answer: optional text, then optionally one tool call (name, id, arguments)."""

    text: str
    call: tuple[str, str, dict[str, Any]] | None = None
    kind: str = "text"
    slug: str | None = None
    step: int | None = None


@dataclass(frozen=True)
class Reply:
    """One answer as the model reported it (for tests and the demo: usage exactly as sent)."""

    api: str
    model: str
    kind: str
    slug: str | None
    step: int | None
    usage: dict[str, Any]


@dataclass
class Usage:
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


# ----- reading requests -------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(part) for part in content)
    if isinstance(content, dict):
        for key in ("text", "output", "content"):
            if key in content:
                return _text(content[key])
    return ""


def _schema_tool(name: str, schema: Any) -> Tool:
    schema = schema if isinstance(schema, dict) else {}
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = tuple(r for r in schema.get("required", []) if isinstance(r, str))
    return Tool(name, dict(properties), required)


def read_conversation(body: dict[str, Any], api: str) -> Conversation:
    """Tools offered, tool calls made (with their outputs) and the prompt text of a request."""
    tools: dict[str, Tool] = {}
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if api == "chat" and isinstance(tool.get("function"), dict):
            fn = tool["function"]
            tools[str(fn.get("name"))] = _schema_tool(str(fn.get("name")), fn.get("parameters"))
        elif api == "anthropic" and "name" in tool:
            tools[str(tool["name"])] = _schema_tool(str(tool["name"]), tool.get("input_schema"))
        elif tool.get("type") == "function" and "name" in tool:
            tools[str(tool["name"])] = _schema_tool(str(tool["name"]), tool.get("parameters"))
    calls, answered = _calls(body, api)
    return Conversation(api, prompt_of(body), calls, tools, answered)


def _calls(body: dict[str, Any], api: str) -> tuple[list[tuple[str, str | None]], bool]:
    order: list[str] = []
    outputs: dict[str, str] = {}
    answered = False
    if api == "responses":
        raw_items = body.get("input")
        items: list[Any] = raw_items if isinstance(raw_items, list) else []
        for item in items:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "function_call":
                order.append(str(item.get("call_id")))
                answered = True
            elif kind == "function_call_output":
                outputs[str(item.get("call_id"))] = _text(item.get("output"))
            elif item.get("role") == "assistant":
                answered = True
    else:
        for message in body.get("messages") or []:
            if not isinstance(message, dict):
                continue
            role, content = message.get("role"), message.get("content")
            if role == "assistant":
                answered = True
                for call in message.get("tool_calls") or []:  # chat
                    if isinstance(call, dict):
                        order.append(str(call.get("id")))
                for block in content if isinstance(content, list) else []:  # anthropic
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        order.append(str(block.get("id")))
            elif role == "tool":
                outputs[str(message.get("tool_call_id"))] = _text(content)
            elif role == "user" and isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        outputs[str(block.get("tool_use_id"))] = _text(block.get("content"))
    return [(ident, outputs.get(ident)) for ident in order], answered


# ----- deciding the next turn ---------------------------------------------------------------------


def shell_tool(conversation: Conversation) -> Tool | None:
    by_lower = {name.lower(): tool for name, tool in conversation.tools.items()}
    return next((by_lower[name] for name in SHELL_TOOLS if name in by_lower), None)


def shell_arguments(tool: Tool, command: Command) -> dict[str, Any]:
    """Arguments for the CLI's shell tool, following the tool's own schema."""
    props = tool.properties
    key = "cmd" if "cmd" in props else "command"
    kind = props.get(key, {}).get("type") if isinstance(props.get(key), dict) else "string"
    args: dict[str, Any] = {key: ["bash", "-lc", command.line] if kind == "array" else command.line}
    if "description" in props:
        args["description"] = (command.say or "Run a command").rstrip(".")[:80]
    timeout_ms = min(command.timeout_sec * 1000, MAX_TOOL_TIMEOUT_MS)
    if "yield_time_ms" in props:
        args["yield_time_ms"] = POLL_MS
    elif "timeout_ms" in props:
        args["timeout_ms"] = timeout_ms
    elif "timeout" in props:
        args["timeout"] = timeout_ms
    return args


def next_turn(conversation: Conversation, book: ScriptBook, prefix: str) -> Turn:
    """The model's decision for this request (pure: the conversation says where it stands)."""
    tool = shell_tool(conversation)
    slug = task_slug(conversation.prompt)
    if tool is None:
        return Turn(f"{LABEL} Scripted session" + (f" for {slug}" if slug else ""), kind="helper", slug=slug)
    commands = book.commands(slug) if slug else None
    if commands is None:
        what = f"task {slug!r}" if slug else "this conversation (no /root/results/<task>_result.json in it)"
        return Turn(f"{LABEL} I have no script for {what}; stopping.", kind="off-script", slug=slug)
    salt = f"{conversation.api}\x00{slug}"
    where = position(conversation.calls)
    if where.step is None:
        return _call(tool, commands, 0, 0, salt, prefix, slug)
    output = where.output or ""
    running = RUNNING.search(output)
    if running and POLL_TOOL in conversation.tools:
        poll = {"session_id": int(running.group(1)), "chars": "", "yield_time_ms": POLL_MS}
        ident = call_id(prefix, where.step, where.poll + 1, salt)
        return Turn("", (POLL_TOOL, ident, poll), kind="poll", slug=slug, step=where.step)
    done = commands[where.step]
    seen = "\n".join(out or "" for ident, out in conversation.calls if f"anc{where.step}p" in ident)
    if done.expect is not None and done.expect.lower() not in seen.lower():
        tail = seen[-400:].strip()
        return Turn(f"{LABEL} Step {where.step + 1} should have printed {done.expect!r}, but its output was:\n"
                    f"{tail}\nStopping here.", kind="off-script", slug=slug, step=where.step)
    if where.step + 1 < len(commands):
        return _call(tool, commands, where.step + 1, 0, salt, prefix, slug)
    script = book.script_for(slug or "")
    final = script.final if script is not None else "Done."
    return Turn(f"{LABEL} {final}", kind="final", slug=slug, step=where.step + 1)


def _call(tool: Tool, commands: list[Command], step: int, poll: int, salt: str, prefix: str,
          slug: str | None) -> Turn:
    command = commands[step]
    text = f"{LABEL} {command.say}" if command.say else ""
    ident = call_id(prefix, step, poll, salt)
    return Turn(text, (tool.name, ident, shell_arguments(tool, command)), kind="tool", slug=slug, step=step)


# ----- the provider ------------------------------------------------------------------------------


class ScriptedModel:
    """The scripted provider's state (the scripts, the replies it sent) and its aiohttp app."""

    def __init__(self, book: ScriptBook, *, cached_ratio: float = 0.75) -> None:
        self.book = book
        self.cached_ratio = cached_ratio
        self._lock = threading.Lock()
        self.replies: list[Reply] = []

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/responses", self._route("responses"))
        app.router.add_post("/v1/chat/completions", self._route("chat"))
        app.router.add_post("/v1/messages", self._route("anthropic"))
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        app.router.add_get("/v1/models", self._models)
        return app

    def recorded(self) -> list[Reply]:
        with self._lock:
            return list(self.replies)

    def _route(self, api: str) -> Any:
        async def handle(request: web.Request) -> web.StreamResponse:
            raw = await request.read()
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            if not isinstance(body, dict):
                return web.json_response({"error": {"type": "invalid_request_error",
                                                    "message": f"{LABEL} the body is not a JSON object"}},
                                         status=400, headers={MOCK_HEADER: "1"})
            conversation = read_conversation(body, api)
            prefix = {"responses": "call_", "chat": "call_", "anthropic": "toolu_"}[api]
            turn = next_turn(conversation, self.book, prefix)
            usage = self._usage(raw, body, turn, conversation)
            model = str(body.get("model", "scripted")) + MODEL_SUFFIX
            ident = hashlib.sha256(raw).hexdigest()[:24]
            writer = {"responses": _responses, "chat": _chat, "anthropic": _messages}[api]
            payload, events = writer(model, ident, turn, usage, body)
            self._record(Reply(api, str(body.get("model")), turn.kind, turn.slug, turn.step, payload["usage"]))
            if not body.get("stream"):
                return web.json_response(payload, headers={MOCK_HEADER: "1"})
            return await _stream(request, events)

        return handle

    def _record(self, reply: Reply) -> None:
        with self._lock:
            self.replies.append(reply)

    def _usage(self, raw: bytes, body: dict[str, Any], turn: Turn, conversation: Conversation) -> Usage:
        input_tokens = math.ceil(len(raw) / 4)
        cached = math.floor(input_tokens * self.cached_ratio) if conversation.answered_before else 0
        emitted = turn.text + (json.dumps(turn.call[2]) if turn.call else "")
        reasoning = 0
        effort = body.get("reasoning", {}).get("effort") if isinstance(body.get("reasoning"), dict) else None
        effort = effort or body.get("reasoning_effort")
        if isinstance(effort, str):
            reasoning = EFFORT_TOKENS.get(effort, 0)
        return Usage(input_tokens, cached, count_tokens(emitted) + reasoning, reasoning)

    async def _count_tokens(self, request: web.Request) -> web.Response:
        raw = await request.read()
        return web.json_response({"input_tokens": math.ceil(len(raw) / 4)}, headers={MOCK_HEADER: "1"})

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": "scripted" + MODEL_SUFFIX, "object": "model", "owned_by": "anchorage-scripted-mock"}]
        return web.json_response({"object": "list", "data": data}, headers={MOCK_HEADER: "1"})


# ----- wire formats ------------------------------------------------------------------------------

Events = list[tuple[str | None, dict[str, Any]]]


def _pieces(text: str) -> list[str]:
    return [text[i:i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)] or [""]


def _responses(model: str, ident: str, turn: Turn, usage: Usage, body: dict[str, Any]) -> tuple[dict[str, Any], Events]:
    report = {"input_tokens": usage.input_tokens, "input_tokens_details": {"cached_tokens": usage.cached_tokens},
              "output_tokens": usage.output_tokens,
              "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
              "total_tokens": usage.input_tokens + usage.output_tokens}
    shell: dict[str, Any] = {"id": f"resp_{ident}", "object": "response", "created_at": CREATED, "model": model,
                             "status": "in_progress", "output": [], "usage": None, "error": None,
                             "incomplete_details": None, "parallel_tool_calls": False, "tool_choice": "auto",
                             "tools": [], "metadata": {}}
    events: Events = [("response.created", {"response": dict(shell)}),
                      ("response.in_progress", {"response": dict(shell)})]
    output: list[dict[str, Any]] = []
    if turn.text or turn.call is None:
        index, item_id = len(output), f"msg_{ident}"
        part = {"type": "output_text", "text": "", "annotations": []}
        item = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        events += [("response.output_item.added", {"output_index": index, "item": item}),
                   ("response.content_part.added", {"item_id": item_id, "output_index": index, "content_index": 0,
                                                    "part": part})]
        events += [("response.output_text.delta", {"item_id": item_id, "output_index": index, "content_index": 0,
                                                   "delta": piece}) for piece in _pieces(turn.text)]
        done_part = {**part, "text": turn.text}
        done = {**item, "status": "completed", "content": [done_part]}
        events += [("response.output_text.done", {"item_id": item_id, "output_index": index, "content_index": 0,
                                                  "text": turn.text}),
                   ("response.content_part.done", {"item_id": item_id, "output_index": index, "content_index": 0,
                                                   "part": done_part}),
                   ("response.output_item.done", {"output_index": index, "item": done})]
        output.append(done)
    if turn.call is not None:
        name, call_ident, arguments = turn.call
        index, item_id, text = len(output), f"fc_{call_ident}", json.dumps(arguments)
        item = {"id": item_id, "type": "function_call", "status": "in_progress", "call_id": call_ident,
                "name": name, "arguments": ""}
        events.append(("response.output_item.added", {"output_index": index, "item": item}))
        events += [("response.function_call_arguments.delta", {"item_id": item_id, "output_index": index,
                                                               "delta": piece}) for piece in _pieces(text)]
        done = {**item, "status": "completed", "arguments": text}
        events += [("response.function_call_arguments.done", {"item_id": item_id, "output_index": index,
                                                              "arguments": text}),
                   ("response.output_item.done", {"output_index": index, "item": done})]
        output.append(done)
    final = {**shell, "status": "completed", "output": output, "usage": report}
    events.append(("response.completed", {"response": final}))
    numbered: Events = [(name, {"type": name, "sequence_number": n, **data}) for n, (name, data) in enumerate(events)]
    return final, numbered


def _messages(model: str, ident: str, turn: Turn, usage: Usage, body: dict[str, Any]) -> tuple[dict[str, Any], Events]:
    report = {"input_tokens": usage.input_tokens - usage.cached_tokens, "cache_read_input_tokens": usage.cached_tokens,
              "cache_creation_input_tokens": 0, "output_tokens": usage.output_tokens}
    content: list[dict[str, Any]] = []
    events: Events = []
    if turn.text or turn.call is None:
        index = len(content)
        events.append(("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}))
        events += [("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": piece}})
                   for piece in _pieces(turn.text)]
        events.append(("content_block_stop", {"index": index}))
        content.append({"type": "text", "text": turn.text})
    if turn.call is not None:
        name, call_ident, arguments = turn.call
        index, text = len(content), json.dumps(arguments)
        block = {"type": "tool_use", "id": call_ident, "name": name, "input": {}}
        events.append(("content_block_start", {"index": index, "content_block": block}))
        events += [("content_block_delta", {"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}})
                   for piece in _pieces(text)]
        events.append(("content_block_stop", {"index": index}))
        content.append({**block, "input": arguments})
    stop = "tool_use" if turn.call is not None else "end_turn"
    message = {"id": f"msg_{ident}", "type": "message", "role": "assistant", "model": model, "content": content,
               "stop_reason": stop, "stop_sequence": None, "usage": report}
    start = {**message, "content": [], "stop_reason": None, "usage": {**report, "output_tokens": 1}}
    framed: Events = [("message_start", {"message": start}), ("ping", {})]
    framed += events
    framed += [("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": usage.output_tokens}}),
               ("message_stop", {})]
    return message, [(name, {"type": name, **data}) for name, data in framed]


def _chat(model: str, ident: str, turn: Turn, usage: Usage, body: dict[str, Any]) -> tuple[dict[str, Any], Events]:
    report = {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
              "total_tokens": usage.input_tokens + usage.output_tokens,
              "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
              "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens}}
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    finish = "stop"
    if turn.call is not None:
        name, call_ident, arguments = turn.call
        message["tool_calls"] = [{"id": call_ident, "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(arguments)}}]
        finish = "tool_calls"
    whole = {"id": f"chatcmpl-{ident}", "object": "chat.completion", "created": CREATED, "model": model,
             "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": report}
    base = {"id": f"chatcmpl-{ident}", "object": "chat.completion.chunk", "created": CREATED, "model": model}

    def chunk(delta: dict[str, Any], reason: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}

    events: Events = [chunk({"role": "assistant", "content": ""})]
    if turn.text:
        events += [chunk({"content": piece}) for piece in _pieces(turn.text)]
    if turn.call is not None:
        name, call_ident, arguments = turn.call
        pieces = _pieces(json.dumps(arguments))
        events.append(chunk({"tool_calls": [{"index": 0, "id": call_ident, "type": "function",
                                             "function": {"name": name, "arguments": pieces[0]}}]}))
        events += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}) for piece in pieces[1:]]
    events.append(chunk({}, finish))
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        events.append((None, {**base, "choices": [], "usage": report}))
    return whole, events


async def _stream(request: web.Request, events: Events) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           MOCK_HEADER: "1"})
    await response.prepare(request)
    frames = [(f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n" for name, data in events]
    if events and events[0][0] is None:
        frames.append("data: [DONE]\n\n")
    await response.write("".join(frames).encode("utf-8"))
    await response.write_eof()
    return response


class RunningScripted:
    """The scripted model served from a background thread (``url``, ``model``, ``stop()``)."""

    def __init__(self, model: ScriptedModel, server: Any) -> None:
        self.model = model
        self._server = server
        self.url: str = server.url

    def upstreams(self) -> list[dict[str, Any]]:
        """Gateway upstreams sending every model to this scripted mock (both API styles)."""
        return [{"name": "scripted-mock-openai", "base_url": self.url, "api": "openai", "models": ["*"]},
                {"name": "scripted-mock-anthropic", "base_url": self.url, "api": "anthropic", "models": ["*"]}]

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> RunningScripted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_scripted(book: ScriptBook, *, host: str = "127.0.0.1", port: int = 0) -> RunningScripted:
    """Start the scripted mock model on ``host:port`` (0 picks a port) in a background thread."""
    from anchorage.gateway.running import BackgroundServer

    model = ScriptedModel(book)
    return RunningScripted(model, BackgroundServer(model.app(), host=host, port=port, name="scripted-mock").start())
