"""Build the 18 benchmark task directories under ``tasks/`` from the TB-MathModel reference data pack.

Run by hand (``.venv/bin/python tools/import_reference.py [REFERENCE_DIR]``, default ``../shared/reference``
relative to the repository root) whenever the reference pack or ``tools/task_overrides.yaml`` changes.
The tests in ``tests/task_suite/`` check what it produced.

What it writes for each ``tasks/<slug>/`` (and only these files; anything else in the directory, such as
``tests/invariants.yaml`` or a reproduction in ``solution/``, is left untouched):

* ``instruction.md`` (the reference's, canary kept; the artifact block and time line are checked),
* ``task.toml`` (the reference's text plus ``[metadata]`` anchor fields and corrected summaries),
* ``environment/Dockerfile`` (ours) and ``environment/data/`` (byte-identical copies, the flat attachment
  mirror materialised from the corpus originals, ``output_schema.json`` with ``$scored_fields`` pinned),
* ``tests/test.sh`` (ours: runs the Anchorage scorer), ``tests/score_config.json`` (overrides applied),
  ``tests/expected_result.json``, ``numeric_checks.json``, ``string_checks.json``, ``scoring_table.md``,
* ``README.md`` and, for imported anchors, ``solution/README.md``;
and once for the suite: ``tasks/LICENSE`` (the reference's Apache-2.0 text) and the table of ``tasks/README.md``.

For tasks whose anchor is ``reproduced`` the committed ``tests/expected_result.json`` belongs to the
reproduction: an existing one is kept (unless ``--refresh-anchors``) and the oracle values of
``score_config.json`` are synced from it. It is the ``paper`` profile's anchor — the published one unless the
seed corrects it (SPEC §6) — and where the reproduction disagrees, the task's ``tests/profiles.yaml`` declares
the erratum (docs/design-notes.md "Scoring profiles").
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import shutil
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
DEFAULT_REFERENCE = REPO.parent / "shared" / "reference"
OVERRIDES = Path(__file__).with_name("task_overrides.yaml")
UPSTREAM = "wxj630/terminal-bench-math-modeling"
AGENT_BASE = "anchorage/agent-base:0.1.0"
ARTIFACT_HEADING = "# Required Benchmark Artifact"
TIME_LINE = "You have 14400 seconds to complete this task."
PATH_TOKEN = re.compile(r"[^.\[\]]+|\[\d+\]")


@dataclass
class TaskReport:
    """What the import did to one task (printed at the end, used by the tests through the files)."""

    slug: str
    anchor: str
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- helpers


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def write_text(path: Path, text: str, *, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if executable:
        path.chmod(0o755)


def copy_file(src: Path, dst: Path) -> None:
    """Copy byte for byte, skipping the write when the destination already holds the same bytes."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_file() and dst.read_bytes() == src.read_bytes():
        return
    shutil.copyfile(src, dst)


def path_tokens(path: str) -> list[str | int]:
    return [int(t[1:-1]) if t.startswith("[") else t for t in PATH_TOKEN.findall(path)]


def get_path(data: Any, path: str) -> Any:
    for token in path_tokens(path):
        data = data[token]
    return data


def set_path(data: Any, path: str, value: Any) -> None:
    tokens = path_tokens(path)
    for token in tokens[:-1]:
        data = data[token]
    data[tokens[-1]] = value


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------------------------- provenance


def provenance_rows(reference: Path) -> dict[str, tuple[str, str]]:
    """Map 'path here' -> (source commit, notes) from the reference's PROVENANCE.md file table."""
    rows: dict[str, tuple[str, str]] = {}
    for line in (reference / "PROVENANCE.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`") and cells[3].replace(" ", "").isdigit():
            rows[cells[0].strip("`")] = (cells[2], cells[4])
    return rows


