"""Rebuilding an artifact from per-metric values, and writing values into an artifact at metric paths.

Used by the scorer (a profile's anchors are written into the oracle's expected result, so an anchor always
scores 1.0 against itself) and by rescoring where only per-metric records were saved (SPEC C.3: "where the
artifact was not packaged, the scored fields are rebuilt from the saved per-metric records") — e.g. the
published answers of a benchmark entry (``tests/scoring/published/``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from anchorage.scoring.scoreconfig import parse_path


def artifact_from_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """An artifact holding each value at its metric path (``a.b[2].c``: missing objects and list slots are
    created; unfilled list slots are ``null``, which the scorer reads as missing)."""
    artifact: dict[str, Any] = {}
    for path, value in values.items():
        set_path(artifact, parse_path(path), value)
    return artifact


def with_values(data: Mapping[str, Any], values: Mapping[tuple[str | int, ...], Any]) -> dict[str, Any]:
    """A deep copy of ``data`` with each token path set to its value."""
    out: dict[str, Any] = copy.deepcopy(dict(data))
    for tokens, value in values.items():
        set_path(out, tokens, value)
    return out


def set_path(node: Any, tokens: tuple[str | int, ...], value: Any) -> None:
    """Set ``value`` at ``tokens`` under ``node``, creating containers on the way (a non-container in the
    way is replaced)."""
    for depth, token in enumerate(tokens):
        last = depth == len(tokens) - 1
        following = None if last else tokens[depth + 1]
        fresh: Any = value if last else ([] if isinstance(following, int) else {})
        if isinstance(token, int):
            assert isinstance(node, list)
            node.extend([None] * (token + 1 - len(node)))
            if last:
                node[token] = value
                return
            if not isinstance(node[token], dict | list) or isinstance(node[token], list) != isinstance(following, int):
                node[token] = fresh
            node = node[token]
        else:
            assert isinstance(node, dict)
            if last:
                node[token] = value
                return
            child = node.get(token)
            if not isinstance(child, dict | list) or isinstance(child, list) != isinstance(following, int):
                node[token] = fresh
            node = node[token]
