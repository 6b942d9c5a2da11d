"""The gateway's configuration: where it listens, which upstreams serve which models, retries, limits.

Built in code by the local engine (``GatewayConfig(upstreams=[...])``) or read from YAML by
``anchorage gateway --config FILE`` (:meth:`GatewayConfig.load`). Provider keys are read from the
environment variable an upstream names (``api_key_env``) — the config file never needs a key in it.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from anchorage.errors import InputError


class UpstreamConfig(BaseModel):
    """One provider endpoint. ``base_url`` ends before the API path (``https://api.openai.com``)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    base_url: str = Field(description="scheme://host[:port][/prefix] (a trailing /v1 is dropped); "
                          "the gateway appends the request path /v1/...")
    api: Literal["openai", "anthropic"] = "openai"
    models: list[str] = Field(default_factory=lambda: ["*"], description="glob patterns of model ids")
    api_key_env: str | None = Field(default=None, description="environment variable holding the key")
    api_key: SecretStr | None = Field(default=None, description="inline key (prefer api_key_env)")
    reasoning_in_output: bool = Field(
        default=True,
        description="False when the provider bills reasoning tokens outside its completion counter",
    )
    include_stream_usage: bool = Field(
        default=True, description="ask for usage in streamed chat requests (stream_options.include_usage: true, "
        "whatever the client asked; the usage chunk is taken out of the stream of a client that did not ask for "
        "it). Off only for a provider that rejects the option: its streams are then unmetered")
    max_output_tokens: int = Field(
        default=32768, ge=1, description="output ceiling assumed for a request that sets no max_tokens / "
        "max_output_tokens (its budget reservation); set it to the models' real ceiling")
    timeout_seconds: float = Field(default=600.0, gt=0)

    @field_validator("base_url")
    @classmethod
    def _without_api_version(cls, value: str) -> str:
        """Accept ``https://api.openai.com/v1`` as well: the gateway appends the request's ``/v1/...``."""
        value = value.rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url {value!r} must start with http:// or https://")
        return value.removesuffix("/v1")

    def serves(self, model: str) -> bool:
        return any(fnmatch.fnmatchcase(model, pattern) for pattern in self.models)

    def key(self) -> str | None:
        """The provider key: inline, else from ``api_key_env`` (None: the upstream needs none)."""
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env is None:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise InputError(
                f"upstream {self.name!r}: environment variable {self.api_key_env} is empty",
                hint=f"export {self.api_key_env}=<provider key> before starting the gateway",
            )
        return value


class RetryConfig(BaseModel):
    """Bounded retries of 429 / 5xx / connection errors (before any byte reached the client)."""

    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(default=5, ge=1, description="attempts in all, the first one included")
    max_total_seconds: float = Field(default=120.0, gt=0, description="give up when waiting would pass this")
    base_delay_seconds: float = Field(default=0.5, ge=0, description="backoff without a hint: base·2^n")
    max_delay_seconds: float = Field(default=30.0, ge=0, description="cap of one backoff without a hint")
    retry_statuses: list[int] = Field(default_factory=lambda: [429, 500, 502, 503, 504, 529])


class TranscriptConfig(BaseModel):
    """Transcripts: the request and response bodies of trials whose token asks for them (keys and tokens
    redacted, size-capped), for ``Gateway.transcript`` and ``GET /admin/v1/transcripts/{trial}``."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="honour tokens that ask for a transcript (false: never keep "
                          "bodies, whatever a token asks)")
    directory: Path | None = Field(default=None, description="where transcripts are kept (default: "
                                   "<ledger_dir>/transcripts, else a temporary folder removed at stop)")
    max_bytes_per_trial: int = Field(default=16 * 2**20, ge=1024, description="a trial's transcript stops "
                                     "growing here (one line then says what was left out)")
    max_body_bytes: int = Field(default=2**20, ge=256, description="a request or response body longer than this "
                                "is cut (and marked so) in the transcript")


MIB = 2**20


class FrontDoorConfig(BaseModel):
    """What one client may hold of the model API's listeners: connections, buffered bytes and time (the gateway's
    front door, :mod:`anchorage.gateway.frontdoor`). A *client* is one trial's socket on the local engine, one
    remote address on TCP, one peer uid on a shared unix socket; a *token* is one trial's account."""

    model_config = ConfigDict(extra="forbid")

    max_connections: int = Field(
        default=4096, ge=1, description="open connections in all; past it the listeners stop accepting until one "
        "closes (lowered at start to what the process's descriptor limit leaves)")
    max_connections_per_client: int = Field(
        default=128, ge=1, description="open connections of one client (a trial's own socket stops accepting; "
        "another client's further connections are closed at once)")
    max_connections_per_token: int = Field(default=64, ge=1, description="open connections that presented one "
                                           "trial's token (more: 429, closed)")
    max_head_bytes: int = Field(default=64 * 1024, ge=1024, description="a request line and its headers, every byte "
                                "counted (more: 431, closed)")
    max_body_bytes: int = Field(default=64 * MIB, ge=1024, description="one request body (more: 413, closed)")
    max_inflight_bytes: int = Field(default=256 * MIB, ge=1024, description="request bodies held at once in all "
                                    "(more: 503 with Retry-After)")
    max_inflight_bytes_per_token: int = Field(default=96 * MIB, ge=1024, description="request bodies of one trial "
                                              "held at once (more: 429 with Retry-After)")
    head_timeout_seconds: float = Field(
        default=10.0, gt=0, description="a request's line and headers must be complete this long after its first "
        "byte (a connection's first request: after the connection opened); bytes that trickle in do not extend it "
        "(408, closed)")
    body_timeout_seconds: float = Field(default=60.0, gt=0, description="a request's body must be complete this "
                                        "long after its headers (408, closed)")
    keepalive_seconds: float = Field(default=75.0, gt=0, description="an idle keep-alive connection is closed "
                                     "after this long")

    @model_validator(mode="after")
    def _fits(self) -> FrontDoorConfig:
        if self.max_body_bytes > self.max_inflight_bytes_per_token:
            raise ValueError(f"front_door.max_body_bytes ({self.max_body_bytes}) is larger than "
                             f"max_inflight_bytes_per_token ({self.max_inflight_bytes_per_token}): such a body could "
                             "never be taken; raise the latter or lower the former")
        if self.max_inflight_bytes_per_token > self.max_inflight_bytes:
            raise ValueError("front_door.max_inflight_bytes_per_token is larger than max_inflight_bytes: lower it")
        if self.max_connections_per_token > self.max_connections or self.max_connections_per_client > \
                self.max_connections:
            raise ValueError("front_door: a per-client or per-token connection cap is larger than max_connections")
        return self


