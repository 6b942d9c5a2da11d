"""Expanding a campaign into its matrix of trials (entries × tasks × seeds), deterministically.

Pure; called by the local engine and by the operator. The order is entry-major, then task, then
seed, with the baseline entry first so its scores (F) are available as early as possible; names
come from :func:`anchorage.campaigns.names.trial_name`, so re-planning the same campaign yields the
same trials and a restarted driver finds the work it already did.
"""

from __future__ import annotations

from dataclasses import dataclass

from anchorage.campaigns.names import trial_name
from anchorage.manifests import CampaignSpec, Entry, TrialSpec


@dataclass(frozen=True)
class PlannedTrial:
    """One cell: its name, its coordinates and the TrialSpec it runs."""

    name: str
    entry: str
    task: str
    seed: int
    spec: TrialSpec
    cost_per_run_usd: float | None = None


def ordered_entries(spec: CampaignSpec) -> list[Entry]:
    """The entries with the baseline first (stable otherwise)."""
    return sorted(spec.entries, key=lambda e: e.name != spec.baseline)


def plan(campaign_name: str, spec: CampaignSpec, tasks: list[str]) -> list[PlannedTrial]:
    """Every (entry, task, seed) trial of the campaign; ``tasks`` are the resolved task names."""
    planned: list[PlannedTrial] = []
    seen: set[str] = set()
    for entry in ordered_entries(spec):
        for task in tasks:
            for seed in range(spec.seeds):
                name = trial_name(campaign_name, entry.name, task, seed)
                if name in seen:
                    raise ValueError(f"two trials share the name {name!r}; rename the entry or the task")
                seen.add(name)
                trial = TrialSpec(
                    task=task, agent=entry.agent, seed=seed, entry=entry.name, limits=spec.limits,
                    verification=spec.verification, scoring=spec.scoring, retries=spec.retries.infrastructure,
                    transcripts=spec.transcripts if entry.transcripts is None else entry.transcripts,
                    runtime_class_name=spec.runtime_class_name,
                    queue_name=spec.queue_name, workload_priority_class=spec.workload_priority_class,
                )
                planned.append(PlannedTrial(name, entry.name, task, seed, trial, entry.cost_per_run_usd))
    return planned
