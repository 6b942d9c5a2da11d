"""``anchorage tasks validate``: every problem of a task directory, with the path it is in and a fix hint.

The task's own files are checked by :func:`anchorage.tasks.validation.check_task_files`; this module adds
what needs the scorer: ``tests/score_config.json`` against its (generated) JSON Schema and model, the
prompt's ``$scored_fields``, and, under every scoring profile, the anchor contract — the anchor scores
every included metric 1.0 and fails none of the profile's hard gates — plus the consistency of
``tests/profiles.yaml`` with the configuration (erratum ``published`` values equal the paper anchors,
paths exist, an erratum's script and committed result exist and its result passes the errata profile).
"""

from __future__ import annotations

from pathlib import Path

from anchorage.errors import AnchorageError
from anchorage.scoring.profiles import PAPER, PROFILES, get_profile
from anchorage.scoring.schema import problems as schema_problems
from anchorage.scoring.scoreconfig import ScoreConfig, parse_score_config
from anchorage.scoring.scorer import ArtifactError, read_json_file, score_artifact, score_metric
from anchorage.tasks.loading import Task, read_task_config
from anchorage.tasks.profiles import PROFILES_FILE, TaskProfiles, load_profiles
from anchorage.tasks.validation import Problem, check_json, check_task_files

__all__ = ["Problem", "validate_task"]


def validate_task(path: str | Path) -> list[Problem]:
    """Every problem of the task directory at ``path`` (empty list: the task is fine)."""
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        return [Problem(str(root), "not a directory", "pass a Harbor task directory")]
    problems: list[Problem] = []
    config_ok = check_task_files(root, problems)
    config = _check_score_config(root, problems)
    if config is None:
        return problems
    _check_oracle(root, config, problems)
    _check_scored_fields(root, config, problems)
    if config_ok:
        _check_profiles(root, config, problems)
    return problems


def _check_score_config(root: Path, problems: list[Problem]) -> ScoreConfig | None:
    path = root / "tests" / "score_config.json"
    if not path.is_file():
        problems.append(Problem(str(path), "missing", "write the scoring configuration (see docs/design-notes.md)"))
        return None
    raw = check_json(path, problems)
    if raw is None:
        return None
    errors = schema_problems(raw)
    for pointer, message in errors:
        problems.append(Problem(f"{path}#{pointer}", message,
                                "see anchorage/scoring/score_config.schema.json for the allowed fields"))
    if errors:
        return None
    try:
        config = parse_score_config(raw, str(path))
    except AnchorageError as exc:
        problems.append(Problem(str(path), exc.message, exc.hint or "fix the configuration"))
        return None
    _check_metrics(path, config, problems)
    return config


def _check_metrics(path: Path, config: ScoreConfig, problems: list[Problem]) -> None:
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
            problems.append(Problem(where, f"degenerate denominator widened to {m.denominator:g} ({m.band_rule}, "
                                    "seed G.6)", "check baseline_value/outstanding_value or set degeneracy_band",
                                    "warning"))


def _check_scored_fields(root: Path, config: ScoreConfig, problems: list[Problem]) -> None:
    """The prompt's ``$scored_fields`` (output_schema.json) must name what the panel scores, same domain."""
    schema_path = root / "environment/data/output_schema.json"
    try:
        import json

        fields = json.loads(schema_path.read_text(encoding="utf-8")).get("$scored_fields")
    except (OSError, ValueError, AttributeError):
        return
    if not isinstance(fields, dict):
        return
    where = f"{schema_path}#/$scored_fields"
    for metric in (m for m in config.metrics if m.weight > 0):
        declared = fields.get(metric.path)
        if not isinstance(declared, dict):
            problems.append(Problem(where, f"scored field {metric.path!r} is not listed",
                                    "list it with its unit and range", "warning"))
        elif declared.get("domain") != metric.domain:
            problems.append(Problem(f"{where}/{metric.path}", f"domain {declared.get('domain')!r} differs from the "
                                    f"scoring configuration's {metric.domain!r}", "make them agree", "warning"))


def _check_oracle(root: Path, config: ScoreConfig, problems: list[Problem]) -> None:
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


