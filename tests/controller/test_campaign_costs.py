"""The campaign's cost totals come from its Trials' statuses: unknown costs and unmetered requests are counted (kopf's
index keeps both per Trial), never summed as 0, and the campaign's message says the cost is incomplete."""

from __future__ import annotations

import asyncio
from typing import Any

from anchorage.controller.campaigns import TrialState, _summary, trials_by_campaign
from anchorage.runtime.kube.status import CampaignStatus


def _state(status: dict[str, Any]) -> TrialState:
    index = asyncio.run(trials_by_campaign(name="t", namespace="ns", labels={"anchorage.dev/campaign": "c"},
                                           annotations={}, status=status))  # type: ignore[arg-type]
    return index[("ns", "c")]


def test_the_index_keeps_unknown_costs_and_unmetered_requests() -> None:
    metered = _state({"phase": "Succeeded", "costUSD": 0.5, "usage": {"unmeteredRequests": 0}})
    assert (metered.cost, metered.unmetered, metered.done) == (0.5, 0, True)
    unmetered = _state({"phase": "Succeeded", "costUnknownReason": "2 request(s) of this trial could not be metered",
                        "usage": {"unmeteredRequests": 2}})
    assert (unmetered.cost, unmetered.unmetered) == (None, 2)
    assert _state({"phase": "Running"}).unmetered == 0


def test_the_message_says_the_cost_is_incomplete() -> None:
    assert _summary(4, 4, 0, 0, True) == "4 of 4 trials scored"
    text = _summary(4, 4, 0, 0, True, "cost incomplete: 1 trial cost(s) unknown, 2 request(s) unmetered by the "
                    "gateway; the costs shown are lower bounds")
    assert text.endswith("; cost incomplete: 1 trial cost(s) unknown, 2 request(s) unmetered by the gateway; the costs "
                         "shown are lower bounds")
    status = CampaignStatus.model_validate({"unmeteredRequests": 2, "costsUnknown": 1}).patch()
    assert (status["unmeteredRequests"], status["costsUnknown"]) == (2, 1)
