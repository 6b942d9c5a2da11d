"""The three custom resources — Trial, VerificationCampaign, ScoringRun — as pydantic models.

Defined once and used by both drivers: the local engine reads them from YAML files, the operator
from the cluster, and ``crds/`` is generated from them. Field names are the camelCase names of the
YAML; Python code uses the snake_case attributes. Unknown fields are errors (``extra="forbid"``),
so a misspelt key is reported instead of silently ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, field_validator, model_validator
from pydantic.alias_generators import to_camel

from anchorage.agentkinds import NEEDS_MODEL, AgentKind
from anchorage.errors import InputError
from anchorage.scoring.profiles import DEFAULT_PROFILE, PROFILES, get_profile
from anchorage.verify.settings import CbuSettings, PanelSettings

API_GROUP = "anchorage.dev"
API_VERSION = "v1alpha1"
API = f"{API_GROUP}/{API_VERSION}"

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
QUEUE_NAME_DOC = ("Cluster only: the Kueue LocalQueue that admits the trials' Jobs (in the namespace the Jobs run in: "
                  "the operator's trials namespace, else the resource's own); default: the operator's --kueue-queue. "
                  "Each Job is created suspended; while Kueue has not admitted it the trial is Queued (no pod, no "
                  "agent time); an attempt Kueue preempts ends InfrastructureFailed/preempted and is retried per the "
                  "infrastructure retries. Refused when Kueue's CRDs are not installed.")
PRIORITY_DOC = ("Cluster only, with queueName: the Kueue WorkloadPriorityClass of the trials' workloads (a higher "
                "one is admitted first and may preempt lower ones, as the ClusterQueue's preemption policy allows).")


def _check_queue(queue: str | None, priority: str | None) -> None:
    if priority is not None and queue is None:
        raise ValueError("workloadPriorityClass needs queueName (a Kueue priority applies to queued workloads only)")


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class AgentSpec(_Model):
    """What runs inside the sandbox."""

    kind: AgentKind = Field(description=" | ".join(get_args(AgentKind)))
    model: str | None = Field(default=None, description="Model name for model-backed agents (through the gateway).")
    reasoning_effort: str | None = Field(default=None, description="Reasoning effort passed to the agent CLI, e.g. xhigh.")
    command: list[str] | None = Field(
        default=None, description="kind=command: the argv template; '{instruction}' is replaced by the prompt."
    )
    image: str | None = Field(default=None, description="Agent image (cluster driver); default: the task's image.")
    artifact: str | None = Field(
        default=None, description="kind=replay: URI or path of the committed artifact to replay (labelled a replay)."
    )
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for the agent (no secrets).")

    @model_validator(mode="after")
    def _kind_fields(self) -> AgentSpec:
        if self.kind == "command" and not self.command:
            raise ValueError("agent.kind 'command' needs agent.command, e.g. ['my-agent', '{instruction}']")
        if self.kind == "replay" and not self.artifact:
            raise ValueError("agent.kind 'replay' needs agent.artifact (a path or URI of the artifact to replay)")
        if self.kind in NEEDS_MODEL and not self.model:
            raise ValueError(f"agent.kind '{self.kind}' needs agent.model")
        return self


class Limits(_Model):
    """Resource limits of one trial; each unset field comes from the task's task.toml."""

    cpus: Annotated[float, Field(gt=0, le=64)] | None = Field(default=None, description="CPU cores.")
    memory_mb: Annotated[int, Field(gt=0, le=262144)] | None = Field(
        default=None, alias="memoryMB", description="Memory limit in MB."
    )
    storage_mb: Annotated[int, Field(gt=0, le=1048576)] | None = Field(
        default=None, alias="storageMB", description="Ephemeral storage limit in MB."
    )
    gpus: Annotated[int, Field(ge=0, le=16)] | None = Field(default=None, description="GPUs (cluster only).")
    agent_timeout_sec: Annotated[float, Field(gt=0, le=604800)] | None = Field(
        default=None, description="Wall-clock limit of the agent in seconds."
    )
    pids: Annotated[int, Field(gt=0, le=65536)] | None = Field(default=None, description="Max processes.")
    result_max_bytes: Annotated[int, Field(gt=0)] | None = Field(
        default=None, description="Max total size of /root/results; larger results are recorded as oversized."
    )


