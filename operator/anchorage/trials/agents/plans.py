"""What an agent kind yields: the :class:`AgentPlan` both drivers run, and the kind's definition.

The plan is driver-neutral: the argv and environment of the agent process, whether it needs the model
gateway, which task folders it sees read-only and where, and — for kinds that run nothing — the
artifact to replay. A driver adds only its own facts (the gateway's address and token, the sandbox or
pod around the process).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from anchorage.manifests import AgentSpec
from anchorage.tasks import Task
from anchorage.trials.agents.templating import escape_references

LOCAL = "local"
OPERATOR = "operator"
DRIVERS = frozenset({LOCAL, OPERATOR})


@dataclass(frozen=True)
class Replay:
    """An artifact copied into ``/root/results`` instead of running anything (labelled a replay).

    ``source`` is a path or URI; with ``in_task`` it is relative to the task's folder (an imported
    anchor's ``tests/expected_result.json``), else as the manifest gave it (relative paths: the
    driver's base folder)."""

    source: str
    in_task: bool = False


@dataclass(frozen=True)
class AgentPlan:
    """How one agent runs. ``problem`` set means it cannot run (the reason is the trial's message).

    ``builtin`` names a program of Anchorage's own (``runtime/local/inside/<builtin>.py``) that the
    driver starts with its interpreter before ``argv``; ``cli`` names the pinned agent CLI that
    ``argv[0]`` is (a key of ``anchorage/agentclis/versions.json``): the driver puts its folder on ``PATH``
    (:func:`anchorage.agentclis.bin_dir`, the same path in the sandbox and the agent image) and checks it is
    installed before anything runs — a missing CLI is the platform's failure, agents cannot download tools;
    ``binds`` maps a mount point to a folder of the task bound read-only there. ``needs_gateway`` is
    set by :func:`anchorage.trials.agents.plan_agent` from the kind's ``gateway``.
    """

    kind: str
    label: str
    argv: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    needs_gateway: bool = False
    binds: Mapping[str, str] = field(default_factory=dict)
    builtin: str | None = None
    cli: str | None = None
    replay: Replay | None = None
    problem: str | None = None

    @property
    def delivers_prompt(self) -> bool:
        """Whether the instruction reaches the agent (a replay and the oracle get none)."""
        return bool(self.argv or self.builtin) and self.kind != "oracle"


#: When a kind calls models: ``always``, ``never``, or ``with_model`` (when ``agent.model`` is set).
Gateway = Literal["always", "never", "with_model"]
def replayed_message(plan: AgentPlan) -> str:
    """The trial's message after a replay (both drivers say the same)."""
    assert plan.replay is not None
    return f"replayed {plan.replay.source} ({plan.label})"


def missing_replay_message(plan: AgentPlan) -> str:
    """The one rule for a replay whose artifact does not exist, on both drivers: the entry's own problem — the
    trial is ``Failed`` (``agent_error``) with this message, never retried, never an infrastructure failure."""
    assert plan.replay is not None
    if plan.replay.in_task:
        return f"replay artifact {plan.replay.source} does not exist in the task's folder (the imported anchor's result)"
    return f"replay artifact {plan.replay.source} does not exist (check the entry's agent.artifact)"


Planner = Callable[[AgentSpec, Task, int], AgentPlan]


@dataclass(frozen=True)
class AgentKind:
    """One agent kind, declared once in its module (``KIND``): its name (``agent.kind``), how to plan it, whether it
    calls models (``gateway``) and needs ``agent.model``, which drivers can run it."""

    name: str
    plan: Planner
    description: str
    gateway: Gateway = "never"
    #: Whether ``agent.model`` is required (the manifests' validator and the CRDs' rule say so: ``anchorage.agentkinds``).
    needs_model: bool = False
    drivers: frozenset[str] = DRIVERS
    refusal: str = ""   # why a driver outside ``drivers`` cannot run it, and what to use instead

    def needs_gateway(self, spec: AgentSpec) -> bool:
        """Whether an agent of this kind calls models (gets the gateway and a per-trial token)."""
        return self.gateway == "always" or (self.gateway == "with_model" and spec.model is not None)


def base_env(spec: AgentSpec, task: Task, seed: int, **extra: str) -> dict[str, str]:
    """The environment every agent gets: the task's ``[environment].env``, the manifest's ``agent.env``,
    ``ANCHORAGE_SEED``, then the kind's own variables."""
    return {**task.config.environment.env, **spec.env, "ANCHORAGE_SEED": str(seed), **extra}


def values(spec: AgentSpec, task: Task, seed: int) -> dict[str, str]:
    """The placeholder values of a trial (see :mod:`.templating`); the instruction is escaped, so the
    ``$(NAME)`` expansion of both drivers leaves it as written."""
    return {"instruction": escape_references(task.instruction), "task": task.slug, "seed": str(seed),
            "model": spec.model or ""}
