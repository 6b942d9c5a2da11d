"""A trial's cost from what the gateway metered — unknown is not zero.

Used by both drivers at a trial's end (the local engine with its in-process gateway's usage, the
operator with the usage read from the gateway's admin API). Returns the record's ``cost_usd``,
``cost_source`` and ``cost_unknown_reason``: a cost is unknown (None, with the reason) when the usage
could not be read, a model had no price, or the gateway relayed requests it could not meter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GATEWAY_SOURCE = "gateway metering × price snapshot"
ENTRY_SOURCE = "entry costPerRunUSD (third-party measured)"
NO_MODEL_SOURCE = "no model calls"


@dataclass(frozen=True)
class Cost:
    usd: float | None
    source: str | None
    unknown_reason: str | None = None


def trial_cost(usage: Mapping[str, Any] | None, *, calls_models: bool, cost_per_run_usd: float | None = None,
               unreadable: str | None = None) -> Cost:
    """The cost of one trial. ``usage`` is the gateway's ``Usage.to_dict()`` (None: not read, then
    ``unreadable`` says why); ``cost_per_run_usd`` (an entry's measured third-party cost) wins."""
    if cost_per_run_usd is not None:
        return Cost(float(cost_per_run_usd), ENTRY_SOURCE)
    if not calls_models:
        return Cost(0.0, NO_MODEL_SOURCE)
    if usage is None:
        return Cost(None, None, unreadable or "the gateway's usage of this trial could not be read")
    unpriced = [str(m) for m in usage.get("unpriced_models") or []]
    if unpriced:
        return Cost(None, GATEWAY_SOURCE, f"model(s) {', '.join(unpriced)} have no price in the gateway's price "
                    "snapshot (add them to prices/ and restart the gateway)")
    unmetered = int(usage.get("unmetered_requests") or usage.get("unmetered") or 0)
    if unmetered:
        return Cost(None, GATEWAY_SOURCE, f"{unmetered} request(s) of this trial could not be metered by the gateway")
    value = usage.get("cost_usd")
    if value is None:
        return Cost(None, GATEWAY_SOURCE, "the gateway reported no cost for this trial")
    return Cost(round(float(value), 9), GATEWAY_SOURCE)
