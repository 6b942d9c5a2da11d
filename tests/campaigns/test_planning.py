"""Matrix planning: every cell once, deterministic names, the baseline first."""

from __future__ import annotations

from anchorage.campaigns.names import trial_name
from anchorage.campaigns.planning import plan
from anchorage.manifests import CampaignSpec


def _spec() -> CampaignSpec:
    return CampaignSpec.model_validate({
        "tasks": ["t1", "t2"], "seeds": 3, "baseline": "flash", "retries": {"infrastructure": 2},
        "entries": [{"name": "big", "agent": {"kind": "mock"}}, {"name": "flash", "agent": {"kind": "oracle"}}],
    })


def test_plan_covers_the_matrix_once_with_stable_names() -> None:
    first, second = plan("c", _spec(), ["t1", "t2"]), plan("c", _spec(), ["t1", "t2"])
    assert [p.name for p in first] == [p.name for p in second]
    assert len({p.name for p in first}) == 2 * 2 * 3
    assert first[0].entry == "flash"  # baseline first: F is known early
    cell = next(p for p in first if (p.entry, p.task, p.seed) == ("big", "t2", 1))
    assert cell.name == trial_name("c", "big", "t2", 1)
    assert cell.spec.seed == 1 and cell.spec.retries == 2 and cell.spec.agent.kind == "mock"
