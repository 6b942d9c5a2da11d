"""The adversarial panel and consequence-based utility of *one trial's* solution, for any model client.

Shared by both drivers: the local engine (``runtime/local/verifying.py``) passes a client whose every call
is its own sandboxed process with its own gateway token; the operator's protocol pod (``runtime/kube/pod.py
protocol``) passes a :class:`~anchorage.verify.models.GatewayClient` with the pod's own token. Both get the
same blocks for ``score.json`` (``panel`` / ``cbu``) and the same failure rule: a platform failure (no
gateway, every call failing) is returned as ``failure`` and makes the trial ``InfrastructureFailed``, never
the model's zero. The step's usage and cost are not the client's to say: each driver adds them from the
gateway's accounts once the step's tokens are revoked (``anchorage.trials.costing.protocol_cost``).
Readings taken (solution text, problem text, outcomes) are in docs/verification.md.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorage import confined
from anchorage.errors import AnchorageError, InputError
from anchorage.tasks import Task
from anchorage.verify.cbu import Neighbour, utility
from anchorage.verify.models import Completion, Message, ModelClient
from anchorage.verify.panel import run_panel
from anchorage.verify.prompts import Problem
from anchorage.verify.settings import CbuSettings, PanelSettings

MAX_SOLUTION_BYTES = 256 * 1024
MAX_ARTIFACT_BYTES = 20 * 1024 * 1024
DEFAULT_SOLUTION_FILE = "solution.md"
DEFAULT_SOLUTION_FIELD = "solution"
#: A model client for a protocol, or why there is none (then the trial's failure is the platform's).
ClientFactory = Callable[[], "ModelClient | str"]


@dataclass(frozen=True)
class ProtocolOutcome:
    """What the trial gets: the block of ``score.json`` and, on a platform failure, the reason."""

    block: dict[str, Any]
    failure: str | None = None


@dataclass
class Counted:
    """A model client that counts its calls (the block's ``calls`` where the client keeps no accounts)."""

    client: ModelClient
    calls: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def complete(self, messages: list[Message], *, model: str, seed: int | None = None,
                 temperature: float | None = None, run_id: str | None = None) -> Completion:
        with self._lock:
            self.calls += 1
        return self.client.complete(messages, model=model, seed=seed, temperature=temperature, run_id=run_id)


# ----- inputs ---------------------------------------------------------------------------------------------

def problem_of(task: Task) -> Problem:
    """The statement the panel judges against: ``environment/data/problem.md``, else the instruction."""
    statement = task.data_dir / "problem.md"
    if statement.is_file():
        text = statement.read_text(encoding="utf-8", errors="replace")
        if text.strip():
            return Problem(task.slug, text)
    return Problem(task.slug, task.instruction)


def solution_text(task: Task, results_dir: Path, artifact: str | None) -> tuple[str | None, str]:
    """The agent's solution text and where it came from (or ``None`` and why there is none)."""
    name = str(task.config.metadata.get("panel_solution", DEFAULT_SOLUTION_FILE))
    try:  # the agent wrote it: read beneath the results folder, no link followed, size-capped
        data = confined.read_bytes(results_dir, name, limit=MAX_SOLUTION_BYTES)
    except confined.ConfinedError as exc:
        if exc.reason == "too_large":
            return None, f"/root/results/{name} is larger than {MAX_SOLUTION_BYTES} bytes"
        data = None
    if data is not None:
        text = data.decode("utf-8", errors="replace")
        return (text, f"/root/results/{name}") if text.strip() else (None, f"/root/results/{name} is empty")
    dotted = str(task.config.metadata.get("panel_solution_field", DEFAULT_SOLUTION_FIELD))
    value = _field(results_dir, artifact, dotted) if artifact and _inside(Path(artifact), results_dir) else None
    if isinstance(value, str) and value.strip():
        return value[:MAX_SOLUTION_BYTES], f"artifact field {dotted}"
    return None, f"no /root/results/{name} and no text at '{dotted}' of the artifact"


def _inside(path: Path, folder: Path) -> bool:
    return folder.resolve() in path.resolve().parents


def _field(results_dir: Path, artifact: str, dotted: str) -> Any:
    try:
        relative = Path(artifact).resolve().relative_to(results_dir.resolve())
        data: Any = json.loads(confined.read_bytes(results_dir, relative, limit=MAX_ARTIFACT_BYTES))
    except (OSError, ValueError, RecursionError, confined.ConfinedError):
        return None
    for part in dotted.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


# ----- the panel of one trial -----------------------------------------------------------------------------

def trial_panel(task: Task, settings: PanelSettings, results_dir: Path, artifact: str | None,
                make_client: ClientFactory) -> ProtocolOutcome:
    """Run the panel on the trial's solution; never raises for the model's or the platform's failures."""
    started = time.monotonic()
    text, source = solution_text(task, results_dir, artifact)
    if text is None:
        return ProtocolOutcome({"outcome": "missing", "status": None, "reason": source, "calls": 0,
                                "settings": settings.model_dump(mode="json", by_alias=True)})
    made = make_client()
    if isinstance(made, str):
        return ProtocolOutcome({"outcome": None, "solution_source": source}, made)
    client = Counted(made)
    try:
        record = run_panel(problem_of(task), text, client, settings).to_dict()
    except AnchorageError as exc:  # a reviser call that failed, missing prompt files: the platform's failure
        block: dict[str, Any] = {"outcome": None, "solution_source": source, "calls": client.calls,
                                 "error": exc.message}
        return ProtocolOutcome(block, f"verification panel failed: {exc.message}")
    block = summarize(record)
    block.update(solution_source=source, duration_sec=round(time.monotonic() - started, 3), record=record)
    ballots = [b for r in record["rounds"] if r["vote"] for b in r["vote"]["ballots"]]
    if ballots and all(b["error"] for b in ballots):
        return ProtocolOutcome(block, f"every panel verifier call failed: {ballots[0]['error']}")
    return ProtocolOutcome(block)


def summarize(record: dict[str, Any]) -> dict[str, Any]:
    """The trial-level view of a panel record: outcome of the submitted solution, votes, launches, revisions."""
    rounds = record["rounds"]
    first = rounds[0]["vote"]["outcome"] if rounds and rounds[0]["vote"] else None
    status = record["status"]
    if status == "abstained":
        outcome = "abstained"
    elif first in ("confirmed", "refuted"):
        outcome = str(first)
    else:
        outcome = "undecided"
    votes = [{"round": r["round"], "outcome": r["vote"]["outcome"], "launched": r["vote"]["launched"],
              **r["vote"]["counts"]} for r in rounds if r["vote"]]
    return {
        "outcome": outcome, "status": status, "repaired": outcome == "refuted" and status == "confirmed",
        "votes": votes, "launches": sum(v["launched"] for v in votes),
        "revisions": sum(1 for r in rounds if r["round"] > 0), "calls": record["calls"],
        "mock_model": record["mock_model"], "abstention": record["abstention"],
        "settings": record["settings"], "thresholds": record["thresholds"],
    }


# ----- consequence-based utility of one trial -------------------------------------------------------------

DEFAULT_NEIGHBOURS = "tests/cbu_neighbours.json"


def neighbours_of(task: Task) -> tuple[list[Neighbour], str]:
    """The task's neighbour problems (``[metadata] cbu_neighbours``, default ``tests/cbu_neighbours.json``:
    ``[{id, problem, answer}]``, hidden from the agent like the rest of ``tests/``) and where they came from."""
    relative = str(task.config.metadata.get("cbu_neighbours", DEFAULT_NEIGHBOURS))
    path = task.root / relative
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
        return [Neighbour(Problem(str(r["id"]), str(r["problem"])), str(r["answer"])) for r in rows], relative
    except FileNotFoundError:
        return [], f"{relative} does not exist"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: neighbours must be a JSON list of {{id, problem, answer}} ({exc})",
                         hint="fix the task's neighbour file (see docs/verification.md)") from exc


