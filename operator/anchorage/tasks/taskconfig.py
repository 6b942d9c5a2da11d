"""The ``task.toml`` model (Harbor task schema 1.3 and 1.4, with the deprecated spellings).

Used by :func:`anchorage.tasks.load_task` (and through it by the runtime, the scorer and
``anchorage tasks validate``). Field names are Harbor's. Deprecated spellings are read and
normalised, and every normalisation is listed in :attr:`TaskConfig.deprecations` so the validator can
say so:

* top-level ``version`` → ``schema_version``;
* ``[environment] memory = "4G"`` / ``storage = "10G"`` → ``memory_mb`` / ``storage_mb``;
* ``[environment] allow_internet = true|false`` → ``network_mode = "public"|"no-network"``.

Keys this model does not know are kept (``extra="allow"``), as Harbor ignores them; their dotted
names are listed in :attr:`TaskConfig.unknown_keys`. Defaults are the benchmark's (SPEC §1 seed
defaults B.2–B.4): 2 CPU, 8192 MB, 20480 MB storage, 0 GPU, build 900 s, agent 14400 s, verifier 180 s.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SUPPORTED_SCHEMA_VERSIONS = ("1.0", "1.1", "1.2", "1.3", "1.4")
NetworkMode = Literal["public", "no-network", "allowlist"]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_UNIT_MB = {"b": 1.0 / (1024 * 1024), "k": 1.0 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0 * 1024.0}


def size_to_mb(value: Any) -> int:
    """``"4G"`` → 4096, ``"512M"`` → 512, ``"1.5Gi"`` → 1536, a bare number → megabytes.

    Units are binary (Harbor and Docker read ``4G`` as 4 GiB). Raises ``ValueError`` on anything else.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a size like '4G' or a number of MB, got {value!r}")
    if isinstance(value, int | float):
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a size like '4G' or a number of MB, got {value!r}")
    match = _SIZE.match(value)
    if match is None:
        raise ValueError(f"cannot read size {value!r}; write e.g. '4G', '512M' or a number of MB")
    number, unit = match.groups()
    return round(float(number) * _UNIT_MB[(unit or "m")[0].lower()])


class _Open(BaseModel):
    """Base: unknown keys are kept (Harbor ignores them) so nothing the author wrote is lost."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Author(_Open):
    name: str = ""
    email: str = ""


class TaskInfo(_Open):
    name: str = ""
    description: str = ""
    keywords: list[str] = Field(default_factory=list)
    authors: list[Author] = Field(default_factory=list)


class VerifierConfig(_Open):
    timeout_sec: float = Field(180.0, gt=0)
    environment_mode: str = "separate"
    env: dict[str, str] = Field(default_factory=dict)
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] = Field(default_factory=list)


class AgentConfig(_Open):
    timeout_sec: float = Field(14400.0, gt=0)
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] = Field(default_factory=list)


class EnvironmentConfig(_Open):
    build_timeout_sec: float = Field(900.0, gt=0)
    cpus: float = Field(2, gt=0)
    memory_mb: int = Field(8192, gt=0)
    storage_mb: int = Field(20480, gt=0)
    gpus: int = Field(0, ge=0)
    network_mode: NetworkMode = "no-network"
    allowed_hosts: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    docker_image: str | None = None
    mcp_servers: list[Any] = Field(default_factory=list)


class SolutionConfig(_Open):
    env: dict[str, str] = Field(default_factory=dict)


class ArtifactEntry(_Open):
    """Schema 1.4 object form of an ``artifacts`` entry."""

    source: str
    destination: str | None = None


class TaskConfig(_Open):
    """One ``task.toml``. ``artifact_paths`` gives the sandbox paths whatever form they were written in."""

    schema_version: str = "1.3"
    artifacts: list[str | ArtifactEntry] = Field(default_factory=list)
    task: TaskInfo = Field(default_factory=TaskInfo)
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    solution: SolutionConfig = Field(default_factory=SolutionConfig)
    deprecations: list[str] = Field(default_factory=list, exclude=True)
    unknown_keys: list[str] = Field(default_factory=list, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _normalise_deprecated(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        data = dict(raw)
        notes: list[str] = []
        if "version" in data and "schema_version" not in data:
            data["schema_version"] = str(data.pop("version"))
            notes.append("`version` is deprecated: write `schema_version`")
        env = data.get("environment")
        if isinstance(env, dict):
            data["environment"] = _normalise_environment(dict(env), notes)
        data["deprecations"] = notes
        return data

    @field_validator("schema_version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> str:
        text = str(value)
        if text not in SUPPORTED_SCHEMA_VERSIONS:
            raise ValueError(
                f"unsupported task schema_version {text!r}; supported: {', '.join(SUPPORTED_SCHEMA_VERSIONS)}"
            )
        return text

    @model_validator(mode="after")
    def _collect_unknown(self) -> TaskConfig:
        self.unknown_keys = sorted(_unknown_keys(self, ""))
        return self

    @property
    def artifact_paths(self) -> list[str]:
        return [a if isinstance(a, str) else a.source for a in self.artifacts]


def _normalise_environment(env: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
        if old in env:
            value = env.pop(old)
            if new not in env:
                env[new] = size_to_mb(value)
            notes.append(f"[environment] `{old} = {value!r}` is deprecated: write `{new} = {env[new]}`")
    if "allow_internet" in env:
        allow = env.pop("allow_internet")
        if "network_mode" not in env:
            env["network_mode"] = "public" if allow else "no-network"
        notes.append(
            f"[environment] `allow_internet = {str(allow).lower()}` is deprecated: "
            f"write `network_mode = \"{env['network_mode']}\"`"
        )
    return env


def _unknown_keys(model: BaseModel, prefix: str) -> list[str]:
    found = [f"{prefix}{key}" for key in (model.model_extra or {})]
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, _Open) and name != "metadata":
            found.extend(_unknown_keys(value, f"{prefix}{name}."))
    return found