def missing_files(reference: Path, slug: str) -> list[tuple[str, str]]:
    """Rows of PROVENANCE.md's 'Missing' section for one task: (path in the task, reason)."""
    text = (reference / "PROVENANCE.md").read_text(encoding="utf-8")
    section = text.split("## Missing", 1)[1]
    out: list[tuple[str, str]] = []
    prefix = f"tasks/{slug}/"
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith(f"`{prefix}"):
            out.append((cells[0].strip("`")[len(prefix):], cells[2]))
    return out


# ------------------------------------------------------------------------------------------ score config


def metric_override(overrides: dict[str, Any], slug: str, path: str) -> dict[str, Any]:
    task = overrides["tasks"].get(slug, {})
    return dict(task.get("metrics", {}).get(path, {}))


def raw_index_reason(overrides: dict[str, Any], slug: str, metric: dict[str, Any]) -> str | None:
    rule = overrides["raw_index_exclusion"]
    if slug not in rule["tasks"] or not any(s in metric["path"] for s in rule["paths_contain"]):
        return None
    if abs(float(metric["oracle_value"])) <= float(rule["min_abs_anchor"]):
        return None
    return str(rule["reason"]).strip()


def apply_metric_overrides(slug: str, metric: dict[str, Any], overrides: dict[str, Any]) -> list[str]:
    """Apply the override table to one metric in place; return human-readable change notes."""
    notes: list[str] = []
    over = metric_override(overrides, slug, metric["path"])
    if "oracle_value" in over and metric["oracle_value"] != over["oracle_value"]:
        notes.append(f"{metric['path']}: oracle_value {metric['oracle_value']} -> {over['oracle_value']}")
        metric["oracle_value"] = over["oracle_value"]
        if "outstanding_value" in metric:
            metric["outstanding_value"] = over["oracle_value"]
    if "direction" in over:
        notes.append(f"{metric['path']}: direction {metric.get('direction')} -> {over['direction']}")
        basis = str(over.get("direction_basis", "")).strip()
        for key in ("direction", "semantic_direction", "normalization_direction"):
            metric[key] = over["direction"]
        if basis:
            metric["direction_basis"] = metric["semantic_direction_basis"] = basis
    for key in ("domain", "unit", "range"):
        if key in over:
            metric[key] = over[key]
    reason = over.get("exclude_reason") or raw_index_reason(overrides, slug, metric)
    if reason:
        metric["exclude_reason"] = " ".join(str(reason).split())
        notes.append(f"{metric['path']}: excluded ({metric['exclude_reason'][:60]}...)")
    return notes


def final_summary(slug: str, overrides: dict[str, Any], metrics: list[dict[str, Any]]) -> str | None:
    task = overrides["tasks"].get(slug, {})
    if "final_answer_summary" in task:
        return " ".join(str(task["final_answer_summary"]).split())
    template = task.get("final_answer_summary_template")
    if not template:
        return None
    values = {m["path"].rsplit(".", 1)[-1].replace("_profit_yuan", ""): m["oracle_value"] for m in metrics}
    return " ".join(str(template).split()).format(**{k: f"{v:.2f}" for k, v in values.items()})


def is_included(metric: dict[str, Any]) -> bool:
    """A metric enters the panel unless it is excluded by configuration or is a constant endpoint."""
    return "exclude_reason" not in metric and metric.get("normalization_mode") != "constant_endpoint"