def trial_cbu(task: Task, settings: CbuSettings, results_dir: Path, artifact: str | None,
              make_client: ClientFactory) -> ProtocolOutcome:
    """Consequence-based utility of the trial's solution text (each rollout one model call)."""
    started = time.monotonic()
    text, source = solution_text(task, results_dir, artifact)
    base: dict[str, Any] = {"settings": settings.model_dump(mode="json", by_alias=True), "solution_source": source}
    if text is None:
        return ProtocolOutcome({**base, "utility": None, "outcome": "missing", "reason": source, "calls": 0})
    try:
        neighbours, where = neighbours_of(task)
    except InputError as exc:   # the task's neighbour file is broken: say so, the trial's score stands
        return ProtocolOutcome({**base, "utility": None, "outcome": "error", "reason": str(exc), "calls": 0})
    if not neighbours:
        return ProtocolOutcome({**base, "utility": None, "outcome": "no_neighbours", "reason": where, "calls": 0})
    made = make_client()
    if isinstance(made, str):
        return ProtocolOutcome(base, made)
    client = Counted(made)
    try:
        result = utility(problem_of(task), text, neighbours, client, settings, parallel=4)
    except AnchorageError as exc:
        return ProtocolOutcome({**base, "utility": None, "outcome": "error", "reason": exc.message},
                               f"consequence-based utility failed: {exc.message}")
    block = {**base, **result, "outcome": "scored", "neighbours_source": where, "calls": client.calls,
             "duration_sec": round(time.monotonic() - started, 3)}
    if all(n["failed_calls"] == n["rollouts"] for n in result["neighbours"]):
        return ProtocolOutcome(block, "every consequence-based-utility call failed")
    return ProtocolOutcome(block)
