"""``trial.json`` as a pydantic model: the one shape both drivers write (never built by hand).

Written by the local engine (``runtime/local/trials.py``) and the operator (``controller/trials.py``)
through :meth:`TrialRecord.to_json`; read back as this model where a driver continues from it (the local
engine's resume and store, the operator's attempt record and campaign passes), as written (plain dicts: any
version's records) by the aggregation and ``anchorage report``. The scorer's record comes in as a
:class:`~anchorage.scoring.records.ScoreRecord` (:meth:`TrialRecord.apply_score`). The Trial's status mirrors
its headline fields (``runtime/kube/status.py``).
Unknown is not zero: ``cost_usd`` is None when the cost is unknown and ``cost_unknown_reason`` says
why. Every record says which driver, sandbox mechanism and limits, scoring profile and versions
made it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import importlib.metadata
import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from anchorage.errors import InputError
from anchorage.manifests import TrialSpec
from anchorage.trials.outcomes import Outcome, with_score
from anchorage.trials.phases import Phase, Reason, is_terminal

if TYPE_CHECKING:  # annotations only: reading records does not load the scorer
    from anchorage.scoring.records import ScoreRecord

API_VERSION = "anchorage.dev/v1alpha1"
#: Fields of the scorer's record (:class:`~anchorage.scoring.records.ScoreRecord`) kept in the trial record's ``score``.
SCORE_KEYS = ("raw", "oracle_raw", "baseline_raw", "baseline_source", "o_eval", "bo_eval", "gradable",
              "hard_gate_failed", "error")
#: Timestamps and timings: the fields that differ between two runs of the same trial.
TIMING_FIELDS = ("started_at", "finished_at", "durations")


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentInfo(_Part):
    kind: str
    model: str | None = None
    reasoning_effort: str | None = None
    label: str = ""


class PromptInfo(_Part):
    path: str = "agent/prompt.txt"
    sha256: str
    delivered: bool


class LimitsInfo(_Part):
    """The limits in force for the agent (what the sandbox or pod was given)."""

    timeout_sec: float | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    pids: int | None = None
    result_max_bytes: int | None = None
    result_max_files: int | None = None
    log_max_bytes: int | None = None
    log_max_files: int | None = None
    tmp_mb: int | None = None


class SandboxInfo(_Part):
    """Which isolation ran the agent, as whom, and what it enforced (and what says so).

    ``user``: the agent's identity (uid/gid inside, host ids, user namespace, capabilities); ``quotas``:
    the results and log folders' quotas during the run and their usage; ``started``: the sandbox's own
    status channel reported that it started the agent; ``evidence``: what decided the outcome, all out of
    the agent's reach (status channel, cgroup counters, limits read back from the cgroup).
    """

    mechanism: str
    enforced: dict[str, str] = Field(default_factory=dict)
    limits: LimitsInfo = Field(default_factory=LimitsInfo)
    result_bytes: int | None = None
    oversized: bool = False
    killed_processes: int | None = None
    user: str = ""
    quotas: dict[str, Any] = Field(default_factory=dict)
    logs_oversized: bool = False
    started: bool | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)


class Durations(_Part):
    agent_sec: float | None = None
    score_sec: float | None = None
    panel_sec: float | None = None
    cbu_sec: float | None = None
    total_sec: float | None = None


class ScoreInfo(_Part):
    """Headline numbers of the scorer's record (the full one is ``score.json``)."""

    raw: float | None = None
    oracle_raw: float | None = None
    baseline_raw: float | None = None
    baseline_source: str | None = None
    o_eval: float | None = None
    bo_eval: float | None = None
    gradable: bool = False
    hard_gate_failed: bool = False
    error: str | None = None

    @classmethod
    def of(cls, score: ScoreRecord) -> ScoreInfo:
        return cls.model_validate({k: getattr(score, k) for k in SCORE_KEYS})


class ArtifactInfo(_Part):
    """The scored artifact, relative to the trial's folder, and how it was found."""

    path: str | None = None
    recovered_from: str | None = None
    recovery_note: str = ""


class ReplayInfo(_Part):
    source: str
    label: str


class AttemptInfo(_Part):
    """An earlier attempt that ended in an infrastructure failure (then retried)."""

    attempt: int
    reason: Reason | None = None
    message: str = ""


def entry_name(spec: TrialSpec) -> str:
    """A trial's leaderboard entry: ``spec.entry`` (campaigns set it), else its agent kind."""
    return spec.entry or spec.agent.kind


@functools.cache
def anchorage_version() -> str:
    """The installed Anchorage distribution's version ("unknown" when not installed)."""
    try:
        return importlib.metadata.version("anchorage-operator")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class Versions(_Part):
    """What made the record: Anchorage, the scorer, the price snapshot."""

    anchorage: str = Field(default_factory=anchorage_version)
    scorer: str | None = None
    price_snapshot: str | None = None


#: The trial's transcript (``transcripts: true``): beside ``trial.json`` in the trial's folder / store prefix.
TRANSCRIPT = "transcript.jsonl"


class TranscriptInfo(_Part):
    """The gateway's record of the trial's model calls (one JSON line per request, redacted, size-capped)."""

    path: str | None = None
    records: int = 0
    bytes: int = 0
    truncated: bool = False
    error: str | None = None


