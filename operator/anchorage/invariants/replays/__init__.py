"""Registry of named replay checks (tier C): physical feasibility that needs computation.

A task's ``tests/invariants.yaml`` names replay checks under ``replay:``; each name maps to a
function here that takes the parsed artifact and returns :class:`GateResult` records. Modules in
this package register their checks with :func:`replay_check` when imported; :func:`get` imports
them all on first use.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from typing import Any

from anchorage.invariants.results import GateResult

ReplayCheck = Callable[[Mapping[str, Any]], list[GateResult]]
_REGISTRY: dict[str, ReplayCheck] = {}
_loaded = False


def replay_check(name: str) -> Callable[[ReplayCheck], ReplayCheck]:
    """Register ``fn`` under ``name`` (the name used in invariants.yaml)."""

    def decorate(fn: ReplayCheck) -> ReplayCheck:
        if name in _REGISTRY and _REGISTRY[name] is not fn:
            raise ValueError(f"replay check {name!r} registered twice")
        _REGISTRY[name] = fn
        return fn

    return decorate


def _load_all() -> None:
    global _loaded
    if not _loaded:
        for info in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{info.name}")
        _loaded = True


def get(name: str) -> ReplayCheck:
    """The replay check called ``name``; KeyError lists the known names."""
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown replay check {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def names() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)
