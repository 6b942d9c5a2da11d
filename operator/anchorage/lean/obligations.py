"""Check an artifact's obligations and summarise them for the score record.

:func:`check_artifact` runs the exact Python checker always and ``lake build`` where Lean is
installed, and returns the JSON report of ``anchorage lean check``. :func:`summarize` is the hook
the scorer (``score_artifact(..., lean=True)``) puts in ``ScoreRecord.obligations`` when
``verification.lean`` is on (counts, the hard failures by name, and which checker ran).
Both take the task directory and the artifact (text, ``Decimal``- or float-parsed).
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
    """Counts of the task's obligations on ``data`` for the score record's ``obligations{}``.

    The exact Python checker always runs; with ``lean`` ``lake build`` runs too where ``lake`` is on
    PATH (``checker`` says ``python`` or ``python+lean``; ``lean.reason`` says why Lean did not run).
    Keys: ``total = proved + unconfirmed + failed + missing``, where ``failed`` and ``failed_hard``
    (obligation names, as the gates name them) are the Python checker's verdicts — the gates' verdicts
    on the same fields — and ``unconfirmed`` counts obligations Python proved but Lean did not
    (``disagreements`` counts every field where the two differ); ``proved_by_python`` and, when Lean
    ran, ``proved_by_lean``.
    """
    spec = load_invariants(Path(task_root))
    if spec is None:
        return {"total": 0, "proved": 0, "unconfirmed": 0, "failed": 0, "missing": 0, "proved_by_python": 0,
                "failed_hard": [], "checker": "python",
                "lean": {"requested": lean, "ran": False, "ok": False, "reason": "no obligations to check"},
                "note": "task has no tests/invariants.yaml"}
    if lean:
        report = check_artifact(Path(task_root), data, lean=True)
        rows, lake = report["obligations"], report["lean"]
        checker: str = report["checker"]
    else:
        _, obs = build_obligations(Path(task_root), exact_view(data))
        rows = [{"theorem": f"{spec.namespace}.{ob.name}", "severity": ob.severity,
                 "python": "missing" if ob.skipped else ("passed" if ob.holds() else "failed")} for ob in obs]
        lake = {"ran": False, "ok": False, "reason": "Lean not requested: the Python exact checker ran"}
        checker = "python"
    return _counts(rows, lake, checker, lean)


def _counts(rows: list[dict[str, Any]], lake: dict[str, Any], checker: str, requested: bool) -> dict[str, Any]:
    ran = bool(lake["ran"])
    proved = sum(r["python"] == "passed" and (not ran or r.get("lean") == "proved") for r in rows)
    python_proved = sum(r["python"] == "passed" for r in rows)
    failed = [r for r in rows if r["python"] == "failed"]
    out: dict[str, Any] = {
        "total": len(rows), "proved": proved, "unconfirmed": python_proved - proved, "failed": len(failed),
        "missing": sum(r["python"] == "missing" for r in rows), "proved_by_python": python_proved,
        "failed_hard": [r["theorem"].split(".", 1)[1] for r in failed if r["severity"] == "hard"],
        "checker": checker,
        "lean": {"requested": requested, "ran": ran, "ok": bool(lake["ok"]), "reason": lake["reason"]},
    }
    if ran:
        out["proved_by_lean"] = sum(r.get("lean") == "proved" for r in rows)
        out["disagreements"] = sum(1 for r in rows if r["python"] != "missing"
                                   and (r["python"] == "passed") != (r.get("lean") == "proved"))
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
