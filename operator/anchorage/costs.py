"""Token usage and its cost in USD from a versioned price snapshot (SPEC §3). Pure: no I/O but YAML.

Called by the model gateway (per response, to keep a per-trial ledger), by the local engine and the
operator (to write cost into trial records) and by reports. Prices live in ``prices/<version>.yaml``
at the repository root; a snapshot is never edited, a new one is added, so costs never drift.

Conventions (one for every provider, the gateway normalises to them):

* ``input_tokens`` counts *all* prompt tokens, cached ones included; ``cached_input_tokens`` is the
  part served from the prompt cache and is billed at ``cached_input`` instead of ``input``.
* ``output_tokens`` is the provider's completion counter. ``reasoning_tokens`` is reported for the
  record; when the provider bills reasoning *outside* its completion counter, those tokens are also
  in ``reasoning_outside_output_tokens`` and are added to output (SPEC §3, first adjustment).
* A model with peak / off-peak prices is billed at the peak price (SPEC §3, second adjustment).
* An unknown model is never silently free: :func:`cost_usd` raises :class:`InputError`; the gateway
  records such models in ``Usage.unpriced_models`` instead.
* Unknown is not zero: a request the provider answered without reporting its usage (a stream cut short,
  an upstream that never reports it) is counted in ``Usage.unmetered_requests``. A trial with unmetered
  requests or unpriced models has no known cost: :attr:`Usage.known_cost_usd` is None and
  :attr:`Usage.cost_unknown_reason` says why (``cost_usd`` is then the metered part, a lower bound).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from anchorage.errors import InputError

PRICES_ENV = "ANCHORAGE_PRICES"


class Billable(Protocol):
    """Anything with the three token counters a price applies to."""

    @property
    def input_tokens(self) -> int: ...

    @property
    def cached_input_tokens(self) -> int: ...

    @property
    def billed_output_tokens(self) -> int: ...


@dataclass(frozen=True)
class TokenCounts:
    """The usage reported by one response (already normalised, see the module docstring)."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    reasoning_in_output: bool = True

    @property
    def reasoning_outside_output_tokens(self) -> int:
        return 0 if self.reasoning_in_output else self.reasoning_tokens

    @property
    def billed_output_tokens(self) -> int:
        return self.output_tokens + self.reasoning_outside_output_tokens


DERIVED_USAGE_KEYS = frozenset({"by_model", "billed_output_tokens", "cost_known", "cost_unknown_reason"})