class Verification(_Model):
    """Which checks run after scoring."""

    gates: bool = Field(default=True, description="Programmatic invariant gates (hard errors penalise the task).")
    lean: bool = Field(default=False, description="Generate and check the Lean obligation layer.")
    discrimination: bool = Field(default=False, description="Run the Lean discrimination suite.")
    panel: PanelSettings | None = Field(
        default=None, description="Adversarial verification panel on the trial's solution text (docs/verification.md)."
    )
    cbu: CbuSettings | None = Field(
        default=None, description="Consequence-based utility settings (docs/verification.md); not run by the engines yet."
    )

    @field_validator("panel", "cbu", mode="wrap")
    @classmethod
    def _settings_errors(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # The verify settings raise InputError for inconsistent thresholds; a manifest error must be a
        # ValueError so it is reported with the field's path like every other bad value.
        try:
            return handler(value)
        except InputError as exc:
            hint = (exc.hint or "").replace("--", "")
            raise ValueError(f"{exc.message} (fix: {hint})" if hint else exc.message) from None


class Scoring(_Model):
    """How the trial's artifact is scored."""

    profile: str = Field(
        default=DEFAULT_PROFILE, json_schema_extra={"enum": list(PROFILES)},
        description="Scoring profile: paper (default: the seed's rules and anchors), strict (+ this project's "
                    "feasibility gates), errata (+ its re-derived anchors), tbmm-report-2026-09 (the published "
                    "report's arithmetic). Every score record and board names it.")

    @field_validator("profile")
    @classmethod
    def _known(cls, value: str) -> str:
        try:
            return get_profile(value).name
        except InputError as exc:
            raise ValueError(f"{exc.message} ({exc.hint})") from None


class TrialSpec(_Model):
    """One agent run on one task with one seed."""

    task: str = Field(description="Task name (under tasks/ or the cluster's task source) or a path.")
    agent: AgentSpec = Field(description="What runs inside the sandbox.")
    seed: Annotated[int, Field(ge=0)] = Field(default=0, description="Seed index (0-based).")
    entry: str | None = Field(default=None, description="Leaderboard entry name (set by campaigns).")
    limits: Limits = Field(default_factory=Limits, description="Resource limits; unset fields come from task.toml.")
    verification: Verification = Field(default_factory=Verification, description="Checks run after scoring.")
    scoring: Scoring = Field(default_factory=Scoring, description="How the artifact is scored (profile).")
    retries: Annotated[int, Field(ge=0, le=10)] = Field(
        default=0, description="Retries of infrastructure failures only (never of a model's own failure)."
    )
    transcripts: bool = Field(
        default=False, description="Keep the agent's model requests and responses (redacted, size-capped by the "
        "gateway) as the trial's transcript.jsonl.")
    runtime_class_name: str | None = Field(
        default=None, pattern=DNS_LABEL, max_length=63, alias="runtimeClassName",
        description="Cluster only: the RuntimeClass of the trial's pod (e.g. gVisor or Kata); default: the "
                    "operator's --runtime-class-name. The local engine's sandbox is bubblewrap either way.",
    )
    queue_name: str | None = Field(
        default=None, pattern=DNS_LABEL, max_length=63, alias="queueName",
        description=QUEUE_NAME_DOC)
    workload_priority_class: str | None = Field(
        default=None, pattern=DNS_SUBDOMAIN, max_length=253, alias="workloadPriorityClass",
        description=PRIORITY_DOC)

    @model_validator(mode="after")
    def _priority_needs_queue(self) -> TrialSpec:
        _check_queue(self.queue_name, self.workload_priority_class)
        return self


class Entry(_Model):
    """One leaderboard row: an agent + model configuration."""

    name: str = Field(pattern=DNS_LABEL, max_length=40, description="Entry name (DNS label).")
    agent: AgentSpec
    cost_per_run_usd: Annotated[float, Field(ge=0)] | None = Field(
        default=None, alias="costPerRunUSD", description="Third-party measured USD per run, used instead of metering."
    )
    transcripts: bool | None = Field(
        default=None, description="Keep this entry's transcripts (transcript.jsonl per trial); unset: the campaign's.")


class Retries(_Model):
    """Retries of failed trials (infrastructure failures only)."""

    infrastructure: Annotated[int, Field(ge=0, le=10)] = Field(
        default=0, description="Retries of infrastructure failures per trial."
    )


class TaskSelector(_Model):
    """Selects tasks by label or name pattern instead of listing them."""

    match_labels: dict[str, str] = Field(default_factory=dict, description="Task keywords/labels to match.")
    names: list[str] = Field(default_factory=list, description="Glob patterns of task names.")


class CampaignSpec(_Model):
    """A matrix of entries × tasks × seeds."""

    tasks: list[str] = Field(default_factory=list, description="Task names or paths.")
    task_selector: TaskSelector | None = Field(default=None, description="Select tasks instead of listing them.")
    entries: list[Entry] = Field(min_length=1, description="The agents under evaluation.")
    baseline: str | None = Field(default=None, description="Entry name whose score is the zero point of Robust BO-Eval.")
    seeds: Annotated[int, Field(ge=1, le=100)] = Field(default=1, description="Seeds per (entry, task).")
    parallelism: Annotated[int, Field(ge=1, le=1000)] = Field(default=1, description="Max trials running at once.")
    retries: Retries = Field(default_factory=Retries)
    limits: Limits = Field(default_factory=Limits, description="Overrides of every trial's limits.")
    verification: Verification = Field(default_factory=Verification)
    scoring: Scoring = Field(default_factory=Scoring, description="How every trial is scored (profile).")
    suspend: bool = Field(default=False, description="Stop launching new trials; running ones finish.")
    transcripts: bool = Field(
        default=False, description="Keep every trial's model requests and responses as its transcript.jsonl "
        "(entries may say otherwise).")
    runtime_class_name: str | None = Field(
        default=None, pattern=DNS_LABEL, max_length=63, alias="runtimeClassName",
        description="Cluster only: the RuntimeClass of every trial pod (e.g. gVisor or Kata); default: the "
                    "operator's --runtime-class-name. The local engine's sandbox is bubblewrap either way.",
    )
    queue_name: str | None = Field(
        default=None, pattern=DNS_LABEL, max_length=63, alias="queueName",
        description=QUEUE_NAME_DOC + " parallelism stays an upper bound on the campaign's trials in the queue and "
        "running.")
    workload_priority_class: str | None = Field(
        default=None, pattern=DNS_SUBDOMAIN, max_length=253, alias="workloadPriorityClass",
        description=PRIORITY_DOC)

    @model_validator(mode="after")
    def _consistent(self) -> CampaignSpec:
        _check_queue(self.queue_name, self.workload_priority_class)
        if not self.tasks and self.task_selector is None:
            raise ValueError("a campaign needs 'tasks' (a list of task names) or 'taskSelector'")
        names = [e.name for e in self.entries]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"entry names must be unique; repeated: {', '.join(dupes)}")
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(f"baseline '{self.baseline}' is not an entry name (entries: {', '.join(names)})")
        return self


