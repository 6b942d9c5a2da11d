"""What every step of a Trial's handling reads of it: its spec as the model, its task (loaded once per task), its
agent's plan and the limits in force (computed once per spec), its folder in the store and the records there, its
attempt's Job, and its status conditions.

Shared by the modules that handle a Trial — :mod:`~anchorage.controller.launching` (an attempt's start),
:mod:`~anchorage.controller.recording` (its record), :mod:`~anchorage.controller.attempts` (its end),
:mod:`~anchorage.controller.finishing` (the trial's end) and :mod:`~anchorage.controller.trials` (its handler and
repair path). Nothing here writes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from anchorage.campaigns.names import child_name
from anchorage.controller.caches import Memo
from anchorage.controller.settings import config, store
from anchorage.manifests import TrialSpec
from anchorage.runtime.kube import jobs
from anchorage.runtime.kube.status import Condition, now_rfc3339
from anchorage.tasks import Task, load_task, resolve_task
from anchorage.trials import AgentPlan, plan_agent
from anchorage.trials.limits import LimitsInForce, resolve_limits
from anchorage.trials.phases import TERMINAL as TERMINAL_PHASES

#: The phases after which nothing happens to a Trial, as its status writes them.
TERMINAL = tuple(str(p) for p in TERMINAL_PHASES)
#: The attempt's record at the agent's end, in the trial's folder, until its scores come.
ATTEMPT_RECORD = "attempt.json"


def job_name(trial: str, attempt: int) -> str:
    """The Job of attempt ``attempt`` of ``trial`` (a DNS label: ≤ 63 characters)."""
    return child_name(trial, f"a{attempt}")


def trial_of_job(job: Mapping[str, Any]) -> tuple[str, str]:
    """The namespace and name of the Trial a trial or protocol Job runs for (its label; the namespace annotation when
    the Job runs in the release's trials namespace)."""
    meta = job["metadata"]
    namespace = (meta.get("annotations") or {}).get("anchorage.dev/trial-namespace", meta["namespace"])
    return namespace, jobs.named(meta, jobs.LABEL_TRIAL) or ""


def runs_job(job: str, trial: Mapping[str, Any]) -> bool:
    """Whether the trial is Running (or Queued for) the attempt of Job ``job``."""
    status = trial.get("status") or {}
    return status.get("phase") in ("Running", "Queued") and status.get("jobName") == job


def condition(type_: str, status: str, reason: str, message: str = "", generation: int | None = None) -> dict[str, Any]:
    """A metav1.Condition as a dict."""
    return Condition(type=type_, status=status, reason=reason, message=message,
                     observed_generation=generation, last_transition_time=now_rfc3339()
                     ).model_dump(by_alias=True, exclude_none=True)


def typed(conditions: list[dict[str, Any]]) -> list[Condition]:
    """Conditions (dicts, as :func:`condition` and ``kube.conditions`` make them) as the status model's."""
    return [Condition.model_validate(c) for c in conditions]


def ready_condition(phase: str, reason: str | None, generation: int | None = None) -> dict[str, Any]:
    """The Trial's ``Ready`` condition for its outcome."""
    return condition("Ready", "True" if phase == "Succeeded" else "False", phase, f"trial ended: {reason}", generation)


@functools.lru_cache(maxsize=256)
def task_cached(task_name: str) -> Task:
    """The task, loaded once per task by this process."""
    return load_task(resolve_task(task_name))


#: Each spec's plan and limits, computed once: an attempt's start, its end and its record read the same.
_INPUTS: Memo[tuple[AgentPlan, LimitsInForce]] = Memo()


def task_inputs(spec: TrialSpec) -> tuple[AgentPlan, LimitsInForce]:
    """The agent's plan (the lifecycle core's, as the local engine's) and the limits in force (the Trial's, which
    carry its campaign's, else task.toml's: :func:`anchorage.trials.limits.resolve_limits`, as the local engine's).

    Computed once per what they depend on — the task (loaded once per name: :func:`task_cached`), the seed, the
    agent and the limits of the spec — for every event of the trial's attempts (:class:`~anchorage.controller.caches.Memo`):
    a changed spec is planned anew."""
    key = (spec.task, spec.seed, spec.agent.model_dump_json(), spec.limits.model_dump_json())

    def compute() -> tuple[AgentPlan, LimitsInForce]:
        task = task_cached(spec.task)
        return plan_agent(spec.agent, task, spec.seed), resolve_limits(task, spec.limits)

    return _INPUTS.get(key, compute)


@functools.lru_cache(maxsize=64)
def _spec(raw: str) -> TrialSpec:
    return TrialSpec.model_validate_json(raw)


def trial_spec(trial: Mapping[str, Any]) -> TrialSpec:
    """The Trial's spec as the model (validated once per distinct spec: a campaign's trials share few)."""
    return _spec(json.dumps(trial["spec"], sort_keys=True))


def store_prefix(status: Mapping[str, Any]) -> str:
    """The trial's folder key in the store (its ``recordUri`` under the store root)."""
    return str(status.get("recordUri", "")).removeprefix(config().store_uri.rstrip("/")).strip("/")


def read_json(key: str) -> dict[str, Any] | None:
    """A JSON object in the store (None: absent, unreadable or not an object)."""
    try:
        data = json.loads(store().get_bytes(key))
    except (OSError, KeyError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_upload(record_uri: str) -> dict[str, Any] | None:
    """The upload sidecar's marker of the trial's attempt (None: it has not uploaded)."""
    return read_json(store_prefix({"recordUri": record_uri}) + "/upload.json")
