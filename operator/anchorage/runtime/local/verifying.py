"""A trial's ``verification.panel`` / ``verification.cbu`` on the local engine, on the agent's solution text.

Called by :func:`anchorage.runtime.local.trials.run_trial` after scoring, when the trial's spec carries
``verification.panel`` (a :class:`anchorage.verify.settings.PanelSettings`) or ``verification.cbu``
(a :class:`anchorage.verify.settings.CbuSettings`). Readings taken (also in
docs/verification.md, "Campaign wiring"):

* **Solution text** — the file ``[metadata] panel_solution`` of ``task.toml`` names in the trial's results
  folder (``/root/results``; default ``solution.md``); when that file is absent, the string at the dotted
  path ``[metadata] panel_solution_field`` (default ``solution``) of the scored JSON artifact. Neither
  present: the panel does not run and the outcome is ``missing`` (the model's own failure, no model call).
* **Problem text** — the task's ``environment/data/problem.md`` when it exists (the statement proper,
  without the artifact instructions), else the task's instruction; the problem id is the task's slug.
* **Isolation** — every solver/verifier/reviser call is its own sandboxed process (the trial's sandbox
  mechanism: private network, empty read-only root, fresh tmpfs) running ``inside/model_call.py``, whose
  only reachable endpoint is the gateway socket; each call gets its own gateway token
  ``<trial>/panel/<NNN>-<role>`` (revoked after the call) and its own folder
  ``verifier/panel/calls/NNN-<role>/`` (request, reply, logs) for the audit trail.
* **Outcome** (of the *submitted* solution): ``confirmed`` (the first vote confirmed it as submitted),
  ``refuted`` (the first vote found holes; ``repaired: true`` when a revision by the panel was then
  confirmed — the panel's text, not the agent's), ``abstained`` (the panel abstained: the reviser declared
  the hole fundamental or the rounds ran out; the record keeps what was proven), ``undecided`` (no
  threshold reached without revisions), ``missing`` (no solution text). ``status`` keeps the panel's own.
* **Consequence-based utility** (``verification.cbu``, :func:`run_trial_cbu`) — the same solution text is the
  candidate; the neighbours are the task's ``tests/cbu_neighbours.json`` (``[{id, problem, answer}]``, or
  ``[metadata] cbu_neighbours``); each rollout is one sandboxed call (accounts ``<trial>/cbu/<NNN>-…``). No
  neighbour file: ``outcome: no_neighbours``, no call.
* **Failures** — the panel's calls are the platform's: no gateway, a reviser call that fails, or every
  verifier call failing makes the trial ``InfrastructureFailed`` (``gateway_error``), never the model's zero.
  Panel usage is recorded in ``panel.usage`` and not added to the entry's cost (it is the evaluator's).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorage import confined
from anchorage.errors import AnchorageError, InfrastructureError, InputError
from anchorage.runtime.local import sandbox
from anchorage.tasks import Task
from anchorage.verify.cbu import Neighbour, utility
from anchorage.verify.models import Completion, Message, _completion
from anchorage.verify.panel import run_panel
from anchorage.verify.prompts import Problem
from anchorage.verify.settings import CbuSettings, PanelSettings

CALL_SCRIPT = "model_call.py"
MAX_SOLUTION_BYTES = 256 * 1024
MAX_ARTIFACT_BYTES = 20 * 1024 * 1024
MAX_REPLY_BYTES = 16 * 1024 * 1024
DEFAULT_SOLUTION_FILE = "solution.md"
DEFAULT_SOLUTION_FIELD = "solution"
CALL_TIMEOUT_SEC = 600.0
_USAGE_KEYS = ("requests", "input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens", "errors")
_ROLE = re.compile(r"[^a-z0-9]+")


def call_limits(timeout_sec: float = CALL_TIMEOUT_SEC) -> sandbox.SandboxLimits:
    """Limits of one model-call sandbox: one HTTP request, a small reply, nothing else."""
    return sandbox.SandboxLimits(timeout_sec=timeout_sec + 30, cpus=1.0, memory_mb=1024, pids=64,
                                 result_max_bytes=16 * 1024 * 1024, file_max_bytes=16 * 1024 * 1024, tmp_mb=16)


@dataclass
class SandboxedModelClient:
    """A :class:`~anchorage.verify.models.ModelClient` whose every call is one fresh sandboxed process."""

    gateway: Any
    mechanism: sandbox.Mechanism
    calls_dir: Path
    trial: str
    entry: str | None = None
    purpose: str = "panel"
    timeout_sec: float = CALL_TIMEOUT_SEC
    usages: list[dict[str, Any]] = field(default_factory=list, init=False)
    _count: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def _next(self, run_id: str | None) -> tuple[int, str]:
        with self._lock:
            self._count += 1
            index = self._count
        parts = (run_id or "call").split("/")
        role = _ROLE.sub("-", ("-".join(parts[2:]) or parts[-1]).lower()).strip("-")[:40] or "call"
        return index, f"{index:03d}-{role}"

    def complete(self, messages: list[Message], *, model: str, seed: int | None = None,
                 temperature: float | None = None, run_id: str | None = None) -> Completion:
        index, name = self._next(run_id)
        folder = self.calls_dir / name
        (folder / "out").mkdir(parents=True)
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": False}
        if seed is not None:
            body["seed"] = seed
        if temperature is not None:
            body["temperature"] = temperature
        (folder / "request.json").write_text(json.dumps({"body": body, "run_id": run_id}, indent=1), encoding="utf-8")
        account = f"{self.trial}/{self.purpose}/{name}"
        try:
            token = self.gateway.issue_token(account, entry=self.entry)
        except Exception as exc:  # the gateway is another component: its failure is the platform's
            raise InfrastructureError(f"the gateway refused a token for {account}: {exc}",
                                      hint="is the gateway still running?") from exc
        try:
            result = sandbox.run(self._spec(folder, token), mechanism=self.mechanism,
                                 trial_id=f"{self.trial[-20:]}-p{index}-{uuid.uuid4().hex[:6]}")
        finally:
            self._account_usage(name, account)
        return self._reply(name, folder, result)

    def _spec(self, folder: Path, token: str) -> sandbox.SandboxSpec:
        inside = self.mechanism != "none"
        script = f"{sandbox.INSIDE_MOUNT}/{CALL_SCRIPT}" if inside else str(sandbox.INSIDE_DIR / CALL_SCRIPT)
        request = f"{sandbox.LOGS}/request.json" if inside else str(folder / "request.json")
        return sandbox.SandboxSpec(
            argv=[sandbox.sandbox_python(), "-I", script, request], results_dir=folder / "out", logs_dir=folder,
            limits=call_limits(self.timeout_sec), env={"OPENAI_API_KEY": token,
                                                       "ANCHORAGE_CALL_TIMEOUT": str(self.timeout_sec)},
            gateway_socket=self.gateway.unix_socket,
        )

    def _account_usage(self, name: str, account: str) -> None:
        try:
            usage = self.gateway.usage(account)
            data = usage.to_dict() if hasattr(usage, "to_dict") else dict(usage)
        except Exception as exc:  # bookkeeping only: keep the call's outcome
            data = {"usage_error": str(exc)}
        revoke = getattr(self.gateway, "revoke", None)
        if callable(revoke):
            with contextlib.suppress(Exception):  # a token that cannot be revoked dies with the gateway
                revoke(account)
        with self._lock:
            self.usages.append({"call": name, **data})

    @staticmethod
    def _reply(name: str, folder: Path, result: sandbox.SandboxResult) -> Completion:
        try:  # written inside the model call's sandbox: read like anything a sandbox wrote
            reply = json.loads(confined.read_bytes(folder / "out", "reply.json", limit=MAX_REPLY_BYTES))
        except (OSError, ValueError, RecursionError, confined.ConfinedError):
            reply = None
        if result.outcome != "exited" or not isinstance(reply, dict):
            raise InfrastructureError(
                f"model call {name} did not complete in its sandbox ({result.outcome}, exit {result.exit_code}): "
                f"{result.detail or 'no reply.json written'}", hint=f"see {folder}/stderr.log")
        if reply.get("status") != 200:
            raise InfrastructureError(f"model call {name} failed: HTTP {reply.get('status')}: {reply.get('error', '')}",
                                      hint="check the panel's model id and the gateway's upstreams")
        return _completion(reply.get("body"), bool(reply.get("mock")))

    def usage_total(self) -> dict[str, Any]:
        total: dict[str, Any] = {key: sum(int(u.get(key, 0) or 0) for u in self.usages) for key in _USAGE_KEYS}
        total["cost_usd"] = round(sum(float(u.get("cost_usd", 0.0) or 0.0) for u in self.usages), 9)
        total["calls"] = len(self.usages)
        return total


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

@dataclass(frozen=True)
class PanelOutcome:
    """What the trial gets: the ``panel`` block of ``score.json`` and, on a platform failure, the reason."""

    block: dict[str, Any]
    failure: str | None = None


def run_trial_panel(task: Task, settings: PanelSettings, *, trial: str, entry: str | None, trial_dir: Path,
                    artifact: str | None, gateway: Any, mechanism: sandbox.Mechanism) -> PanelOutcome:
    """Run the panel on the trial's solution; never raises for the model's or the platform's failures."""
    started = time.monotonic()
    text, source = solution_text(task, trial_dir / "artifacts", artifact)
    if text is None:
        return PanelOutcome({"outcome": "missing", "status": None, "reason": source, "calls": 0,
                             "settings": settings.model_dump(mode="json", by_alias=True)})
    if gateway is None or getattr(gateway, "unix_socket", None) is None:
        return PanelOutcome({"outcome": None, "solution_source": source},
                            "verification.panel needs the model gateway, but none is running")
    client = SandboxedModelClient(gateway, mechanism, trial_dir / "verifier" / "panel" / "calls", trial, entry)
    try:
        record = run_panel(problem_of(task), text, client, settings).to_dict()
    except AnchorageError as exc:  # a reviser call that failed, missing prompt files: the platform's failure
        block: dict[str, Any] = {"outcome": None, "solution_source": source, "usage": client.usage_total(),
                                 "error": exc.message}
        return PanelOutcome(block, f"verification panel failed: {exc.message}")
    block = summarize(record)
    block.update(solution_source=source, usage=client.usage_total(), duration_sec=round(time.monotonic() - started, 3),
                 record=record)
    ballots = [b for r in record["rounds"] if r["vote"] for b in r["vote"]["ballots"]]
    if ballots and all(b["error"] for b in ballots):
        return PanelOutcome(block, f"every panel verifier call failed: {ballots[0]['error']}")
    return PanelOutcome(block)


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


