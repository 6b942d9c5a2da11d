"""A trial's cost from what the gateway metered — unknown is not zero.

Used by both drivers at a trial's end (the local engine with its in-process gateway's usage, the
operator with the usage read from the gateway's admin API). Returns the record's ``cost_usd``,
``cost_source`` and ``cost_unknown_reason``: a cost is unknown (None, with the reason) when the usage
could not be read, a model had no price, or the gateway relayed requests it could not meter.

:func:`protocol_cost` is the same rule for a ``verification.panel`` / ``.cbu`` step: the fields both drivers
put into the step's block of ``score.json`` (and its summary in the record) — locally the sum of the step's
per-call accounts, in a cluster the step pod's account, each read at the gateway once its token is revoked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from anchorage.costs import Usage

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


def _add(total: Usage, part: Usage) -> None:
    for item in fields(Usage):
        mine, theirs = getattr(total, item.name), getattr(part, item.name)
        if item.name == "by_model":
            for model, usage in theirs.items():
                _add(mine.setdefault(model, Usage()), usage)
        elif item.name == "unpriced_models":
            mine.extend(m for m in theirs if m not in mine)
        else:
            setattr(total, item.name, mine + theirs)


def total_usage(usages: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The sum of gateway usages (each ``Usage.to_dict()``, extra keys ignored): counters and costs added, unpriced
    models united — as ``Usage.to_dict()``, so the sum of one usage is that usage."""
    known = {item.name for item in fields(Usage)}
    total = Usage()
    for usage in usages:
        _add(total, Usage.from_dict({k: v for k, v in usage.items() if k in known}))
    return total.to_dict()


def protocol_cost(usages: Iterable[Mapping[str, Any]] | None, *, unreadable: str | None = None) -> dict[str, Any]:
    """The cost fields of a protocol step's block (``usage``, ``cost_usd``, ``cost_source``, ``cost_unknown_reason``)
    from the gateway's usage of the step's accounts (None: not read, ``unreadable`` says why). No request: 0."""
    if usages is None:
        cost = trial_cost(None, calls_models=True, unreadable=unreadable)
        return {"usage": None, "cost_usd": cost.usd, "cost_source": cost.source, "cost_unknown_reason": cost.unknown_reason}
    usage = total_usage(usages)
    called = bool(usage["requests"] or usage["unmetered_requests"])
    cost = trial_cost(usage, calls_models=called)
    return {"usage": usage, "cost_usd": cost.usd, "cost_source": cost.source, "cost_unknown_reason": cost.unknown_reason}
