"""Reading manifest files (one or many YAML documents) into the pydantic models, with line numbers.

Called by ``anchorage run`` and ``anchorage report``. Every problem — a file too large, binary or not
UTF-8, YAML syntax, runaway nesting, an alias bomb, a huge integer, a duplicate key
(:mod:`.yamlsafe`), a missing or unknown ``kind``, an unknown field, a bad value, an unknown task —
becomes one :class:`~anchorage.errors.InputError` per problem list, each line naming ``file:line``,
the field path as written in YAML, what was wrong (quoting at most a short excerpt of the input), and
the fix.
"""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from anchorage.campaigns import yamlsafe
from anchorage.errors import InputError, did_you_mean
from anchorage.manifests import KINDS, Trial, VerificationCampaign

_HINTS = {
    "extra_forbidden": "remove it or fix its spelling",
    "missing": "add it",
    "greater_than_equal": "raise it to the minimum shown",
    "greater_than": "raise it above the minimum shown",
    "less_than_equal": "lower it to the maximum shown",
    "string_pattern_mismatch": "use lower-case letters, digits and '-' (a DNS label)",
    "literal_error": "use one of the values shown",
}


@dataclass(frozen=True)
class Document:
    """One parsed manifest and where it came from."""

    resource: Trial | VerificationCampaign | BaseModel
    path: Path
    node: yaml.Node

    def line_of(self, *loc: str | int) -> int:
        return line_of(self.node, loc)


def line_of(node: yaml.Node, loc: tuple[str | int, ...]) -> int:
    """1-based line of the YAML node at ``loc`` (the deepest existing ancestor when it is absent)."""
    current = node
    for part in loc:
        child = _child(current, part)
        if child is None:
            break
        current = child
    return current.start_mark.line + 1


def _child(node: yaml.Node, part: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == part:
                child_node: yaml.Node = value
                return child_node
        return None
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        child: yaml.Node = node.value[part]
        return child
    return None


def _key_line(node: yaml.Node, loc: tuple[str | int, ...]) -> int:
    """Line of the *key* at ``loc`` (for unknown fields, whose value may sit on a later line)."""
    parent = node
    for part in loc[:-1]:
        parent = _child(parent, part) or parent
    if isinstance(parent, yaml.MappingNode):
        for key, _ in parent.value:
            if key.value == loc[-1]:
                return int(key.start_mark.line) + 1
    return line_of(node, loc)


def _fields_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """The YAML field names allowed at ``loc`` (the parent of an unknown field)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        match = next((f for n, f in current.model_fields.items() if (f.alias or n) == part), None)
        if match is None:
            return []
        current = _unwrap(match.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(f.alias or n for n, f in current.model_fields.items())
    return []


def _unwrap(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _unwrap(options[0]) if options else annotation
    if origin in (list, typing.Annotated):
        return _unwrap(typing.get_args(annotation)[0])
    return annotation


def describe_validation(exc: ValidationError, model: type[BaseModel], path: Path, node: yaml.Node) -> list[str]:
    lines: list[str] = []
    for error in exc.errors():
        loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and "[" in p))
        field = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in loc).replace(".[", "[") or "(document)"
        kind = error["type"]
        message = error["msg"].removeprefix("Value error, ")
        if kind == "extra_forbidden":
            allowed = _fields_at(model, loc[:-1])
            hint = f"{_HINTS[kind]}; allowed here: {', '.join(allowed)}" if allowed else _HINTS[kind]
            close = did_you_mean(str(loc[-1]), allowed) if allowed else None
            if close:
                hint = f"{close} ({hint})"
            lines.append(f"{path}:{_key_line(node, loc)}: unknown field '{field}'\n  fix: {hint}")
            continue
        got = "" if kind == "missing" else f" (got {yamlsafe.excerpt(error.get('input'))})"
        hint = _HINTS.get(kind, "see examples/ for a valid manifest")
        expected = (error.get("ctx") or {}).get("expected")
        if kind == "literal_error" and isinstance(error.get("input"), str) and expected:
            close = did_you_mean(error["input"], re.findall(r"'([^']+)'", str(expected)))
            hint = f"{close} ({hint})" if close else hint
        if kind == "value_error":
            hint = "change the manifest as the message says"
        lines.append(f"{path}:{line_of(node, loc)}: {field}: {message}{got}\n  fix: {hint}")
    return lines


def load_documents(path: Path) -> list[Document]:
    """Every manifest in ``path`` (``---``-separated), validated; raises one InputError listing all problems."""
    try:
        parsed = [(node, data) for node, data in yamlsafe.documents(yamlsafe.read_text(path)) if data is not None]
    except yamlsafe.ManifestError as exc:
        where = f"{path}:{exc.line}" if exc.line else str(path)
        raise InputError(f"{where}: {exc.message}", hint=exc.hint or None) from None
    nodes = [node for node, _ in parsed]
    datas = [data for _, data in parsed]
    if not datas:
        raise InputError(f"{path} holds no manifest", hint="see examples/trial.yaml and examples/campaign.yaml")
    documents: list[Document] = []
    problems: list[str] = []
    for node, data in zip(nodes, datas, strict=True):
        document, errors = _one(path, node, data)
        problems += errors
        if document is not None:
            documents.append(document)
    if problems:
        raise InputError(f"{path} is not a valid manifest:\n" + "\n".join(problems), hint=None)
    return documents


def _one(path: Path, node: yaml.Node, data: Any) -> tuple[Document | None, list[str]]:
    line = node.start_mark.line + 1
    if not isinstance(data, dict):
        return None, [f"{path}:{line}: a manifest must be a mapping with apiVersion, kind, metadata, spec"
                      "\n  fix: start the document with 'apiVersion: anchorage.dev/v1alpha1'"]
    kind = data.get("kind")
    if kind not in KINDS:
        return None, [f"{path}:{line_of(node, ('kind',))}: kind {yamlsafe.excerpt(kind)} is not one of {', '.join(KINDS)}"
                      "\n  fix: set kind to Trial, VerificationCampaign or ScoringRun"]
    model = KINDS[kind]
    try:
        return Document(model.model_validate(data), path, node), []
    except ValidationError as exc:
        return None, describe_validation(exc, model, path, node)


def check_tasks(document: Document, resolve: typing.Callable[[str], object]) -> None:
    """Resolve every task the manifest names; an unknown one is reported at its line."""
    resource = document.resource
    refs: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(resource, Trial):
        refs.append((("spec", "task"), resource.spec.task))
    elif isinstance(resource, VerificationCampaign):
        refs += [(("spec", "tasks", i), t) for i, t in enumerate(resource.spec.tasks)]
    problems: list[str] = []
    for loc, ref in refs:
        try:
            resolve(ref)
        except InputError as exc:
            problems.append(f"{document.path}:{document.line_of(*loc)}: {'.'.join(map(str, loc))}: {exc.message}"
                            f"\n  fix: {exc.hint or 'use a task name from anchorage tasks list'}")
    if problems:
        raise InputError("unknown task(s):\n" + "\n".join(problems))
