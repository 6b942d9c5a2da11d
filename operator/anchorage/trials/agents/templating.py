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


# ----- environment references: Kubernetes' $(NAME) in container args ---------------------------------------
#
# A plan may refer to a variable only the driver knows (the gateway's URL: codex takes it on its command
# line, not from the environment) as ``$(OPENAI_BASE_URL)``. In a pod the kubelet expands such references
# against the container's environment; the local sandbox does the same with :func:`expand_references`, so
# one argv works on both drivers. Text a plan puts in argv that is not a reference (the instruction) goes
# through :func:`escape_references` first, so ``$(NAME)`` written in a prompt reaches the agent literally.

_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


_EXPANDABLE = re.compile(r"\$(?=[$(])")


def escape_references(text: str) -> str:
    """``text`` for an argv slot that must not be expanded: each ``$`` the kubelet would act on (before
    ``$`` or ``(``) doubled; other text, a lone ``$5`` included, is left as written."""
    return _EXPANDABLE.sub("$$", text)


def expand_references(text: str, env: Mapping[str, str]) -> str:
    """What the kubelet makes of a container arg: ``$(NAME)`` → its value when ``env`` defines it,
    ``$$`` → ``$``, anything else (an undefined name, a lone ``$``) as written."""
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        return env.get(name, match.group(0))

    return _REFERENCE.sub(one, text)
