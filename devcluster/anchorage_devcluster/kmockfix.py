"""The one place the cluster fake reaches below kmock's public API.

Used by ``anchorage_devcluster.apiserver`` (``install()`` at import). kmock 0.8 parses
``/api/v1/namespaces[/NAME[/status|/finalize]]`` as a namespace *prefix* of a namespaced request, not as
the Namespace resource itself; :func:`install` wraps its path parser so those paths name the Namespace
kind. Everything else goes to kmock's own parser. When kmock fixes this (or moves the module), only
this file changes.
"""

from __future__ import annotations

from typing import Any

from kmock._internal import parsing

_ORIGINAL = parsing.parse_path


def _parse_path(path: str) -> Any:
    parts = path.strip("/").split("/")
    core = parts[:2] == ["api", "v1"] and len(parts) >= 3 and parts[2] == "namespaces"
    if core and len(parts) <= 5 and (len(parts) < 5 or parts[4] in ("status", "finalize")):
        return parsing.ParsedPath("", "v1", "namespaces", None, parts[3] if len(parts) > 3 else None,
                                  parts[4] if len(parts) > 4 else None)
    return _ORIGINAL(path)


def install() -> None:
    """Route Namespace paths to the Namespace kind (kmock's request parser reads the module attribute)."""
    parsing.parse_path = _parse_path
