"""Argv templates: replace only the documented placeholders, leave every other brace as written.

Used by every agent kind (``command`` argv, ``replay`` paths), so both drivers fill templates alike.
A single pass over the template: text substituted for one placeholder (an instruction that itself
contains ``{task}``) is never substituted again, and braces of shell code or JSON (``{x: 1}``,
``json.dump({}, f)``, ``${HOME}``) stay untouched — no ``str.format`` and its ``KeyError``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: The placeholders an argv template may use.
PLACEHOLDERS = ("instruction", "task", "seed", "model")
_PATTERN = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")


def fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``{name}`` of :data:`PLACEHOLDERS` that ``values`` has replaced."""
    return _PATTERN.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def fill_all(templates: list[str] | tuple[str, ...], values: Mapping[str, str]) -> tuple[str, ...]:
    """:func:`fill` on each part of an argv template."""
    return tuple(fill(part, values) for part in templates)
