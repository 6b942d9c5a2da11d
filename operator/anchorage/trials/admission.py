"""Admission: what a driver refuses before anything runs — an agent kind or a post-agent step it lacks.

Called by the local engine (``anchorage run``: exit code 2) and the operator (a Trial ends
``InfrastructureFailed`` with condition ``InvalidInput``, a campaign goes ``Failed`` before creating any
Trial, a ScoringRun ``Failed``). A manifest means the same on both drivers or is refused: never a step
silently skipped.
"""

from __future__ import annotations

from anchorage.errors import InputError
from anchorage.manifests import AgentSpec, Verification
from anchorage.trials.agents import refusal
from anchorage.trials.pipeline import refusals


def admit(agent: AgentSpec, verification: Verification, driver: str, where: str = "spec") -> None:
    """Raise InputError naming every field of the manifest ``driver`` cannot run."""
    problems = [p for p in (refusal(agent, driver),) if p]
    problems += refusals(verification, driver, where=f"{where}.verification")
    if problems:
        raise InputError("; ".join(problems), hint="change the manifest (docs/architecture.md lists what each "
                         "driver runs)")