def build_score_config(
    slug: str, ref_config: dict[str, Any], overrides: dict[str, Any], anchors: dict[str, Any] | None
) -> tuple[dict[str, Any], list[str]]:
    """The reference configuration with our overrides; ``anchors`` = a committed expected result to sync from."""
    config = copy.deepcopy(ref_config)
    notes: list[str] = []
    for metric in config["metrics"]:
        notes += apply_metric_overrides(slug, metric, overrides)
        if anchors is not None:
            value = get_path(anchors, metric["path"])
            if value != metric["oracle_value"]:
                notes.append(f"{metric['path']}: oracle_value synced from expected_result.json: {value}")
                metric["oracle_value"] = value
                if "outstanding_value" in metric:
                    metric["outstanding_value"] = value
    included = [m for m in config["metrics"] if is_included(m)]
    config["metric_count"] = len(config["metrics"])
    config["effective_metric_count"] = len(included)
    summary = final_summary(slug, overrides, config["metrics"])
    if summary:
        config["final_question"]["final_answer_summary"] = summary
        notes.append("final_answer_summary rewritten to quote the anchor")
    pinned = [m["path"] for m in config["metrics"] if "unit" in m]
    if pinned:
        notes.append(f"unit and range pinned for {len(pinned)} metric(s) (score_config and output_schema `$scored_fields`)")
    config["anchorage"] = {
        "source": f"{UPSTREAM} (Apache-2.0), see tasks/NOTICE",
        "changes": notes,
        "excluded_metrics": [m["path"] for m in config["metrics"] if m not in included],
    }
    return config, notes


# -------------------------------------------------------------------------------------------- task.toml


def toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


# Schema 1.3 spellings rewritten to schema 1.4 (same meaning; the 1.3 ones are deprecated).
SCHEMA_1_4 = {
    'schema_version = "1.3"': 'schema_version = "1.4"',
    "allow_internet = false": 'network_mode = "no-network"',
}


def build_task_toml(ref_text: str, slug: str, meta: dict[str, str], summary: str | None) -> str:
    """Rewrite 1.3 spellings to 1.4, insert our [metadata] keys, replace the quoted final answer summary."""
    lines = ref_text.splitlines()
    out: list[str] = []
    for line in lines:
        line = SCHEMA_1_4.get(line.strip(), line)
        if summary is not None and line.startswith("final_answer_summary = "):
            line = f"final_answer_summary = {toml_string(summary)}"
        out.append(line)
        if line.strip() == "[metadata]":
            out.extend(f"{key} = {toml_string(value)}" for key, value in meta.items())
    text = "\n".join(out) + "\n"
    if "[metadata]" not in text:
        raise SystemExit(f"{slug}: reference task.toml has no [metadata] table")
    return text


# -------------------------------------------------------------------------------------------- data dir


