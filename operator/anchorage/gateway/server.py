"""The gateway's aiohttp application: authenticate, limit, forward with retries, count, stream.

Built by :func:`anchorage.gateway.running.start_gateway` (and ``anchorage gateway``). One request:

1. the bearer token (``Authorization: Bearer`` or Anthropic's ``x-api-key``) names a trial, else 401;
2. the trial's rate and budget limits are checked, else 429 with a message saying which limit;
3. the model picks an upstream; the provider key is added (the client's token is never forwarded);
4. 429/5xx and connection errors are retried within the budget of :class:`RetryConfig`, honouring
   ``Retry-After`` and ``reset_seconds``; when it runs out the client gets a 502 JSON error saying
   how many attempts failed with what;
5. the response is passed back — streams chunk by chunk as they arrive — while its usage is read;
6. usage and cost go into the trial's ledger and the Prometheus collectors.

Prompts, replies and keys are never logged unless ``log_bodies`` is set (then only bodies, not keys).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from anchorage import metrics
from anchorage.costs import TokenCounts
from anchorage.gateway.config import GatewayConfig, UpstreamConfig
from anchorage.gateway.ledger import Ledger, TrialAccount
from anchorage.gateway.relay import IdleWatch, PushRelay
from anchorage.gateway.retrying import retry_delay
from anchorage.gateway.usage import StreamUsage, counts_from_body

log = logging.getLogger("anchorage.gateway")

PASSED_REQUEST_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta", "accept")
DROPPED_RESPONSE_HEADERS = frozenset(
    {"content-length", "transfer-encoding", "content-encoding", "connection", "keep-alive", "date", "server"}
)
LARGE_BODY = 512 * 1024
SESSION_KEY: web.AppKey[aiohttp.ClientSession] = web.AppKey("session", aiohttp.ClientSession)


def error_response(status: int, kind: str, message: str, **extra: Any) -> web.Response:
    """An OpenAI-shaped JSON error (``{"error": {"type", "message", ...}}``) from the gateway itself."""
    body = {"error": {"type": kind, "message": message, "source": "anchorage-gateway", **extra}}
    headers = {"x-anchorage-gateway-error": kind}
    if "retry_after" in extra and extra["retry_after"] is not None:
        headers["Retry-After"] = str(max(1, round(extra["retry_after"])))
    return web.json_response(body, status=status, headers=headers)


@dataclass
class Call:
    """What the handler knows about one request while it is forwarded."""

    endpoint: str
    api: str
    account: TrialAccount
    model: str
    upstream: UpstreamConfig
    body: bytes
    stream: bool
    started: float
    retries: int = 0


class Exhausted(Exception):
    """The retry budget ran out; ``message`` says what failed how often."""

    def __init__(self, message: str, last_status: int | None, attempts: int) -> None:
        super().__init__(message)
        self.message, self.last_status, self.attempts = message, last_status, attempts


class GatewayApp:
    """Request handlers bound to one config and one ledger."""

    def __init__(self, config: GatewayConfig, ledger: Ledger, admin_token: str | None = None) -> None:
        self.config = config
        self.ledger = ledger
        self.admin_token = admin_token
        self._timeouts: dict[tuple[str, float], aiohttp.ClientTimeout] = {}

    def build(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handler("chat", "openai"))
        app.router.add_post("/v1/responses", self._handler("responses", "openai"))
        app.router.add_post("/v1/messages", self._handler("messages", "anthropic"))
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/healthz", self.health)
        if self.config.metrics_path:
            app.router.add_get(self.config.metrics_path, self.metrics)
        if self.admin_token:
            app.router.add_post("/admin/v1/tokens", self.admin_issue)
            app.router.add_get("/admin/v1/usage/{trial}", self.admin_usage)
            app.router.add_delete("/admin/v1/tokens/{trial}", self.admin_revoke)
        app.cleanup_ctx.append(self._session)
        return app

    async def _session(self, app: web.Application) -> Any:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
            app[SESSION_KEY] = session
            yield

    # ----- small routes -------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def metrics(self, request: web.Request) -> web.Response:
        response = web.Response(body=generate_latest(REGISTRY))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def models(self, request: web.Request) -> web.Response:
        if self._account(request) is None:
            return self._unauthorized()
        names = sorted({m for u in self.config.upstreams for m in u.models if not any(c in m for c in "*?[")})
        snapshot = self.ledger.snapshot
        if snapshot is not None:
            names = sorted(set(names) | {m for m in snapshot.models
                                         if any(u.serves(m) for u in self.config.upstreams)})
        data = [{"id": name, "object": "model", "owned_by": "anchorage-gateway"} for name in names]
        return web.json_response({"object": "list", "data": data})

    # ----- admin API (cluster mode: the operator issues tokens and reads usage) -----------------

    def _is_admin(self, request: web.Request) -> bool:
        return request.headers.get("Authorization", "") == f"Bearer {self.admin_token}"

    async def admin_issue(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return error_response(401, "unauthorized", "admin token required")
        try:
            body = await request.json()
            token = self.ledger.issue(str(body["trial_id"]), budget_usd=body.get("budget_usd"),
                                      rate_per_min=body.get("rate_per_min"), entry=body.get("entry"))
        except (ValueError, KeyError, TypeError) as exc:
            return error_response(400, "invalid_request", f"expected {{trial_id, budget_usd?, "
                                  f"rate_per_min?, entry?}}: {exc}")
        await self._durable()
        return web.json_response({"token": token})

    async def admin_usage(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return error_response(401, "unauthorized", "admin token required")
        return web.json_response(self.ledger.usage(request.match_info["trial"]).to_dict())

    async def admin_revoke(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return error_response(401, "unauthorized", "admin token required")
        self.ledger.revoke(request.match_info["trial"])
        await self._durable()
        return web.json_response({"revoked": request.match_info["trial"]})

    # ----- forwarding ---------------------------------------------------------------------------

    def _account(self, request: web.Request) -> TrialAccount | None:
        auth = request.headers.get("Authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else request.headers.get("x-api-key", "")
        return self.ledger.authenticate(token) if token else None

    @staticmethod
    def _unauthorized() -> web.Response:
        metrics.GATEWAY_REFUSALS.labels("unauthorized").inc()
        return error_response(401, "invalid_api_key", "unknown or revoked trial token",
                              hint="use the token the engine issued for this trial")

    def _handler(self, endpoint: str, api: str) -> Any:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self.forward(request, endpoint, api)

        return handle

    async def forward(self, request: web.Request, endpoint: str, api: str) -> web.StreamResponse:
        started = time.perf_counter()
        account = self._account(request)
        if account is None:
            return self._unauthorized()
        raw = await request.read()
        try:
            payload = json.loads(raw)
            model = payload.get("model") if isinstance(payload, dict) else None
            if not isinstance(model, str):
                raise TypeError
        except (ValueError, TypeError):
            return error_response(400, "invalid_request", "the body must be a JSON object with a string 'model'")
        upstream = self.config.upstream_for(model, api)
        if upstream is None:
            return error_response(404, "model_not_found", f"model {model!r} is not served by this gateway "
                                  f"on /{endpoint}", hint="check the gateway config's upstreams[].models")
        refusal = self.ledger.admit(account)
        if refusal is not None:
            metrics.GATEWAY_REFUSALS.labels(refusal.kind).inc()
            return error_response(429, refusal.kind, refusal.message, retry_after=refusal.retry_after)
        if self.config.log_bodies:
            log.debug("trial %s %s body: %s", account.trial_id, endpoint, raw.decode("utf-8", "replace"))
        stream = bool(payload.get("stream"))
        call = Call(endpoint, api, account, model, upstream, self._body(payload, raw, endpoint, upstream),
                    stream, started)
        return await self._answer(request, call)

    @staticmethod
    def _body(payload: dict[str, Any], raw: bytes, endpoint: str, upstream: UpstreamConfig) -> bytes:
        """The body to forward: chat streams ask for usage in their last chunk (unless told not to)."""
        if endpoint != "chat" or not payload.get("stream") or not upstream.include_stream_usage:
            return raw
        options = payload.get("stream_options") or {}
        if isinstance(options, dict) and "include_usage" not in options:
            payload["stream_options"] = {**options, "include_usage": True}
            return json.dumps(payload).encode("utf-8")
        return raw

    async def _answer(self, request: web.Request, call: Call) -> web.StreamResponse:
        try:
            upstream_response = await self._send_with_retries(request.app[SESSION_KEY], request, call)
        except Exhausted as exc:
            self._finish(call, None, 502, error=True)
            await self._durable()
            return error_response(502, "upstream_retries_exhausted", exc.message,
                                  attempts=exc.attempts, last_status=exc.last_status)
        async with upstream_response:
            if "text/event-stream" in upstream_response.headers.get("Content-Type", ""):
                return await self._relay_stream(request, call, upstream_response)
            return await self._relay_body(call, upstream_response)

    def _upstream_headers(self, request: web.Request, upstream: UpstreamConfig) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        for name in PASSED_REQUEST_HEADERS:
            if name in request.headers:
                headers[name] = request.headers[name]
        key = upstream.key()
        if key is not None and upstream.api == "anthropic":
            headers["x-api-key"] = key
            headers.setdefault("anthropic-version", "2023-06-01")
        elif key is not None:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def _send_with_retries(self, session: aiohttp.ClientSession, request: web.Request,
                                 call: Call) -> aiohttp.ClientResponse:
        """The first acceptable upstream response, or :class:`Exhausted`."""
        retry = self.config.retry
        url = call.upstream.base_url.rstrip("/") + request.path
        headers = self._upstream_headers(request, call.upstream)
        timeout = self._timeout(call.upstream)
        deadline = time.monotonic() + retry.max_total_seconds
        failures: list[str] = []
        last_status: int | None = None
        for attempt in range(1, retry.max_attempts + 1):
            try:
                # large bodies as a stream: aiohttp warns that raw bytes that big block the loop
                data = io.BytesIO(call.body) if len(call.body) > LARGE_BODY else call.body
                response = await session.post(url, data=data, headers=headers, timeout=timeout)
            except (TimeoutError, aiohttp.ClientConnectionError) as exc:
                failures.append(type(exc).__name__)
                cause, delay = "connection", retry_delay(attempt, {}, b"", retry)
            else:
                if response.status not in retry.retry_statuses:
                    return response
                body = await response.read()
                response.release()
                last_status = response.status
                failures.append(str(response.status))
                cause, delay = str(response.status), retry_delay(attempt, response.headers, body, retry)
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

    def _timeout(self, upstream: UpstreamConfig) -> aiohttp.ClientTimeout:
        """The upstream's read timeout (made once per upstream: it is immutable)."""
        key = (upstream.name, upstream.timeout_seconds)
        timeout = self._timeouts.get(key)
        if timeout is None:
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=upstream.timeout_seconds)
            self._timeouts[key] = timeout
        return timeout

    @staticmethod
    def _response_headers(upstream_response: aiohttp.ClientResponse, call: Call) -> dict[str, str]:
        headers = {k: v for k, v in upstream_response.headers.items()
                   if k.lower() not in DROPPED_RESPONSE_HEADERS}
        headers["x-anchorage-attempts"] = str(call.retries + 1)
        return headers

    async def _relay_body(self, call: Call, upstream_response: aiohttp.ClientResponse) -> web.Response:
        body = await upstream_response.read()
        counts = None
        if upstream_response.status < 400:
            try:
                counts = counts_from_body(json.loads(body), api=call.api,
                                          reasoning_in_output=call.upstream.reasoning_in_output)
            except ValueError:
                counts = None
        self._finish(call, counts, upstream_response.status, error=upstream_response.status >= 400)
        await self._durable()
        return web.Response(body=body, status=upstream_response.status,
                            headers=self._response_headers(upstream_response, call))

    async def _relay_stream(self, request: web.Request, call: Call,
                            upstream_response: aiohttp.ClientResponse) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream_response.status,
                                      headers=self._response_headers(upstream_response, call))
        if request.version == aiohttp.HttpVersion11:
            response.enable_chunked_encoding()  # so the relay knows how to frame what it writes
        else:
            response.force_close()  # HTTP/1.0 has no chunks: the end of the stream is the end of the connection
        await response.prepare(request)
        reader = StreamUsage(api=call.api, reasoning_in_output=call.upstream.reasoning_in_output)
        error = upstream_response.status >= 400
        try:
            # The first chunk goes through aiohttp (its sock_read timer covers the wait; the headers
            # go out with it), the rest through the push relay, or this loop when it cannot be used.
            first = await upstream_response.content.readany()
            reader.feed(first)
            await response.write(first)
            if first and PushRelay.usable(upstream_response, request.transport):
                assert request.transport is not None
                await PushRelay(upstream_response, request.transport,
                                chunked=response.chunked, feed=reader.feed,
                                timeout=call.upstream.timeout_seconds).run()
            elif first:
                await self._relay_loop(upstream_response, response, reader.feed, call.upstream.timeout_seconds)
        except (TimeoutError, aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            error = True
            log.warning("trial %s: stream ended early (%s)", call.account.trial_id, type(exc).__name__)
            upstream_response.close()
            if request.transport is not None:
                request.transport.abort()  # the client must see a broken stream, not a short complete one
        except ConnectionResetError:
            error = True
            upstream_response.close()
            log.info("trial %s: client went away mid-stream", call.account.trial_id)
        # The ledger is updated (and journalled) before the client sees the end of the stream, so a
        # caller that reads usage after its stream ended always sees this request, even after a restart.
        self._finish(call, reader.finish(), upstream_response.status, error=error)
        await self._durable()
        if not error:
            await response.write_eof()
        return response

    @staticmethod
    async def _relay_loop(upstream_response: aiohttp.ClientResponse, response: web.StreamResponse,
                          feed: Callable[[bytes], None], timeout: float) -> None:
        """The plain relay (one read, one usage scan, one write per chunk), when the push relay cannot run."""
        read, write = upstream_response.content.readany, response.write
        watch = IdleWatch(upstream_response, timeout)
        try:
            while chunk := await read():
                feed(chunk)
                await write(chunk)
        finally:
            watch.cancel()

    async def _durable(self) -> None:
        """Wait until the ledger's journal has what was recorded so far (no-op without a journal)."""
        await self.ledger.synced()  # a failed write was logged by the journal; the usage is still in memory

    def _finish(self, call: Call, counts: TokenCounts | None, status: int, *, error: bool) -> None:
        cost = self.ledger.record(call.account, call.model, counts, retries=call.retries, error=error)
        model = metrics.model_label(call.model)
        metrics.GATEWAY_REQUESTS.labels(call.endpoint, model, str(status)).inc()
        metrics.GATEWAY_LATENCY.labels(call.endpoint, model).observe(time.perf_counter() - call.started)
        if counts is not None:
            metrics.record_tokens(call.account.entry, call.model, input_tokens=counts.input_tokens,
                                  cached_input_tokens=counts.cached_input_tokens,
                                  output_tokens=counts.billed_output_tokens,
                                  reasoning_tokens=counts.reasoning_tokens, cost_usd=cost)
        log.debug("trial %s %s model=%s status=%s retries=%d cost=%s", call.account.trial_id, call.endpoint,
                  call.model, status, call.retries, cost)
