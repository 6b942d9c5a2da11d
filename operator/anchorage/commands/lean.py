"""``anchorage lean gen|check|discriminate``: the Lean obligation layer on the command line.

The trust audit of an artifact's obligations is ``anchorage audit lean --task T --artifact A -o OUT`` (one
audit group; ``lean audit`` is kept, hidden, for old scripts).

Registered by :mod:`anchorage.cli`. The exact Python checker always runs; Lean (``lake``) runs only
where it is on PATH, and every command says which checker ran. Exit codes: 0 all good, 1 a verdict
failed (an obligation false, an audit violation, a mutation not rejected), 2 bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from anchorage.commands import task_option

lean_app = typer.Typer(help="Lean obligations: generate, check, discriminate (SPEC §5); audits: anchorage audit lean.",
                       no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(lean_app, name="lean")


def _task_root(task: str) -> Path:
    from anchorage.tasks import resolve_task

    return Path(resolve_task(task))




@lean_app.command("gen")
def gen(
    artifact: Path = typer.Argument(..., help="The artifact JSON (decimals are read exactly from its text)."),
    task: str = task_option(),
    out: Path = typer.Option(..., "-o", "--out", help="Directory of the Lake package to write."),
    library: Path | None = typer.Option(None, "--library", help="The Feasibility Lake project (default: lean/ "
                                        "of this repository or $ANCHORAGE_LEAN_LIBRARY)."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Write a Lake package with one `by decide` theorem per checkable field of ARTIFACT."""
    from anchorage.invariants.exact import load_exact
    from anchorage.lean.generation import generate_package

    root = _task_root(task)
    package = generate_package(root, load_exact(artifact), out, artifact_label=artifact.name, library=library)
    if as_json:
        typer.echo(json.dumps({"module": str(package.module_path), "theorems": len(package.theorems),
                               "skipped": [{"name": f"{package.namespace}.{ob.name}", "reason": ob.reason}
                                           for ob in package.skipped],
                               "obligations": str(out / "obligations.json")}, indent=2))
        return
    typer.echo(f"wrote {package.module_path} ({len(package.theorems)} theorems, "
               f"{len(package.skipped)} skipped as missing evidence) and {out / 'obligations.json'}")
    for ob in package.skipped:
        typer.echo(f"  skipped {package.namespace}.{ob.name}: {ob.reason}")


@lean_app.command("check")
def check(
    artifacts: list[Path] = typer.Argument(..., help="One or more artifact JSON files."),
    task: str = task_option(),
    report_dir: Path | None = typer.Option(None, "--report-dir", help="Write <artifact>.lean-check.json here "
                                           "(default: beside each artifact)."),
    no_lean: bool = typer.Option(False, "--no-lean", help="Run only the exact Python checker."),
    keep: Path | None = typer.Option(None, "--keep", help="Keep each generated Lake package in KEEP/<artifact> "
                                     "(default: a temporary directory; only used when lake runs)."),
    as_json: bool = typer.Option(False, "--json", help="Print the reports as JSON instead of a summary."),
) -> None:
    """Check every obligation exactly in Python, and with `lake build` where Lean is installed.

    Exit 1 when an obligation is false (hard or warning) or the two checkers disagree.
    """
    from anchorage.invariants.exact import load_exact
    from anchorage.lean.obligations import check_artifact

    root = _task_root(task)
    reports: list[dict[str, Any]] = []
    for artifact in artifacts:
        out = keep / artifact.stem if keep is not None else None
        report = check_artifact(root, load_exact(artifact), out=out, lean=not no_lean, artifact_label=str(artifact))
        target = (report_dir or artifact.parent) / f"{artifact.stem}.lean-check.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        reports.append(report)
        if not as_json:
            _print_check(report, target)
    if as_json:
        typer.echo(json.dumps(reports, indent=2, ensure_ascii=False))
    if any(r["counts"]["failed"] or r["counts"].get("disagreements") for r in reports):
        raise typer.Exit(1)