class GatewayConfig(BaseModel):
    """Everything :func:`anchorage.gateway.start_gateway` needs."""

    model_config = ConfigDict(extra="forbid")

    host: str | None = Field(default="127.0.0.1", description="TCP host; None: no TCP listener")
    port: int = Field(default=0, ge=0, le=65535, description="0 picks a free port")
    unix_socket: Path | None = Field(default=None, description="also (or only) listen on this socket")
    trial_sockets: Path | None = Field(
        default=None, description="folder of the per-trial sockets (Gateway.open_trial_socket: one listener per "
        "trial, which takes that trial's token only); default: the unix_socket's folder")
    front_door: FrontDoorConfig = Field(default_factory=FrontDoorConfig)
    upstreams: list[UpstreamConfig] = Field(min_length=1)
    prices: Path | None = Field(default=None, description="price snapshot; default: newest prices/*.yaml")
    retry: RetryConfig = Field(default_factory=RetryConfig)
    admin_host: str = Field(default="127.0.0.1", description="host of the admin listener")
    admin_port: int | None = Field(
        default=None, ge=0, le=65535, description="the admin listener (/healthz, /metrics, /admin/v1): a port of "
        "its own that agents cannot reach; None: no admin listener (the local engine reads the ledger in-process)")
    default_budget_usd: float | None = Field(default=None, gt=0)
    default_rate_per_min: float | None = Field(default=None, gt=0)
    reserve_input_bytes_per_token: float = Field(
        default=1.0, gt=0, description="a request's input estimate for its budget reservation is its body's bytes "
        "divided by this (1: an upper bound for text, as a token covers at least one byte)")
    token_ttl_seconds: float | None = Field(
        default=86400.0, gt=0, description="expiry of a token issued without one (the engine and the operator "
        "pass the trial's deadline plus a margin); None: such tokens never expire")
    disconnect_drain_seconds: float = Field(
        default=30.0, ge=0, description="after a client left mid-stream, keep reading the upstream this long "
        "for the usage it reports (else the request is unmetered)")
    disconnect_drain_bytes: int = Field(default=8 * 2**20, ge=0, description="... and at most this many bytes")
    token_secret_env: str | None = Field(
        default=None, description="env var with the HMAC secret for trial tokens (default: random)"
    )
    admin_token_env: str | None = Field(
        default=None, description="env var with the bearer token of the /admin/v1 API (off when unset)"
    )
    ledger_dir: Path | None = Field(
        default=None, description="directory of the usage ledger's journal (ledger.jsonl): usage and revocations "
        "survive a restart; None: kept in memory only")
    ledger_fsync: bool = Field(
        default=True, description="fdatasync the journal before a response ends (off: survives a crash of the "
        "gateway process, not of the machine)")
    metrics_path: str | None = Field(default="/metrics", description="route of the metrics on the admin listener "
                                     "(None: none)")
    log_bodies: bool = Field(default=False, description="log prompts and replies (off: never logged)")
    transcripts: TranscriptConfig = Field(default_factory=TranscriptConfig)

    @model_validator(mode="after")
    def _listens_somewhere(self) -> GatewayConfig:
        if self.host is None and self.unix_socket is None:
            raise ValueError("set host (TCP) or unix_socket: the gateway must listen somewhere")
        if self.admin_port is not None and self.admin_port == self.port and self.port != 0 \
                and self.host is not None:
            raise ValueError(f"admin_port {self.admin_port} is the model API's port: give the admin listener "
                             "a port of its own (agents must not reach it)")
        names = [u.name for u in self.upstreams]
        if len(set(names)) != len(names):
            raise ValueError(f"upstream names must be unique, got {names}")
        return self

    @classmethod
    def load(cls, path: str | Path) -> GatewayConfig:
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            return cls.model_validate(data)
        except OSError as exc:
            raise InputError(f"cannot read gateway config {path}: {exc.strerror}") from exc
        except (yaml.YAMLError, ValidationError) as exc:
            raise InputError(f"gateway config {path} is invalid:\n{exc}",
                             hint="see docs/design-notes.md, section Gateway, for an example") from exc

    def upstream_for(self, model: str, api: str) -> UpstreamConfig | None:
        """The first upstream of the given API style whose patterns match ``model``."""
        return next((u for u in self.upstreams if u.api == api and u.serves(model)), None)