@dataclass
class Usage:
    """A trial's accumulated usage: the ledger the engine writes into the trial record.

    ``cost_usd`` is the sum of per-response costs (exact, each priced with its own model) — the
    *metered* cost; ``by_model`` breaks the same counters down per requested model. Whether that is the
    trial's whole cost: :attr:`cost_known` (False with ``unmetered_requests`` or ``unpriced_models``);
    :attr:`known_cost_usd` is the figure for a trial record (None when unknown) and
    :attr:`cost_unknown_reason` the reason to record with it. ``unmetered_reserved_usd`` is the sum of
    the worst-case estimates the gateway reserved for the unmetered requests (the budget counts them as
    spent); ``unmetered_input_tokens`` the gateway's estimate of their input.
    """

    requests: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    reasoning_outside_output_tokens: int = 0
    cost_usd: float = 0.0
    retries: int = 0
    errors: int = 0
    unpriced_models: list[str] = field(default_factory=list)
    unmetered_requests: int = 0
    unmetered_input_tokens: int = 0
    unmetered_reserved_usd: float = 0.0
    by_model: dict[str, Usage] = field(default_factory=dict)

    @property
    def billed_output_tokens(self) -> int:
        return self.output_tokens + self.reasoning_outside_output_tokens

    @property
    def cost_known(self) -> bool:
        """True when every request was metered and priced (``cost_usd`` is then the whole cost)."""
        return not self.unmetered_requests and not self.unpriced_models

    @property
    def known_cost_usd(self) -> float | None:
        """The cost to record for the trial: ``cost_usd`` when known, else None (never a partial sum as if whole)."""
        return self.cost_usd if self.cost_known else None

    @property
    def cost_unknown_reason(self) -> str | None:
        """Why the cost is unknown (None when it is known), in words for ``trial.json`` and the Trial status."""
        reasons = []
        if self.unmetered_requests:
            reasons.append(f"{self.unmetered_requests} request(s) unmetered (the upstream reported no token usage; "
                           f"metered cost ${self.cost_usd:.6f} is a lower bound)")
        if self.unpriced_models:
            reasons.append(f"model(s) {', '.join(self.unpriced_models)} have no price in the price snapshot "
                           "(add them to prices/ in a new snapshot)")
        return "; ".join(reasons) or None

    def add_tokens(self, counts: TokenCounts, cost: float | None) -> None:
        """Add one response's counts (``cost`` None means the model had no price)."""
        self.input_tokens += counts.input_tokens
        self.cached_input_tokens += counts.cached_input_tokens
        self.output_tokens += counts.output_tokens
        self.reasoning_tokens += counts.reasoning_tokens
        self.reasoning_outside_output_tokens += counts.reasoning_outside_output_tokens
        if cost is not None:
            self.cost_usd += cost

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (``cost_usd`` rounded to 1e-9 USD, plus the derived ``billed_output_tokens``,
        ``cost_known`` and ``cost_unknown_reason``)."""
        data = asdict(self)
        data["billed_output_tokens"] = self.billed_output_tokens  # derived, for readers of the record
        data["cost_usd"] = round(self.cost_usd, 9)
        data["unmetered_reserved_usd"] = round(self.unmetered_reserved_usd, 9)
        data["cost_known"] = self.cost_known
        data["cost_unknown_reason"] = self.cost_unknown_reason
        data["by_model"] = {name: usage.to_dict() for name, usage in self.by_model.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        fields = {k: v for k, v in data.items() if k not in DERIVED_USAGE_KEYS}
        usage = cls(**fields)
        usage.by_model = {k: cls.from_dict(v) for k, v in data.get("by_model", {}).items()}
        return usage


class ModelPrice(BaseModel):
    """USD per ``per_tokens`` tokens for one model (one price window)."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    output: float = Field(ge=0)

    @property
    def cached_input_price(self) -> float:
        return self.input if self.cached_input is None else self.cached_input


class ModelEntry(BaseModel):
    """Either a flat price or a ``peak`` / ``off_peak`` pair (the peak one is used)."""

    model_config = ConfigDict(extra="forbid")

    input: float | None = Field(default=None, ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    output: float | None = Field(default=None, ge=0)
    peak: ModelPrice | None = None
    off_peak: ModelPrice | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> ModelEntry:
        flat = self.input is not None or self.output is not None
        if flat == (self.peak is not None):
            raise ValueError("give either input/output prices or a peak (and optional off_peak) block")
        if flat and (self.input is None or self.output is None):
            raise ValueError("a flat price needs both input and output")
        if self.off_peak is not None and self.peak is None:
            raise ValueError("off_peak without peak: the peak price is the one billed")
        return self

    def billed(self) -> ModelPrice:
        if self.peak is not None:
            return self.peak
        assert self.input is not None and self.output is not None
        return ModelPrice(input=self.input, cached_input=self.cached_input, output=self.output)


class PriceSnapshot(BaseModel):
    """A versioned price file (``prices/<version>.yaml``)."""

    model_config = ConfigDict(extra="forbid")

    version: str = Field(min_length=1)
    currency: str = "USD"
    per_tokens: int = Field(default=1_000_000, gt=0)
    models: dict[str, ModelEntry]
    aliases: dict[str, str] = Field(default_factory=dict)
    source: str | None = None
    _billed: dict[str, ModelPrice] = PrivateAttr(default_factory=dict)  # model -> billed price, made on first use

    @model_validator(mode="after")
    def _aliases_resolve(self) -> PriceSnapshot:
        if self.currency != "USD":
            raise ValueError(f"currency {self.currency!r} is not supported (prices must be in USD)")
        missing = sorted(alias for alias, target in self.aliases.items() if target not in self.models)
        if missing:
            raise ValueError(f"aliases point to unknown models: {', '.join(missing)}")
        return self

    @classmethod
    def load(cls, path: str | Path) -> PriceSnapshot:
        """Read and validate a snapshot file; the error names the file and the bad field."""
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"cannot read price snapshot {path}: {exc.strerror}",
                             hint="pass an existing prices/<version>.yaml") from exc
        except yaml.YAMLError as exc:
            raise InputError(f"price snapshot {path} is not valid YAML: {exc}") from exc
        try:
            snapshot = cls.model_validate(data)
        except ValidationError as exc:
            raise InputError(f"price snapshot {path} is invalid:\n{exc}",
                             hint="see prices/2026-11.yaml for the expected shape") from exc
        snapshot.source = str(path)
        return snapshot

    def resolve(self, model: str) -> str | None:
        """The snapshot's name for ``model`` (exact name or alias), or None when unpriced."""
        if model in self.models:
            return model
        return self.aliases.get(model)

    def is_priced(self, model: str) -> bool:
        return self.resolve(model) is not None

    def price(self, model: str) -> ModelPrice:
        """The billed price of ``model``; unknown models raise (never a silent zero). Made once per model
        (the gateway prices every request twice: its reservation and its cost)."""
        known = self._billed.get(model)
        if known is not None:
            return known
        name = self.resolve(model)
        if name is None:
            raise InputError(
                f"model {model!r} has no price in snapshot {self.version}",
                hint=f"add it (or an alias) to {self.source or 'the price snapshot'} in a new snapshot version",
            )
        self._billed[model] = price = self.models[name].billed()
        return price


