"""The declarative invariants file of a task (``tasks/<slug>/tests/invariants.yaml``).

Parsed into pydantic models; decimals in the YAML text are kept exact (``Decimal``), never floats.
Loaded by :mod:`anchorage.invariants.gates` and :mod:`anchorage.lean`; the format is documented in
``docs/design-notes.md`` ("Invariants file").
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from anchorage.errors import InputError
from anchorage.invariants.exact import parse_path

INVARIANTS_FILE = Path("tests") / "invariants.yaml"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class _ExactLoader(yaml.SafeLoader):
    """SafeLoader that reads YAML floats as ``Decimal`` from their text."""


def _decimal(loader: yaml.SafeLoader, node: yaml.Node) -> Decimal:
    assert isinstance(node, yaml.ScalarNode)
    text = str(loader.construct_scalar(node)).replace("_", "")
    if text.lower().lstrip("+-") in {".inf", ".nan"}:
        raise InputError(f"non-finite number {text!r} in invariants file", hint="bounds must be finite decimals")
    return Decimal(text)


_ExactLoader.add_constructor("tag:yaml.org,2002:float", _decimal)

Number = int | Decimal


class Invariant(BaseModel):
    """One declared invariant; which fields apply depends on ``form``."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str
    form: Literal["range", "ordering", "identity", "finite_domain", "sign", "interval"]
    path: str | None = None
    lhs: str | None = None
    rhs: str | None = None
    op: Literal["<=", "<", ">", ">="] | None = None
    lo: Number | str | None = None
    hi: Number | str | None = None
    product: list[str] | None = None
    target: Number | str | None = None
    rel_tol: Number | None = None
    abs_tol: Number | None = None
    values: list[Number] | None = None
    measure: Literal["value", "length"] = "value"
    severity: Literal["hard", "warning"] = "hard"
    source: str = ""

    @model_validator(mode="after")
    def _check_shape(self) -> Invariant:
        if not _NAME.match(self.name):
            raise ValueError(f"name {self.name!r} must be a Lean identifier part ([A-Za-z][A-Za-z0-9_]*)")
        problem = _SHAPE_CHECKS[self.form](self)
        if problem:
            raise ValueError(f"{self.form} invariant {self.name!r}: {problem}")
        for path in self.read_paths():
            try:
                parse_path(path)
            except InputError as exc:
                raise ValueError(f"invariant {self.name!r}: {exc.message}") from None
        return self

    def read_paths(self) -> list[str]:
        """The JSON path patterns this invariant reads, in order."""
        if self.form == "ordering":
            return [str(self.lhs), str(self.rhs)]
        if self.form == "interval":
            return [str(self.lo), str(self.hi)]
        if self.form == "identity":
            factors = list(self.product or ([self.path] if self.path else []))
            return [*factors, *([self.target] if isinstance(self.target, str) else [])]
        return [str(self.path)]


def _range(inv: Invariant) -> str:
    if not inv.path:
        return "needs path"
    if inv.lo is None and inv.hi is None:
        return "needs lo and/or hi"
    if isinstance(inv.lo, str) or isinstance(inv.hi, str):
        return "lo/hi must be numbers (use ordering or interval to compare two fields)"
    return ""


def _ordering(inv: Invariant) -> str:
    if not (inv.lhs and inv.rhs):
        return "needs lhs and rhs paths"
    return "" if inv.op in (None, "<=", "<") else "op must be <= or <"


def _identity(inv: Invariant) -> str:
    if bool(inv.product) == bool(inv.path):
        return "needs exactly one of product (a list of paths) or path"
    if inv.target is None:
        return "needs target (a number or a path)"
    if inv.rel_tol is None and inv.abs_tol is None:
        return "needs rel_tol and/or abs_tol"
    if any(tol is not None and tol < 0 for tol in (inv.rel_tol, inv.abs_tol)):
        return "tolerances must be non-negative"
    return ""


def _finite_domain(inv: Invariant) -> str:
    if not inv.path:
        return "needs path"
    return "" if inv.values else "needs a non-empty list of values"


def _sign(inv: Invariant) -> str:
    if not inv.path:
        return "needs path"
    return "" if inv.op in (">", ">=") else "op must be > or >="


def _interval(inv: Invariant) -> str:
    if not (isinstance(inv.lo, str) and isinstance(inv.hi, str)):
        return "lo and hi must both be JSON paths"
    return ""


_SHAPE_CHECKS = {
    "range": _range,
    "ordering": _ordering,
    "identity": _identity,
    "finite_domain": _finite_domain,
    "sign": _sign,
    "interval": _interval,
}


class InvariantsFile(BaseModel):
    """The whole file: a Lean namespace, the invariants, and the replay checks to run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str
    invariants: list[Invariant] = Field(default_factory=list)
    replay: list[str] = Field(default_factory=list)
    notes: str = ""

    @model_validator(mode="after")
    def _unique(self) -> InvariantsFile:
        if not _NAME.match(self.namespace) or not self.namespace[0].isupper():
            raise ValueError(f"namespace {self.namespace!r} must be a CamelCase Lean identifier")
        seen: set[str] = set()
        for inv in self.invariants:
            if inv.name in seen:
                raise ValueError(f"invariant name {inv.name!r} appears twice")
            seen.add(inv.name)
        return self


def parse_invariants(text: str, origin: str = "<text>") -> InvariantsFile:
    """Parse the YAML text; InputError names the file and the offending entry."""
    try:
        raw: Any = yaml.load(text, Loader=_ExactLoader)
    except yaml.YAMLError as exc:
        raise InputError(f"{origin} is not valid YAML: {exc}", hint="fix the YAML syntax") from None
    try:
        return InvariantsFile.model_validate(raw)
    except ValidationError as exc:
        raise InputError(
            f"{origin} does not match the invariants format:\n{exc}",
            hint="see docs/design-notes.md, section 'Invariants file'",
        ) from None


_CACHE: dict[Path, tuple[int, int, InvariantsFile]] = {}


def load_invariants(task_root: Path) -> InvariantsFile | None:
    """The task's invariants (cached by file mtime and size), or None when it has none."""
    path = (task_root / INVARIANTS_FILE).resolve()
    try:
        stat = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    cached = _CACHE.get(path)
    if cached and cached[0] == stat.st_mtime_ns and cached[1] == stat.st_size:
        return cached[2]
    parsed = parse_invariants(path.read_text(encoding="utf-8"), str(path))
    _CACHE[path] = (stat.st_mtime_ns, stat.st_size, parsed)
    return parsed
