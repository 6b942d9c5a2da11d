"""The extension points' one idiom: each entry is a module of its package that declares it as a module-level
constant (an agent kind's ``KIND``, an invariant form's ``FORM``, a replay check's ``CHECK``, a metric mode's
``MODE``, a command module's ``register``), and the registry is what the package's modules declare
(:func:`declared`; named entries by their names: :func:`by_name`) — adding an entry is adding a module, with nothing
to list elsewhere.

Facts other layers need before they can import a registry (the manifests' enum of agent kinds, the CRDs' rules) are
generated from it and drift-tested (``anchorage dev crds``).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Named(Protocol):
    """An entry that has a name (an agent kind, an invariant form, a replay check, a metric mode)."""

    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


def declared(package: str, path: Iterable[str], attribute: str, kind: type[T]) -> list[T]:
    """What the modules of ``package`` (its ``__path__``: ``path``) declare as ``attribute``, in the order of their
    module names; a module without it, or with another type, declares nothing."""
    found: list[T] = []
    for info in sorted(pkgutil.iter_modules(list(path)), key=lambda m: m.name):
        value = getattr(importlib.import_module(f"{package}.{info.name}"), attribute, None)
        if isinstance(value, kind):
            found.append(value)
    return found


def by_name(entries: Iterable[N], what: str) -> dict[str, N]:
    """The entries by their names, in their order; two entries of one name are an error (a ValueError naming the
    ``what`` and the name), never one silently hiding the other."""
    found: dict[str, N] = {}
    for entry in entries:
        if entry.name in found:
            raise ValueError(f"{what} {entry.name!r} is declared twice")
        found[entry.name] = entry
    return found
