"""Run servers (aiohttp applications or the gateway's own HTTP server) in a background thread with their own
event loop; the Gateway handle.

:func:`start_gateway` is what the local engine calls: it returns a :class:`Gateway` whose methods
(``issue_token``, ``usage``, ``transcript``, ``revoke``, ``stop``) are safe to call from the engine's
thread. :class:`BackgroundServer` is shared with the mock upstream (``anchorage.gateway.mock``), tests,
the benchmark and ``anchorage gateway`` (which waits in the foreground for a signal). The gateway serves
two things on one loop: the model API (:class:`anchorage.gateway.http.HttpServer`, TCP and/or unix socket, and
one unix socket per trial: :meth:`Gateway.open_trial_socket`) and, with ``admin_port``, the admin API (an aiohttp
application) on a listener of its own.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from anchorage import metrics
from anchorage.costs import PriceSnapshot, Usage, default_snapshot_path
from anchorage.errors import InfrastructureError, InputError
from anchorage.gateway.admin import AdminApp
from anchorage.gateway.gatewayconfig import GatewayConfig
from anchorage.gateway.http import HttpServer
from anchorage.gateway.journal import Journal
from anchorage.gateway.ledger import Ledger
from anchorage.gateway.server import GatewayApp
from anchorage.gateway.tokens import EXPIRY_MARGIN_SECONDS
from anchorage.gateway.transcripts import Transcripts

log = logging.getLogger("anchorage.gateway")


def new_event_loop(*, prefer_uvloop: bool = True) -> asyncio.AbstractEventLoop:
    """uvloop's event loop when preferred and importable (it cuts the gateway's CPU per relayed chunk by
    10–20 %), else asyncio's; ``ANCHORAGE_EVENT_LOOP=asyncio`` forces the standard one."""
    if not prefer_uvloop or os.environ.get("ANCHORAGE_EVENT_LOOP") == "asyncio":
        return asyncio.new_event_loop()
    try:
        uvloop = importlib.import_module("uvloop")  # a dependency on Linux/macOS; absent elsewhere
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


