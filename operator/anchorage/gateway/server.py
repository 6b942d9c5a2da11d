"""The gateway's model API: the request handlers agents reach (its admin API is :mod:`anchorage.gateway.admin`).

Built by :func:`anchorage.gateway.running.build` (and ``anchorage gateway``), served by the gateway's own
HTTP/1.1 server (:mod:`anchorage.gateway.http`) on the TCP port and/or the unix socket agents use, and
forwarded by its own upstream client (:mod:`anchorage.gateway.upstream`). It serves the model routes only,
and every route wants a valid trial token — unknown paths and ``/metrics`` included (401 without one, 404
with one); ``HEAD /`` alone answers 200 with no body (clients probe the base URL). One model request:

1. the bearer token (``Authorization: Bearer`` or Anthropic's ``x-api-key``) names a trial and has not
   expired or been revoked, and on a trial's own socket (:meth:`GatewayApp.gate`) it is that trial's, else 401 —
   checked by the server's gate when the request's head is complete, before a byte of its body is read (no
   ``100 Continue`` for a refused one; the connection closes), so it never reaches an upstream;
2. the model picks an upstream (404 if none); the request's worst-case cost
   (:mod:`anchorage.gateway.estimates`) is *reserved* against the trial's budget with a slot of its rate
   limit, else 429 ``budget_exceeded`` (with the figures) or ``rate_limited``;
3. the provider key replaces the client's credentials; chat streams always ask for usage; the path and
   query string are kept;
4. 429/5xx and connection errors are retried within :class:`RetryConfig`, honouring ``Retry-After`` and
   ``reset_seconds``; when it runs out the client gets a 502 JSON error saying what failed how often;
5. the response is passed back — streams chunk by chunk as they arrive — while its usage is read; a
   usage chunk the client did not ask for is left out of its stream; when the client leaves mid-stream
   the upstream is still read (bounded in time and bytes) until its usage arrives;
6. the reservation is replaced by the metered cost in the trial's ledger (or the request is recorded as
   *unmetered*, with what is known, when no usage came), and the Prometheus collectors are updated;
   with a transcript asked for, the bodies are kept (:mod:`anchorage.gateway.transcripts`).

Also answered: Anthropic ``POST /v1/messages/count_tokens`` (forwarded, or estimated when the upstream
has no such route; never billed), and WebSocket upgrades of ``/v1/responses`` get 426 (clients such as
codex then use HTTP at once). Prompts, replies and keys are never logged unless ``log_bodies`` is set
(then only bodies, not keys).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from anchorage import metrics
from anchorage.costs import TokenCounts
from anchorage.gateway import fastjson
from anchorage.gateway.estimates import Estimate, estimate
from anchorage.gateway.gatewayconfig import FrontDoorConfig, GatewayConfig, UpstreamConfig
from anchorage.gateway.http import HttpServer, Reply, Request, json_reply
from anchorage.gateway.ledger import Ledger, TrialAccount, Unmetered
from anchorage.gateway.relay import ClientGone, PushRelay
from anchorage.gateway.retrying import retry_delay
from anchorage.gateway.tokens import TokenClaims
from anchorage.gateway.transcripts import Transcripts, body_for_transcript
from anchorage.gateway.upstream import UpstreamError, UpstreamPool, UpstreamResponse, header_lines, request_head
from anchorage.gateway.usage import StreamUsage, UsageStripper, counts_from_body

log = logging.getLogger("anchorage.gateway")

PASSED_REQUEST_HEADERS = (b"anthropic-version", b"anthropic-beta", b"openai-beta", b"accept")
#: The upstream's own connection and framing headers (the gateway frames its answer itself); content-encoding
#: is dropped as well: answers are asked for and passed on unencoded (``Accept-Encoding: identity``).
DROPPED_RESPONSE_HEADERS = frozenset(
    {b"content-length", b"transfer-encoding", b"content-encoding", b"connection", b"keep-alive", b"date", b"server"}
)
ROUTES_KEPT = 1024  # (model, API) pairs whose upstream was looked up
#: Upstream answers to count_tokens that mean "no such route here": the gateway estimates instead.
NO_COUNT_ROUTE = frozenset({404, 405, 501})


def _error(kind: str, message: str, extra: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    body = {"error": {"type": kind, "message": message, "source": "anchorage-gateway", **extra}}
    headers = {"x-anchorage-gateway-error": kind}
    if "retry_after" in extra and extra["retry_after"] is not None:
        headers["Retry-After"] = str(max(1, round(extra["retry_after"])))
    return body, headers


def error_response(status: int, kind: str, message: str, **extra: Any) -> web.Response:
    """An OpenAI-shaped JSON error (``{"error": {"type", "message", ...}}``) from the gateway's admin API."""
    body, headers = _error(kind, message, extra)
    return web.json_response(body, status=status, headers=headers)


