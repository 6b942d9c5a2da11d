"""How an attempt ended → the trial's phase, reason and message; whether to retry.

Each driver turns *its* evidence into an :class:`AttemptEnd` (the local engine from the sandbox's
result, the operator from the finished Job and the upload sidecar's marker) and calls
:func:`classify`; after scoring, :func:`with_score` turns a run that left no artifact into
``no_artifact``. Nothing else decides a trial's phase.

The rule other parts rely on: an *infrastructure* failure is decided only from evidence the agent
cannot forge — the launcher's own status channel (``launcher_failure``), the gateway
(``gateway_failure``), the store (``storage_failure``). The agent's exit code, its output and what
it writes are the agent's: they can make a trial ``Failed`` (``agent_error``, ...) but never
``InfrastructureFailed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from anchorage.trials.phases import Phase, Reason

if TYPE_CHECKING:  # annotations only: the lifecycle core does not load the scorer
    from anchorage.scoring.records import ScoreRecord


@dataclass(frozen=True)
class AttemptEnd:
    """Driver-neutral evidence of how one attempt ended.

    Platform evidence (the agent cannot write it): ``preempted`` — the cluster's batch queue took the attempt's
    admission back and its pod was stopped (what the queue said); ``launcher_failure`` — the sandbox or pod never ran
    the agent (the launcher's own channel says why); ``gateway_failure`` — no token or no gateway;
    ``storage_failure`` — the results could not be collected; ``timed_out`` and ``oom_killed`` — the
    platform killed the agent; ``oversized`` — the results folder measured over ``result_max_bytes``.
    Agent evidence: ``exit_code`` (None when the agent did not exit by itself); ``agent_problem`` — the
    agent could not be started for a reason of the entry's own (its CLI missing, its task lacking a
    runnable solution). ``replayed`` — a replay copied the artifact (no process ran).
    ``platform_reason``: which of the platform's reasons a ``launcher_failure`` is (an image that cannot be pulled, a
    pod no node can take, a lost node...: :class:`~anchorage.trials.phases.Reason`); ``sandbox_error`` without it.
    """

    exit_code: int | None = None
    preempted: str | None = None
    launcher_failure: str | None = None
    platform_reason: Reason | None = None
    gateway_failure: str | None = None
    storage_failure: str | None = None
    agent_problem: str | None = None
    timed_out: bool = False
    timeout_sec: float | None = None
    oom_killed: bool = False
    oom_detail: str = ""
    memory_mb: int | None = None
    oversized: bool = False
    result_bytes: int = 0
    result_max_bytes: int | None = None
    oversized_detail: str = ""
    replayed: str | None = None


@dataclass(frozen=True)
class Outcome:
    """A classified attempt: the trial's phase, reason and message."""

    phase: Phase
    reason: Reason
    message: str = ""

    @property
    def infrastructure(self) -> bool:
        return self.phase is Phase.INFRASTRUCTURE_FAILED


def _infra(reason: Reason, message: str) -> Outcome:
    return Outcome(Phase.INFRASTRUCTURE_FAILED, reason, message)


def _failed(reason: Reason, message: str) -> Outcome:
    return Outcome(Phase.FAILED, reason, message)


def classify(end: AttemptEnd) -> Outcome:
    """The phase, reason and message of an attempt (platform failures first, then the agent's)."""
    if end.preempted is not None:
        return _infra(Reason.PREEMPTED, end.preempted or "preempted by the cluster's batch queue")
    if end.launcher_failure is not None:
        reason = end.platform_reason if end.platform_reason is not None and end.platform_reason.infrastructure \
            else Reason.SANDBOX_ERROR
        return _infra(reason, end.launcher_failure or "the sandbox failed to start the agent")
    if end.gateway_failure is not None:
        return _infra(Reason.GATEWAY_ERROR, end.gateway_failure)
    if end.storage_failure is not None:
        return _infra(Reason.STORAGE_ERROR, end.storage_failure)
    if end.agent_problem is not None:
        return _failed(Reason.AGENT_ERROR, end.agent_problem)
    if end.replayed is not None:
        return Outcome(Phase.SUCCEEDED, Reason.COMPLETED, end.replayed)
    if end.timed_out:
        limit = f" {end.timeout_sec:g}s" if end.timeout_sec is not None else " its time limit"
        return _failed(Reason.TIMEOUT, f"the agent ran past{limit} and was killed")
    if end.oom_killed:
        limit = f" (limit {end.memory_mb} MB)" if end.memory_mb is not None else ""
        return _failed(Reason.OOM, f"out of memory{limit}" + (f": {end.oom_detail}" if end.oom_detail else ""))
    if end.oversized:
        return _failed(Reason.OVERSIZED_RESULT, end.oversized_detail or f"/root/results holds {end.result_bytes} "
                       f"bytes, over the {end.result_max_bytes}-byte limit")
    if end.exit_code is None:
        return _failed(Reason.AGENT_ERROR, "the agent left no exit status")
    if end.exit_code != 0:
        return _failed(Reason.AGENT_ERROR, f"the agent exited with status {end.exit_code}")
    return Outcome(Phase.SUCCEEDED, Reason.COMPLETED)


def with_score(outcome: Outcome, score: ScoreRecord) -> Outcome:
    """After scoring: a run that ended well but left no artifact is the model's ``no_artifact``; a scored run
    whose message is empty says what the scorer found wrong (ungradable, failed gates), so a trial's line
    never reads "Succeeded" with nothing while its ``score.json`` lists failed gates."""
    if outcome.phase is not Phase.SUCCEEDED:
        return outcome
    error = score.error or ""
    if (not score.gradable and score.artifact is None) or error.startswith("missing artifact"):
        return _failed(Reason.NO_ARTIFACT, error or "no artifact was written")
    if outcome.message:
        return outcome
    return Outcome(outcome.phase, outcome.reason, score_findings(score))


def score_findings(score: ScoreRecord) -> str:
    """What a score record found wrong, in one line: ungradable, the hard-gate penalty, failed warning gates."""
    if score.error:
        return f"ungradable: {score.error}"
    gates = [g for g in score.gates if g.status == "failed"]
    hard = [g.name for g in gates if g.severity == "hard"]
    warned = [g.name for g in gates if g.severity != "hard"]
    profile = score.profile_ref or score.profile or "the profile"
    parts = []
    if hard or score.hard_gate_failed:
        parts.append(score.penalty or f"hard gate failed: {', '.join(hard)}")
    if warned:
        shown = ", ".join(warned[:6]) + (f" and {len(warned) - 6} more" if len(warned) > 6 else "")
        parts.append(f"{len(warned)} gate(s) failed as warnings under {profile}: {shown}")
    return "; ".join(parts)


def should_retry(outcome: Outcome, attempts_done: int, retries: int) -> bool:
    """Whether to run another attempt: only after an infrastructure failure, at most ``retries`` times
    (``attempts_done`` counts the attempts run so far, the first included). A model's own failure never."""
    return outcome.infrastructure and attempts_done <= retries
