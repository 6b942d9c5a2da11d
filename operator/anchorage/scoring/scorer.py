"""Scoring one artifact against one task: the entry point every driver uses.

``score_artifact(task, artifact_path_or_results_dir, *, baseline=None, gates=True, lean=False, profile=None)
-> ScoreRecord`` is called by ``anchorage score``, the local engine, the operator's ScoringRun handler and the
benchmark. It never raises on a bad *artifact* (too large, not JSON, not an object, too deep, NaN,
strings ...): each becomes a record with ``gradable: false`` (BO-Eval −1) or per-metric reasons. It
raises :class:`~anchorage.errors.InputError` only for a bad *task* or *baseline* (missing or invalid
score_config.json, unreadable baseline file) — those are the caller's to fix.

The artifact is read once and parsed once, with ``parse_float=Decimal``: the metrics read those leaves
as floats (``float(Decimal(text))`` is the float ``json`` would have parsed), and the gates
(:func:`anchorage.invariants.gates.check`) and, with ``lean=True``, the obligation summary
(:func:`anchorage.lean.obligations.summarize`) get the same exact data — decimals to the last digit of
the file, never through binary floats.

Every record is made under one scoring profile (:mod:`anchorage.scoring.profiles`, default ``paper``):
the profile picks the anchors (the task's, its errata, or a compatibility profile's), the arithmetic
(SPEC §4, or the published report's: :mod:`anchorage.scoring.tbmm_report`) and which failed gates
penalise (the seed's classes only, or every hard gate); the record names it.

Per task and profile, the compiled configuration and the oracle panel O (the task's
``tests/expected_result.json`` scored with the same configuration, the profile's anchors written in) are
cached, keyed by the files' mtime and size, so thousands of artifacts per second can be scored in one
process.
"""

from __future__ import annotations

import importlib
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from anchorage import confined, numbers
from anchorage.errors import AnchorageError, InfrastructureError, InputError
from anchorage.invariants.results import GateResult
from anchorage.scoring import tbmm_report
from anchorage.scoring.profiles import Profile, apply_profile, get_profile, profile_gates
from anchorage.scoring.rebuild import with_values
from anchorage.scoring.records import MetricResult, ScoreRecord
from anchorage.scoring.rewards import bo_eval, domain_violation, metric_reward, o_eval, panel
from anchorage.scoring.scoreconfig import Metric, ScoreConfig, ScoreConfigModel, compile_config, validate_config
from anchorage.scoring.values import lookup, summarise, to_number
from anchorage.tasks import Task, load_task, locate_artifact, resolve_task
from anchorage.tasks.profiles import TaskProfiles, load_profiles, profiles_stamp

MAX_ARTIFACT_BYTES = 20 * 1024 * 1024
"""Artifacts larger than this (20 MiB) are not read: the record says ``too large``, gradable false."""

BaselineArg = float | int | str | os.PathLike[str] | ScoreRecord | None
ProfileArg = str | Profile | None
GateChecker = Callable[[Path, Any], list[GateResult]]


@dataclass(frozen=True, slots=True)
class _Compiled:
    config: ScoreConfig
    oracle_raw: float
    oracle_source: str
    profile: Profile
    task_profiles: TaskProfiles
    baseline: tuple[float, str] | None     # the profile's published F for the task, and where it is printed
    anchor_source: str
    gate_memo: dict[str, bool]             # gate name -> hard penalty under the profile (filled as gates are seen)


_CACHE: dict[tuple[str, str], tuple[tuple[int, ...], _Compiled]] = {}
_TASKS: dict[str, tuple[int, Task]] = {}


class ArtifactError(Exception):
    """Internal: why an artifact could not be read (becomes the record's ``error``)."""


# --- reading -------------------------------------------------------------------------------------------

def read_json_file(path: Path, limit: int = MAX_ARTIFACT_BYTES, *, exact: bool = False,
                   info: os.stat_result | None = None) -> Any:
    """Parse a JSON file, checking its size *before* reading; raise :class:`ArtifactError` saying why not.

    With ``exact``, non-integral numbers are parsed as ``Decimal`` (the form the gates need). The file
    is read through :mod:`anchorage.confined` beneath its folder: a symlink is refused (never followed
    — a link to the answer key or another trial's artifact scores nothing), so are FIFOs and devices
    (opened ``O_PATH`` first, nothing blocks); the size comes from ``fstat`` and the read is capped.
    ``info`` is accepted for callers that have just ``stat``-ed the path; the descriptor's own status is
    what counts.
    """
    del info
    try:
        blob = confined.read_bytes(path.parent, path.name, limit=limit)
    except confined.ConfinedError as exc:
        raise ArtifactError(_unreadable(path, exc)) from exc
    return parse_json_bytes(blob, exact=exact)