def error_reply(status: int, kind: str, message: str, *, close: bool = False, **extra: Any) -> Reply:
    """The same error as an answer of the model API's server."""
    body, headers = _error(kind, message, extra)
    return json_reply(status, body, header_lines(headers), close=close)


@dataclass
class Call:
    """What the handler knows about one admitted request while it is forwarded."""

    endpoint: str
    api: str
    account: TrialAccount
    claims: TokenClaims
    model: str
    upstream: UpstreamConfig
    payload: dict[str, Any]
    raw: bytes
    body: bytes
    stream: bool
    strip_usage: bool
    estimate: Estimate
    started: float
    token: str
    keep: bool  # keep a transcript: the token asks and the config allows
    retries: int = 0
    status: int | None = None  # the upstream's answer, once there is one
    settled: bool = False
    transcript: dict[str, Any] = field(default_factory=dict)


class Exhausted(Exception):
    """The retry budget ran out; ``message`` says what failed how often."""

    def __init__(self, message: str, last_status: int | None, attempts: int) -> None:
        super().__init__(message)
        self.message, self.last_status, self.attempts = message, last_status, attempts


class GatewayApp:
    """Request handlers bound to one config and one ledger."""

    def __init__(self, config: GatewayConfig, ledger: Ledger, transcripts: Transcripts | None = None) -> None:
        self.config = config
        self.ledger = ledger
        self.transcripts = transcripts
        self._headers: dict[str, tuple[bytes, bytes]] = {}  # upstream name -> its provider header lines
        self._routes: dict[tuple[str, str], UpstreamConfig | None] = {}  # (model, api) -> its upstream
        self._pool: UpstreamPool | None = None
        self.server: HttpServer | None = None
        self._forwarded = {"/v1/chat/completions": ("chat", "openai"), "/v1/responses": ("responses", "openai"),
                           "/v1/messages": ("messages", "anthropic")}

    # ----- the server and its routes ---------------------------------------------------------------

    def build(self, limits: FrontDoorConfig | None = None) -> HttpServer:
        """The model API's server (what agents reach); ``start_tcp`` / ``start_unix`` it on the gateway's loop."""
        self.server = HttpServer(self.dispatch, limits=limits or self.config.front_door, gate=self.gate,
                                 on_close=self.close)
        return self.server

    @property
    def pool(self) -> UpstreamPool:
        """The upstream connections (made on first use, on the serving loop)."""
        if self._pool is None:
            self._pool = UpstreamPool()
        return self._pool

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()

    async def dispatch(self, request: Request) -> Reply | None:
        """The route of ``request`` (by method and path; anything else is 404 behind the token check)."""
        method, path = request.method, request.path
        if method == "POST":
            route = self._forwarded.get(path)
            if route is not None:
                return await self.forward(request, *route)
            if path == "/v1/messages/count_tokens":
                return await self.count_tokens(request)
        elif method == "GET" and path == "/v1/responses":
            return self.websocket_refused(request)
        elif method in ("GET", "HEAD") and path == "/v1/models":
            return self.models(request)
        elif method == "HEAD" and path == "/":
            return self.probe(request)
        return self.not_a_model_route(request)

    # ----- small routes -------------------------------------------------------------------------

    @staticmethod
    def probe(request: Request) -> Reply:
        """``HEAD /``: clients check the base URL answers; nothing is said but that it does."""
        return Reply(200)

    def not_a_model_route(self, request: Request) -> Reply:
        if self._auth(request) is None:
            return self._unauthorized(request)
        return error_reply(404, "not_found", f"{request.method} {request.path} is not a model API route of "
                           "this gateway", hint="POST /v1/chat/completions, /v1/responses or /v1/messages")

    def websocket_refused(self, request: Request) -> Reply:
        """A WebSocket upgrade (or GET) of /v1/responses: 426, so clients use HTTP POST at once."""
        if self._auth(request) is None:
            return self._unauthorized(request)
        metrics.GATEWAY_REFUSALS.labels("websocket").inc()  # a client that keeps retrying shows here
        return error_reply(426, "websocket_unsupported", "this gateway serves the Responses API over HTTP "
                           "only: POST /v1/responses", hint="codex: supports_websockets = false", close=True)

    def models(self, request: Request) -> Reply:
        if self._auth(request) is None:
            return self._unauthorized(request)
        names = sorted({m for u in self.config.upstreams for m in u.models if not any(c in m for c in "*?[")})
        snapshot = self.ledger.snapshot
        if snapshot is not None:
            names = sorted(set(names) | {m for m in snapshot.models
                                         if any(u.serves(m) for u in self.config.upstreams)})
        data = [{"id": name, "object": "model", "owned_by": "anchorage-gateway"} for name in names]
        return json_reply(200, {"object": "list", "data": data})

    # ----- authentication -------------------------------------------------------------------------

    @staticmethod
    def _token(request: Request) -> str:
        headers = request.headers
        auth = headers.get(b"authorization")
        if auth is not None and auth[:7].lower() == b"bearer ":
            return auth[7:].strip().decode("latin-1")
        key = headers.get(b"x-api-key")
        return "" if key is None else key.decode("latin-1")

    def gate(self, request: Request) -> Reply | None:
        """The front door's check of a request whose head is complete (its body not read yet): None admits it (its
        ``auth`` and ``account`` set), else the 401 to answer instead. ``HEAD /`` needs no token; every other
        request needs one that is valid and, on a trial's own socket, that trial's."""
        if request.method == "HEAD" and request.path == "/":
            return None
        token = self._token(request)
        auth = self.ledger.authenticate(token) if token else None
        channel = request.channel
        if auth is None:
            why = self.ledger.why_refused(token)
            channel.door.refused("unauthorized", channel.client, f"trial token refused: {why}")
            return error_reply(401, "invalid_api_key", f"trial token refused: {why}",
                               hint="use the token the engine issued for this trial", close=True)
        trial = auth[1].trial_id
        if channel.owner is not None and trial != channel.owner:
            channel.door.refused("wrong_socket", channel.client, f"a token of trial {trial} on this socket")
            return error_reply(401, "invalid_api_key", "trial token refused: it was issued for another trial (a "
                               "trial's token works only on its own sandbox's gateway socket)",
                               hint="use the token the engine issued for this trial", close=True)
        request.auth, request.account = auth, trial
        return None

    def _auth(self, request: Request) -> tuple[TrialAccount, TokenClaims] | None:
        """What the gate found (a server without a gate: the token checked now)."""
        if request.auth is not None:
            auth: tuple[TrialAccount, TokenClaims] = request.auth
            return auth
        token = self._token(request)
        return self.ledger.authenticate(token) if token else None

    def _unauthorized(self, request: Request) -> Reply:
        metrics.GATEWAY_REFUSALS.labels("unauthorized").inc()
        return error_reply(401, "invalid_api_key", f"trial token refused: {self.ledger.why_refused(self._token(request))}",
                           hint="use the token the engine issued for this trial")

    # ----- forwarding ---------------------------------------------------------------------------

    @staticmethod
    def _model_of(raw: bytes) -> tuple[dict[str, Any], str] | None:
        try:
            payload = fastjson.loads(raw)
        except ValueError:
            return None
        model = payload.get("model") if isinstance(payload, dict) else None
        return (payload, model) if isinstance(model, str) else None

    async def forward(self, request: Request, endpoint: str, api: str) -> Reply | None:
        started = time.perf_counter()
        auth = self._auth(request)
        if auth is None:
            return self._unauthorized(request)
        token = self._token(request)
        account, claims = auth
        raw = request.body
        parsed = self._model_of(raw)
        if parsed is None:
            return error_reply(400, "invalid_request", "the body must be a JSON object with a string 'model'")
        payload, model = parsed
        upstream = self._upstream_for(model, api)
        if upstream is None:
            return error_reply(404, "model_not_found", f"model {model!r} is not served by this gateway "
                               f"on /{endpoint}", hint="check the gateway config's upstreams[].models")
        worst = estimate(payload, len(raw), endpoint, model, ceiling=upstream.max_output_tokens,
                         bytes_per_token=self.config.reserve_input_bytes_per_token, rate=self.ledger.rate(model))
        refusal = self.ledger.admit(account, worst.usd)
        if refusal is not None:
            metrics.GATEWAY_REFUSALS.labels(refusal.kind).inc()
            code: dict[str, Any] = {"code": "insufficient_quota"} if refusal.kind == "budget_exceeded" and \
                refusal.retry_after is None else {}
            return error_reply(429, refusal.kind, refusal.message, retry_after=refusal.retry_after,
                               **refusal.figures, **code)
        if self.config.log_bodies:
            log.debug("trial %s %s body: %s", account.trial_id, endpoint, raw.decode("utf-8", "replace"))
        stream = bool(payload.get("stream"))
        body, strip = self._body(payload, raw, endpoint, upstream)
        call = Call(endpoint, api, account, claims, model, upstream, payload, raw, body, stream, strip, worst,
                    started, token, claims.transcript and self.transcripts is not None)
        try:
            return await self._answer(request, call)
        finally:
            if not call.settled:  # cancelled (the gateway is stopping): settle what is known
                self._finish(call, None, 499, error=True, unmetered=None if call.status is None else
                             self._unmetered(call, "the gateway stopped while relaying the answer"))

    def _upstream_for(self, model: str, api: str) -> UpstreamConfig | None:
        """:meth:`GatewayConfig.upstream_for`, matched once per model (its patterns are fnmatch globs)."""
        key = (model, api)
        try:
            return self._routes[key]
        except KeyError:
            pass
        upstream = self.config.upstream_for(model, api)
        if len(self._routes) < ROUTES_KEPT:  # model names come from requests: bounded
            self._routes[key] = upstream
        return upstream

    @staticmethod
    def _body(payload: dict[str, Any], raw: bytes, endpoint: str, upstream: UpstreamConfig) -> tuple[bytes, bool]:
        """The body to forward, and whether to strip the usage chunk from the client's stream.

        A chat stream always asks for usage (``stream_options.include_usage: true``): a client that left it
        out or set it false would otherwise make its request unmetered. Its usage chunk is then taken out of
        what that client sees.
        """
        if endpoint != "chat" or not payload.get("stream") or not upstream.include_stream_usage:
            return raw, False
        options = payload.get("stream_options")
        options = options if isinstance(options, dict) else {}
        if options.get("include_usage") is True:
            return raw, False
        forced = {**payload, "stream_options": {**options, "include_usage": True}}
        return fastjson.dumps(forced), True

    async def _answer(self, request: Request, call: Call) -> Reply | None:
        try:
            upstream_response = await self._send_with_retries(self.pool, request, call)
        except Exhausted as exc:
            self._finish(call, None, 502, error=True)
            await self._durable()
            return error_reply(502, "upstream_retries_exhausted", exc.message,
                               attempts=exc.attempts, last_status=exc.last_status)
        call.status = upstream_response.status
        try:
            if "text/event-stream" in (upstream_response.header("content-type") or ""):
                await self._relay_stream(request, call, upstream_response)
                return None
            return await self._relay_body(call, upstream_response)
        finally:
            upstream_response.close()

    def _upstream_headers(self, request: Request, upstream: UpstreamConfig) -> bytes:
        """The header lines of a request to ``upstream``: the provider's and those passed from the client
        (their values came through the request parser: no line breaks in them)."""
        lines, default_version = self._provider_headers(upstream)
        headers = request.headers
        passed = [b"%s: %s\r\n" % (name, headers[name]) for name in PASSED_REQUEST_HEADERS if name in headers]
        if not passed:
            return lines + default_version
        if default_version and b"anthropic-version" not in headers:
            lines += default_version
        return lines + b"".join(passed)

    def _provider_headers(self, upstream: UpstreamConfig) -> tuple[bytes, bytes]:
        """The header lines every request to ``upstream`` carries, its key included, and its default
        ``anthropic-version`` line (a client's version replaces it); made once per upstream."""
        found = self._headers.get(upstream.name)
        if found is None:
            headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
            version = b""
            key = upstream.key()
            if key is not None and upstream.api == "anthropic":
                headers["x-api-key"] = key
                version = b"anthropic-version: 2023-06-01\r\n"
            elif key is not None:
                headers["Authorization"] = f"Bearer {key}"
            found = (header_lines(headers), version)
            self._headers[upstream.name] = found
        return found

    async def _send_with_retries(self, pool: UpstreamPool, request: Request, call: Call) -> UpstreamResponse:
        """The first acceptable upstream response, or :class:`Exhausted`."""
        retry = self.config.retry
        origin = pool.origin(call.upstream.base_url)
        # the path and query string as the client sent them
        head = request_head(b"POST", origin, request.target.encode("latin-1"),
                            self._upstream_headers(request, call.upstream), len(call.body))
        timeout = call.upstream.timeout_seconds
        deadline = time.monotonic() + retry.max_total_seconds
        failures: list[str] = []
        last_status: int | None = None
        for attempt in range(1, retry.max_attempts + 1):
            try:
                response = await pool.request(origin, head, call.body, read_timeout=timeout)
                if response.status in retry.retry_statuses:
                    body = await response.read()
            except UpstreamError as exc:
                failures.append(type(exc).__name__)
                cause, delay = "connection", retry_delay(attempt, {}, b"", retry)
            else:
                if response.status not in retry.retry_statuses:
                    return response
                last_status = response.status
                failures.append(str(response.status))
                cause, delay = str(response.status), retry_delay(attempt, response.header_map(), body, retry)
            remaining = deadline - time.monotonic()
            if attempt == retry.max_attempts or delay > remaining:
                why = ("attempts used up" if attempt == retry.max_attempts else
                       f"the next wait ({delay:.1f} s) would pass the {retry.max_total_seconds:g} s budget")
                raise Exhausted(f"upstream {call.upstream.name!r} failed {attempt} time(s) for model "
                                f"{call.model!r} ({', '.join(failures)}); gave up: {why}", last_status, attempt)
            metrics.GATEWAY_RETRIES.labels(metrics.model_label(call.model), cause).inc()
            call.retries += 1
            log.info("trial %s: upstream %s answered %s, retry %d in %.2f s", call.account.trial_id,
                     call.upstream.name, cause, attempt, delay)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")

    @staticmethod
    def _response_headers(upstream_response: UpstreamResponse, call: Call | None = None) -> bytes:
        """The upstream's header lines (repeated ones kept) but those of its own connection and framing."""
        dropped = DROPPED_RESPONSE_HEADERS
        lines = [b"%s: %s\r\n" % (name, value) for name, value in upstream_response.headers
                 if name.lower() not in dropped]
        if call is not None:
            lines.append(b"x-anchorage-attempts: %d\r\n" % (call.retries + 1))
        return b"".join(lines)

    async def _relay_body(self, call: Call, upstream_response: UpstreamResponse) -> Reply:
        try:
            body = await upstream_response.read()
        except UpstreamError as exc:
            self._finish(call, None, 502, error=True)
            await self._durable()
            return error_reply(502, "upstream_broken", f"upstream {call.upstream.name!r} broke its answer off: {exc}")
        status = upstream_response.status
        counts = None
        if status < 400:
            try:
                counts = counts_from_body(fastjson.loads(body), api=call.api,
                                          reasoning_in_output=call.upstream.reasoning_in_output)
            except ValueError:
                counts = None
        unmetered = self._unmetered(call, "the upstream's answer reported no usage") \
            if status < 400 and counts is None else None
        if call.keep:
            call.transcript["response"] = self._kept(body)
        self._finish(call, counts, status, error=status >= 400, unmetered=unmetered)
        await self._durable()
        return Reply(status, body, self._response_headers(upstream_response, call))

    async def _relay_stream(self, request: Request, call: Call, upstream_response: UpstreamResponse) -> None:
        channel = request.channel
        transport = channel.transport
        reader = StreamUsage(api=call.api, reasoning_in_output=call.upstream.reasoning_in_output)
        stripper = UsageStripper(reader) if call.strip_usage else None
        feed = stripper.feed if stripper is not None else reader.feed
        tap = self._tap(call, feed)
        error, gone, why = upstream_response.status >= 400, False, "the upstream's stream ended without its usage"
        chunked = False
        try:
            if transport is None or transport.is_closing():
                raise ClientGone("the client left before the stream began")
            chunked = channel.start_stream(request, upstream_response.status,
                                           self._response_headers(upstream_response, call))
            await PushRelay(upstream_response, transport, chunked=chunked, feed=tap, drained=channel.drain).run()
            if stripper is not None and (rest := tap(stripper.finish())):
                transport.write(b"%x\r\n%b\r\n" % (len(rest), rest) if chunked else rest)
        except ConnectionResetError:  # the relay's ClientGone: the client left
            gone = True
        except UpstreamError as exc:
            error, why = True, f"the upstream's stream broke ({type(exc).__name__}) before its usage"
            log.warning("trial %s: stream ended early (%s)", call.account.trial_id, type(exc).__name__)
            upstream_response.close()
            if transport is not None:
                transport.abort()  # the client must see a broken stream, not a short complete one
        if gone:
            why = await self._drain(call, upstream_response, reader, feed)
        counts = reader.finish()
        unmetered = self._unmetered(call, why, reader.chunks) \
            if upstream_response.status < 400 and not reader.complete else None
        # The ledger is updated (and journalled) before the client sees the end of the stream, so a
        # caller that reads usage after its stream ended always sees this request, even after a restart.
        self._finish(call, counts, upstream_response.status, error=error, unmetered=unmetered)
        await self._durable()
        if not error and not gone:
            channel.end_stream(chunked)  # (a client that closed after the last event: nothing is written)
        return None

    def _tap(self, call: Call, feed: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
        """What each relayed chunk goes through: the usage reader (and stripper), and the transcript if kept."""
        if not call.keep or self.transcripts is None:
            return feed
        kept = bytearray()
        limit = self.transcripts.max_body_bytes
        call.transcript["response_sse"] = kept

        def tap(chunk: bytes) -> bytes:
            out = feed(chunk)
            if len(kept) <= limit:
                kept.extend(out[:limit + 1 - len(kept)])
            return out

        return tap

    async def _drain(self, call: Call, upstream_response: UpstreamResponse, reader: StreamUsage,
                     feed: Callable[[bytes], bytes]) -> str:
        """The client left mid-stream: read on (bounded) until the upstream reports usage. Returns why the
        request is unmetered if it still is."""
        log.info("trial %s: client went away mid-stream; reading the upstream on for its usage", call.account.trial_id)
        seconds, limit = self.config.disconnect_drain_seconds, self.config.disconnect_drain_bytes
        read = 0

        def sink(chunk: bytes) -> None:
            nonlocal read
            read += len(chunk)
            feed(chunk)  # (what it returns was for the client)
            if reader.complete or read > limit:
                upstream_response.detach()

        upstream_response.resume_reading()  # (a relay paused for a slow client may have paused it)
        try:
            async with asyncio.timeout(seconds):
                await upstream_response.attach(sink)
        except (TimeoutError, UpstreamError):
            pass
        upstream_response.close()
        return (f"the client left mid-stream and the upstream reported no usage within {seconds:g} s / "
                f"{limit} bytes of reading on")

    async def _durable(self) -> None:
        """Wait until the ledger's journal has what was recorded so far (no-op without a journal)."""
        await self.ledger.synced()  # a failed write was logged by the journal; the usage is still in memory

    @staticmethod
    def _unmetered(call: Call, why: str, chunks: int = 0) -> Unmetered:
        return Unmetered(why, call.estimate.input_tokens, chunks, call.estimate.usd)

    def _kept(self, body: bytes) -> Any:
        assert self.transcripts is not None
        return body_for_transcript(body, self.transcripts.max_body_bytes)

    def _finish(self, call: Call, counts: TokenCounts | None, status: int, *, error: bool,
                unmetered: Unmetered | None = None) -> None:
        call.settled = True
        cost = self.ledger.record(call.account, call.model, counts, retries=call.retries, error=error,
                                  reserved_usd=call.estimate.usd, unmetered=unmetered)
        model = metrics.model_label(call.model)
        metrics.child(metrics.GATEWAY_REQUESTS, call.endpoint, model, str(status)).inc()
        metrics.child(metrics.GATEWAY_LATENCY, call.endpoint, model).observe(time.perf_counter() - call.started)
        if counts is not None:
            metrics.record_tokens(call.account.campaign, call.account.entry, call.model, input_tokens=counts.input_tokens,
                                  cached_input_tokens=counts.cached_input_tokens,
                                  output_tokens=counts.billed_output_tokens,
                                  reasoning_tokens=counts.reasoning_tokens, cost_usd=cost)
        if unmetered is not None:
            metrics.unmetered(call.account.campaign, call.account.entry, call.model)
            log.warning("trial %s: request to %s unmetered: %s", call.account.trial_id, call.model, unmetered.why)
        if call.keep:
            self._keep_transcript(call, counts, status, unmetered)
        log.debug("trial %s %s model=%s status=%s retries=%d cost=%s", call.account.trial_id, call.endpoint,
                  call.model, status, call.retries, cost)

    def _keep_transcript(self, call: Call, counts: TokenCounts | None, status: int,
                         unmetered: Unmetered | None) -> None:
        assert self.transcripts is not None
        record: dict[str, Any] = {"endpoint": call.endpoint, "model": call.model, "status": status,
                                  "stream": call.stream, "request": self._kept(call.raw)}
        sse = call.transcript.get("response_sse")
        if isinstance(sse, bytearray):
            record["response_sse"] = self._kept(bytes(sse)) if len(sse) > self.transcripts.max_body_bytes \
                else sse.decode("utf-8", "replace")
        elif "response" in call.transcript:
            record["response"] = call.transcript["response"]
        record["usage"] = None if counts is None else {
            "input_tokens": counts.input_tokens, "cached_input_tokens": counts.cached_input_tokens,
            "output_tokens": counts.output_tokens, "reasoning_tokens": counts.reasoning_tokens}
        record["unmetered"] = None if unmetered is None else unmetered.why
        try:
            self.transcripts.add(call.account.trial_id, record, token=call.token)
        except OSError as exc:  # bookkeeping: the request itself succeeded
            log.warning("trial %s: transcript not written: %s", call.account.trial_id, exc)

    # ----- count_tokens (Anthropic): forwarded, or estimated; never billed -------------------------

    async def count_tokens(self, request: Request) -> Reply:
        auth = self._auth(request)
        if auth is None:
            return self._unauthorized(request)
        raw = request.body
        parsed = self._model_of(raw)
        if parsed is None:
            return error_reply(400, "invalid_request", "the body must be a JSON object with a string 'model'")
        upstream = self.config.upstream_for(parsed[1], "anthropic")
        if upstream is not None:
            pool = self.pool
            origin = pool.origin(upstream.base_url)
            head = request_head(b"POST", origin, request.target.encode("latin-1"),
                                self._upstream_headers(request, upstream), len(raw))
            answer: UpstreamResponse | None = None
            try:
                answer = await pool.request(origin, head, raw, read_timeout=upstream.timeout_seconds)
                if answer.status not in NO_COUNT_ROUTE:
                    body = await answer.read()
                    metrics.GATEWAY_REQUESTS.labels("count_tokens", metrics.model_label(parsed[1]),
                                                    str(answer.status)).inc()
                    return Reply(answer.status, body, self._response_headers(answer))
            except UpstreamError:
                pass
            finally:
                if answer is not None:
                    answer.close()
        metrics.GATEWAY_REQUESTS.labels("count_tokens", metrics.model_label(parsed[1]), "200").inc()
        estimated = math.ceil(len(raw) / 4)  # the common ~4 bytes per token of text: an estimate, said so
        return json_reply(200, {"input_tokens": estimated}, b"x-anchorage-estimated: 1\r\n")
