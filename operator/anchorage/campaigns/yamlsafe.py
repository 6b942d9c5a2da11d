"""A YAML reader for manifests that a user (or a generator gone wrong) hands to ``anchorage run``.

Called by :mod:`anchorage.campaigns.documents`. Every way a file can go wrong becomes one
:class:`ManifestError` with the line it is on and a short excerpt, never a traceback, an hour of CPU or
a 373 MB ``campaign.json``:

* size: at most :data:`MAX_BYTES` are read (checked before reading, the read capped);
* text: UTF-8 only — a NUL byte says "binary", an undecodable byte names its line, column and value
  (Latin-1 files: save as UTF-8);
* nesting deeper than :data:`MAX_DEPTH` levels stops at the level that crosses it (the composer is
  recursive: 20,000 levels would overflow Python's stack);
* aliases: the size a node would have once its aliases are expanded is computed (never expanded) and
  bounded by :data:`MAX_NODES` (an alias bomb in ``metadata`` is refused); a recursive alias is refused;
* integers longer than :data:`MAX_INT_DIGITS` digits (Python refuses to parse 5,000 digits anyway);
* duplicate keys in a mapping are errors (YAML 1.2 says so; PyYAML silently keeps the last).

Built on PyYAML's pure-Python ``SafeLoader`` (no object construction beyond plain data).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 100
MAX_NODES = 100_000
MAX_INT_DIGITS = 40
EXCERPT = 60


def excerpt(value: Any, limit: int = EXCERPT) -> str:
    """``repr`` of a value, cut to ``limit`` characters (messages quote, never dump, the input)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return text[: limit - 3] + "..."


@dataclass
class ManifestError(Exception):
    """What is wrong with a manifest file, where (1-based line, 0 when unknown), and how to fix it."""

    message: str
    line: int = 0
    hint: str = ""

    def __str__(self) -> str:
        return self.message


def read_text(path: Path) -> str:
    """The file as text, refusing (with the reason) what is too large, binary or not UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise ManifestError(f"cannot read {path}: {exc.strerror}", hint="pass an existing manifest file") from exc
    try:
        info = os.fstat(fd)
        if not _regular(info.st_mode):
            raise ManifestError(f"{path} is not a regular file", hint="pass a manifest file")
        if info.st_size > MAX_BYTES:
            raise ManifestError(_too_large(info.st_size), hint=_SPLIT)
        blob = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(blob) > MAX_BYTES:
        raise ManifestError(_too_large(len(blob)), hint=_SPLIT)
    return decode(blob)


_SPLIT = "split it into several manifests, or list tasks with a taskSelector instead of one by one"


def _regular(mode: int) -> bool:
    import stat

    return stat.S_ISREG(mode)


def _too_large(size: int) -> str:
    return f"the file is {size} bytes; a manifest may be at most {MAX_BYTES} bytes"


def decode(blob: bytes) -> str:
    """UTF-8 text (a BOM is allowed); a NUL byte or an undecodable byte is a :class:`ManifestError`."""
    if b"\0" in blob:
        line = blob.count(b"\n", 0, blob.index(b"\0")) + 1
        raise ManifestError(f"this is a binary file, not YAML text (a NUL byte at line {line})", line=line,
                            hint="pass the manifest's .yaml file")
    try:
        return blob.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = blob.count(b"\n", 0, exc.start) + 1
        column = exc.start - (blob.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ManifestError(f"not UTF-8 text: byte 0x{blob[exc.start]:02x} at line {line}, column {column}",
                            line=line, hint="save the file as UTF-8 (it looks like Latin-1 or another legacy encoding)"
                            ) from None


class _Loader(yaml.SafeLoader):
    """SafeLoader that bounds depth, alias expansion and integers, and refuses duplicate keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        line = event.start_mark.line + 1 if event.start_mark is not None else 0
        if isinstance(event, AliasEvent):
            node = super().compose_node(parent, index)
            if node is None or id(node) not in self._sizes:
                raise ManifestError(f"the alias *{event.anchor} refers to a node that contains it (a recursive alias)",
                                    line=line, hint="remove the recursive alias")
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ManifestError(f"nested more than {MAX_DEPTH} levels deep", line=line,
                                hint="a manifest needs a few levels; remove the runaway nesting")
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is None:
            return None
        self._sizes[id(node)] = size = self._size(node)
        if size > MAX_NODES:
            raise ManifestError(f"this node expands to {size} values once its aliases are expanded (at most {MAX_NODES})",
                                line=node.start_mark.line + 1, hint="an alias bomb? write the values out, or fewer")
        if isinstance(node, MappingNode):
            _no_duplicates(node)
        return node

    def _size(self, node: Node) -> int:
        if isinstance(node, SequenceNode):
            return 1 + sum(self._sizes.get(id(child), 1) for child in node.value)
        if isinstance(node, MappingNode):
            return 1 + sum(self._sizes.get(id(k), 1) + self._sizes.get(id(v), 1) for k, v in node.value)
        return 1

    def construct_yaml_int(self, node: ScalarNode) -> int:
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise ManifestError(f"an integer with {digits} digits (at most {MAX_INT_DIGITS})",
                                line=node.start_mark.line + 1, hint="use a number of a sensible size")
        value: int = super().construct_yaml_int(node)
        return value


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def _no_duplicates(node: MappingNode) -> None:
    seen: dict[Any, int] = {}
    for key, _ in node.value:
        if not isinstance(key, ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        line = key.start_mark.line + 1
        if key.value in seen:
            raise ManifestError(f"duplicate key {excerpt(key.value)} (first at line {seen[key.value]})", line=line,
                                hint="keep one of them; YAML keys must be unique in a mapping")
        seen[key.value] = line


def documents(text: str) -> Iterator[tuple[Node, Any]]:
    """(node, data) of every non-empty document; errors as :class:`ManifestError` with the line."""
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (control characters)
        line = text.count("\n", 0, exc.position) + 1
        raise ManifestError(f"YAML syntax error: character {exc.character!r} is not allowed in YAML text", line=line,
                            hint="remove the control character at that line") from None
    try:
        while True:
            try:
                if not loader.check_node():
                    break
                node = loader.get_node()
                if node is None:
                    continue
                data = loader.construct_document(node)
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                problem = getattr(exc, "problem", None) or exc.__class__.__name__
                raise ManifestError(f"YAML syntax error: {problem}", line=mark.line + 1 if mark is not None else 0,
                                    hint="fix the indentation or quoting at that line (YAML needs spaces, not tabs)"
                                    ) from None
            except RecursionError:
                raise ManifestError(f"nested too deeply (more than {MAX_DEPTH} levels)",
                                    hint="remove the runaway nesting") from None
            yield node, data
    finally:
        loader.dispose()