def run_trial_cbu(task: Task, settings: CbuSettings, *, trial: str, entry: str | None, trial_dir: Path,
                  artifact: str | None, gateway: Any, mechanism: sandbox.Mechanism) -> PanelOutcome:
    """Consequence-based utility of the trial's solution text (each rollout one sandboxed call)."""
    started = time.monotonic()
    text, source = solution_text(task, trial_dir / "artifacts", artifact)
    base: dict[str, Any] = {"settings": settings.model_dump(mode="json", by_alias=True), "solution_source": source}
    if text is None:
        return PanelOutcome({**base, "utility": None, "outcome": "missing", "reason": source, "calls": 0})
    try:
        neighbours, where = neighbours_of(task)
    except InputError as exc:   # the task's neighbour file is broken: say so, the trial's score stands
        return PanelOutcome({**base, "utility": None, "outcome": "error", "reason": str(exc), "calls": 0})
    if not neighbours:
        return PanelOutcome({**base, "utility": None, "outcome": "no_neighbours", "reason": where, "calls": 0})
    if gateway is None or getattr(gateway, "unix_socket", None) is None:
        return PanelOutcome(base, "verification.cbu needs the model gateway, but none is running")
    client = SandboxedModelClient(gateway, mechanism, trial_dir / "verifier" / "cbu" / "calls", trial, entry, "cbu")
    try:
        result = utility(problem_of(task), text, neighbours, client, settings, parallel=4)
    except AnchorageError as exc:
        return PanelOutcome({**base, "utility": None, "outcome": "error", "reason": exc.message},
                            f"consequence-based utility failed: {exc.message}")
    usage = client.usage_total()
    block = {**base, **result, "outcome": "scored", "neighbours_source": where, "calls": usage["calls"], "usage": usage,
             "duration_sec": round(time.monotonic() - started, 3)}
    if all(n["failed_calls"] == n["rollouts"] for n in result["neighbours"]):
        return PanelOutcome(block, "every consequence-based-utility call failed")
    return PanelOutcome(block)
