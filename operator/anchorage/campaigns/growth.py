"""Growing a campaign that already ran: more seeds, more entries, more tasks — never a changed trial.

Pure; called by the local engine when a campaign's run folder already holds a manifest
(``campaign.json``). A spec *grows* the previous one when every trial the previous one planned is planned
again with the same TrialSpec: seeds may rise, entries and tasks may be added (existing ones unchanged),
and the settings that only steer the run (``parallelism``, ``suspend``, ``retries``) may change. Anything
else (an entry's agent, limits, verification, the baseline, transcripts, fewer seeds, a removed entry or
task) would make old and new trials incomparable under one name: refused, with what changed.
"""

from __future__ import annotations

from typing import Any

from anchorage.manifests import CampaignSpec

#: Settings that decide how a run proceeds, not what a trial is.
STEERING = ("parallelism", "suspend", "retries")


def growth_problems(previous: CampaignSpec, spec: CampaignSpec) -> list[str]:
    """What keeps ``spec`` from growing ``previous`` (empty when it only grows it or is the same)."""
    problems: list[str] = []
    if spec.seeds < previous.seeds:
        problems.append(f"seeds went down from {previous.seeds} to {spec.seeds}")
    new_entries = {e.name: _dump(e) for e in spec.entries}
    for entry in previous.entries:
        if entry.name not in new_entries:
            problems.append(f"entry {entry.name!r} was removed")
        elif new_entries[entry.name] != _dump(entry):
            problems.append(f"entry {entry.name!r} changed")
    if previous.task_selector != spec.task_selector:
        problems.append("taskSelector changed")
    removed = [t for t in previous.tasks if t not in spec.tasks]
    if removed:
        problems.append(f"task(s) removed: {', '.join(removed)}")
    old, new = _dump(previous), _dump(spec)
    for key in sorted(set(old) | set(new)):
        if key in (*STEERING, "seeds", "entries", "tasks", "taskSelector"):
            continue
        if old.get(key) != new.get(key):
            problems.append(f"{key} changed")
    return problems


def grown(previous: CampaignSpec, spec: CampaignSpec) -> dict[str, Any]:
    """What ``spec`` adds to ``previous`` (for the run folder's history)."""
    old_entries = {e.name for e in previous.entries}
    return {"seeds": [previous.seeds, spec.seeds],
            "entries_added": [e.name for e in spec.entries if e.name not in old_entries],
            "tasks_added": [t for t in spec.tasks if t not in previous.tasks]}


def _dump(model: Any) -> dict[str, Any]:
    data: dict[str, Any] = model.model_dump(mode="json", by_alias=True)
    return data
