"""The post-agent pipeline: one ordered list of steps, and which driver runs which.

After the agent's attempt (unless it ended ``InfrastructureFailed``) every driver runs, in this order:
``score`` (the task's metric panel, always), ``gates`` and ``lean`` (inside the scorer's call, switched
by ``verification.gates`` / ``verification.lean``), ``panel`` and ``cbu`` (model calls on the trial's
solution text: locally each model call its own sandboxed process with its own gateway token, in a cluster
each step its own pod with its own token). A driver lists the
steps it can run in :data:`SUPPORTED`; admission refuses a manifest that turns on a step the driver
cannot run (:func:`refusals`) — a campaign never means something different on the two drivers.

Who calls it: the local engine (``runtime/local/trials.py``) and the operator's admission and
verifier Job builder (``controller``, ``runtime/kube/jobs.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from anchorage.manifests import Verification
from anchorage.trials.agents.plans import LOCAL, OPERATOR


@dataclass(frozen=True)
class Step:
    """One post-agent step; ``switch`` is the ``verification`` field that turns it on (None: always)."""

    name: str
    switch: str | None
    description: str
    in_scorer: bool = False  # run by the scorer's own call (score_artifact(gates=..., lean=...))


STEPS: tuple[Step, ...] = (
    Step("score", None, "the task's metric panel: raw, O-Eval, Robust BO-Eval", in_scorer=True),
    Step("gates", "gates", "programmatic invariant gates (a hard error penalises the task)", in_scorer=True),
    Step("lean", "lean", "the Lean obligation layer on the same exact data", in_scorer=True),
    Step("discrimination", "discrimination", "the Lean discrimination suite"),
    Step("panel", "panel", "adversarial verification panel on the solution text"),
    Step("cbu", "cbu", "consequence-based utility of the solution text"),
)

#: The steps each driver runs.
SUPPORTED: dict[str, frozenset[str]] = {
    LOCAL: frozenset({"score", "gates", "lean", "panel", "cbu"}),
    OPERATOR: frozenset({"score", "gates", "lean", "panel", "cbu"}),
}
#: The protocol steps (after the scorer), and the keys of their ``score.json`` block the trial record keeps.
#: Each ends with the step's cost (:func:`anchorage.trials.costing.protocol_cost`: unknown is None with the reason).
PROTOCOL_SUMMARY: dict[str, tuple[str, ...]] = {
    "panel": ("outcome", "status", "repaired", "votes", "launches", "revisions", "calls", "solution_source", "reason",
              "mock_model", "cost_usd", "cost_unknown_reason"),
    "cbu": ("utility", "outcome", "reason", "rollouts", "calls", "cost_usd", "cost_unknown_reason"),
}

_WHY = {
    "discrimination": "the discrimination suite checks the task's invariants, not a trial: run `anchorage lean "
                      "discriminate` instead",
}


def switched_on(verification: Verification, step: Step) -> bool:
    """Whether the manifest turns ``step`` on (``score`` is always on)."""
    if step.switch is None:
        return True
    value = getattr(verification, step.switch)
    return value is not None and value is not False


def enabled(verification: Verification) -> list[Step]:
    """The steps a trial with this ``verification`` runs, in order."""
    return [step for step in STEPS if switched_on(verification, step)]


def protocol_steps(verification: Verification) -> list[Step]:
    """The enabled steps after the scorer's call (each a model-calling protocol with its own token)."""
    return [step for step in enabled(verification) if not step.in_scorer]


def summary(step: str, block: dict[str, Any]) -> dict[str, Any]:
    """The trial record's view of a protocol step's ``score.json`` block."""
    return {key: block.get(key) for key in PROTOCOL_SUMMARY[step]}


def refusals(verification: Verification, driver: str, where: str = "spec.verification") -> list[str]:
    """One message per step the manifest turns on that ``driver`` cannot run (empty: admissible)."""
    supported = SUPPORTED[driver]
    return [f"{where}.{step.switch} is not supported by the {driver} driver yet: {_WHY.get(step.name, step.description)}"
            for step in enabled(verification) if step.name not in supported]