@dataclass(frozen=True, slots=True)
class Rate:
    """One model's billed prices as plain floats (USD per ``per_tokens`` tokens): the arithmetic of
    :func:`cost_usd` and :func:`worst_case_cost_usd`, kept per model by the gateway's ledger, which prices
    every request twice (a pydantic model's attributes cost more to read than the sums)."""

    input: float
    cached_input: float
    output: float
    per_tokens: int

    @classmethod
    def of(cls, model: str, snapshot: PriceSnapshot) -> Rate:
        price = snapshot.price(model)
        return cls(price.input, price.cached_input_price, price.output, snapshot.per_tokens)

    def cost(self, usage: Billable) -> float:
        """USD for ``usage``: uncached input, cached input and billed output at their prices."""
        cached = min(usage.cached_input_tokens, usage.input_tokens)
        uncached = usage.input_tokens - cached
        return (uncached * self.input + cached * self.cached_input + usage.billed_output_tokens * self.output) \
            / self.per_tokens

    def worst_case(self, input_tokens: int, output_tokens: int) -> float:
        """USD of ``input_tokens`` all uncached and ``output_tokens`` billed output."""
        return (input_tokens * self.input + output_tokens * self.output) / self.per_tokens


def cost_usd(usage: Billable, model: str, snapshot: PriceSnapshot) -> float:
    """USD for ``usage`` of ``model``: uncached input, cached input and billed output at their prices."""
    return Rate.of(model, snapshot).cost(usage)


def worst_case_cost_usd(input_tokens: int, output_tokens: int, model: str, snapshot: PriceSnapshot) -> float:
    """USD of ``input_tokens`` all uncached and ``output_tokens`` billed output: an upper bound of a request's
    cost when both counts are (the gateway's budget reservations)."""
    return Rate.of(model, snapshot).worst_case(input_tokens, output_tokens)


def default_snapshot_path() -> Path:
    """``$ANCHORAGE_PRICES`` (a file or a folder) or the repository's ``prices/``: the newest file."""
    configured = os.environ.get(PRICES_ENV)
    location = Path(configured) if configured else Path(__file__).resolve().parents[2] / "prices"
    if location.is_file():
        return location
    candidates = sorted(location.glob("*.yaml")) if location.is_dir() else []
    if not candidates:
        raise InputError(f"no price snapshot found at {location}",
                         hint=f"set {PRICES_ENV} to a prices/<version>.yaml file or its folder")
    return candidates[-1]