class BackgroundServer:
    """One aiohttp app (or the gateway's :class:`HttpServer`) served on TCP and/or a unix socket from a daemon
    thread (plus, optionally, more aiohttp apps on TCP listeners of their own: ``more`` = ``[(app, host,
    port)]``, their bound ports in ``more_ports``).

    ``uvloop``: run it on uvloop when importable (the gateway does; mocks and other test servers keep asyncio's loop).
    """

    def __init__(self, app: web.Application | HttpServer, *, host: str | None = "127.0.0.1", port: int = 0,
                 unix_socket: Path | None = None, name: str = "aiohttp", uvloop: bool = False,
                 more: Sequence[tuple[web.Application, str, int]] = ()) -> None:
        self._app = app
        self._host, self._port, self._unix_socket = host, port, unix_socket
        self._loop = new_event_loop(prefer_uvloop=uvloop)
        self._http = app if isinstance(app, HttpServer) else None
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False) if isinstance(app, web.Application) \
            else None
        self._more = [(web.AppRunner(extra, access_log=None, handle_signals=False), extra_host, extra_port)
                      for extra, extra_host, extra_port in more]
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self.port: int | None = None
        self.more_ports: list[int] = []

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def http(self) -> HttpServer | None:
        """The gateway's own HTTP server (None when this serves an aiohttp application)."""
        return self._http

    def start(self, timeout: float = 30.0) -> BackgroundServer:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        try:
            future.result(timeout)
        except OSError as exc:
            self.stop()
            raise InfrastructureError(f"cannot listen on {self._where()}: {exc}",
                                      hint="pick another port or socket path") from exc
        return self

    def _where(self) -> str:
        tcp = f"{self._host}:{self._port}" if self._host is not None else ""
        return " and ".join(x for x in (tcp, str(self._unix_socket or "")) if x)

    async def _start(self) -> None:
        if self._runner is not None:
            await self._runner.setup()
        if self._host is not None:
            if self._http is not None:
                self.port = await self._http.start_tcp(self._host, self._port, backlog=1024)
            else:
                assert self._runner is not None
                await web.TCPSite(self._runner, self._host, self._port, backlog=1024).start()
                self.port = int(self._runner.addresses[0][1])
        if self._unix_socket is not None:
            self._unix_socket.parent.mkdir(parents=True, exist_ok=True)
            if self._unix_socket.is_socket():
                self._unix_socket.unlink()
            if self._http is not None:
                await self._http.start_unix(self._unix_socket)
            else:
                assert self._runner is not None
                await web.UnixSite(self._runner, str(self._unix_socket)).start()
        for runner, host, port in self._more:
            await runner.setup()
            await web.TCPSite(runner, host, port).start()
            self.more_ports.append(int(runner.addresses[0][1]))

    @property
    def url(self) -> str | None:
        if self._host is None or self.port is None:
            return None
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    def call(self, coro: object) -> Future[object]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]

    def stop(self, timeout: float = 10.0) -> None:
        if not self._thread.is_alive():
            return
        try:
            for runner, _host, _port in self._more:
                asyncio.run_coroutine_threadsafe(runner.cleanup(), self._loop).result(timeout)
            main = self._http.close() if self._http is not None else self._runner.cleanup() if self._runner else None
            if main is not None:
                asyncio.run_coroutine_threadsafe(main, self._loop).result(timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            if not self._loop.is_running():
                self._loop.close()
            if self._unix_socket is not None and self._unix_socket.is_socket():
                self._unix_socket.unlink()


class Gateway:
    """Handle on a running gateway: tokens, usage ledger, addresses, stop."""

    def __init__(self, config: GatewayConfig, ledger: Ledger, server: BackgroundServer,
                 transcripts: Transcripts | None = None) -> None:
        self.config = config
        self._ledger = ledger
        self._server = server
        self._transcripts = transcripts

    @property
    def url(self) -> str | None:
        """``http://host:port`` (None when listening only on a unix socket). Clients use ``url + /v1``."""
        return self._server.url

    @property
    def unix_socket(self) -> Path | None:
        return self.config.unix_socket

    @property
    def admin_url(self) -> str | None:
        """``http://admin_host:port`` of the admin listener (None without ``admin_port``)."""
        if self.config.admin_port is None or not self._server.more_ports:
            return None
        host = self.config.admin_host
        return f"http://{f'[{host}]' if ':' in host else host}:{self._server.more_ports[0]}"

    @property
    def snapshot(self) -> PriceSnapshot | None:
        return self._ledger.snapshot

    def issue_token(self, trial_id: str, *, budget_usd: float | None = None, rate_per_min: float | None = None,
                    entry: str | None = None, timeout_sec: float | None = None, expires_at: float | None = None,
                    transcript: bool = False, campaign: str | None = None) -> str:
        """A bearer token for ``trial_id``; every request made with it is billed to that trial.

        ``entry`` and ``campaign`` (optional) label the trial's tokens and cost in the Prometheus metrics. The token
        expires ``timeout_sec`` (the trial's agent timeout, counted from now) plus
        :data:`~anchorage.gateway.tokens.EXPIRY_MARGIN_SECONDS` from now, or at ``expires_at`` (Unix
        seconds); with neither, ``token_ttl_seconds`` from now. ``transcript``: keep the trial's request and
        response bodies (:meth:`transcript`), when the config's ``transcripts.enabled`` allows it.
        """
        if expires_at is None and timeout_sec is not None:
            expires_at = time.time() + timeout_sec + EXPIRY_MARGIN_SECONDS
        token = self._ledger.issue(trial_id, budget_usd=budget_usd, rate_per_min=rate_per_min, entry=entry,
                                   expires_at=expires_at, transcript=transcript, campaign=campaign)
        self.wait_durable()
        return token

    def open_trial_socket(self, trial_id: str) -> Path:
        """A unix socket that serves ``trial_id`` alone, for its sandbox: it takes that trial's token only (another
        trial's gets 401, never billed), and its connections have a cap of their own (past it the socket stops
        accepting; other trials' sockets are not touched). Opening it again while open gives the same socket;
        :meth:`close_trial_socket` when the trial's processes are gone."""
        folder = self.config.trial_sockets or (self.config.unix_socket.parent if self.config.unix_socket else None)
        http = self._server.http
        if folder is None or http is None:
            raise InputError("this gateway has no folder for per-trial sockets",
                             hint="set trial_sockets (or unix_socket) in the gateway config")
        path = folder / f"trial-{hashlib.blake2b(trial_id.encode(), digest_size=10).hexdigest()}.sock"

        async def open_() -> None:
            if http.trial_listener(trial_id) is None:
                folder.mkdir(parents=True, exist_ok=True)
                await http.start_unix(path, owner=trial_id)

        self._server.call(open_()).result(30)
        return path

    def close_trial_socket(self, trial_id: str) -> None:
        """Stop the trial's socket (:meth:`open_trial_socket`) and close its connections; nothing when none is open."""
        http = self._server.http
        if http is None:
            return

        async def close() -> None:
            listener = http.trial_listener(trial_id)
            if listener is not None:
                http.stop_listener(listener)

        self._server.call(close()).result(30)

    def transcript(self, trial_id: str) -> list[dict[str, Any]]:
        """The trial's transcript records (one per request, redacted; empty when none was kept)."""
        return self._transcripts.read(trial_id) if self._transcripts is not None else []

    def usage(self, trial_id: str) -> Usage:
        """A copy of the trial's usage so far (``.to_dict()`` for the trial record)."""
        return self._ledger.usage(trial_id)

    def revoke(self, trial_id: str) -> None:
        """Refuse the trial's token from now on (its usage stays readable; journalled with a ledger_dir)."""
        self._ledger.revoke(trial_id)
        self.wait_durable()

    def wait_durable(self, timeout: float = 30.0) -> None:
        """Block until every ledger change so far is in the journal (no-op without ``ledger_dir``)."""
        self._ledger.synced_wait(timeout)

    def stop(self) -> None:
        self._server.stop()
        self._ledger.close()
        if self._transcripts is not None:
            self._transcripts.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _secret(config: GatewayConfig) -> bytes:
    if config.token_secret_env is None:
        return secrets.token_bytes(32)
    value = os.environ.get(config.token_secret_env)
    if not value:
        raise InputError(f"environment variable {config.token_secret_env} (token secret) is empty",
                         hint="set it to the secret shared with the operator, or drop token_secret_env")
    return value.encode("utf-8")


def _admin_token(config: GatewayConfig) -> str | None:
    if config.admin_token_env is None:
        return None
    value = os.environ.get(config.admin_token_env)
    if not value:
        raise InputError(f"environment variable {config.admin_token_env} (admin token) is empty",
                         hint="set it, or drop admin_token_env to disable the admin API")
    return value


@dataclass
class Built:
    """What :func:`build` made: the model API, the admin API, the ledger, the transcripts."""

    app: HttpServer
    admin: web.Application
    ledger: Ledger
    transcripts: Transcripts | None


def _transcripts(config: GatewayConfig, secrets: list[str]) -> Transcripts | None:
    settings = config.transcripts
    if not settings.enabled:
        return None
    directory = settings.directory or (config.ledger_dir / "transcripts" if config.ledger_dir is not None else None)
    return Transcripts(directory, max_bytes_per_trial=settings.max_bytes_per_trial,
                       max_body_bytes=settings.max_body_bytes, secrets=secrets)


def build(config: GatewayConfig) -> Built:
    """The gateway's model API server, its admin application and its ledger (keys are checked here, before
    listening)."""
    keys = [key for upstream in config.upstreams if (key := upstream.key()) is not None]
    snapshot = PriceSnapshot.load(config.prices or default_snapshot_path())
    metrics.allow_models([*snapshot.models, *snapshot.aliases])
    metrics.allow_models(m for u in config.upstreams for m in u.models if not any(c in m for c in "*?["))
    journal = Journal(config.ledger_dir, fsync=config.ledger_fsync) if config.ledger_dir is not None else None
    ledger = Ledger(_secret(config), snapshot, default_budget_usd=config.default_budget_usd,
                    default_rate_per_min=config.default_rate_per_min, journal=journal,
                    token_ttl_seconds=config.token_ttl_seconds)
    if journal is None:
        log.info("no ledger_dir: per-trial usage and revocations are kept in memory only (a restart loses them)")
    else:
        log.info("usage ledger: %s (replayed and compacted: %d trial(s))", journal.path, ledger.trials())
    admin_token = _admin_token(config)
    transcripts = _transcripts(config, [*keys, *([admin_token] if admin_token else [])])
    admin = AdminApp(ledger, admin_token, transcripts, config.metrics_path)
    return Built(GatewayApp(config, ledger, transcripts).build(), admin.build(), ledger, transcripts)


def build_app(config: GatewayConfig) -> tuple[HttpServer, Ledger]:
    """The model API and the ledger only (the benchmark serves just that)."""
    built = build(config)
    return built.app, built.ledger


def start_gateway(config: GatewayConfig) -> Gateway:
    """Start the gateway in a background thread and return its handle (``stop()`` it when done)."""
    built = build(config)
    more = [(built.admin, config.admin_host, config.admin_port)] if config.admin_port is not None else []
    try:
        server = BackgroundServer(built.app, host=config.host, port=config.port, unix_socket=config.unix_socket,
                                  name="anchorage-gateway", uvloop=True, more=more).start()
    except BaseException:
        built.ledger.close()
        if built.transcripts is not None:
            built.transcripts.close()
        raise
    return Gateway(config, built.ledger, server, built.transcripts)
