"""``anchorage verify clean|panel|numeric|cbu|rank``: the verification protocols of SPEC §7 on files.

Registered by :mod:`anchorage.cli`. Model calls go to an OpenAI-compatible gateway given by
``--base-url`` (or ``$ANCHORAGE_GATEWAY_URL``) with the bearer token in ``$ANCHORAGE_GATEWAY_TOKEN``;
``--mock`` instead starts an in-process gateway in front of the deterministic, labelled mock upstream
(``--mock-replies FILE`` scripts its replies: ``replies: [{marker, reply}]``). Exit codes: 0 done (and,
for ``panel``, the solution confirmed), 1 the panel did not confirm, 2 bad input.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from anchorage.verify.models import ModelClient
    from anchorage.verify.prompts import Problem

verify_app = typer.Typer(help="Verification protocols: adversarial panel, numeric vote, CBU, ranking (SPEC §7).",
                         no_args_is_help=True)

BASE_URL_HELP = "Gateway URL (OpenAI-compatible; default $ANCHORAGE_GATEWAY_URL). Token: $ANCHORAGE_GATEWAY_TOKEN."
MOCK_HELP = "Start an in-process gateway in front of the labelled mock model (tests, demos)."
MOCK_REPLIES_HELP = "YAML of the mock's scripted replies (replies: [{marker, reply}]); implies --mock."


def register(app: typer.Typer) -> None:
    app.add_typer(verify_app, name="verify")


def _problem(path: Path) -> Problem:
    from anchorage.errors import InputError
    from anchorage.verify.prompts import Problem

    try:
        return Problem(path.stem, path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read problem file {path}: {exc.strerror}") from exc


def _read(path: Path, what: str) -> str:
    from anchorage.errors import InputError

    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {what} file {path}: {exc.strerror}") from exc


@contextmanager
def model_client(base_url: str | None, mock: bool, mock_replies: Path | None) -> Iterator[ModelClient]:
    """A gateway client: the given gateway, or an in-process gateway + mock upstream."""
    from anchorage.errors import InputError
    from anchorage.verify.models import GatewayClient

    if not (mock or mock_replies):
        url = base_url or os.environ.get("ANCHORAGE_GATEWAY_URL")
        if not url:
            raise InputError("no model gateway given", hint="pass --base-url URL (or set ANCHORAGE_GATEWAY_URL), "
                             "or --mock for the labelled mock model")
        yield GatewayClient(url, os.environ.get("ANCHORAGE_GATEWAY_TOKEN"))
        return
    from anchorage.gateway import BackgroundServer, GatewayConfig, start_gateway
    from anchorage.gateway.mock import MockConfig, MockUpstream

    upstream = BackgroundServer(MockUpstream(MockConfig.load(mock_replies) if mock_replies else MockConfig()).app(),
                                name="mock-upstream").start()
    try:
        config = GatewayConfig.model_validate({"upstreams": [{"name": "mock", "base_url": upstream.url}]})
        with start_gateway(config) as gateway:
            assert gateway.url is not None
            yield GatewayClient(gateway.url, gateway.issue_token("verify-cli"))
    finally:
        upstream.stop()


def _emit(record: dict[str, Any], out: Path | None, as_json: bool) -> None:
    text = json.dumps(record, indent=2, ensure_ascii=False)
    if out is not None:
        out.write_text(text + "\n", encoding="utf-8")
    if as_json:
        typer.echo(text)


def _settings(model: Any, values: dict[str, Any]) -> Any:
    """Validate flags into a settings model; a bad flag is an InputError naming it."""
    from pydantic import ValidationError

    from anchorage.errors import InputError

    try:
        return model.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(f"--{'-'.join(str(p) for p in e['loc']).replace('_', '-')}: {e['msg']}"
                             for e in exc.errors())
        raise InputError(f"invalid option: {problems}", hint="see anchorage verify panel --help") from exc


@verify_app.command("clean")
def clean(
    solution: Path = typer.Argument(..., help="A solver's raw output (markdown/text)."),
    as_json: bool = typer.Option(False, "--json", help="Print the cleaning record as JSON."),
) -> None:
    """Print what verifiers would see: Method, Proof and Answer, without thinking or exploratory prose."""
    from anchorage.verify.cleaning import clean_solution

    cleaned = clean_solution(_read(solution, "solution"))
    if as_json:
        typer.echo(json.dumps({"text": cleaned.text, **cleaned.summary(),
                               "removed_text": [r.text for r in cleaned.removed]}, indent=2, ensure_ascii=False))
    else:
        typer.echo(cleaned.text)


@verify_app.command("panel")
def panel(
    problem: Path = typer.Option(..., "--problem", help="Problem statement file (its stem is the problem id)."),
    solution: Path | None = typer.Option(None, "--solution", help="Solution to judge; without it the tier's "
                                         "solvers write candidates first."),
    tier: str = typer.Option("medium", "--tier", help="small (12 solvers, 7 verifiers, 5/3) | medium (6, 5, 4/2) | "
                             "large (4, 5 + one per pattern, 4/2)."),
    verifiers: int | None = typer.Option(None, "--verifiers", help="Custom panel size (default: tier)."),
    confirm: int | None = typer.Option(None, "--confirm", help="HOLDS votes that confirm (default: tier)."),
    refute: int | None = typer.Option(None, "--refute", help="HOLE FOUND votes that refute (default: tier)."),
    max_revisions: int | None = typer.Option(None, "--max-revisions", help="Revision rounds before abstaining "
                                             "(default: tier; 0 = judge only)."),
    policy: str = typer.Option("staggered", "--policy", help="staggered (default: never more in flight than the HOLE "
                               "FOUND still needed to refute, so two early ones stop the rest) | wave (launch what "
                               "could confirm, wait for it) | eager (keep the pigeonhole bound filled)."),
    max_parallel: int | None = typer.Option(None, "--max-parallel", help="Verifiers in flight at most (1: sequential)."),
    model: str = typer.Option("mock-model", "--model", help="Model id sent through the gateway."),
    base_url: str | None = typer.Option(None, "--base-url", help=BASE_URL_HELP),
    mock: bool = typer.Option(False, "--mock", help=MOCK_HELP),
    mock_replies: Path | None = typer.Option(None, "--mock-replies", help=MOCK_REPLIES_HELP),
    out: Path | None = typer.Option(None, "-o", "--out", help="Write the panel record (JSON) here."),
    as_json: bool = typer.Option(False, "--json", help="Print the panel record as JSON."),
) -> None:
    """Adversarial panel: clean, vote with early exit, revise on refutation, abstain when it cannot hold."""
    from anchorage.verify.panel import run_panel, solve_and_verify
    from anchorage.verify.settings import PanelSettings

    settings = _settings(PanelSettings, {
        "tier": tier, "verifiers": verifiers, "confirm": confirm, "refute": refute, "max_revisions": max_revisions,
        "policy": policy, "max_parallel": max_parallel, "model": model})
    statement = _problem(problem)
    with model_client(base_url, mock, mock_replies) as client:
        if solution is not None:
            record = run_panel(statement, _read(solution, "solution"), client, settings)
        else:
            record = solve_and_verify(statement, client, settings)
    data = record.to_dict()
    _emit(data, out, as_json)
    if not as_json:
        _print_panel(data)
    raise typer.Exit(0 if record.status == "confirmed" else 1)


def _print_panel(data: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"panel · {data['problem']} · {data['status']}"
                  + (" · MOCK MODEL" if data["mock_model"] else ""))
    for column in ("round", "solution", "outcome", "launched", "HOLDS", "HOLE FOUND", "UNCLEAR", "revision"):
        table.add_column(column)
    for r in data["rounds"]:
        vote = r["vote"] or {}
        counts = vote.get("counts", {})
        table.add_row(str(r["round"]), (r["solution"] or {}).get("digest", ""), vote.get("outcome", "—"),
                      str(vote.get("launched", "—")), str(counts.get("HOLDS", "")), str(counts.get("HOLE FOUND", "")),
                      str(counts.get("UNCLEAR", "")), r["revision"])
    console = Console()
    console.print(table)
    if data["abstention"]:
        console.print(f"abstained: what WAS proven: {data['abstention'].get('what_was_proven') or '(nothing)'}")


@verify_app.command("numeric")
def numeric(
    problem: Path = typer.Option(..., "--problem", help="Problem statement file with a numeric answer."),
    solvers: int = typer.Option(5, "--solvers", help="Solvers (5–7)."),
    model: str = typer.Option("mock-model", "--model", help="Model id sent through the gateway."),
    base_url: str | None = typer.Option(None, "--base-url", help=BASE_URL_HELP),
    mock: bool = typer.Option(False, "--mock", help=MOCK_HELP),
    mock_replies: Path | None = typer.Option(None, "--mock-replies", help=MOCK_REPLIES_HELP),
    out: Path | None = typer.Option(None, "-o", "--out", help="Write the record (JSON) here."),
    as_json: bool = typer.Option(False, "--json", help="Print the record as JSON (else the answer and its support)."),
) -> None:
    """Numeric answers: majority vote over 5–7 solvers, top two checked by substitution without a majority."""
    from anchorage.verify.numeric import run_numeric

    with model_client(base_url, mock, mock_replies) as client:
        record = run_numeric(_problem(problem), client, model=model, solvers=solvers)
    _emit(record, out, as_json)
    if not as_json:
        typer.echo(f"answer: {record['answer'] if record['answer'] is not None else 'none (no majority held)'}"
                   + (f"  (record: {out})" if out else ""))
    raise typer.Exit(0 if record["answer"] is not None else 1)


@verify_app.command("cbu")
def cbu(
    problem: Path = typer.Option(..., "--problem", help="The target problem statement file."),
    candidates: list[Path] = typer.Option(..., "--candidate", help="Candidate solution file (repeat; stem = id)."),
    neighbours: Path = typer.Option(..., "--neighbours", help='JSON: [{"id", "problem", "answer"}] neighbour '
                                    "problems with verifiable answers."),
    rollouts: int = typer.Option(64, "--rollouts", help="Rollouts per neighbour (64 in the paper)."),
    model: str = typer.Option("mock-model", "--model", help="Solver model id sent through the gateway."),
    base_url: str | None = typer.Option(None, "--base-url", help=BASE_URL_HELP),
    mock: bool = typer.Option(False, "--mock", help=MOCK_HELP),
    mock_replies: Path | None = typer.Option(None, "--mock-replies", help=MOCK_REPLIES_HELP),
    out: Path | None = typer.Option(None, "-o", "--out", help="Write {problem: {candidate: utility}} + details here "
                                    "(readable by `verify rank --scores`)."),
    as_json: bool = typer.Option(False, "--json", help="Print the utilities and details as JSON (else one line each)."),
) -> None:
    """Consequence-based utility of each candidate: verified accuracy on neighbours with it as exemplar."""
    from anchorage.verify.cbu import score_pool
    from anchorage.verify.settings import CbuSettings

    target = _problem(problem)
    settings = _settings(CbuSettings, {"model": model, "rollouts": rollouts})
    pool = {path.stem: _read(path, "candidate") for path in candidates}
    with model_client(base_url, mock, mock_replies) as client:
        result = score_pool(target, pool, _neighbours(neighbours), client, settings)
    _emit({"scores": {target.id: result["scores"]}, "details": {target.id: result["details"]}}, out, as_json)
    if not as_json:
        for candidate, utility in result["scores"].items():
            typer.echo(f"{candidate}: consequence-based utility {utility}")


def _neighbours(path: Path) -> list[Any]:
    from anchorage.errors import InputError
    from anchorage.verify.cbu import Neighbour
    from anchorage.verify.prompts import Problem

    try:
        rows = json.loads(_read(path, "neighbours"))
        return [Neighbour(Problem(str(r["id"]), str(r["problem"])), str(r["answer"])) for r in rows]
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: neighbours must be a JSON list of {{id, problem, answer}} ({exc})") from exc


@verify_app.command("rank")
def rank(
    scores: Path = typer.Option(..., "--scores", help="{problem: {candidate: score}} or rows [{problem, candidate, "
                                "score}] (JSON/JSONL)."),
    labels: Path = typer.Option(..., "--labels", help="{problem: {group?, candidates: {id: {correct, human?}}}} or rows "
                                "[{problem, candidate, correct, human?, group?}]."),
    human_in_pool: bool = typer.Option(False, "--human-in-pool", help="Rank the human solution with the model "
                                       "candidates (default: it only enters HumanWin)."),
    k: int = typer.Option(5, "--k", help="Cut-off of Recall@k."),
    as_json: bool = typer.Option(False, "--json", help="Print the full record as JSON."),
) -> None:
    """Acc@1, Recall@5, AUC, HumanWin, MeanWin of a verifier's scores, averaged over variants then problems."""
    from anchorage.verify.ranking import load_labels, load_scores
    from anchorage.verify.ranking import rank as compute

    record = compute(load_scores(scores), load_labels(labels), human_in_pool=human_in_pool, k=k)
    if as_json:
        typer.echo(json.dumps(record, indent=2))
        return
    _print_rank(record)


def _print_rank(record: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from anchorage.verify.ranking import LABELS, METRICS

    table = Table(title="ranking metrics (×100; mean over groups of variants)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("groups", justify="right")
    table.add_column("problems", justify="right")
    table.add_column("undefined", justify="right")
    for metric in METRICS:
        m = record["metrics"][metric]
        value = "—" if m["value"] is None else f"{100 * m['value']:.2f}"
        label = LABELS[metric].replace("@5", f"@{record['k']}") if metric == "recall_at_5" else LABELS[metric]
        table.add_row(label, value, str(m["groups"]), str(m["problems"]), str(m["undefined"]))
    Console().print(table)