def _print_check(report: dict[str, Any], target: Path) -> None:
    c = report["counts"]
    typer.echo(f"{report['artifact']}: checker={report['checker']} total={c['total']} "
               f"proved_by_python={c['proved_by_python']} failed={c['failed']} missing={c['missing']}"
               + (f" proved_by_lean={c['proved_by_lean']}" if "proved_by_lean" in c else ""))
    if not report["lean"]["ran"]:
        typer.echo(f"  {report['lean']['reason']}")
    for row in report["obligations"]:
        if row["python"] == "failed" or row.get("lean") == "failed":
            typer.echo(f"  FAILED {row['theorem']} [{', '.join(row['paths'])}]: {row['claim']}")
    for error in report["lean"]["errors"]:
        typer.echo(f"  lean error line {error['line']} {error['theorem'] or ''} {error['paths']}: {error['message']}")
    typer.echo(f"  report: {target}")


@lean_app.command("audit", hidden=True)
def audit(
    artifact: Path = typer.Argument(..., help="The artifact JSON whose obligations are audited."),
    task: str = task_option(),
    out: Path = typer.Option(..., "-o", "--out", help="Directory of the Lake package to (re)generate and audit."),
    library: Path | None = typer.Option(None, "--library", help="The Feasibility Lake project."),
    as_json: bool = typer.Option(False, "--json", help="Print the audit report as JSON."),
) -> None:
    """The same as `anchorage audit lean --task TASK --artifact ARTIFACT -o OUT` (kept for old scripts)."""
    audit_obligations(task, artifact, out, library, as_json)


def audit_obligations(task: str, artifact: Path, out: Path, library: Path | None, as_json: bool) -> None:
    """Trust audit of an artifact's obligations: grep the generated sources for sorry/native_decide/axiom and
    `#print axioms` every theorem (Lean). Exit 1 when the audit fails."""
    from anchorage.invariants.exact import load_exact
    from anchorage.lean.audit import audit_package
    from anchorage.lean.generation import default_library, generate_package

    lib = (library or default_library()).resolve()
    package = generate_package(_task_root(task), load_exact(artifact), out, artifact_label=artifact.name, library=lib)
    report = audit_package(package, lib)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        typer.echo(f"audit of {out}: checker={'source grep + #print axioms' if report.lean_ran else 'source grep'} "
                   f"→ {'OK' if report.ok else 'FAILED'}")
        if report.reason:
            typer.echo(f"  {report.reason}")
        for finding in report.source_findings:
            typer.echo(f"  forbidden `{finding.token}` at {finding.file}:{finding.line}: {finding.text}")
        for name, bad in report.violations.items():
            typer.echo(f"  {name}: {', '.join(bad)}")
        if report.lean_ran:
            typer.echo(f"  axioms printed for {len(report.axioms)} declarations; allowed: propext, Quot.sound")
    if not report.ok:
        raise typer.Exit(1)


@lean_app.command("discriminate")
def discriminate(
    tasks_dir: Path = typer.Option(Path("tasks"), "--tasks-dir", help="Where the 18 benchmark tasks are."),
    reference: Path | None = typer.Option(None, "--reference", help="Reference tasks folder used for an anchor "
                                          "a task lacks (e.g. ../shared/reference/tasks)."),
    no_lean: bool = typer.Option(False, "--no-lean", help="Run only the exact Python checker."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
) -> None:
    """The ten one-leaf mutations of SPEC §5: each must be rejected citing its field."""
    from anchorage.lean.discrimination import run_suite

    results = run_suite(tasks_dir, reference, lean=not no_lean)
    if as_json:
        typer.echo(json.dumps([r.to_dict() for r in results], indent=2, ensure_ascii=False))
    else:
        _print_table(results)
    if not all(r.rejected for r in results):
        raise typer.Exit(1)


def _print_table(results: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console() if Console().is_terminal else Console(width=220)
    lean_ran = any(r.lean_ran for r in results)
    table = Table(title=f"Discrimination suite — checker: {'python+lean' if lean_ran else 'python (lake not on PATH)'}")
    for column in ("#", "mutation", "task", "field", "anchor → mutant", "rejected by (python)", "lean", "verdict"):
        table.add_column(column)
    for index, r in enumerate(results, start=1):
        m = r.mutation
        lean = ", ".join(r.lean_rejected_by) if r.lean_ran else "not run"
        table.add_row(str(index), m.label, m.task, m.path, f"{r.original} → {m.value}",
                      ", ".join(r.python_rejected_by) or "—", lean, "REJECTED" if r.rejected else "NOT REJECTED")
    console.print(table)
    passed = sum(r.rejected for r in results)
    console.print(f"{passed}/{len(results)} mutations rejected")