def transcript_info(data: bytes) -> TranscriptInfo:
    """The account of a transcript written as ``data`` (JSON Lines, as the gateway serves it) beside the record."""
    lines = [json.loads(line) for line in data.splitlines() if line.strip()]
    return TranscriptInfo(path=TRANSCRIPT, records=len(lines), bytes=len(data),
                          truncated=any(isinstance(x, dict) and x.get("truncated") is True for x in lines))


def transcript_unreadable(problem: object) -> TranscriptInfo:
    """The account of a transcript the gateway could not give (bookkeeping: never the trial's failure)."""
    return TranscriptInfo(error=f"the gateway's transcript could not be read: {problem}")


class TrialRecord(BaseModel):
    """One trial's record (``<run>/<campaign>/<trial>/trial.json``), written last."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True)

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["TrialRecord"] = "TrialRecord"
    name: str
    campaign: str | None = None
    entry: str
    task: str
    seed: int
    attempt: int = 1
    driver: Literal["local", "operator"]
    agent: AgentInfo | None = None
    phase: Phase = Phase.RUNNING
    reason: Reason | None = None
    message: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    exit_code: int | None = None
    prompt: PromptInfo | None = None
    sandbox: SandboxInfo | None = None
    durations: Durations = Field(default_factory=Durations)
    usage: dict[str, Any] | None = None
    cost_usd: float | None = None
    cost_source: str | None = None
    cost_unknown_reason: str | None = None
    artifact: ArtifactInfo | None = None
    score: ScoreInfo | None = None
    scoring_profile: str | None = None
    replay: ReplayInfo | None = None
    panel: dict[str, Any] | None = None
    cbu: dict[str, Any] | None = None
    transcript: TranscriptInfo | None = None
    previous_attempts: list[AttemptInfo] = Field(default_factory=list)
    logs: dict[str, str] = Field(default_factory=lambda: {"stdout": "agent/stdout.log", "stderr": "agent/stderr.log"})
    versions: Versions = Field(default_factory=Versions)

    def to_json(self) -> dict[str, Any]:
        """The JSON object written to ``trial.json`` (every field, nulls included: one shape)."""
        return self.model_dump(mode="json", by_alias=True)

    def end(self, phase: Phase, reason: Reason, message: str = "") -> None:
        """Set the trial's phase, reason and message."""
        self.phase, self.reason, self.message = phase, reason, message

    def apply_score(self, score: ScoreRecord, artifact_path: str | None, results_dir: str | None = None) -> None:
        """The scorer's record (``score.json``) into this record: headline numbers, the profile (``name@version``)
        and scorer that made them, the artifact (``artifact_path``: relative to the trial's folder) — and a
        run that left no artifact becomes the model's ``no_artifact`` (:func:`~anchorage.trials.with_score`).
        ``results_dir``: where this driver's scorer looked for the artifact; the record's notes name it
        ``artifacts`` (the trial's folder), so both drivers write the same words."""
        if results_dir:
            score = dataclasses.replace(score, error=in_trial_terms(score.error, results_dir),
                                        recovery_note=in_trial_terms(score.recovery_note, results_dir))
        self.score = ScoreInfo.of(score)
        self.scoring_profile = score.profile_ref or score.profile
        self.versions.scorer = score.scorer_version
        self.artifact = ArtifactInfo(path=artifact_path, recovered_from=score.recovered_from,
                                     recovery_note=score.recovery_note)
        outcome = with_score(self.outcome(), score)
        self.end(outcome.phase, outcome.reason, outcome.message)

    def outcome(self) -> Outcome:
        """The record's phase, reason and message as an :class:`Outcome` (the trial must have ended)."""
        return Outcome(self.phase, self.reason or Reason.COMPLETED, self.message)

    def comparable(self) -> dict[str, Any]:
        """:meth:`to_json` without the timing fields (what two runs of the same trial share)."""
        return {k: v for k, v in self.to_json().items() if k not in TIMING_FIELDS}


class UnreadableRecord(InputError):
    """A finished trial's record that this version cannot read: resuming would run the trial again over it."""


def parse_record(raw: bytes, where: str) -> TrialRecord | None:
    """A stored ``trial.json`` (``where``: its path or URI, for the error) as a :class:`TrialRecord`; None when it
    is not JSON or records an unfinished trial this version cannot read (the trial then runs again, as an
    unfinished one does). A *finished* trial's record this version cannot read (another version's) raises
    :class:`UnreadableRecord`: running it again would replace a finished result."""
    try:
        return TrialRecord.model_validate_json(raw)
    except ValueError as problem:
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        if not (isinstance(data, dict) and is_terminal(data.get("phase"))):
            return None
        first = "; ".join(line.strip() for line in str(problem).splitlines()[1:3])
        raise UnreadableRecord(
            f"{where}: a finished trial's record that this version of Anchorage ({anchorage_version()}) cannot "
            f"read ({first}; written by {_written_by(data)})",
            hint="resume this run with the version that wrote it, or run the campaign into a new --runs-dir") from None


def _written_by(data: dict[str, Any]) -> str:
    versions = data.get("versions")
    return str(versions.get("anchorage", "unknown")) if isinstance(versions, dict) else "unknown"


def in_trial_terms(text: Any, results_dir: str) -> Any:
    """``text`` with a driver's results folder (an absolute path on the local engine, the verifier pod's scratch
    folder in a cluster) said as the trial folder's ``artifacts``; anything but a string as it is."""
    return text.replace(results_dir.rstrip("/"), "artifacts") if isinstance(text, str) and results_dir else text


def now() -> str:
    """The current UTC time as records write it (ISO 8601, milliseconds)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
