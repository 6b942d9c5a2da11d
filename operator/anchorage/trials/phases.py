"""Trial phases and reasons: the one spelling of the lifecycle's states, used by both drivers.

Who uses it: :mod:`anchorage.trials.outcomes` (classification), :mod:`anchorage.trials.records`
(``trial.json``), the local engine, the operator's handlers and status models, metrics and the
aggregation. ``Failed`` is the model's own failure (scored: a missing artifact is BO-Eval −1);
``InfrastructureFailed`` is the platform's, never scored as the model's zero, retried only when the
manifest asks for it (``retries``). ``Queued`` is a cluster trial's wait for admission by the cluster's batch
queue (Kueue): no pod exists, no agent time passes; ``preempted`` ends an attempt whose admission the queue took back
(Kueue evicted its workload for a higher-priority one) — the platform's, retried as such. ``Cancelled`` is neither:
the trial was deleted (or its campaign was) before its end, its Jobs and pods were stopped; it has no score and is
never counted as one.
"""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """Where a trial is. The last four are terminal."""

    PENDING = "Pending"
    QUEUED = "Queued"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    INFRASTRUCTURE_FAILED = "InfrastructureFailed"
    CANCELLED = "Cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


class Reason(StrEnum):
    """Why a trial ended (the model's reasons, then the platform's)."""

    COMPLETED = "completed"
    AGENT_ERROR = "agent_error"
    TIMEOUT = "timeout"
    OOM = "oom"
    OVERSIZED_RESULT = "oversized_result"
    NO_ARTIFACT = "no_artifact"
    SANDBOX_ERROR = "sandbox_error"
    GATEWAY_ERROR = "gateway_error"
    STORAGE_ERROR = "storage_error"
    CANCELLED = "cancelled"
    # The cluster's own failures, each from the platform's evidence (the operator's pod watch: docs/design-notes.md,
    # "Operator", *Platform failures*), and the batch queue's: Kueue took the attempt's admission back.
    PREEMPTED = "preempted"
    IMAGE_PULL = "image_pull"
    UNSCHEDULABLE = "unschedulable"
    QUOTA_EXCEEDED = "quota_exceeded"
    POD_REJECTED = "pod_rejected"
    CONTAINER_CONFIG = "container_config"
    EVICTED = "evicted"
    NODE_LOST = "node_lost"

    @property
    def infrastructure(self) -> bool:
        return self in INFRASTRUCTURE_REASONS


TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.INFRASTRUCTURE_FAILED, Phase.CANCELLED})
#: Phases that end a trial without a score of the model's (never averaged, never a zero on a board).
UNSCORED = frozenset({Phase.INFRASTRUCTURE_FAILED, Phase.CANCELLED})
#: The platform's failures: they end a trial InfrastructureFailed.
INFRASTRUCTURE_REASONS = frozenset({Reason.SANDBOX_ERROR, Reason.GATEWAY_ERROR, Reason.STORAGE_ERROR, Reason.IMAGE_PULL,
                                    Reason.UNSCHEDULABLE, Reason.QUOTA_EXCEEDED, Reason.POD_REJECTED,
                                    Reason.CONTAINER_CONFIG, Reason.EVICTED, Reason.NODE_LOST,
                                    Reason.PREEMPTED})
#: Every phase, in lifecycle order (metrics set each of them, 0 when empty).
PHASES = tuple(Phase)


def is_terminal(phase: str | None) -> bool:
    """Whether ``phase`` (as written in a record or a status) ends the trial."""
    return phase in TERMINAL
