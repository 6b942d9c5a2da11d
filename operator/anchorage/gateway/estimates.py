"""A request's worst-case cost before it is sent: what the gateway reserves against the trial's budget.

Called by the gateway's forwarder (:mod:`anchorage.gateway.server`) for every model request, and by
tests that state budgets in "requests' worth". Pure: no I/O.

* **Output**: the request's own cap — chat ``max_completion_tokens`` (else ``max_tokens``), responses
  ``max_output_tokens``, Anthropic ``max_tokens`` (required there; extended thinking counts inside it) —
  else the upstream's ``max_output_tokens`` ceiling. The provider never returns more than the cap, so the
  output part is exact as an upper bound, except where a provider bills reasoning *outside* its completion
  counter beyond the cap (``reasoning_in_output: false``).
* **Input**: the body's bytes divided by ``reserve_input_bytes_per_token`` (1 by default: an upper bound
  for text, as every token of a byte-level tokenizer covers at least one byte, and the JSON around the
  text is longer than the few tokens of per-message framing a provider adds). Priced as uncached input.
  Tokens a body does not show — an image by URL, a provider's own system prompt for tools — are the
  estimate's error.
* An unpriced model reserves nothing (its cost is unknown anyway: the trial's cost becomes unknown).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from anchorage.costs import PriceSnapshot, Rate

#: The request fields that cap its output, per endpoint, in the order the provider honours them.
OUTPUT_CAPS = {"chat": ("max_completion_tokens", "max_tokens"), "responses": ("max_output_tokens",),
               "messages": ("max_tokens",)}


@dataclass(frozen=True)
class Estimate:
    """A request's worst case: input tokens (estimated), output tokens (its cap) and their cost."""

    input_tokens: int
    output_tokens: int
    usd: float


def output_cap(payload: dict[str, Any], endpoint: str, ceiling: int) -> int:
    """The most output tokens the request can be billed for (its own cap, else ``ceiling``)."""
    for key in OUTPUT_CAPS.get(endpoint, ()):
        value = payload.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return ceiling


def estimate(payload: dict[str, Any], body_bytes: int, endpoint: str, model: str, *, ceiling: int,
             bytes_per_token: float, snapshot: PriceSnapshot | None = None, rate: Rate | None = None) -> Estimate:
    """The worst-case :class:`Estimate` of one request (``usd`` 0 when the model has no price): priced at
    ``rate`` (the model's, as the ledger keeps it) or else from ``snapshot``."""
    input_tokens = math.ceil(body_bytes / bytes_per_token)
    output_tokens = output_cap(payload, endpoint, ceiling)
    if rate is None and snapshot is not None and snapshot.is_priced(model):
        rate = Rate.of(model, snapshot)
    return Estimate(input_tokens, output_tokens, 0.0 if rate is None else rate.worst_case(input_tokens, output_tokens))
