"""``anchorage gateway``: run the model gateway in the foreground (the cluster's gateway Deployment).

The local engine does not use this command: it starts the gateway in-process with
:func:`anchorage.gateway.start_gateway`. aiohttp is imported inside the command so ``--help`` is fast.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("gateway")(gateway)


def gateway(
    config: Path | None = typer.Option(None, "--config", "-c", exists=True, dir_okay=False,
                                       help="Gateway config YAML (upstreams, retry, limits, listeners)."),
    host: str | None = typer.Option(None, help="TCP host (overrides the config)."),
    port: int | None = typer.Option(None, help="TCP port, 0 picks one (overrides the config)."),
    unix_socket: Path | None = typer.Option(None, help="Also listen on this unix socket."),
    admin_host: str | None = typer.Option(None, help="Host of the admin listener (overrides the config; "
                                          "default 127.0.0.1)."),
    admin_port: int | None = typer.Option(
        None, min=0, max=65535, help="Serve /healthz, /metrics and the /admin/v1 API on this port, a listener of "
        "its own that agents must not reach (0 picks one; overrides the config; default: no admin listener)."),
    ledger_dir: Path | None = typer.Option(
        None, file_okay=False, help="Journal per-trial usage, limits and revocations in this directory "
        "(ledger.jsonl, replayed at start) so a restart loses none of them (overrides the config's ledger_dir). "
        "Without it they are kept in memory only."),
    mock: bool = typer.Option(False, "--mock", help="Start the deterministic mock upstream in-process and "
                              "serve every model from it (demos; responses are labelled as mock)."),
    mock_config: Path | None = typer.Option(None, exists=True, dir_okay=False,
                                            help="Mock upstream config YAML (canned replies, reasoning mode)."),
    token_secret_env: str | None = typer.Option(
        None, "--token-secret-env", metavar="VAR", help="Environment variable with the HMAC secret of trial tokens, "
        "shared with the operator (overrides the config's token_secret_env; default: a random secret)."),
    admin_token_env: str | None = typer.Option(
        None, "--admin-token-env", metavar="VAR", help="Environment variable with the bearer token of the /admin/v1 "
        "API (overrides the config's admin_token_env; default: no admin API)."),
    issue_token: list[str] = typer.Option([], "--issue-token", metavar="TRIAL",
                                          help="Print a bearer token for this trial id at start (repeatable)."),
    log_level: str = typer.Option("INFO", help="Python log level (prompts are never logged unless the "
                                  "config sets log_bodies)."),
) -> None:
    """Run the OpenAI-compatible model gateway until interrupted (Ctrl-C or SIGTERM)."""
    from anchorage.errors import InputError
    from anchorage.gateway import BackgroundServer, GatewayConfig, start_gateway
    from anchorage.gateway.mock import MockConfig, MockUpstream
    from anchorage.gctuning import tune_gc

    stop = _stop_on_signal()
    tune_gc()  # as the operator's: fewer collector passes per request
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if config is None and not mock:
        raise InputError("no upstream: pass --config FILE or --mock", hint="anchorage gateway --mock for a demo")
    data = GatewayConfig.load(config).model_dump() if config else {"upstreams": []}
    data.update({k: v for k, v in {"host": host, "port": port, "unix_socket": unix_socket, "token_secret_env":
                                    token_secret_env, "admin_token_env": admin_token_env, "ledger_dir": ledger_dir,
                                    "admin_host": admin_host, "admin_port": admin_port}.items()
                 if v is not None})
    mock_server = None
    if mock:
        upstream = MockUpstream(MockConfig.load(mock_config) if mock_config else MockConfig())
        mock_server = BackgroundServer(upstream.app(), name="mock-upstream").start()
        data["upstreams"] = [*data["upstreams"], {"name": "mock", "base_url": mock_server.url, "models": ["*"]},
                             {"name": "mock-anthropic", "base_url": mock_server.url, "api": "anthropic",
                              "models": ["*"]}]
    running = start_gateway(GatewayConfig.model_validate(data))
    typer.echo(f"anchorage gateway listening on {running.url or ''} {running.unix_socket or ''}".rstrip())
    if running.admin_url is not None:
        api = ", /admin/v1" if running.config.admin_token_env else "; /admin/v1 off without --admin-token-env"
        typer.echo(f"admin API (/healthz, /metrics{api}) on {running.admin_url}")
    else:
        typer.echo("admin API: off (no --admin-port): no /healthz, /metrics or /admin/v1")
    if mock_server is not None:
        typer.echo(f"mock upstream (labelled x-anchorage-mock: 1) at {mock_server.url}")
    for trial in issue_token:
        typer.echo(f"token {trial}: {running.issue_token(trial)}")
    if running.config.ledger_dir is None:
        typer.echo("usage ledger: in memory only, a restart loses per-trial usage and revocations "
                   "(pass --ledger-dir or set ledger_dir)")
    else:
        typer.echo(f"usage ledger: {running.config.ledger_dir / 'ledger.jsonl'} (journalled, replayed at start)")
    while not stop.wait(1.0):
        pass
    running.stop()
    if mock_server is not None:
        mock_server.stop()


def _stop_on_signal() -> threading.Event:
    """An event set by SIGINT or SIGTERM (installed first, so an early signal still stops cleanly)."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop
