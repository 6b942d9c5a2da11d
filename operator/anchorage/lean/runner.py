"""Run Lake on a generated obligation package and map its errors back to JSON paths.

Lean is optional: :func:`lake_path` is None where no toolchain is installed (this machine), and
callers then report that only the Python exact checker ran. Used by :mod:`anchorage.lean.obligations`,
:mod:`anchorage.lean.audit` and the discrimination suite.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from anchorage.lean.generation import GeneratedPackage

BUILD_TIMEOUT_S = 900
_LOCATION = re.compile(r"(?P<file>[^\s:]+\.lean):(?P<line>\d+):(?P<col>\d+):")


def lake_path() -> str | None:
    return shutil.which("lake")


def no_lean_reason() -> str:
    return "lake not on PATH: Lean build not run; the Python exact checker ran"


@dataclass(frozen=True)
class LeanError:
    line: int
    message: str
    theorem: str | None = None
    paths: tuple[str, ...] = ()


@dataclass
class LakeOutcome:
    ran: bool
    ok: bool
    reason: str = ""
    errors: list[LeanError] = field(default_factory=list)
    output: str = ""

    def failed_theorems(self) -> set[str]:
        return {e.theorem for e in self.errors if e.theorem}


def parse_build_errors(output: str, package: GeneratedPackage) -> list[LeanError]:
    """Errors in the obligation module, each tied to its theorem and JSON paths when it can be."""
    module_name = package.module_path.name
    errors: list[LeanError] = []
    for raw in output.splitlines():
        match = _LOCATION.search(raw)
        if not match or "error" not in raw.lower() or not match.group("file").endswith(module_name):
            continue
        line = int(match.group("line"))
        rendered = package.theorem_at(line)
        message = raw[match.end():].strip().removeprefix("error:").strip()
        if rendered is None:
            errors.append(LeanError(line, message))
        else:
            errors.append(LeanError(line, message, rendered.full_name, rendered.obligation.paths))
    return errors


def build(package: GeneratedPackage, *, timeout: int = BUILD_TIMEOUT_S) -> LakeOutcome:
    """``lake build`` in the package; never raises for a failed build (that is a verdict)."""
    lake = lake_path()
    if lake is None:
        return LakeOutcome(ran=False, ok=False, reason=no_lean_reason())
    try:
        proc = subprocess.run([lake, "build"], cwd=package.root, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return LakeOutcome(ran=True, ok=False, reason=f"lake build timed out after {timeout} s")
    output = proc.stdout + proc.stderr
    return LakeOutcome(ran=True, ok=proc.returncode == 0, errors=parse_build_errors(output, package), output=output)


def run_lean_file(package_root: Path, lean_file: Path, *, timeout: int = BUILD_TIMEOUT_S) -> tuple[int, str]:
    """``lake env lean FILE`` inside the package (used by the axiom audit)."""
    lake = lake_path()
    if lake is None:
        raise FileNotFoundError(no_lean_reason())
    proc = subprocess.run([lake, "env", "lean", str(lean_file)], cwd=package_root, capture_output=True, text=True,
                          timeout=timeout, check=False)
    return proc.returncode, proc.stdout + proc.stderr
