"""The ``status`` of the three custom resources, as pydantic models.

The operator writes these (``controller``), ``crds/`` publishes their schema (``kube.crds``) and
``kubectl get`` shows some of their fields as printer columns. Conditions follow the shape of
``metav1.Condition`` so generic tooling (``kubectl wait --for=condition=...``) works.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from anchorage.trials import Phase, Reason

RunPhase = Literal["Pending", "Running", "Succeeded", "Failed"]
CampaignPhase = Literal["Pending", "Running", "Suspended", "Succeeded", "Failed"]


class _Status(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def patch(self) -> dict[str, Any]:
        """The status merge-patch: the fields that were set (a field set to None removes it)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


def now_rfc3339() -> str:
    """The current UTC time as Kubernetes writes timestamps (seconds precision, ``Z``)."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Condition(_Status):
    """One observation of the resource's state (the shape of metav1.Condition)."""

    type: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9]*$", max_length=316,
                      description="Condition type in CamelCase, e.g. Ready, Scored, Suspended.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation the condition was set for.")
    last_transition_time: str = Field(
        json_schema_extra={"format": "date-time"}, description="When the status last changed (RFC 3339).")
    reason: str = Field(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", max_length=1024,
                        description="Machine-readable CamelCase reason of the last transition.")
    message: str = Field(max_length=32768, description="Human-readable details; empty when nothing to add.")


class Usage(_Status):
    """Tokens counted by the model gateway for one trial."""

    requests: int = Field(default=0, ge=0, description="Requests the gateway relayed for the trial.")
    input_tokens: int = Field(default=0, ge=0, description="Prompt tokens.")
    cached_input_tokens: int = Field(default=0, ge=0, description="Prompt tokens served from the provider's cache.")
    output_tokens: int = Field(default=0, ge=0, description="Completion tokens as the provider counted them.")
    billed_output_tokens: int = Field(
        default=0, ge=0, description="Output tokens billed: completion plus reasoning counted outside it.")
    reasoning_tokens: int = Field(default=0, ge=0, description="Reasoning tokens reported by the provider.")
    unmetered_requests: int = Field(default=0, ge=0, description="Requests the provider answered without "
                                    "reporting usage: their tokens are not counted, and costUSD is then unknown.")


class TrialStatus(_Status):
    """Where a Trial is and what it produced."""

    phase: Phase = Field(default=Phase.PENDING,
                         description="Pending, Queued (waiting for admission by its Kueue LocalQueue: no pod, no "
                         "agent time), Running, Succeeded, Failed, InfrastructureFailed or Cancelled (deleted "
                         "before its end: its Jobs and pods were stopped).")
    reason: Reason | None = Field(default=None, description="Why the trial ended (see docs/design-notes.md).")
    message: str | None = Field(default=None, description="Human-readable detail of the last transition.")
    attempt: int = Field(default=0, ge=0, description="Infrastructure retries used so far (0 = first run).")
    job_name: str | None = Field(default=None, description="Name of the Job running the current attempt.")
    start_time: str | None = Field(default=None, description="When the agent started (RFC 3339): its Job's "
                                   "creation, or with a queue its admission.")
    queue: str | None = Field(default=None, description="The Kueue LocalQueue of the current attempt's Job.")
    queued_time: str | None = Field(default=None, description="When the current attempt entered its queue (RFC 3339).")
    queue_position: int | None = Field(default=None, ge=0, description="While Queued: the position of its workload in "
                                       "its LocalQueue (0 is next) as Kueue's visibility API reports it.")
    queue_message: str | None = Field(default=None, description="While Queued: why Kueue has not admitted it yet "
                                      "(its workload's QuotaReserved condition).")
    completion_time: str | None = Field(default=None, description="When the agent ended (RFC 3339).")
    exit_code: int | None = Field(default=None, description="Exit code of the agent container.")
    record_uri: str | None = Field(default=None, description="URI of the trial's folder in the artifact store.")
    scoring_run: str | None = Field(default=None, description="Name of the ScoringRun that scores this trial.")
    raw: float | None = Field(default=None, description="Panel score R of the artifact.")
    o_eval: float | None = Field(default=None, description="O-Eval = clamp(R / oracle, 0, 1).")
    bo_eval: float | None = Field(default=None, description="Robust BO-Eval (−1 for a missing or ungradable artifact).")
    gradable: bool | None = Field(default=None, description="Whether a gradable artifact was found.")
    cost_usd: float | None = Field(default=None, alias="costUSD", description="Cost in USD (tokens × the gateway's "
                                   "price snapshot); absent when unknown (see costUnknownReason).")
    usage: Usage | None = Field(default=None, description="Tokens counted by the gateway.")
    cost_unknown_reason: str | None = Field(
        default=None, description="Why costUSD is unknown (no gateway admin token, gateway unreachable, unmetered "
                           "requests, unpriced model).")
    observed_generation: int | None = Field(default=None, description="metadata.generation last acted on.")
    conditions: list[Condition] = Field(default_factory=list, description="Ready and Scored, and Complete, Failed, "
                                        "Reconciling and Stalled (anchorage.runtime.kube.conditions).")