def materialise_attachments(data_dir: Path, manifest: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Copy each attachment's corpus original to its flat name; return (made, unavailable)."""
    made: list[str] = []
    unavailable: list[str] = []
    for entry in manifest.get("attachments_index", []):
        flat = data_dir / entry["path"].removeprefix("/root/data/")
        original = data_dir / entry["original"].removeprefix("/root/data/")
        if not original.is_file() and original.parent.is_file():
            original = original.parent  # MCM manifests repeat the PDF name: .../X.pdf/X.pdf
        if original.is_file():
            copy_file(original, flat)
            made.append(flat.name)
        else:
            unavailable.append(flat.name)
    return made, unavailable


def retype_schema(schema: dict[str, Any], types: dict[str, str]) -> dict[str, Any]:
    """Set the type name of the template fields named by dotted ``types`` paths (the ``schema_types`` override)."""
    out = json.loads(json.dumps(schema))
    for path, type_name in types.items():
        *parents, leaf = path.split(".")
        node = out
        for key in parents:
            node = node[key]
        if leaf not in node:
            raise KeyError(f"schema_types: {path} is not a field of output_schema.json")
        node[leaf] = type_name
    return out


def pin_schema(schema: dict[str, Any], metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """Add ``$scored_fields``: unit and range of every declared metric field (meta key, not an output field)."""
    pinned: dict[str, Any] = {}
    for metric in metrics:
        entry: dict[str, Any] = {"type": "number", "unit": metric.get("unit", "unspecified"), "range": metric.get("range")}
        if "domain" in metric:
            entry["domain"] = metric["domain"]
        if "exclude_reason" in metric:
            entry["scored"] = False
        pinned[metric["path"]] = entry
    out = dict(schema)
    out["$scored_fields"] = {
        "$comment": (
            "Meta key, not part of the artifact: the fields the final-question panel reads, each with the unit and "
            "range it must be reported in. A value outside its range or domain earns no credit for that field."
        ),
        **pinned,
    }
    return out


# --------------------------------------------------------------------------------------------- writers

DOCKERFILE = """\
# Agent image of {slug}: the Anchorage agent base plus this task's read-only data at /root/data.
# Build from this directory: docker build -t anchorage/task-{slug}:0.1.0 .
# (the sandbox and the operator mount environment/data read-only instead of baking it in).
ARG AGENT_BASE={base}
FROM ${{AGENT_BASE}}
COPY data /root/data
WORKDIR /root/results
"""

IMAGE_PACKAGES = """\
# Packages this task's reproduction (solution/) needs beyond the agent base's pinned stack.
USER 0
RUN uv pip install --python /opt/venv/bin/python --no-cache {packages}
USER 10001
"""


def dockerfile(slug: str, packages: list[str]) -> str:
    """The task's agent image: the base plus its data, plus the reproduction's extra packages if any."""
    text = DOCKERFILE.format(slug=slug, base=AGENT_BASE)
    if packages:
        text = text.replace("COPY data /root/data\n", "COPY data /root/data\n"
                            + IMAGE_PACKAGES.format(packages=" ".join(packages)))
    return text


TEST_SH = """\
#!/usr/bin/env bash
# Verifier of {slug}: scores /root/results with the Anchorage scorer (the verifier image's entry point).
#
# Where the task is: our sandbox and operator mount the whole task, so the task root is the parent of tests/.
# Harbor uploads only this tests/ directory (to /tests); then a minimal task root is made around it, since
# tests/ holds everything scoring needs (score_config.json, expected_result.json, invariants.yaml).
# ANCHORAGE_TASK_DIR, ANCHORAGE_RESULTS_DIR and ANCHORAGE_VERIFIER_LOGS override the three locations;
# ANCHORAGE_SCORING_PROFILE picks the scoring profile (default paper; see docs/design-notes.md).
set -euo pipefail

tests_dir="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
task_dir="${{ANCHORAGE_TASK_DIR:-$(dirname "$tests_dir")}}"
results_dir="${{ANCHORAGE_RESULTS_DIR:-/root/results}}"
logs_dir="${{ANCHORAGE_VERIFIER_LOGS:-/logs/verifier}}"
mkdir -p "$logs_dir"

if [ ! -f "$task_dir/task.toml" ]; then
  # Only tests/ is here (Harbor): give the scorer a minimal task root around it.
  task_dir="$(mktemp -d)/{slug}"
  mkdir -p "$task_dir"
  ln -s "$tests_dir" "$task_dir/tests"
  printf 'schema_version = "1.4"\nartifacts = ["/root/results/{slug}_result.json"]\n' > "$task_dir/task.toml"
  printf 'verifier-only task root of {slug}\n' > "$task_dir/instruction.md"
fi

anchorage score --task "$task_dir" "$results_dir" --reward-file "$logs_dir/reward.json" --json \\
  --profile "${{ANCHORAGE_SCORING_PROFILE:-paper}}" > "$logs_dir/score.json"
"""


def anchor_metadata(
    slug: str, overrides: dict[str, Any], prov: dict[str, tuple[str, str]], config: dict[str, Any]
) -> dict[str, str]:
    task = overrides["tasks"][slug]
    exp = prov.get(f"tasks/{slug}/tests/expected_result.json", ("?", ""))[0]
    src = config.get("oracle_source", {})
    meta = {
        "anchor": str(task["anchor"]),
        "anchor_provenance": (
            f"{UPSTREAM} tests/expected_result.json ({exp}); outstanding paper {src.get('paper_id', '?')}, "
            f"reproduction result {src.get('result_path', '?')}"
        ),
    }
    if task["anchor"] == "reproduced":
        meta["anchor_provenance"] = "solution/ of this task (our reproduction); reference anchor: " + meta["anchor_provenance"]
    if task.get("anchor_flag"):
        meta["anchor_flag"] = " ".join(str(task["anchor_flag"]).split())
    return meta


def solution_readme(slug: str, meta: dict[str, str]) -> str:
    return f"""# Oracle of {slug}

anchor: {meta['anchor']}

There is no runnable reproduction of this task's outstanding paper in Anchorage yet. The anchor is the
reference benchmark's committed expected result, imported unchanged (apart from the corrections listed in
the task README): `tests/expected_result.json`.

Provenance: {meta['anchor_provenance']}.

The machine-readable marker is `anchor = "{meta['anchor']}"` in `task.toml` `[metadata]`;
`anchorage oracle` reads it and says plainly that it replays the imported anchor instead of running a
reproduction.
"""


def task_readme(slug: str, config: dict[str, Any], meta: dict[str, str], notes: list[str], missing: list[tuple[str, str]],
                unavailable: list[str]) -> str:
    fq = config["final_question"]
    rows = []
    for m in config["metrics"]:
        status = ("excluded: " + m["exclude_reason"] if "exclude_reason" in m else "scored").replace("|", "\\|")
        rows.append(f"| `{m['path']}` | {m['oracle_value']} | {m.get('unit', '')} | {m.get('domain', '')} | "
                    f"`{m['direction']}` | `{m['normalization_mode']}` | {status} |")
    lines = [
        f"# {slug}",
        "",
        f"Final question ({fq['label']}): {fq['plain_question']}",
        "",
        f"Anchor: **{meta['anchor']}** — {meta['anchor_provenance']}.",
    ]
    if "anchor_flag" in meta:
        lines += ["", f"**Flagged:** {meta['anchor_flag']}"]
    lines += ["", "## Metric panel", "", "| path | anchor | unit | domain | direction | mode | status |",
              "|---|---:|---|---|---|---|---|", *rows, "", "## Changes from the reference", ""]
    lines += [f"- {n}" for n in notes] or ["- none"]
    lines += ["", "## Files the reference lacks (listed, not invented)", ""]
    listed = [f"- `{p}` — {r}" for p, r in missing if not p.startswith("environment/data/figures/")
              and not (p.startswith("environment/data/attachments/") and p.rsplit("/", 1)[-1] not in unavailable)]
    lines += listed or ["- none"]
    lines += ["", "Attachment mirrors present in the corpus were materialised as byte-identical copies of their "
              "originals; figures were regenerated from the official PDF (`environment/data/figures/FIGURES.md`)."
              if any(p.startswith("environment/data/figures/") for p, _ in missing) else
              "Attachment mirrors present in the corpus were materialised as byte-identical copies of their originals."]
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------------------------- per task


def check_instruction(slug: str, text: str) -> None:
    problems = []
    if not text.startswith("<!--") and "canary" not in text.splitlines()[0].lower():
        problems.append("no leading canary comment")
    if ARTIFACT_HEADING not in text or f"/root/results/{slug}_result.json" not in text:
        problems.append("no artifact block naming the artifact")
    if TIME_LINE not in text:
        problems.append("no time line")
    if problems:
        raise SystemExit(f"{slug}: instruction.md: {', '.join(problems)}")


def patch_anchor_file(data: Any, config: dict[str, Any], overrides: dict[str, Any], slug: str) -> Any:
    data = copy.deepcopy(data)
    for metric in config["metrics"]:
        over = metric_override(overrides, slug, metric["path"])
        if "oracle_value" in over:
            set_path(data, metric["path"], over["oracle_value"])
    return data


def patch_numeric_checks(checks: list[dict[str, Any]], anchors: Any) -> tuple[list[dict[str, Any]], int, list[str]]:
    """Point every numeric check at the value of the committed expected result (the anchor) at its path.

    Checks whose path the anchor does not have (a reproduction that structures its artifact differently
    from the reference's) are dropped and returned by path, so the task README can list them.
    """
    kept: list[dict[str, Any]] = []
    changed = 0
    dropped: list[str] = []
    for check in copy.deepcopy(checks):
        try:
            value = get_path(anchors, check["path"])
        except (KeyError, IndexError, TypeError):
            dropped.append(check["path"])
            continue
        if isinstance(value, int | float) and not isinstance(value, bool) and value != check["expected"]:
            check["expected"] = value
            changed += 1
        kept.append(check)
    return kept, changed, dropped


def fmt_number(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def table_rows(config: dict[str, Any]) -> list[str]:
    rows = []
    for i, m in enumerate(config["metrics"], 1):
        excluded = not is_included(m)
        rows.append(
            f"| {i} | `{m['path']}` | {fmt_number(m.get('baseline_value'))} | {fmt_number(m['oracle_value'])} | "
            f"`{m.get('semantic_direction', m['direction'])}` | `{m['normalization_mode']}` | "
            f"{'`' + m['normalization_direction'] + '`' if m.get('normalization_direction') else ''} | "
            f"{'no (excluded)' if excluded else 'yes'} | {0 if excluded else fmt_number(m.get('weight', 1.0))} | "
            f"{'`' + m['baseline_source_path'] + '`' if m.get('baseline_source_path') else ''} |"
        )
    return rows


def scoring_table(ref_text: str, config: dict[str, Any], notes: list[str]) -> str:
    """The reference table with the final answer and the metric rows re-rendered from our configuration."""
    summary = config["final_question"]["final_answer_summary"]
    text = re.sub(r"^- Final answer: .*$", lambda _: f"- Final answer: {summary}", ref_text, count=1, flags=re.M)
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("| 1 |"))
    last = max(i for i, line in enumerate(lines) if re.match(r"^\| \d+ \|", line))
    text = "\n".join([*lines[:first], *table_rows(config), *lines[last + 1 :]])
    extra = ["", "## Anchorage changes", ""]
    extra += [f"- {n}" for n in notes] or ["- none"]
    extra += ["", f"Included metrics: {config['effective_metric_count']} of {config['metric_count']} declared."]
    return text.rstrip("\n") + "\n" + "\n".join(extra) + "\n"


def import_task(reference: Path, dest_root: Path, slug: str, overrides: dict[str, Any],
                prov: dict[str, tuple[str, str]], refresh_anchors: bool) -> TaskReport:
    src = reference / "tasks" / slug
    dst = dest_root / slug
    task_over = overrides["tasks"][slug]
    report = TaskReport(slug, task_over["anchor"])

    instruction = (src / "instruction.md").read_text(encoding="utf-8")
    check_instruction(slug, instruction)
    write_text(dst / "instruction.md", instruction)

    # environment/data: byte-identical copies, then the flat attachment mirror and the pinned schema
    data_src, data_dst = src / "environment" / "data", dst / "environment" / "data"
    for path in sorted(p for p in data_src.rglob("*") if p.is_file()):
        if path.name != "output_schema.json" or path.parent != data_src:
            copy_file(path, data_dst / path.relative_to(data_src))
    manifest = read_json(data_src / "source_manifest.json")
    _, unavailable = materialise_attachments(data_dst, manifest)
    write_text(dst / "environment" / "Dockerfile", dockerfile(slug, task_over.get("image_packages", [])))

    # tests: anchors first (a reproduced task's committed expected result wins), then the configuration
    tests_src, tests_dst = src / "tests", dst / "tests"
    ref_config = read_json(tests_src / "score_config.json")
    committed = tests_dst / "expected_result.json"
    keep_committed = task_over["anchor"] == "reproduced" and committed.is_file() and not refresh_anchors
    anchors = read_json(committed) if keep_committed else None
    config, notes = build_score_config(slug, ref_config, overrides, anchors)
    if not keep_committed:
        anchors = patch_anchor_file(read_json(tests_src / "expected_result.json"), config, overrides, slug)
        write_json(committed, anchors)
    if task_over["anchor"] == "reproduced" and anchors == read_json(tests_src / "expected_result.json"):
        notes.append("tests/expected_result.json is the published anchor; the reproduction in solution/ is compared "
                     "with it in solution/comparison.json")
    elif keep_committed:
        notes.append("tests/expected_result.json is the reproduction's committed result (kept)")
    if (tests_src / "numeric_checks.json").is_file():
        checks, changed, dropped = patch_numeric_checks(read_json(tests_src / "numeric_checks.json"), anchors)
        write_json(tests_dst / "numeric_checks.json", checks)
        if changed:
            notes.append(f"numeric_checks.json: {changed} expected value(s) set to the anchor's")
        if dropped:
            notes.append(f"numeric_checks.json: {len(dropped)} check(s) dropped, not in the reproduction's artifact: "
                         + ", ".join(f"`{p}`" for p in dropped))
    write_json(tests_dst / "score_config.json", config)
    copy_file(tests_src / "string_checks.json", tests_dst / "string_checks.json")
    ref_table = (tests_src / "scoring_table.md").read_text(encoding="utf-8")
    write_text(tests_dst / "scoring_table.md", scoring_table(ref_table, config, notes))
    write_text(tests_dst / "test.sh", TEST_SH.format(slug=slug), executable=True)
    template = retype_schema(read_json(data_src / "output_schema.json"), task_over.get("schema_types", {}))
    if task_over.get("schema_types"):
        notes.append(f"output_schema.json: field types corrected: {task_over['schema_types']}")
    write_json(data_dst / "output_schema.json", pin_schema(template, config["metrics"]))

    meta = anchor_metadata(slug, overrides, prov, config)
    summary = config["final_question"]["final_answer_summary"] if "final_answer_summary" in task_over or \
        "final_answer_summary_template" in task_over else None
    write_text(dst / "task.toml", build_task_toml((src / "task.toml").read_text(encoding="utf-8"), slug, meta, summary))
    if meta["anchor"] == "imported":
        write_text(dst / "solution" / "README.md", solution_readme(slug, meta))
    elif meta["anchor"] == "reproduced" and not (dst / "solution" / "README.md").exists():
        write_text(dst / "solution" / "README.md", f"# Oracle of {slug}\n\nanchor: reproduced\n\n"
                   "The reproduction (`solve.sh` and its script) lives in this directory.\n")
    write_text(dst / "README.md", task_readme(slug, config, meta, notes, missing_files(reference, slug), unavailable))
    report.notes = notes
    return report


TABLE_BEGIN = "<!-- task-table:begin (generated by tools/import_reference.py) -->"
TABLE_END = "<!-- task-table:end -->"


def gate_summary(task_dir: Path) -> str:
    """Count the gates of tests/invariants.yaml (written by the invariants owner), or say they are pending."""
    path = task_dir / "tests" / "invariants.yaml"
    if not path.is_file():
        return "pending"
    spec = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    forms = len(spec.get("invariants", []) or [])
    replays = len(spec.get("replay", []) or [])
    return f"{forms} + {replays} replay" if replays else str(forms)


def short_name(path: str) -> str:
    """The informative tail of a metric path (``a.b.eerie_group.actual`` -> ``eerie_group``)."""
    parts = path.split(".")
    if parts[-1] == "actual" and len(parts) > 1:
        return parts[-2]
    return ".".join(parts[-2:]) if len(parts) > 1 and "[" in parts[-2] else parts[-1]


def task_row(task_dir: Path, overrides: dict[str, Any]) -> str:
    config = read_json(task_dir / "tests" / "score_config.json")
    meta = tomllib.loads((task_dir / "task.toml").read_text(encoding="utf-8"))["metadata"]
    slug = task_dir.name
    declared = len(config["metrics"])
    included = sum(is_included(m) for m in config["metrics"])
    excluded = ", ".join(f"`{short_name(m['path'])}`" for m in config["metrics"] if not is_included(m)) or "—"
    caveats = [c for c in (overrides.get("caveats", {}).get(slug), meta.get("anchor_flag")) if c]
    question = f"{config['final_question']['label']}: {config['final_question']['plain_question']}"
    cells = [f"`{slug}`", question.replace("|", "/"), f"{declared} / {included}", excluded, str(meta["anchor"]),
             gate_summary(task_dir), "; ".join(caveats).replace("|", "/") or "—"]
    return "| " + " | ".join(cells) + " |"


def refresh_readme_table(dest: Path, overrides: dict[str, Any]) -> None:
    """Rewrite the table between the markers of tasks/README.md from the task directories."""
    readme = dest / "README.md"
    if not readme.is_file():
        return
    text = readme.read_text(encoding="utf-8")
    if TABLE_BEGIN not in text or TABLE_END not in text:
        raise SystemExit(f"{readme}: the task-table markers are missing")
    tasks = sorted(p for p in dest.iterdir() if (p / "task.toml").is_file() and (p / "tests" / "score_config.json").is_file())
    rows = ["| task | final question | metrics declared / in panel | excluded | anchor | gates | known caveats |",
            "|---|---|---:|---|---|---|---|", *(task_row(p, overrides) for p in tasks)]
    reference = [read_json(p / "tests" / "score_config.json")["metrics"] for p in tasks if p.name in overrides["tasks"]]
    declared = sum(len(m) for m in reference)
    included = sum(is_included(x) for m in reference for x in m)
    rows += ["", f"Total over the {len(reference)} reference tasks: **{declared} declared / {included} in panels**."]
    head, rest = text.split(TABLE_BEGIN, 1)
    tail = rest.split(TABLE_END, 1)[1]
    readme.write_text(head + TABLE_BEGIN + "\n" + "\n".join(rows) + "\n" + TABLE_END + tail, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reference", nargs="?", type=Path, default=DEFAULT_REFERENCE,
                        help="the reference data pack (holds tasks/ and PROVENANCE.md); default ../shared/reference")
    parser.add_argument("--dest", type=Path, default=REPO / "tasks", help="where the task directories go (default: tasks/)")
    parser.add_argument("--only", action="append", default=[], help="import only this slug (repeatable)")
    parser.add_argument("--refresh-anchors", action="store_true",
                        help="overwrite the committed expected_result.json of reproduced tasks with the reference's")
    args = parser.parse_args(argv)
    reference: Path = args.reference.resolve()
    if not (reference / "tasks").is_dir() or not (reference / "PROVENANCE.md").is_file():
        print(f"error: {reference} is not the reference data pack (needs tasks/ and PROVENANCE.md); "
              "pass its path as the first argument", file=sys.stderr)
        return 2
    overrides = yaml.safe_load(OVERRIDES.read_text(encoding="utf-8"))
    prov = provenance_rows(reference)
    slugs = sorted(p.name for p in (reference / "tasks").iterdir() if p.is_dir())
    unknown = set(slugs) ^ set(overrides["tasks"])
    if unknown:
        print(f"error: task_overrides.yaml and the reference disagree on: {sorted(unknown)}", file=sys.stderr)
        return 2
    for slug in args.only or slugs:
        report = import_task(reference, args.dest, slug, overrides, prov, args.refresh_anchors)
        print(f"{report.slug}: anchor {report.anchor}; {len(report.notes)} change(s)")
    copy_file(reference / "LICENSE", args.dest / "LICENSE")   # Apache-2.0 §4(a): recipients get a copy
    refresh_readme_table(args.dest, overrides)
    return 0


if __name__ == "__main__":
    sys.exit(main())
