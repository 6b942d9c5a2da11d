"""The agent-kind registry: one module per kind, one list of them, one ``plan_agent`` for both drivers.

Called by the local engine (``runtime/local/trials.py``), the operator's Job builder
(``runtime/kube/jobs.py``) and admission (``controller``), and ``anchorage run`` (does a campaign need
the gateway?). Adding a kind: a module here with a ``KIND`` (see ``codex.py``), then ``anchorage dev crds``
(regenerates ``anchorage.agentkinds``, the manifests' enum, and the CRDs) — see docs/architecture.md, "Add an agent
kind". An unknown kind is an error, never another CLI.
"""

from __future__ import annotations

import dataclasses

from anchorage.errors import InputError
from anchorage.manifests import AgentSpec
from anchorage.registry import by_name, declared
from anchorage.tasks import Task
from anchorage.trials.agents.plans import DRIVERS, LOCAL, OPERATOR, AgentKind, AgentPlan, Replay
from anchorage.trials.agents.templating import PLACEHOLDERS, fill

#: Every agent kind, by ``agent.kind``: what this package's modules declare as ``KIND`` (:mod:`anchorage.registry`).
KINDS: dict[str, AgentKind] = by_name(declared(__name__, __path__, "KIND", AgentKind), "agent kind")

__all__ = ["DRIVERS", "KINDS", "LOCAL", "OPERATOR", "PLACEHOLDERS", "AgentKind", "AgentPlan", "Replay", "fill",
           "kind_of", "needs_gateway", "plan_agent", "refusal"]


def kind_of(name: str) -> AgentKind:
    """The registered kind ``name``; an unknown kind is an InputError listing the known ones."""
    try:
        return KINDS[name]
    except KeyError:
        raise InputError(f"unknown agent kind {name!r}", hint=f"use one of: {', '.join(KINDS)}") from None


def plan_agent(spec: AgentSpec, task: Task, seed: int) -> AgentPlan:
    """What runs for ``spec`` on ``task`` with ``seed`` (the same plan on both drivers)."""
    kind = kind_of(spec.kind)
    return dataclasses.replace(kind.plan(spec, task, seed), needs_gateway=kind.needs_gateway(spec))


def needs_gateway(spec: AgentSpec) -> bool:
    """Whether the agent calls models (and so gets the gateway and a token) — without loading a task."""
    return kind_of(spec.kind).needs_gateway(spec)


def refusal(spec: AgentSpec, driver: str) -> str | None:
    """Why ``driver`` cannot run this agent kind (None: it can)."""
    kind = kind_of(spec.kind)
    if driver in kind.drivers:
        return None
    where = " and ".join(sorted(kind.drivers))
    return f"agent kind {kind.name!r} runs on the {where} driver only" + (f": {kind.refusal}" if kind.refusal else "")
