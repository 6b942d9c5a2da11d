"""The named replay checks (tier C): physical feasibility that needs computation.

A task's ``tests/invariants.yaml`` names replay checks under ``replay:``. Each is one module of this package that
declares it as ``CHECK`` (:class:`ReplayCheck`: the name, and the function that takes the parsed artifact and returns
:class:`GateResult` records); the registry, :data:`CHECKS`, is what the modules declare (:mod:`anchorage.registry`).
Adding a check is adding a module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from anchorage.invariants.results import GateResult
from anchorage.registry import by_name, declared


@dataclass(frozen=True)
class ReplayCheck:
    """One replay check, declared once in its module (``CHECK``)."""

    #: The name a task's ``tests/invariants.yaml`` gives under ``replay:``.
    name: str
    #: The check over the artifact's exact data (numbers ``Decimal``/int: :func:`anchorage.invariants.gates.check`).
    run: Callable[[Mapping[str, Any]], list[GateResult]]


#: Every replay check, by name: what this package's modules declare as ``CHECK`` (two of one name are an error).
CHECKS: dict[str, ReplayCheck] = by_name(declared(__name__, __path__, "CHECK", ReplayCheck), "replay check")


def get(name: str) -> ReplayCheck:
    """The replay check called ``name``; KeyError lists the known names."""
    try:
        return CHECKS[name]
    except KeyError:
        raise KeyError(f"unknown replay check {name!r}; known: {', '.join(sorted(CHECKS))}") from None
