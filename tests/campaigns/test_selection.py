"""Task selection of campaigns (``tasks`` + ``taskSelector``), shared by the local engine and the operator."""

from __future__ import annotations

from pathlib import Path

import pytest

from anchorage.campaigns.selection import campaign_task_names, campaign_task_refs, candidate_tasks, matches, select
from anchorage.errors import InputError
from anchorage.manifests import CampaignSpec, TaskSelector
from anchorage.runtime.local.engine import resolve_tasks


def _spec(**fields: object) -> CampaignSpec:
    return CampaignSpec.model_validate({"entries": [{"name": "o", "agent": {"kind": "oracle"}}], **fields})


def test_names_globs_and_labels_as_keywords() -> None:
    selector = TaskSelector.model_validate({"names": ["smoke-*", "mcm-2024-*"], "matchLabels": {"topic": "eoq"}})
    assert matches(selector, "smoke-inventory", ["eoq"])  # a label matches its value alone ...
    assert matches(selector, "mcm-2024-a-lamprey", ["topic=eoq"])  # ... or key=value
    assert not matches(selector, "smoke-inventory", ["lp"])
    assert not matches(selector, "cumcm-2024-a-dragon-dance", ["eoq"])
    assert matches(TaskSelector(), "anything", [])


def test_select_from_the_repo_tasks(repo_root: Path) -> None:
    candidates = candidate_tasks([repo_root / "tasks"])
    assert [t.slug for t in select(TaskSelector(names=["smoke-*"]), candidates)] == ["smoke-inventory"]
    with pytest.raises(InputError, match=r"taskSelector \(nope-\*\) matches no task"):
        select(TaskSelector(names=["nope-*"]), candidates)


def test_listed_and_selected_tasks_are_not_repeated(repo_root: Path) -> None:
    candidates = candidate_tasks([repo_root / "tasks"])
    spec = _spec(tasks=["smoke-inventory"], taskSelector={"names": ["smoke-*", "cumcm-2024-a-*"]})
    assert campaign_task_names(spec, candidates) == ["smoke-inventory", "cumcm-2024-a-dragon-dance"]
    refs = campaign_task_refs(spec, candidates)
    assert refs == ["smoke-inventory", str(repo_root / "tasks" / "cumcm-2024-a-dragon-dance")]


def test_the_local_engine_resolves_the_same_tasks_as_the_operator_plans() -> None:
    spec = _spec(taskSelector={"names": ["smoke-*"]})
    assert [t.slug for t in resolve_tasks(spec)] == campaign_task_names(spec) == ["smoke-inventory"]