def _unreadable(path: Path, exc: confined.ConfinedError) -> str:
    if exc.reason == "missing":
        return f"{path} does not exist"
    if exc.reason == "too_large":
        return f"artifact is too large: {exc.message}"
    if exc.reason == "symlink":
        return f"{path} is a symbolic link: links are not followed (write the artifact itself)"
    if exc.reason == "not_regular":
        return f"{path} is not a regular file: {exc.message}"
    return f"cannot read {path}: {exc.message}"


_EXACT_DECODER = json.JSONDecoder(parse_float=numbers.parse_decimal, parse_int=numbers.parse_int)
"""The exact decoder (decimals as ``Decimal``; a number written with hundreds of characters kept as its text,
``numbers.Unreadable``, so no huge number is ever built), built once (it keeps no state)."""


def parse_json_bytes(blob: bytes, *, exact: bool = False) -> Any:
    try:
        text = blob.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ArtifactError(f"artifact is not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    try:
        if exact and not text.startswith("\ufeff"):  # json.loads refuses a (second) BOM itself: let it say so
            return _EXACT_DECODER.decode(text)
        if exact:
            return json.loads(text, parse_float=numbers.parse_decimal, parse_int=numbers.parse_int)
        return json.loads(text, parse_int=numbers.parse_int)
    except RecursionError as exc:
        raise ArtifactError("artifact JSON is nested too deeply to parse (more than ~1000 levels)") from exc
    except ValueError as exc:  # JSONDecodeError, and int strings longer than Python's digit limit
        raise ArtifactError(f"artifact is not valid JSON: {exc}") from exc


# --- per-task cache --------------------------------------------------------------------------------------

def _stamp(*paths: Path) -> tuple[int, ...]:
    out: list[int] = []
    for path in paths:
        try:
            info = os.stat(path)
            out += [info.st_mtime_ns, info.st_size]
        except OSError:
            out += [-1, -1]
    return tuple(out)


def load_score_config(path: Path) -> ScoreConfig:
    """Read and compile a score_config.json; :class:`InputError` when it is missing or invalid."""
    return compile_config(load_score_model(path))


def load_score_model(path: Path) -> ScoreConfigModel:
    """Read and validate a score_config.json (not compiled); :class:`InputError` when missing or invalid."""
    if not path.is_file():
        raise InputError(f"scoring configuration {path} is missing",
                         hint="every scored task needs tests/score_config.json (see docs/design-notes.md)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path} is not valid JSON: {exc}", hint="fix the JSON syntax") from exc
    return validate_config(raw, str(path))


def compiled(task: Task, profile: ProfileArg = None) -> _Compiled:
    """The task's configuration and oracle panel under ``profile`` (cached per task and profile)."""
    chosen = get_profile(profile)
    key = (str(task.score_config_path), chosen.name)
    stamp = _stamp(task.score_config_path, task.expected_result_path) + profiles_stamp(task.root)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    task_profiles = load_profiles(task.root)
    applied = apply_profile(load_score_model(task.score_config_path), task_profiles, chosen,
                            str(task.root / "tests" / "profiles.yaml"))
    config = compile_config(applied.model)
    oracle_raw, source = _oracle_panel(task, config, chosen, applied.substitutions)
    baseline = None if applied.baseline is None else (
        applied.baseline.raw, f"profile:{chosen.name} ({applied.baseline.source})")
    entry = _Compiled(config, oracle_raw, source, chosen, task_profiles, baseline, applied.anchor_source, {})
    _CACHE[key] = (stamp, entry)
    return entry


def _oracle_panel(task: Task, config: ScoreConfig, profile: Profile,
                  substitutions: dict[str, float]) -> tuple[float, str]:
    try:
        data = read_json_file(task.expected_result_path)
    except ArtifactError as exc:
        fallback = config.outstanding_panel_score
        value = 1.0 if fallback is None else fallback
        return value, f"config:outstanding_endpoint ({exc}); expected_result not usable"
    if not isinstance(data, dict):
        return 0.0, "expected_result.json is not a JSON object"
    source = "expected_result.json"
    if substitutions:
        data = with_values(data, {m.tokens: substitutions[m.path] for m in config.metrics if m.path in substitutions})
        source += f" with the {profile.name} anchors of {len(substitutions)} metric(s)"
    results = [score_metric(m, data, profile) for m in config.metrics]
    return _panel(profile, results), source


def _panel(profile: Profile, results: list[MetricResult]) -> float:
    pairs = [(r.weight, r.reward or 0.0) for r in results]
    return tbmm_report.weighted_mean(pairs) if profile.arithmetic == "tbmm-report-2026-09" else panel(pairs)


def as_task(task: Task | str | os.PathLike[str]) -> Task:
    """A :class:`Task` from a Task, a task directory or a task name (loaded tasks are cached)."""
    if isinstance(task, Task):
        return task
    root = resolve_task(task)
    stamp = _stamp(root / "task.toml")[0]
    hit = _TASKS.get(str(root))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    loaded = load_task(root)
    _TASKS[str(root)] = (stamp, loaded)
    return loaded


# --- metrics ---------------------------------------------------------------------------------------------

def score_metric(metric: Metric, data: Any, profile: ProfileArg = None) -> MetricResult:
    """Read and score one metric of a parsed artifact (see values.py for the value rule) under ``profile``."""
    raw, missing = lookup(data, metric.tokens)
    # the record shows an exact parse's Decimal as the float json.loads would have given; the value rule
    # (anchorage.numbers, shared with the gates) reads the Decimal itself, bounds first
    value = float(raw) if type(raw) is Decimal else raw
    if metric.excluded_reason is not None:
        return _result(metric, summarise(value), None, None, "excluded", metric.excluded_reason)
    if missing is not None:
        return _result(metric, None, None, 0.0, "missing", missing)
    if profile is not None and get_profile(profile).arithmetic == "tbmm-report-2026-09":
        return _report_metric(metric, raw, value)
    number, why_not, note = to_number(raw)
    if number is None:
        return _result(metric, summarise(value), None, 0.0, "non_numeric", why_not or "")
    violation = domain_violation(metric.domain, number)
    if violation is not None:
        return _result(metric, summarise(value), number, 0.0, "domain_violation", violation)
    if metric.endpoint_error is not None:
        return _result(metric, summarise(value), number, 0.0, "endpoint_invalid", metric.endpoint_error)
    return _result(metric, summarise(value), number, metric_reward(metric, number), "scored", note or "")


def _report_metric(metric: Metric, raw: Any, value: Any) -> MetricResult:
    """One metric under the published report's arithmetic (no domain rule: its unit and validity rules)."""
    number, why_not, note = tbmm_report.read_number(raw)
    if number is None:
        return _result(metric, summarise(value), None, 0.0, "non_numeric", why_not)
    reward, status, reason = tbmm_report.reward(metric, number)
    return _result(metric, summarise(value), number, reward, status, "; ".join(r for r in (note, reason) if r))


def _result(metric: Metric, value: Any, number: float | None, reward: float | None, status: str,
            reason: str) -> MetricResult:
    return MetricResult(  # positional (cheaper than 20 keywords, once per metric of every artifact): field order
        metric.path, value, number, reward, status, reason,
        metric.mode, metric.direction, metric.normalization_direction,
        metric.anchor, metric.oracle_value, metric.baseline_value,
        metric.outstanding_value, metric.rel_scale, metric.abs_scale,
        metric.weight, metric.configured_weight, metric.domain,
        metric.unit, metric.band,
    )


# --- gates -----------------------------------------------------------------------------------------------

_GATES = "anchorage.invariants.gates"


def _gate_checker() -> GateChecker | None:
    """``anchorage.invariants.gates.check`` when that module exists, else None (no gates)."""
    try:
        module = importlib.import_module(_GATES)
    except ModuleNotFoundError as exc:
        if exc.name in ("anchorage.invariants.gates", "anchorage.invariants"):
            return None
        raise _broken_gates(exc) from exc
    except Exception as exc:  # a broken checker must not silently drop the hard-gate penalty
        raise _broken_gates(exc) from exc
    check: GateChecker = module.check
    return check


def _broken_gates(exc: BaseException) -> InfrastructureError:
    return InfrastructureError(f"the gate checker anchorage.invariants.gates cannot be imported: "
                               f"{type(exc).__name__}: {exc}",
                               hint="fix that module, or score without gates (gates=False / --no-gates)")


def run_gates(task: Task, data: Any) -> list[GateResult]:
    """The task's gate results; a crash of the checker is recorded as a warning, never a hard error."""
    checker = _gate_checker()
    if checker is None:
        return []
    try:
        return list(checker(task.root, data))
    except AnchorageError:
        raise
    except Exception as exc:
        return [GateResult(name="gates", form="error", paths=(), status="missing", severity="warning",
                           message=f"the gate checker failed on this artifact: {type(exc).__name__}: {exc}")]


# --- baseline --------------------------------------------------------------------------------------------

def resolve_baseline(task: Task, baseline: BaselineArg, config: ScoreConfig,
                     published: tuple[float, str] | None = None, profile: ProfileArg = None) -> tuple[float, str]:
    """F and where it came from (``baseline_source``): the caller's baseline, else the profile's published
    F of the task, else the configuration's baseline endpoint."""
    if baseline is None and published is not None:
        return published
    if baseline is None:
        if config.baseline_panel_score is None:
            return 0.0, "default: the configuration has no baseline_endpoint (0.0)"
        return config.baseline_panel_score, f"config:{config.baseline_panel_key}"
    if isinstance(baseline, ScoreRecord):
        return baseline.raw, f"score_record:{baseline.artifact}"
    if isinstance(baseline, bool):
        raise InputError("a baseline must be a number, a score record or a file, not a boolean")
    if isinstance(baseline, int | float):
        return float(baseline), "value"
    return _baseline_from_file(task, Path(baseline), profile)


def _baseline_from_file(task: Task, path: Path, profile: ProfileArg = None) -> tuple[float, str]:
    if not path.exists():
        raise InputError(f"baseline {path} does not exist",
                         hint="pass the baseline entry's artifact (or its score.json) for this task")
    if path.is_file():
        try:
            data = read_json_file(path)
        except ArtifactError as exc:
            raise InputError(f"baseline {path} is unreadable: {exc}",
                             hint="pass a readable artifact or score record") from exc
        if isinstance(data, dict) and "scorer_version" in data and "raw" in data:
            return _raw_of_record(task, data, path), f"score_record:{path}"
    record = score_artifact(task, path, baseline=0.0, profile=profile)
    note = "" if record.gradable else f" (ungradable: {record.error})"
    return record.raw, f"artifact:{path}{note}"


def _raw_of_record(task: Task, data: dict[str, Any], path: Path) -> float:
    if data.get("task") not in (None, task.slug):
        raise InputError(f"baseline score record {path} is for task {data.get('task')!r}, not {task.slug!r}",
                         hint="pass the baseline's record for the same task")
    raw = data["raw"]
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise InputError(f"baseline score record {path} has a non-numeric raw {raw!r}")
    return float(raw)


# --- the entry point -------------------------------------------------------------------------------------

def score_artifact(task: Task | str | os.PathLike[str], artifact_path_or_results_dir: str | os.PathLike[str],
                   *, baseline: BaselineArg = None, gates: bool = True, lean: bool = False,
                   profile: ProfileArg = None) -> ScoreRecord:
    """Score one artifact (a file, or a results folder searched with near-miss recovery).

    ``lean`` (``verification.lean``): also fill ``obligations{}`` with the Lean obligation layer's
    summary (the exact Python checker; ``lake build`` as well where ``lake`` is on PATH). ``profile``: the
    scoring profile (name, ``name@version`` or :class:`Profile`; default ``paper``).
    """
    task = as_task(task)
    entry = compiled(task, profile)
    f_value, f_source = resolve_baseline(task, baseline, entry.config, entry.baseline, entry.profile)
    try:
        info: os.stat_result | None = os.stat(artifact_path_or_results_dir)
    except OSError:
        info = None
    if info is not None and not stat.S_ISDIR(info.st_mode):  # a file is used as given (locate_artifact's rule)
        target = artifact_path_or_results_dir
        path = target if isinstance(target, Path) else Path(target)
        record = _empty_record(task, entry, f_value, f_source, path)
    else:
        location = locate_artifact(artifact_path_or_results_dir, task.slug, task.artifact_name)
        record = _empty_record(task, entry, f_value, f_source, location.path or location.expected)
        record.recovered_from, record.recovery_note = location.recovered_from, location.note
        if location.path is None:
            return _ungradable(record, entry, f"missing artifact: {location.note or location.expected}", task, lean)
        path, info = location.path, None
    try:
        data = read_json_file(path, exact=True, info=info)
    except ArtifactError as exc:
        return _ungradable(record, entry, str(exc), task, lean)
    return _score_parsed(task, entry, record, data, gates, lean)


def score_data(task: Task | str | os.PathLike[str], data: Any, *, baseline: BaselineArg = None,
               gates: bool = True, lean: bool = False, profile: ProfileArg = None) -> ScoreRecord:
    """Score an already-parsed artifact (in-memory callers); ``artifact`` is None in the record.

    Parse with ``parse_float=Decimal`` for gates exact to the last digit; float-parsed data is read by
    the gates through each float's shortest ``repr``.
    """
    task = as_task(task)
    entry = compiled(task, profile)
    f_value, f_source = resolve_baseline(task, baseline, entry.config, entry.baseline, entry.profile)
    return _score_parsed(task, entry, _empty_record(task, entry, f_value, f_source, None), data, gates, lean)


def _score_parsed(task: Task, entry: _Compiled, record: ScoreRecord, data: Any, gates: bool,
                  lean: bool = False) -> ScoreRecord:
    if not isinstance(data, dict):
        kind = "an array" if isinstance(data, list) else type(data).__name__
        return _ungradable(record, entry, f"the artifact's top-level JSON value is {kind}; expected an object",
                           task, lean)
    profile = entry.profile
    record.metrics = [score_metric(m, data, profile) for m in entry.config.metrics]
    record.gradable = True
    record.raw = record.raw_before_gates = _panel(profile, record.metrics)
    checked = run_gates(task, data) if gates else []
    if lean:
        record.obligations = obligations_summary(task, data, checked if gates else None)
    record.gates = profile_gates(checked, entry.task_profiles, profile, entry.gate_memo)
    failed = [g.name for g in record.gates if g.status == "failed" and g.severity == "hard"]  # GateResult.hard_error
    if failed:
        return _penalise(record, failed)
    record.o_eval = o_eval(record.raw, record.oracle_raw)
    record.bo_eval, record.bo_branch = bo_eval(record.raw, record.oracle_raw, record.baseline_raw)
    return record


def obligations_summary(task: Task, data: Any, gate_results: list[GateResult] | None) -> dict[str, Any]:
    """``obligations{}`` of the record: the Lean layer's counts, checked against the gates' verdicts.

    The obligations are the task's invariants, the same fields the gates decided (with the same
    exact data), so the hard failures must coincide: ``agrees_with_gates`` says they do (the gate
    names of hard-failed invariants equal ``failed_hard``; replay checks have no obligation). With
    gates off (``gate_results`` None) nothing is penalised, and ``gates_applied: false`` says so.
    """
    from anchorage.lean.obligations import summarize

    summary = summarize(task.root, data, lean=True)
    summary["gates_applied"] = gate_results is not None
    if gate_results is not None:
        invariant_failures = sorted(g.name for g in gate_results if g.hard_error and g.form != "replay")
        summary["agrees_with_gates"] = invariant_failures == sorted(summary["failed_hard"])
        if not summary["agrees_with_gates"]:
            summary["note"] = (f"gates hard-failed {invariant_failures} but the obligations failed "
                               f"{summary['failed_hard']}: report this as a bug of anchorage.invariants")
    return summary


def _penalise(record: ScoreRecord, failed: list[str]) -> ScoreRecord:
    """The hard-gate penalty (G.4): R = 0, O-Eval 0, BO-Eval −1; ``raw_before_gates`` keeps R."""
    record.raw, record.hard_gate_failed, record.bo_branch = 0.0, True, "hard_gate"
    record.penalty = "hard gate failed: " + ", ".join(failed) + " (R = 0, O-Eval 0, BO-Eval -1)"
    record.o_eval, record.bo_eval = 0.0, -1.0
    return record


def _empty_record(task: Task, entry: _Compiled, f_value: float, f_source: str, artifact: Path | None) -> ScoreRecord:
    return ScoreRecord(
        task=task.slug, artifact=None if artifact is None else str(artifact), gradable=False, raw=0.0,
        raw_before_gates=0.0, oracle_raw=entry.oracle_raw, oracle_source=entry.oracle_source,
        baseline_raw=f_value, baseline_source=f_source, gap=entry.oracle_raw - f_value, bo_branch="",
        o_eval=0.0, bo_eval=-1.0, scoring_version=entry.config.scoring_version, profile=entry.profile.name,
        profile_ref=entry.profile.ref, anchor_source=entry.anchor_source,
    )


def _ungradable(record: ScoreRecord, entry: _Compiled, error: str, task: Task | None = None,
                lean: bool = False) -> ScoreRecord:
    record.error, record.gradable, record.bo_branch = error, False, "ungradable"
    record.o_eval, record.bo_eval = 0.0, -1.0
    record.metrics = [_result(m, None, None, None if m.excluded_reason else 0.0,
                              "excluded" if m.excluded_reason else "missing",
                              m.excluded_reason or "artifact ungradable")
                      for m in entry.config.metrics]
    if lean and task is not None:
        from anchorage.lean.obligations import summarize

        record.obligations = summarize(task.root, None)  # every field is missing evidence; no Lean build
        if record.obligations["total"]:
            record.obligations["note"] = f"artifact ungradable ({error}): every obligation is missing evidence"
    return record
