"""Check an artifact's obligations and summarise them for the score record.

:func:`check_artifact` runs the exact Python checker always and ``lake build`` where Lean is
installed, and returns the JSON report of ``anchorage lean check``. :func:`summarize` is the hook
the scorer puts in ``ScoreRecord.obligations`` when ``verification.lean`` is on (counts and which
checker ran). Both take the task directory and the artifact (text, ``Decimal``- or float-parsed).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from anchorage.invariants.gates import exact_view
from anchorage.invariants.spec import load_invariants
from anchorage.lean import runner
from anchorage.lean.generation import build_obligations, generate_package


def summarize(task_root: Path, data: Any, *, lean: bool = False) -> dict[str, Any]:
    """Counts of the task's obligations on ``data`` (Python exact checker; Lean too if ``lean``)."""
    if load_invariants(Path(task_root)) is None:
        return {"total": 0, "proved_by_python": 0, "failed": 0, "missing": 0, "checker": "python",
                "note": "task has no tests/invariants.yaml"}
    if lean:
        return _counts(check_artifact(Path(task_root), data, lean=True))
    _, obs = build_obligations(Path(task_root), exact_view(data))
    proved = sum(1 for ob in obs if not ob.skipped and ob.holds())
    missing = sum(1 for ob in obs if ob.skipped)
    return {"total": len(obs), "proved_by_python": proved, "failed": len(obs) - proved - missing,
            "missing": missing, "checker": "python"}


def _counts(report: dict[str, Any]) -> dict[str, Any]:
    keys = ("total", "proved_by_python", "failed", "missing", "checker")
    out = {key: report["counts"][key] if key in report["counts"] else report[key] for key in keys}
    if report["lean"]["ran"]:
        out["proved_by_lean"] = report["counts"]["proved_by_lean"]
    return out


def check_artifact(task_root: Path, data: Any, *, out: Path | None = None, lean: bool = True,
                   artifact_label: str = "artifact") -> dict[str, Any]:
    """The check report of one artifact: every obligation's Python verdict, and Lean's where present."""
    exact = exact_view(data)
    if lean and runner.lake_path() is not None:
        if out is None:
            with tempfile.TemporaryDirectory(prefix="anchorage-lean-") as tmp:
                return _check_with_lean(task_root, exact, Path(tmp), artifact_label)
        return _check_with_lean(task_root, exact, out, artifact_label)
    _, obs = build_obligations(task_root, exact)
    reason = runner.no_lean_reason() if lean else "Lean not requested: the Python exact checker ran"
    return _report(task_root, obs, runner.LakeOutcome(ran=False, ok=False, reason=reason), artifact_label)


def _check_with_lean(task_root: Path, exact: Any, out: Path, label: str) -> dict[str, Any]:
    package = generate_package(task_root, exact, out, artifact_label=label)
    return _report(task_root, package.obligations, runner.build(package), label, package.namespace)


def _lean_verdict(skipped: bool, failed: bool, lake: runner.LakeOutcome) -> str:
    """A theorem failed when Lean cited it, or when the build failed without citing anything."""
    if skipped:
        return "missing"
    return "failed" if failed or (not lake.ok and not lake.errors) else "proved"


def _report(task_root: Path, obs: list[Any], lake: runner.LakeOutcome, label: str, namespace: str = "") -> dict[str, Any]:
    namespace = namespace or (load_invariants(task_root).namespace if load_invariants(task_root) else "")  # type: ignore[union-attr]
    failed_in_lean = lake.failed_theorems()
    rows = []
    for ob in obs:
        theorem = f"{namespace}.{ob.name}"
        python = "missing" if ob.skipped else ("passed" if ob.holds() else "failed")
        row: dict[str, Any] = {"theorem": theorem, "form": ob.form, "paths": list(ob.paths), "python": python,
                               "claim": ob.claim, "severity": ob.severity, "reason": ob.reason}
        if lake.ran:
            row["lean"] = _lean_verdict(ob.skipped, theorem in failed_in_lean, lake)
        rows.append(row)
    counts = {
        "total": len(rows),
        "proved_by_python": sum(r["python"] == "passed" for r in rows),
        "failed": sum(r["python"] == "failed" for r in rows),
        "missing": sum(r["python"] == "missing" for r in rows),
    }
    if lake.ran:
        counts["proved_by_lean"] = sum(r.get("lean") == "proved" for r in rows)
        counts["disagreements"] = sum(
            1 for r in rows if r["python"] != "missing" and (r["python"] == "passed") != (r["lean"] == "proved"))
    return {
        "task": task_root.name,
        "artifact": label,
        "checker": "python+lean" if lake.ran else "python",
        "lean": {"ran": lake.ran, "ok": lake.ok, "reason": lake.reason,
                 "errors": [{"line": e.line, "theorem": e.theorem, "paths": list(e.paths), "message": e.message}
                            for e in lake.errors]},
        "counts": counts,
        "obligations": rows,
    }
