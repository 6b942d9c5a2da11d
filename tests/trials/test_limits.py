"""The limits in force are resolved once (``anchorage.trials.limits``), and both drivers enforce what it says."""

from __future__ import annotations

import dataclasses

from anchorage.manifests import Limits, TrialSpec
from anchorage.runtime.kube import jobs
from anchorage.runtime.local.trials import sandbox_limits
from anchorage.tasks import load_task, resolve_task
from anchorage.trials.limits import DEFAULT_PIDS, MIB, resolve_limits

TASK = load_task(resolve_task("smoke-inventory"))  # task.toml: 2 CPUs, 8192 MB, 20480 MB, 0 GPUs, 14400 s


def test_the_trial_then_the_campaign_then_the_task_decide_each_limit() -> None:
    trial = Limits(cpus=0.5, agent_timeout_sec=90.5)
    campaign = Limits(cpus=4, memory_mb=2048, pids=64)
    limits = resolve_limits(TASK, trial, campaign)
    assert (limits.cpus, limits.memory_mb, limits.pids, limits.timeout_sec) == (0.5, 2048, 64, 90.5)
    assert (limits.storage_mb, limits.gpus) == (20480, 0)  # the task's
    assert limits.deadline_sec == 91  # rounded up: never less than the agent's time


def test_what_no_layer_sets_has_the_tasks_value_or_the_projects_default() -> None:
    limits = resolve_limits(TASK)
    assert limits == resolve_limits(TASK, None, Limits())
    assert (limits.cpus, limits.memory_mb, limits.timeout_sec) == (2.0, 8192, 14400.0)
    assert limits.pids == DEFAULT_PIDS and limits.result_max_bytes == 512 * MIB
    assert resolve_limits(TASK, Limits(storage_mb=100)).result_max_bytes == 100 * MIB  # the smaller of the two


def test_a_gpu_count_of_zero_is_a_set_value() -> None:
    gpu_task = dataclasses.replace(TASK, config=TASK.config.model_copy(update={
        "environment": TASK.config.environment.model_copy(update={"gpus": 1})}))
    assert resolve_limits(gpu_task).gpus == 1
    assert resolve_limits(gpu_task, Limits(gpus=0)).gpus == 0


def test_both_drivers_enforce_the_same_limits() -> None:
    spec = TrialSpec.model_validate({"task": TASK.slug, "agent": {"kind": "oracle"},
                                     "limits": {"cpus": 1.5, "resultMaxBytes": 4 * MIB}})
    campaign = Limits(memory_mb=4096, agent_timeout_sec=600)
    local = sandbox_limits(spec, TASK, campaign)
    # on the cluster a campaign's Trials carry its limits in their own spec
    merged = spec.limits.model_copy(update={"memory_mb": 4096, "agent_timeout_sec": 600})
    cluster = resolve_limits(TASK, merged)
    resources = jobs.resources_in_force(cluster)
    assert resources == {"cpu": "1500m", "memory": "4096Mi", "ephemeral-storage": "20480Mi"}
    assert (local.cpus, local.memory_mb, local.timeout_sec) == (1.5, 4096, 600.0)
    assert local.result_max_bytes == jobs.folder_quotas(cluster)["results"] == 4 * MIB
    assert local.file_max_bytes == cluster.storage_mb * MIB
