"""Checking a task directory: every problem, with the path it is in and a fix hint.

Called by ``anchorage tasks validate`` (and usable by CI and the task authors' tests). Errors make a
task unusable or its scores wrong (bad task.toml, no instruction, invalid score_config.json, an
expected result that does not score a raw panel of 1.0 under its own configuration, an oracle that
fails its own hard gates); warnings are things Harbor tolerates (deprecated spellings, unknown keys,
files the verifier or oracle would need but a data-only pack may lack).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from anchorage.errors import AnchorageError
from anchorage.tasks.loading import Task, read_task_config, strip_canary

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "scoring" / "score_config.schema.json"
Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    path: str          # file (and, after '#', a JSON pointer or dotted field) the problem is in
    message: str
    hint: str
    severity: Severity = "error"

    def render(self) -> str:
        return f"{self.severity}: {self.path}: {self.message}\n  fix: {self.hint}"


@cache
def score_config_schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return loaded


def validate_task(path: str | Path) -> list[Problem]:
    """Every problem of the task directory at ``path`` (empty list: the task is fine)."""
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        return [Problem(str(root), "not a directory", "pass a Harbor task directory")]
    problems: list[Problem] = []
    config_ok = _check_task_toml(root, problems)
    _check_instruction(root, problems)
    _check_layout(root, problems)
    config = _check_score_config(root, problems)
    if config is not None:
        _check_oracle(root, config, problems, gates=config_ok)
        _check_scored_fields(root, config, problems)
    return problems


def _check_task_toml(root: Path, problems: list[Problem]) -> bool:
    toml = root / "task.toml"
    try:
        config = read_task_config(toml)
    except AnchorageError as exc:
        problems.append(Problem(str(toml), exc.message, exc.hint or "fix task.toml"))
        return False
    for note in config.deprecations:
        problems.append(Problem(str(toml), note, "use the schema 1.4 spelling shown", "warning"))
    for key in config.unknown_keys:
        problems.append(Problem(f"{toml}#{key}", f"unknown key {key!r} (Harbor ignores it)",
                                "remove it or move it under [metadata]", "warning"))
    json_artifacts = [a for a in config.artifact_paths if a.endswith(".json")]
    if not json_artifacts:
        problems.append(Problem(f"{toml}#artifacts", "no JSON artifact declared",
                                f'add artifacts = ["/root/results/{root.name}_result.json"]'))
    elif Path(json_artifacts[0]).name != f"{root.name}_result.json":
        problems.append(Problem(f"{toml}#artifacts", f"artifact {json_artifacts[0]!r} is not named "
                                f"<slug>_result.json", f"use /root/results/{root.name}_result.json", "warning"))
    return True


def _check_instruction(root: Path, problems: list[Problem]) -> None:
    path = root / "instruction.md"
    if not path.is_file():
        problems.append(Problem(str(path), "missing", "write the prompt to instruction.md"))
    elif not strip_canary(path.read_text(encoding="utf-8")).strip():
        problems.append(Problem(str(path), "empty once the canary comment is stripped", "write the prompt"))


def _check_layout(root: Path, problems: list[Problem]) -> None:
    wanted: list[tuple[str, str]] = [
        ("environment/data", "put the problem statement and attachments in environment/data/"),
        ("environment/data/output_schema.json", "describe the artifact's fields and types"),
        ("tests/test.sh", "the verifier writes /logs/verifier/reward.json (anchorage score --reward-file)"),
        ("solution/solve.sh", "the oracle writes the artifact (Harbor convention)"),
    ]
    for rel, hint in wanted:
        if not (root / rel).exists():
            problems.append(Problem(str(root / rel), "missing", hint, "warning"))
    schema = root / "environment/data/output_schema.json"
    if schema.is_file():
        _check_json(schema, problems, severity="warning")


def _check_json(path: Path, problems: list[Problem], severity: Severity = "error") -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        problems.append(Problem(str(path), f"not valid JSON: {exc}", "fix the JSON syntax", severity))
        return None


def _check_score_config(root: Path, problems: list[Problem]) -> Any:
    path = root / "tests" / "score_config.json"
    if not path.is_file():
        problems.append(Problem(str(path), "missing", "write the scoring configuration (see docs/design-notes.md)"))
        return None
    raw = _check_json(path, problems)
    if raw is None:
        return None
    import jsonschema

    validator = jsonschema.Draft202012Validator(score_config_schema())
    errors = sorted(validator.iter_errors(raw), key=lambda e: list(e.absolute_path))
    for err in errors:
        pointer = "/" + "/".join(str(p) for p in err.absolute_path)
        problems.append(Problem(f"{path}#{pointer}", err.message,
                                "see anchorage/scoring/score_config.schema.json for the allowed fields"))
    if errors:
        return None
    from anchorage.scoring import parse_score_config

    try:
        config = parse_score_config(raw, str(path))
    except AnchorageError as exc:
        problems.append(Problem(str(path), exc.message, exc.hint or "fix the configuration"))
        return None
    _check_metrics(path, config, problems)
    return config


def _check_metrics(path: Path, config: Any, problems: list[Problem]) -> None:
    if not any(m.weight > 0 for m in config.metrics):
        problems.append(Problem(f"{path}#/metrics", "no metric has a positive weight: the panel is empty",
                                "give at least one metric weight > 0"))
    seen: set[str] = set()
    for m in config.metrics:
        where = f"{path}#/metrics/{m.index}"
        if m.path in seen:
            problems.append(Problem(where, f"path {m.path!r} is scored twice", "remove the duplicate metric",
                                    "warning"))
        seen.add(m.path)
        if None not in (m.oracle_value, m.outstanding_value) and m.oracle_value != m.outstanding_value:
            problems.append(Problem(where, f"oracle_value {m.oracle_value!r} differs from outstanding_value "
                                    f"{m.outstanding_value!r}; the anchor used is {m.anchor!r}",
                                    "make the two endpoints agree", "warning"))
        if m.endpoint_error is not None:
            problems.append(Problem(where, m.endpoint_error, "swap the endpoints or fix normalization_direction"))
        if m.widened:
            problems.append(Problem(where, f"degenerate denominator widened to {m.denominator:g} ({m.band_rule})",
                                    "check baseline_value/outstanding_value or set degeneracy_band", "warning"))


def _check_scored_fields(root: Path, config: Any, problems: list[Problem]) -> None:
    """The prompt's ``$scored_fields`` (output_schema.json) must name what the panel scores, same domain."""
    schema_path = root / "environment/data/output_schema.json"
    try:
        fields = json.loads(schema_path.read_text(encoding="utf-8")).get("$scored_fields")
    except (OSError, ValueError, AttributeError):
        return
    if not isinstance(fields, dict):
        return
    where = f"{schema_path}#/$scored_fields"
    included = {m.path: m for m in config.metrics if m.weight > 0}
    for path, metric in included.items():
        declared = fields.get(path)
        if not isinstance(declared, dict):
            problems.append(Problem(where, f"scored field {path!r} is not listed", "list it with its unit and range",
                                    "warning"))
        elif declared.get("domain") != metric.domain:
            problems.append(Problem(f"{where}/{path}", f"domain {declared.get('domain')!r} differs from the "
                                    f"scoring configuration's {metric.domain!r}", "make them agree", "warning"))