class ScoreSummary(_Status):
    """Headline numbers of one scored artifact; the full record is at ``recordUri``."""

    entry: str | None = Field(default=None, description="Entry the artifact belongs to.")
    seed: int | None = Field(default=None, ge=0, description="Seed of the artifact.")
    artifact: str | None = Field(default=None, description="URI of the scored artifact.")
    raw: float | None = Field(default=None, description="Panel score R.")
    o_eval: float | None = Field(default=None, description="O-Eval.")
    bo_eval: float | None = Field(default=None, description="Robust BO-Eval.")
    gradable: bool = Field(default=False, description="Whether the artifact was gradable.")
    record_uri: str | None = Field(default=None, description="URI of the full score record (score.json).")


class LeaderboardRow(_Status):
    """One entry of the compact leaderboard (the full report is in the store)."""

    entry: str = Field(description="Entry name.")
    o_eval: float | None = Field(default=None, description="Mean over seeds of the per-seed task-mean O-Eval (null: "
                                 "nothing of this entry was scored).")
    o_eval_std: float | None = Field(default=None, description="Standard deviation of O-Eval over seeds.")
    bo_eval: float | None = Field(default=None, description="Mean over seeds of Robust BO-Eval.")
    bo_eval_std: float | None = Field(default=None, description="Standard deviation of Robust BO-Eval over seeds.")
    artifacts: str | None = Field(default=None, description="Tasks with a gradable artifact, e.g. '5/6'.")
    cost_usd: float | None = Field(default=None, alias="costUSD", description="Mean cost per seed in USD (of the known "
                                   "costs: a lower bound when costsUnknown > 0).")
    costs_unknown: int = Field(default=0, ge=0, description="Scored trials of this entry whose "
                               "cost could not be read at the gateway (not counted in costUSD).")
    unmetered_requests: int = Field(default=0, ge=0, description="Requests of those trials that the gateway relayed "
                                    "without usage (their cost is unknown: costUSD is then a lower bound).")
    infrastructure_failed: int = Field(default=0, ge=0, description="Trials of this entry that ended "
                                       "InfrastructureFailed (no score; not counted in the means).")
    cancelled: int = Field(default=0, ge=0, description="Trials of this entry deleted before their end (Cancelled: no "
                           "score; not counted in the means).")
    incomplete: bool = Field(default=False, description="True when some (task, seed) of this entry has no score "
                             "(an infrastructure failure, a cancelled trial): its means are over the scored ones only.")


#: Per-artifact summaries a ScoringRun's status holds at most (the first ones scored); every one is in the store
#: (``scoresUri``), so the object stays small whatever the number of artifacts (``anchorage.runtime.kube.scores``).
SCORES_IN_STATUS = 10


