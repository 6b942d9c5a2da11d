"""``anchorage audit lean|judge``: the audits of formal artifacts, in one group (seed 001, SPEC §7, §5 H.3).

Registered by :mod:`anchorage.cli`. ``lean PROJECT`` runs the mechanical gates of a Lean project
(:func:`anchorage.verify.lean_audit.audit_project`): exit 0 every gate passed or was skipped (the output
says why), 1 a gate failed, 2 bad input; ``lean --task T --artifact A -o OUT`` the trust audit of an artifact's
generated obligations (formerly ``lean audit``, still accepted). ``judge`` runs the judge-based semantic audit through the
gateway (:func:`anchorage.verify.semantic_audit.judge_pairs`): exit 1 when a judged declaration is not
faithful or duplicates another.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from anchorage.commands import task_option

audit_app = typer.Typer(help="Audits of formal artifacts.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")


@audit_app.command("lean")
def lean(
    project: Path | None = typer.Argument(None, help="The Lean project folder (holding lakefile.lean). Or, with "
                                          "--task and --artifact, none: the artifact's obligations are audited."),
    task: str | None = task_option(required=False),
    artifact: Path | None = typer.Option(None, "--artifact", help="With --task: the artifact JSON whose generated "
                                         "obligations are audited (sources grepped, #print axioms where Lean is)."),
    out: Path | None = typer.Option(None, "-o", "--out", help="With --task: folder of the Lake package to (re)generate."),
    library: Path | None = typer.Option(None, "--library", help="With --task: the Feasibility Lake project."),
    base: str | None = typer.Option(None, "--base", help="Git revision to compare with: the total sorry count may "
                                    "not rise against it."),
    allow_axiom: list[str] = typer.Option([], "--allow-axiom", help="An axiom name accepted (repeatable)."),
    max_sorry: int | None = typer.Option(None, "--max-sorry", help="Also fail when the total sorry count exceeds N."),
    require_lean: bool = typer.Option(False, "--require-lean", help="Fail (instead of skipping) the build and axiom "
                                      "gates when lake is not on PATH."),
    no_lean: bool = typer.Option(False, "--no-lean", help="Do not run Lean even where lake is installed."),
    as_json: bool = typer.Option(False, "--json", help="Print the audit record as JSON."),
) -> None:
    """Audit Lean: a project (sorry count per declaration and in total, axioms, and the gates: sorry not rising,
    build, axioms), or with --task/--artifact an artifact's generated obligations (the trust audit)."""
    from anchorage.errors import InputError
    from anchorage.verify.lean_audit import audit_project

    if task is not None or artifact is not None:
        if task is None or artifact is None or out is None or project is not None:
            raise InputError("an artifact's obligations are audited with --task, --artifact and -o together "
                             "(and no PROJECT)", hint="anchorage audit lean --task T --artifact A.json -o build/")
        from anchorage.commands.lean import audit_obligations

        audit_obligations(task, artifact, out, library, as_json)
        return
    if project is None:
        raise InputError("anchorage audit lean needs a PROJECT folder, or --task with --artifact",
                         hint="anchorage audit lean lean/ --base HEAD~1")
    record = audit_project(project, base=base, allow_axioms=frozenset(allow_axiom), max_sorry=max_sorry,
                           require_lean=require_lean, use_lean=not no_lean)
    if as_json:
        typer.echo(json.dumps(record, indent=2))
    else:
        _print(record)
    raise typer.Exit(0 if record["ok"] else 1)


def _print(record: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    decls = Table(title=f"declarations with findings · {record['sorry_total']} sorry in total")
    for column in ("declaration", "file:line", "finding"):
        decls.add_column(column)
    for f in record["findings"]:
        what = "axiom declaration" if f["kind"] == "axiom" else f"{f['count']} sorry"
        if f.get("rise"):
            what += f" (+{f['rise']} vs base)"
        decls.add_row(f.get("declaration") or "(top level)", f"{f['file']}:{f.get('line', '')}", what)
    console.print(decls)
    gates = Table(title="gates")
    for column in ("gate", "status", "detail"):
        gates.add_column(column)
    for g in record["gates"]:
        style = {"pass": "green", "fail": "red", "skipped": "yellow"}[g["status"]]
        gates.add_row(g["name"], f"[{style}]{g['status']}[/{style}]", g["detail"])
    console.print(gates)


@audit_app.command("judge")
def judge(
    project: Path = typer.Argument(..., help="The Lean project folder."),
    pairs: Path = typer.Option(..., "--pairs", help='JSON [{"declaration": "Ns.name", "statement": "the source '
                               'text"}] pairing each declaration with its natural-language statement.'),
    model: str = typer.Option("mock-model", "--model", help="Judge model id sent through the gateway."),
    base_url: str | None = typer.Option(None, "--base-url", help="Gateway URL (default $ANCHORAGE_GATEWAY_URL; "
                                        "token $ANCHORAGE_GATEWAY_TOKEN)."),
    mock: bool = typer.Option(False, "--mock", help="In-process gateway in front of the labelled mock model."),
    mock_replies: Path | None = typer.Option(None, "--mock-replies", help="YAML of the mock's scripted replies; "
                                             "implies --mock."),
    out: Path | None = typer.Option(None, "-o", "--out", help="Write the record (JSON) here."),
    as_json: bool = typer.Option(False, "--json", help="Print the record as JSON (else a summary per declaration)."),
) -> None:
    """Semantic audit: faithfulness, library reuse and cross-file reuse per declaration (LLM judge)."""
    from anchorage.commands.verify import model_client
    from anchorage.errors import InputError
    from anchorage.verify.semantic_audit import judge_pairs

    try:
        rows = json.loads(pairs.read_text(encoding="utf-8"))
        if not isinstance(rows, list) or not all(isinstance(r, dict) and "declaration" in r and "statement" in r
                                                 for r in rows):
            raise ValueError("expected a list of {declaration, statement}")
    except (OSError, ValueError) as exc:
        raise InputError(f"--pairs {pairs}: {exc}", hint='[{"declaration": "Ns.name", "statement": "..."}]') from exc
    with model_client(base_url, mock, mock_replies) as client:
        record = judge_pairs(project, rows, client, model=model)
    text = json.dumps(record, indent=2, ensure_ascii=False)
    if out is not None:
        out.write_text(text + "\n", encoding="utf-8")
    if as_json:
        typer.echo(text)
    else:
        for item in record.get("judgements") or []:
            typer.echo(f"{item.get('declaration')}: faithful {item.get('faithful')}"
                       + (f", reinvents {item['reinvents']}" if item.get("reinvents") else ""))
        typer.echo(f"audit {'passed' if record['ok'] else 'FAILED'}" + (f" (record: {out})" if out else ""))
    raise typer.Exit(0 if record["ok"] else 1)