def _check_profiles(root: Path, config: ScoreConfig, problems: list[Problem]) -> None:
    """The anchor contract under every seed-arithmetic profile, and tests/profiles.yaml against the config."""
    where = str(root / PROFILES_FILE)
    try:
        declared = load_profiles(root)
        task = Task(root=root, slug=root.name, config=read_task_config(root / "task.toml"), instruction="")
    except AnchorageError:
        return  # reported by check_task_files
    _check_declarations(where, declared, config, problems)
    for profile in PROFILES.values():
        if profile.arithmetic != "seed":
            continue
        try:
            record = score_artifact(task, root / "tests" / "expected_result.json", profile=profile)
        except AnchorageError as exc:
            problems.append(Problem(where, exc.message, exc.hint or "fix tests/profiles.yaml"))
            continue
        if record.gradable and record.o_eval != 1.0 and profile.anchors == PAPER.anchors and profile.gates == PAPER.gates:
            problems.append(Problem(f"{root / 'tests' / 'expected_result.json'}", f"the anchor scores O-Eval "
                                    f"{record.o_eval:.6g} under {profile.name}", "fix the anchor or the configuration"))
        if profile.anchors != PAPER.anchors:
            continue
        declared_checks = " ".join(e.check for e in declared.anchors.errata)
        for gate in record.gates:
            if not gate.hard_error or (profile.gates == "all_hard" and gate.name in declared_checks):
                continue  # a strict gate the published anchor fails is fine when an erratum's check names it
            problems.append(Problem(f"{root / 'tests' / 'expected_result.json'}#gate:{gate.name}",
                                    f"the anchor fails its own hard gate under {profile.name}: {gate.message}",
                                    "fix the gate's bounds or the expected result, or declare the erratum whose "
                                    "check this gate is (tests/profiles.yaml)"))
    _check_errata_results(root, declared, problems)
    _check_gate_patterns(root, task, declared, problems)


def _check_declarations(where: str, declared: TaskProfiles, config: ScoreConfig, problems: list[Problem]) -> None:
    anchors = {m.path: m for m in config.metrics}
    for erratum in declared.anchors.errata:
        for metric in erratum.metrics:
            paper = anchors.get(metric.path)
            if paper is None:
                problems.append(Problem(f"{where}#errata/{erratum.id}", f"metric {metric.path!r} is not in "
                                        "score_config.json", "use a metric path of the task"))
            elif metric.published is not None and metric.published != paper.anchor:
                problems.append(Problem(f"{where}#errata/{erratum.id}", f"{metric.path}: published "
                                        f"{metric.published!r} differs from the paper anchor {paper.anchor!r}",
                                        "'published' must be the anchor this erratum replaces"))
    for name, compat in declared.anchors.compat.items():
        try:
            profile = get_profile(name)
        except AnchorageError as exc:
            problems.append(Problem(f"{where}#compat/{name}", exc.message, exc.hint or "name a profile"))
            continue
        if profile.anchors != "compat":
            problems.append(Problem(f"{where}#compat/{name}", f"{name} is not a compatibility profile",
                                    "compat keys name compatibility profiles (e.g. tbmm-report-2026-09)"))
        for metric in compat.metrics:
            if metric.path not in anchors:
                problems.append(Problem(f"{where}#compat/{name}", f"metric {metric.path!r} is not in "
                                        "score_config.json", "use a metric path of the task"))
    for gate in declared.gates.paper:
        if not gate.reason:
            problems.append(Problem(f"{where}#gates/paper/{gate.gate}", "no reason given", "say why the gate is "
                                    f"of the seed's class {gate.seed_class}", "warning"))


def _check_gate_patterns(root: Path, task: Task, declared: TaskProfiles, problems: list[Problem]) -> None:
    """Every gates.paper pattern (and compat gate) names a gate the task's checks produce (a typo guard)."""
    import fnmatch

    from anchorage.scoring.scorer import run_gates

    try:
        data = read_json_file(root / "tests" / "expected_result.json", exact=True)
    except ArtifactError:
        return
    names = {g.name for g in run_gates(task, data)}
    patterns = [(f"gates/paper/{g.gate}", g.gate) for g in declared.gates.paper]
    patterns += [(f"compat/{name}/gates/{p}", p) for name, c in declared.anchors.compat.items() for p in c.gates or []]
    for where, pattern in patterns:
        if not any(fnmatch.fnmatchcase(name, pattern) for name in names):
            problems.append(Problem(f"{root / PROFILES_FILE}#{where}", f"{pattern!r} matches no gate of the task "
                                    f"(gate results are named <invariant>[_<i>]_<form> or by their replay check)",
                                    "use the name `anchorage score --json` shows under gates[]"))


def _check_errata_results(root: Path, declared: TaskProfiles, problems: list[Problem]) -> None:
    for erratum in declared.anchors.errata:
        where = f"{root / PROFILES_FILE}#errata/{erratum.id}"
        for rel, what in ((erratum.script, "script"), (erratum.result, "result")):
            if not (root / rel).is_file():
                problems.append(Problem(where, f"{what} {rel} does not exist", f"commit the reproduction's {what}"))
        result = root / erratum.result
        if not result.is_file():
            continue
        record = score_artifact(root, result, profile="errata")
        failed = [g.name for g in record.gates if g.hard_error]
        if failed or record.o_eval != 1.0:
            problems.append(Problem(where, f"the erratum's result scores O-Eval {record.o_eval:.6g} under errata"
                                    + (f" and fails {', '.join(failed)}" if failed else ""),
                                    "the re-derived anchor must score 1.0 and pass every errata gate"))

