"""The limits a trial's agent runs under, resolved in one place for both drivers.

Each limit is the first one set of: the Trial's own ``limits``, then its campaign's (the local engine passes them
apart; a campaign's Trials on the cluster carry them already), then the task's ``task.toml`` (``[environment]``,
``[agent].timeout_sec``: the seed's defaults, SPEC B.2–B.4). Limits the task does not state have this project's
defaults (:data:`DEFAULT_PIDS`, :data:`DEFAULT_RESULT_MAX_MB`). How a driver enforces them is its own (the local
sandbox's cgroups, rlimits and quota tmpfs; the cluster's container resources, emptyDir size limits and the Job's
deadline); what is in force is the same on both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from anchorage.manifests import Limits
from anchorage.tasks import Task

MIB = 1024 * 1024
#: Processes an agent may run at once when neither the Trial nor its campaign says.
DEFAULT_PIDS = 1024
#: The agent's results folder holds at most this (or the task's storage, when smaller) unless the Trial says.
DEFAULT_RESULT_MAX_MB = 512
#: The agent's log folder holds at most this (the cluster: or the task's storage, when smaller).
LOG_MAX_MB = 256


@dataclass(frozen=True)
class LimitsInForce:
    """What a trial's agent may use: its time, CPUs, memory, disk, GPUs, processes and the size of its results."""

    timeout_sec: float
    cpus: float
    memory_mb: int
    storage_mb: int
    gpus: int
    pids: int
    result_max_bytes: int

    @property
    def deadline_sec(self) -> int:
        """The agent's time in whole seconds, rounded up (rounding down would cut it; 0.5 s would be 0)."""
        return math.ceil(self.timeout_sec)


def resolve_limits(task: Task, *layers: Limits | None) -> LimitsInForce:
    """The limits in force for an agent on ``task``: of ``layers`` (the Trial's, then its campaign's) the first set
    value of each limit, else the task's."""
    def pick(name: str) -> Any:
        for layer in layers:
            value = getattr(layer, name) if layer is not None else None
            if value is not None:
                return value
        return None

    env = task.config.environment
    storage = int(pick("storage_mb") or env.storage_mb)
    gpus = pick("gpus")
    return LimitsInForce(
        timeout_sec=float(pick("agent_timeout_sec") or task.config.agent.timeout_sec),
        cpus=float(pick("cpus") or env.cpus),
        memory_mb=int(pick("memory_mb") or env.memory_mb),
        storage_mb=storage,
        gpus=int(env.gpus if gpus is None else gpus),
        pids=int(pick("pids") or DEFAULT_PIDS),
        result_max_bytes=int(pick("result_max_bytes") or min(storage, DEFAULT_RESULT_MAX_MB) * MIB),
    )
