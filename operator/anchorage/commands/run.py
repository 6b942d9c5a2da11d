"""``anchorage run FILE.yaml``: run Trials and VerificationCampaigns on this machine (the local engine).

Registered by :mod:`anchorage.cli`. Validates every document first (one message per problem, with
file:line and the fix), starts the model gateway when an agent needs one, runs each campaign in the
sandbox with progress (or the subset ``--task/--entry/--limit/--retry-infra`` selects), prints the
leaderboard (``--json``: a summary per document) and writes the run folder's outputs. Exit code from the
selected trials' phases (:func:`anchorage.commands.phases_exit_code`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from anchorage.commands import JSON_HELP, phases_exit_code, print_json

if TYPE_CHECKING:  # the CLI imports what a command runs only when it runs
    from anchorage.trials import TrialRecord

UNSANDBOXED_WARNING = (
    "WARNING: --unsandboxed: agents run as plain processes on this host with full network and file access. "
    "Use only for agents you trust completely."
)


def register(app: typer.Typer) -> None:
    app.command("run")(run)


def run(
    file: Path = typer.Argument(..., help="A Trial or VerificationCampaign manifest (multi-document YAML allowed)."),
    runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", help="Where run folders are kept (the run's state)."),
    store: str | None = typer.Option(
        None, "--store", help="Also publish every finished trial, and the campaign's files, to this artifact store "
        "(s3://bucket/prefix or file:///path; credentials and endpoint from the AWS_* environment). Trials the store "
        "already records are not run again."),
    task: list[str] = typer.Option([], "--task", "-t", help="Run only this task's trials (repeatable; the campaign's "
                                   "task names). Other trials are kept, not run."),
    entry: list[str] = typer.Option([], "--entry", "-e", help="Run only this entry's trials (repeatable)."),
    limit: int | None = typer.Option(None, "--limit", min=0, help="Start at most N trials in this run (resume later)."),
    retry_infra: bool = typer.Option(False, "--retry-infra", help="Run again the trials that ended "
                                     "InfrastructureFailed (their earlier attempts are kept); a model's own failure "
                                     "is never rerun."),
    metrics_port: int | None = typer.Option(None, "--metrics-port", help="Serve Prometheus metrics on this port."),
    gateway_config: Path | None = typer.Option(
        None, "--gateway-config", exists=True, dir_okay=False, readable=True,
        help="Gateway upstreams for real models (models named mock* use the mock)."),
    unsandboxed: bool = typer.Option(
        False, "--unsandboxed", help="DANGEROUS: run agents without any sandbox (no isolation, no limits but time)."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Skip the plots (faster)."),
    mock_replies: Path | None = typer.Option(
        None, "--mock-replies", exists=True, dir_okay=False,
        help="Scripted replies of the mock model (YAML: replies[{marker, reply}]), e.g. for "
        "verification.panel demos; every reply stays labelled a mock."),
    scripted_model: bool = typer.Option(
        False, "--scripted-model", help="Serve every model with the scripted MOCK model (offline, labelled): it plays "
        "each task's reproduction as tool calls the agent CLI really runs (see --scripts)."),
    scripts: Path | None = typer.Option(
        None, "--scripts", help="Folder of scripted-model scripts (<task>.yaml); implies --scripted-model. Tasks "
        "without one get the default script: their solution/ played through the shell tool."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Run every trial of FILE in the local sandbox, score it, and print the leaderboard.

    Re-running the same command resumes: finished trials (trial.json with a terminal phase) are kept. A
    finished campaign grows under its name when the manifest adds seeds, entries or tasks. Exit code: 0 every
    trial scored, 1 a trial Failed (the model's failure), 3 a trial failed for the platform, 2 bad input.
    """
    from anchorage.campaigns.documents import check_tasks, load_documents
    from anchorage.errors import InputError
    from anchorage.manifests import Trial, VerificationCampaign
    from anchorage.runtime.local import sandbox
    from anchorage.runtime.local.engine import Selection
    from anchorage.tasks import resolve_task

    documents = load_documents(file)
    for document in documents:
        check_tasks(document, resolve_task)
    runnable = [d for d in documents if isinstance(d.resource, Trial | VerificationCampaign)]
    if not runnable:
        raise InputError(f"{file} holds no Trial or VerificationCampaign, so there is nothing to run",
                         hint="a ScoringRun is scored with 'anchorage score' (or by the operator)")
    selection = Selection(tuple(task), tuple(entry), limit, retry_infra)
    artifact_store = _open_store(store) if store is not None else None
    if (task or entry or limit is not None or retry_infra) and not any(
            isinstance(d.resource, VerificationCampaign) for d in runnable):
        raise InputError("--task, --entry, --limit and --retry-infra select trials of a campaign; the file holds "
                         "only Trials", hint="drop them (a lone Trial runs as it is)")
    if unsandboxed:
        typer.secho(UNSANDBOXED_WARNING, fg="red", bold=True, err=True)
    mechanism = sandbox.detect_mechanism(unsandboxed=unsandboxed)
    if metrics_port is not None:
        _serve_metrics(metrics_port)
    book = _script_book(runnable, scripts) if scripted_model or scripts is not None else None
    if book is not None and gateway_config is not None:
        raise InputError("--scripted-model serves every model, so --gateway-config would never be used",
                         hint="drop one of them: the scripted mock model for offline runs, the gateway config for "
                         "real providers")
    if book is not None:
        typer.secho("models are served by the scripted MOCK model (offline): scores and costs are not a real "
                    "model's", fg="yellow", err=True)
    if gateway_config is not None:
        _check_gateway_config(gateway_config, [d.resource for d in runnable])
    gateway = _gateway_if_needed([d.resource for d in runnable], gateway_config, mock_replies, book)
    results: list[dict[str, Any]] = []
    try:
        for document in runnable:
            results.append(_run_document(document.resource, runs_dir, mechanism, gateway, file.parent, not no_plots,
                                         metrics_port is not None, selection, as_json, artifact_store))
    finally:
        if gateway is not None:
            gateway.stop()
    code = phases_exit_code(phase for result in results for phase in result["phases"])
    if any(result.get("unpublished") for result in results):
        code = max(code, 3)  # finished but not in the store: the platform's failure (a rerun publishes them)
    if as_json:
        print_json({"exit_code": code, "results": [{k: v for k, v in r.items() if k != "phases"} for r in results]})
    raise typer.Exit(code)


