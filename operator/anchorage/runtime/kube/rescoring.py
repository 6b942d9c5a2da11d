"""What a ScoringRun with ``campaignRef`` rescores: the uploaded artifacts of one task's trials of a campaign.

Called by ``controller.scoring`` (the run's sources); no Kubernetes client here, only the store. The
campaign is planned with the shared planner and task selection (``campaigns.planning``,
``campaigns.selection``), so the trial names are the ones the campaign created; each planned trial of
the task is looked up in its store folder (``kube.jobs.trial_prefix``: ``<campaign>/<trial>``) and taken
when its ``upload.json`` (written last by the trial pod's upload sidecar) lists uploaded artifacts.
Trials that have not run, or ended without an artifact, are left out. Records land under the run's
own prefix (``_scoring/<ns>/<run>/<entry>-s<seed>``), as for ``spec.artifacts``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from anchorage.campaigns.planning import plan
from anchorage.campaigns.selection import campaign_task_names
from anchorage.errors import InputError
from anchorage.manifests import CampaignSpec
from anchorage.runtime.kube.jobs import trial_prefix
from anchorage.store import ArtifactStore


def _slug(name: str) -> str:
    return name.rstrip("/").split("/")[-1]


def choose_task(campaign: str, tasks: list[str], task: str | None) -> str:
    """The campaign's task to rescore: ``task`` (by name or path), or the only one; InputError otherwise."""
    if task is None:
        if len(tasks) == 1:
            return tasks[0]
        raise InputError(f"campaign {campaign!r} has {len(tasks)} tasks ({', '.join(tasks)}): a campaignRef "
                         "rescoring needs spec.task to say which one",
                         hint="set spec.task to one of them (one ScoringRun per task)")
    chosen = [t for t in tasks if t == task or _slug(t) == _slug(task)]
    if not chosen:
        raise InputError(f"task {task!r} is not one of campaign {campaign!r}'s tasks ({', '.join(tasks)})",
                         hint="set spec.task to one of the campaign's tasks")
    return chosen[0]


def _uploaded_artifacts(store: ArtifactStore, prefix: str) -> bool:
    try:
        upload = json.loads(store.get_bytes(f"{prefix}/upload.json"))
    except (OSError, KeyError, ValueError):
        return False
    return isinstance(upload, dict) and bool((upload.get("files") or {}).get("artifacts"))


def campaign_items(campaign: Mapping[str, Any], task: str | None, store: ArtifactStore) -> tuple[str, list[dict[str, Any]]]:
    """(task, verifier items ``{"uri", "entry", "seed", "out"}``) of the campaign's uploaded trials of one task."""
    name, namespace = campaign["metadata"]["name"], campaign["metadata"].get("namespace", "")
    spec = CampaignSpec.model_validate(campaign["spec"])
    chosen = choose_task(name, campaign_task_names(spec), task)
    items = []
    for planned in plan(name, spec, [chosen]):
        prefix = trial_prefix(namespace, planned.name, name)
        if _uploaded_artifacts(store, prefix):
            items.append({"uri": f"{prefix}/artifacts", "entry": planned.entry, "seed": planned.seed,
                          "out": f"{planned.entry}-s{planned.seed}"})
    if not items:
        raise InputError(f"campaign {name!r} has no uploaded artifacts for task {chosen!r} yet",
                         hint="rescore once its trials have run, or list the artifacts in spec.artifacts")
    return chosen, items