def _check_oracle(root: Path, config: Any, problems: list[Problem], gates: bool) -> None:
    from anchorage.scoring.scorer import ArtifactError, read_json_file, run_gates, score_metric

    expected = root / "tests" / "expected_result.json"
    try:
        data = read_json_file(expected)
    except ArtifactError as exc:
        problems.append(Problem(str(expected), str(exc), "commit the oracle's result as tests/expected_result.json"))
        return
    if not isinstance(data, dict):
        problems.append(Problem(str(expected), "not a JSON object", "the artifact must be a JSON object"))
        return
    for metric in config.metrics:
        result = score_metric(metric, data)
        if result.status != "excluded" and result.reward != 1.0:
            problems.append(Problem(
                f"{expected}#{metric.path}",
                f"the oracle's own value {result.value!r} scores {result.reward} ({result.status}: "
                f"{result.reason or 'differs from the anchor'}; anchor {metric.anchor!r})",
                "make oracle_value/outstanding_value equal the expected result, or fix the expected result"))
    if gates:
        _check_oracle_gates(root, data, problems, run_gates)


def _check_oracle_gates(root: Path, data: Any, problems: list[Problem], run_gates: Any) -> None:
    try:
        task = Task(root=root, slug=root.name, config=read_task_config(root / "task.toml"), instruction="")
        gates = run_gates(task, data)
    except AnchorageError as exc:
        problems.append(Problem(str(root / "tests" / "invariants.yaml"), exc.message, exc.hint or "fix it"))
        return
    for gate in gates:
        if gate.hard_error:
            problems.append(Problem(f"{root / 'tests' / 'expected_result.json'}#gate:{gate.name}",
                                    f"the oracle fails its own hard gate: {gate.message}",
                                    "fix the invariant's bounds or the expected result"))