def _open_store(uri: str) -> Any:
    """The ``--store``, checked before anything runs (a bad URI or an unreachable bucket is an error now)."""
    from anchorage.store import open_store

    artifact_store = open_store(uri)
    artifact_store.list("-")  # one request: credentials, endpoint and bucket answer before any trial runs
    return artifact_store


def _check_gateway_config(path: Path, resources: list[Any]) -> None:
    """A gateway config is read even when no agent needs a model (a bad file is an error, never ignored)."""
    from anchorage.gateway.gatewayconfig import GatewayConfig

    GatewayConfig.load(path)
    if not any(_calls_models(r) for r in resources):
        typer.secho(f"note: --gateway-config {path}: no agent or protocol of this file calls a model, so no gateway "
                    "is started", fg="yellow", err=True)


def _serve_metrics(port: int) -> None:
    from anchorage import metrics

    server = metrics.serve(port)
    typer.echo(f"metrics on http://127.0.0.1:{server.port}/metrics", err=True)


class _Published:
    """What the engine has published so far: trial counts by (entry, phase)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}


def _publish(campaign: str, kind: str, item: Any, record: TrialRecord | None, state: _Published) -> None:
    """Feed one engine event to the Prometheus collectors (bounded labels: no trial names).

    Scores are published as trials finish (the mean over the seeds scored so far, under the profile that
    scored them: :data:`anchorage.metrics.SEED_MEANS`), so a dashboard shows them during the run; a trial
    reused from an earlier run counts like one that ran now; the final board's values replace them at the end
    (:func:`anchorage.metrics.board_scores`). Gates and obligations are counted where the engine scores
    (``runtime.local.trials``).
    """
    from anchorage import metrics

    def bump(phase: str, by: int) -> None:
        state.counts[(item.entry, phase)] = state.counts.get((item.entry, phase), 0) + by

    if kind == "started":
        bump("Running", 1)
    elif record is not None:
        if kind == "finished":
            bump("Running", -1)
            metrics.trial_finished(campaign, item.entry, item.task, str(record.phase), str(record.reason),
                                   record.durations.total_sec)
        bump(str(record.phase), 1)
        _publish_score(campaign, item, record)
    metrics.set_trial_counts(campaign, state.counts)


def _publish_score(campaign: str, item: Any, record: TrialRecord) -> None:
    from anchorage import metrics

    score = record.score
    if score is None or score.o_eval is None:
        return  # unscored (infrastructure failure): nothing to show, never a zero
    metrics.SEED_MEANS.add(campaign, item.entry, item.task, record.scoring_profile, item.name, score.o_eval,
                           score.bo_eval)


def _calls_models(resource: Any) -> bool:
    """Whether a Trial's or a campaign's agents (their kinds' answer) or its verification protocols call models."""
    from anchorage.manifests import Trial
    from anchorage.trials.agents import needs_gateway

    agents = [resource.spec.agent] if isinstance(resource, Trial) else [e.agent for e in resource.spec.entries]
    if resource.spec.verification.panel is not None or resource.spec.verification.cbu is not None:  # protocol calls
        return True
    return any(needs_gateway(a) for a in agents)


def _gateway_if_needed(resources: list[Any], config: Path | None, mock_replies: Path | None = None,
                       scripts: Any = None) -> Any:
    if not any(_calls_models(r) for r in resources):
        return None
    from anchorage.runtime.local.gatewaystart import start_local_gateway

    return start_local_gateway(config, mock_replies=mock_replies, scripts=scripts)


def _script_book(documents: list[Any], scripts: Path | None) -> Any:
    """The scripted model's scripts for the tasks of ``documents`` (files in ``scripts`` win)."""
    from anchorage.gateway.scripts import ScriptBook
    from anchorage.manifests import Trial
    from anchorage.runtime.local.engine import resolve_tasks
    from anchorage.tasks import load_task, resolve_task

    tasks: dict[str, Path] = {}
    for document in documents:
        resource = document.resource
        found = [load_task(resolve_task(resource.spec.task))] if isinstance(resource, Trial) \
            else resolve_tasks(resource.spec)
        tasks.update({task.slug: task.root for task in found})
    return ScriptBook(tasks, scripts)


def _run_document(
    resource: Any, runs_dir: Path, mechanism: Any, gateway: Any, base_dir: Path, plots: bool, publish: bool,
    selection: Any, as_json: bool, store: Any = None,
) -> dict[str, Any]:
    from anchorage.manifests import Trial
    from anchorage.runtime.local.trials import LocalRuntime

    runtime = LocalRuntime(mechanism=mechanism, base_dir=base_dir.resolve(),
                           gateway=gateway.gateway if gateway is not None else None)
    if isinstance(resource, Trial):
        return _run_trial(resource, runs_dir, runtime, as_json, store)
    return _run_campaign(resource, runs_dir, runtime, plots, publish, selection, as_json, store)


def _run_trial(trial: Any, runs_dir: Path, runtime: Any, as_json: bool, store: Any = None) -> dict[str, Any]:
    from anchorage.runtime.local.engine import run_single_trial

    record = run_single_trial(trial, runs_dir, runtime, store=store)
    folder = runs_dir / trial.metadata.name
    if not as_json:
        _print_trial(record, folder)
    return {"kind": "Trial", "name": record.name, "folder": str(folder), "phase": record.phase,
            "reason": record.reason, "message": record.message,
            "score": record.score.model_dump(mode="json") if record.score else None,
            "cost_usd": record.cost_usd, "cost_unknown_reason": record.cost_unknown_reason, "phases": [record.phase]}


def _print_trial(record: TrialRecord, folder: Path) -> None:
    from anchorage.commands import shown
    from anchorage.report.tables import fixed

    score = record.score
    typer.echo(shown(f"trial {record.name}: {record.phase} ({record.reason}) {record.message}".rstrip()))
    if score is not None and score.raw is not None:
        typer.echo(f"  raw {fixed(score.raw)}  O-Eval {fixed(score.o_eval)}  BO-Eval "
                   f"{fixed(score.bo_eval, sign=True)}  gradable {score.gradable}")
    if record.panel:
        panel = record.panel
        typer.echo(f"  panel: {panel.get('outcome')} (status {panel.get('status')}, {panel.get('calls')} calls)")
    if record.cbu:
        typer.echo(f"  CBU: {record.cbu.get('utility')} ({record.cbu.get('outcome')})")
    typer.echo(f"  folder: {folder}")


def _run_campaign(campaign: Any, runs_dir: Path, runtime: Any, plots: bool, publish: bool, selection: Any,
                  as_json: bool, store: Any = None) -> dict[str, Any]:
    from anchorage.campaigns.planning import plan
    from anchorage.report.progress import Progress
    from anchorage.report.writing import write_outputs
    from anchorage.runtime.local.engine import resolve_tasks, run_campaign

    name = campaign.metadata.name
    planned = [p for p in plan(name, campaign.spec, [t.slug for t in resolve_tasks(campaign.spec)])]
    total = sum(1 for p in planned if selection.wants(p))
    published = _Published()
    with Progress(total, title=name) as progress:

        def on_event(kind: str, item: Any, record: TrialRecord | None) -> None:
            if selection.wants(item):
                progress.event(kind, item, record)
            if publish:
                _publish(name, kind, item, record, published)

        outcome = run_campaign(campaign, runs_dir, runtime, on_event=on_event, selection=selection, store=store)
    if publish:
        from anchorage import metrics

        metrics.board_scores(name, outcome.board)
    outputs = write_outputs(outcome.directory, campaign.metadata.name, outcome.board,
                            [r.to_json() for r in outcome.records], with_plots=plots)
    unpublished = outcome.extra.get("unpublished") or []
    if store is not None:
        from anchorage.runtime.local.publishing import Publisher, outputs_of

        Publisher(store, name).publish_files(outcome.directory, outputs_of(outcome.directory))
    if not as_json:
        _print_board(outcome, outputs)
        if store is not None:
            typer.echo(f"published to {store.uri_of(name)}")
        if unpublished:
            typer.secho(f"{len(unpublished)} finished trials could not be published to {store.uri} (e.g. "
                        f"{unpublished[0]}): rerun the same command to publish them", fg="red", err=True)
    selected = outcome.extra.get("selected", outcome.records)
    counts: dict[str, int] = {}
    for record in selected:
        key = f"{record.phase}/{record.reason}"
        counts[key] = counts.get(key, 0) + 1
    return {"kind": "VerificationCampaign", "name": name, "folder": str(outcome.directory), "ran": outcome.ran,
            "resumed": outcome.reused, "not_run": outcome.extra.get("not_run", 0), "counts": counts,
            "leaderboard": board_rows(outcome.board), "outputs": {k: str(v) for k, v in outputs.items()},
            "phases": [r.phase for r in selected], "unpublished": unpublished}


def board_rows(board: Any) -> list[dict[str, Any]]:
    """The leaderboard rows as JSON (numbers as numbers; a cost with unknown parts says it is a lower bound)."""
    keys = ("entry", "o_eval_mean", "o_eval_std", "bo_eval_mean", "bo_eval_std", "artifacts_mean", "tasks", "seeds",
            "cost_per_seed_usd", "costs_unknown", "unmetered_requests", "infrastructure_failed", "incomplete",
            "cells_scored", "cells_expected")
    return [{**{k: getattr(row, k) for k in keys}, "rank": rank, "cost_is_lower_bound": bool(row.costs_unknown)}
            for rank, row in enumerate(board.rows, 1)]


def _print_board(outcome: Any, outputs: dict[str, Path]) -> None:
    from rich.console import Console
    from rich.table import Table

    from anchorage.commands import markup
    from anchorage.report.tables import board_notes, to_text

    board = outcome.board
    table = Table(title=markup(f"Leaderboard — {outcome.directory.name} — scoring profile {board.profile}"))
    columns = ["entry", "Art.", "O-Eval (mean ± std)", "Robust BO-Eval (mean ± std)", "cost/seed"]
    for column in columns + (["panel confirmed"] if board.has_panel else []) + (
            ["CBU"] if board.has_cbu else []):
        table.add_column(column, justify="left" if column == "entry" else "right")
    for row in to_text(board):
        table.add_row(*map(markup, row))
    console = Console(file=sys.stdout, width=120)
    console.print(table)
    notes = board_notes(board)
    cost = notes.pop() if board.cost_note else None
    for note in notes:
        console.print(markup(note), style="yellow" if note.startswith(tuple(f"{r.entry}: " for r in board.rows
                                                                             if r.no_score)) else None)
    if any(row.incomplete for row in board.rows):
        console.print(markup(board.ranking))
    if cost:
        console.print(markup(cost), style="yellow")
    for line in infrastructure_lines(outcome.extra.get("selected", outcome.records)):
        console.print(markup(line), style="yellow")
    console.print(markup(f"{outcome.ran} trials run, {outcome.reused} resumed from {outcome.directory}"))
    console.print(markup(f"report: {outputs['html']}  ·  leaderboard: {outputs['md']}"))


def infrastructure_lines(records: list[TrialRecord], *, examples: int = 3) -> list[str]:
    """The platform's failures among ``records``, grouped by reason and message (the message says why and, where
    the platform knows it, the fix — e.g. the install command of a missing agent CLI)."""
    from anchorage.commands import shown
    from anchorage.trials import Phase

    groups: dict[tuple[str, str], list[str]] = {}
    for record in records:
        if record.phase is Phase.INFRASTRUCTURE_FAILED:
            key = (str(record.reason or "unknown"), shown(record.message or "no message recorded"))
            groups.setdefault(key, []).append(record.name)
    if not groups:
        return []
    total = sum(len(names) for names in groups.values())
    lines = [f"{total} trial(s) failed for the platform (never counted as a model's zero; rerun them with "
             "--retry-infra once fixed):"]
    for (reason, message), names in sorted(groups.items(), key=lambda item: -len(item[1])):
        shown_names = ", ".join(names[:examples]) + (f" and {len(names) - examples} more" if len(names) > examples
                                                      else "")
        lines.append(f"  {reason} ×{len(names)} ({shown_names}): {message}")
    return lines
