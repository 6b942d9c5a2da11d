"""The extension points' one idiom: each entry is a module of its package that declares it as a module-level
constant (an agent kind's ``KIND``, a command module's ``register``), and the registry is what the package's modules
declare — adding an entry is adding a module, with nothing to list elsewhere.

Facts other layers need before they can import a registry (the manifests' enum of agent kinds, the CRDs' rules) are
generated from it and drift-tested (``anchorage dev crds``).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def declared(package: str, path: Iterable[str], attribute: str, kind: type[T]) -> list[T]:
    """What the modules of ``package`` (its ``__path__``: ``path``) declare as ``attribute``, in the order of their
    module names; a module without it, or with another type, declares nothing."""
    found: list[T] = []
    for info in sorted(pkgutil.iter_modules(list(path)), key=lambda m: m.name):
        value = getattr(importlib.import_module(f"{package}.{info.name}"), attribute, None)
        if isinstance(value, kind):
            found.append(value)
    return found
