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
* **Usage and cost** — the sum of the step's per-call accounts at the gateway (each read, then its token
  revoked, when its call ends), as ``usage``, ``cost_usd``, ``cost_source`` and ``cost_unknown_reason`` of the
  step's block (:func:`anchorage.trials.costing.protocol_cost`, the operator's rule too); not added to the
  entry's cost (it is the evaluator's).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorage import confined
from anchorage.errors import InfrastructureError
from anchorage.runtime.local import sandbox
from anchorage.tasks import Task
from anchorage.trials.costing import protocol_cost
from anchorage.verify.models import Completion, Message, _completion
from anchorage.verify.protocols import ProtocolOutcome as PanelOutcome
from anchorage.verify.protocols import (  # re-exported: the local engine's callers and tests use these names
    neighbours_of,
    problem_of,
    solution_text,
    summarize,
    trial_cbu,
    trial_panel,
)
from anchorage.verify.settings import CbuSettings, PanelSettings

__all__ = ["PanelOutcome", "SandboxedModelClient", "call_limits", "neighbours_of", "problem_of", "run_trial_cbu",
           "run_trial_panel", "solution_text", "summarize"]

CALL_SCRIPT = "model_call.py"
MAX_REPLY_BYTES = 16 * 1024 * 1024
CALL_TIMEOUT_SEC = 600.0
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
            token = self.gateway.issue_token(account, entry=self.entry, timeout_sec=self.timeout_sec)
            socket = self.gateway.open_trial_socket(account)  # the call's own socket: its token only
        except Exception as exc:  # the gateway is another component: its failure is the platform's
            raise InfrastructureError(f"the gateway refused a token for {account}: {exc}",
                                      hint="is the gateway still running?") from exc
        try:
            result = sandbox.run(self._spec(folder, token, socket), mechanism=self.mechanism,
                                 trial_id=f"{self.trial[-20:]}-p{index}-{uuid.uuid4().hex[:6]}")
        finally:
            with contextlib.suppress(Exception):
                self.gateway.close_trial_socket(account)
            self._account_usage(name, account)
        return self._reply(name, folder, result)

    def _spec(self, folder: Path, token: str, socket: Path) -> sandbox.SandboxSpec:
        inside = self.mechanism != "none"
        script = f"{sandbox.INSIDE_MOUNT}/{CALL_SCRIPT}" if inside else str(sandbox.INSIDE_DIR / CALL_SCRIPT)
        request = f"{sandbox.LOGS}/request.json" if inside else str(folder / "request.json")
        return sandbox.SandboxSpec(
            argv=[sandbox.sandbox_python(), "-I", script, request], results_dir=folder / "out", logs_dir=folder,
            limits=call_limits(self.timeout_sec), env={"OPENAI_API_KEY": token,
                                                       "ANCHORAGE_CALL_TIMEOUT": str(self.timeout_sec)},
            gateway_socket=socket,
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



# ----- the trial's protocols on the local engine ------------------------------------------------------------

@dataclass
class _StepClient:
    """Makes the step's client when the protocol asks for one, then says what its calls cost."""

    gateway: Any
    mechanism: sandbox.Mechanism
    calls_dir: Path
    trial: str
    entry: str | None
    purpose: str
    made: SandboxedModelClient | None = None

    def make(self) -> SandboxedModelClient | str:
        if self.gateway is None or getattr(self.gateway, "unix_socket", None) is None:
            return f"verification.{self.purpose} needs the model gateway, but none is running"
        self.made = SandboxedModelClient(self.gateway, self.mechanism, self.calls_dir, self.trial, self.entry,
                                         self.purpose)
        return self.made

    def cost(self) -> dict[str, Any]:
        """The step's usage and cost: the sum of its calls' accounts (unknown when one could not be read)."""
        usages = self.made.usages if self.made is not None else []
        unread = [u for u in usages if "usage_error" in u]
        if unread:
            return protocol_cost(None, unreadable=f"the gateway's usage of call {unread[0]['call']} could not be "
                                 f"read: {unread[0]['usage_error']}")
        return protocol_cost(usages)


def _run_step(run: Callable[..., PanelOutcome], task: Task, settings: Any, *, purpose: str, trial: str,
              entry: str | None, trial_dir: Path, artifact: str | None, gateway: Any,
              mechanism: sandbox.Mechanism) -> PanelOutcome:
    client = _StepClient(gateway, mechanism, trial_dir / "verifier" / purpose / "calls", trial, entry, purpose)
    outcome = run(task, settings, trial_dir / "artifacts", artifact, client.make)
    outcome.block.update(client.cost())
    return outcome


def run_trial_panel(task: Task, settings: PanelSettings, *, trial: str, entry: str | None, trial_dir: Path,
                    artifact: str | None, gateway: Any, mechanism: sandbox.Mechanism) -> PanelOutcome:
    """The panel on the trial's solution, each call its own sandboxed process (:func:`protocols.trial_panel`)."""
    return _run_step(trial_panel, task, settings, purpose="panel", trial=trial, entry=entry, trial_dir=trial_dir,
                     artifact=artifact, gateway=gateway, mechanism=mechanism)


def run_trial_cbu(task: Task, settings: CbuSettings, *, trial: str, entry: str | None, trial_dir: Path,
                  artifact: str | None, gateway: Any, mechanism: sandbox.Mechanism) -> PanelOutcome:
    """Consequence-based utility of the trial's solution, each rollout one sandboxed call (:func:`protocols.trial_cbu`)."""
    return _run_step(trial_cbu, task, settings, purpose="cbu", trial=trial, entry=entry, trial_dir=trial_dir,
                     artifact=artifact, gateway=gateway, mechanism=mechanism)