class ScoringRunStatus(_Status):
    """Progress and headline results of a ScoringRun (bounded: counts, at most :data:`SCORES_IN_STATUS` summaries and
    the pointer to all of them in the store)."""

    phase: RunPhase = Field(default="Pending", description="Pending, Running, Succeeded or Failed.")
    message: str | None = Field(default=None, description="Human-readable detail of the last transition.")
    job_name: str | None = Field(default=None, description="Name of the verifier Job.")
    o_eval: float | None = Field(default=None, description="O-Eval of the first (usually only) artifact.")
    bo_eval: float | None = Field(default=None, description="Robust BO-Eval of the first artifact.")
    raw: float | None = Field(default=None, description="Panel score R of the first artifact.")
    record_uri: str | None = Field(default=None, description="URI of the full score record(s).")
    artifacts: int | None = Field(default=None, ge=0, description="Artifacts the run scored (each has a line in "
                                  "scoresUri).")
    gradable: int | None = Field(default=None, ge=0, description="Of those, the artifacts found gradable.")
    unscored: int | None = Field(default=None, ge=0, description="Of those, the artifacts without a score record "
                                 "(the verifier left none: the run is Failed).")
    scores: list[ScoreSummary] = Field(default_factory=list, description=f"The first {SCORES_IN_STATUS} artifacts' "
                                       "summaries (a trial's run: its only one); all of them are in scoresUri.")
    scores_uri: str | None = Field(default=None, description="URI of every artifact's summary in the store (JSON "
                                   "lines; a trial's run: its recordUri's score.json).")
    profile: str | None = Field(default=None, description="The scoring profile of every score (name@version).")
    leaderboard: list[LeaderboardRow] = Field(default_factory=list, description="campaignRef: the rescored "
                                              "task's leaderboard under this run's profile (full board in the store).")
    observed_generation: int | None = Field(default=None, description="metadata.generation last acted on.")
    conditions: list[Condition] = Field(default_factory=list, description="Ready, and Complete, Failed, "
                                        "Reconciling and Stalled (anchorage.runtime.kube.conditions).")


class CampaignStatus(_Status):
    """Progress, compact leaderboard and cost of a VerificationCampaign."""

    phase: CampaignPhase = Field(default="Pending",
                                 description="Pending, Running, Suspended, Succeeded or Failed.")
    message: str | None = Field(default=None, description="Human-readable detail of the last transition.")
    total: int = Field(default=0, ge=0, description="Trials in the matrix (entries × tasks × seeds).")
    created: int = Field(default=0, ge=0, description="Trials created so far.")
    running: int = Field(default=0, ge=0, description="Trials created and not finished.")
    finished: int = Field(default=0, ge=0, description="Trials in a terminal phase.")
    scored: int = Field(default=0, ge=0, description="Trials with a score.")
    infrastructure_failed: int = Field(default=0, ge=0, description="Trials that ended InfrastructureFailed.")
    cancelled: int = Field(default=0, ge=0, description="Trials deleted before their end (Cancelled: no score, not "
                           "created again; their entries are marked incomplete).")
    progress: str | None = Field(default=None, description="scored/total, e.g. '12/18'.")
    best_entry: str | None = Field(default=None, description="Entry with the best mean O-Eval so far.")
    best_o_eval: float | None = Field(default=None, description="Mean O-Eval of the best entry.")
    cost_usd: float | None = Field(default=None, alias="costUSD", description="Total of the known trial costs in USD so "
                                   "far: a lower bound when costsUnknown > 0.")
    costs_unknown: int = Field(default=0, ge=0, description="Trials whose cost could not be read "
                               "at the gateway (see the Trial's costUnknownReason); they are not counted in costUSD.")
    unmetered_requests: int = Field(default=0, ge=0, description="Requests of the campaign's trials that the gateway "
                                    "relayed without usage (their trials' costs are unknown); with costsUnknown > 0 "
                                    "the message says the cost is incomplete.")
    leaderboard: list[LeaderboardRow] = Field(default_factory=list, description="Compact leaderboard, best first.")
    profile: str | None = Field(default=None, description="The scoring profile of the leaderboard (name@version).")
    report_uri: str | None = Field(default=None, description="URI of the full report in the artifact store.")
    observed_generation: int | None = Field(default=None, description="metadata.generation last acted on.")
    conditions: list[Condition] = Field(default_factory=list, description="Ready, Degraded (some trials ended "
                                        "InfrastructureFailed), Suspended, and Complete, Failed, Reconciling and "
                                        "Stalled (anchorage.runtime.kube.conditions).")