class ArtifactRef(_Model):
    """An external artifact to score (e.g. a third-party run)."""

    uri: str = Field(description="file://, s3:// or a path of an artifact (or results folder).")
    entry: str = Field(description="Entry the artifact belongs to.")
    seed: Annotated[int, Field(ge=0)] = Field(default=0, description="Seed of the run that produced it.")


class ScoringRunSpec(_Model):
    """Score artifacts of a task: a trial's, a campaign's, or external ones."""

    task: str | None = Field(default=None, description="Task name or path (required with artifacts).")
    artifacts: list[ArtifactRef] = Field(default_factory=list, description="External artifacts to score.")
    trial_ref: str | None = Field(default=None, description="Name of a Trial whose artifact is scored.")
    campaign_ref: str | None = Field(default=None, description="Name of a campaign whose artifacts are rescored.")
    baseline: str | None = Field(default=None, description="Baseline artifact or score record (URI).")
    verification: Verification = Field(default_factory=Verification)
    scoring: Scoring = Field(default_factory=Scoring, description="How the artifacts are scored (profile); a "
                             "campaignRef rescored under another profile gives that profile's board.")

    @model_validator(mode="after")
    def _one_source(self) -> ScoringRunSpec:
        sources = [bool(self.artifacts), self.trial_ref is not None, self.campaign_ref is not None]
        if sum(sources) != 1:
            raise ValueError("a ScoringRun needs exactly one of 'artifacts', 'trialRef' or 'campaignRef'")
        if self.artifacts and not self.task:
            raise ValueError("'artifacts' needs 'task'")
        return self


class Metadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = Field(pattern=DNS_LABEL, max_length=63)
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class _Resource(_Model):
    api_version: Literal["anchorage.dev/v1alpha1"] = "anchorage.dev/v1alpha1"
    metadata: Metadata
    status: dict[str, Any] | None = None


class Trial(_Resource):
    kind: Literal["Trial"] = "Trial"
    spec: TrialSpec


class VerificationCampaign(_Resource):
    kind: Literal["VerificationCampaign"] = "VerificationCampaign"
    spec: CampaignSpec


class ScoringRun(_Resource):
    kind: Literal["ScoringRun"] = "ScoringRun"
    spec: ScoringRunSpec


Resource = Annotated[Trial | VerificationCampaign | ScoringRun, Field(discriminator="kind")]
KINDS: dict[str, type[_Resource]] = {"Trial": Trial, "VerificationCampaign": VerificationCampaign, "ScoringRun": ScoringRun}
PLURALS: dict[str, str] = {"Trial": "trials", "VerificationCampaign": "verificationcampaigns", "ScoringRun": "scoringruns"}
SHORT_NAMES: dict[str, str] = {"Trial": "tr", "VerificationCampaign": "vc", "ScoringRun": "sr"}
