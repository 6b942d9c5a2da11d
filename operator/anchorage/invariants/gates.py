"""The programmatic gate checker: a task's invariants and replay checks over one artifact.

Called by the scorer (``anchorage.scoring``) as ``check(task_root, data)``; a result that is a hard
error (``status == "failed"`` and ``severity == "hard"``) triggers the hard-gate penalty (SPEC §4,
G.4). Missing fields are *missing evidence*: status ``missing``, severity ``warning`` — an empty
artifact never hard-fails. Every invariant is evaluated exactly (scaled integers from the JSON
text, see :mod:`anchorage.invariants.exact`).

``data`` may be the JSON text (``str``/``bytes``, parsed exactly here), data parsed with
``parse_float=Decimal``, or data parsed with plain floats (read through their shortest ``repr``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from anchorage.invariants import replays
from anchorage.invariants.compiler import obligations
from anchorage.invariants.exact import loads_exact
from anchorage.invariants.expr import Obligation
from anchorage.invariants.results import GateResult
from anchorage.invariants.spec import load_invariants


def check(task_root: Path, data: Any) -> list[GateResult]:
    """All gate results of the task's ``tests/invariants.yaml`` on ``data``; ``[]`` without the file."""
    spec = load_invariants(Path(task_root))
    if spec is None:
        return []
    exact = exact_view(data)
    results = [to_gate_result(ob) for ob in obligations(spec, exact)]
    plain = _float_view(exact)
    for name in spec.replay:
        results.extend(run_replay(name, plain))
    return results


def to_gate_result(ob: Obligation) -> GateResult:
    """The gate record of one obligation (evaluated exactly, or missing when skipped)."""
    if ob.prop is None:
        return GateResult(
            name=ob.name, form=ob.form, paths=ob.paths, status="missing", severity="warning",
            message=f"missing evidence: {ob.reason}",
        )
    passed = ob.holds()
    verdict = "holds" if passed else "violated"
    return GateResult(
        name=ob.name, form=ob.form, paths=ob.paths, status="passed" if passed else "failed",
        severity=ob.severity, message=f"{ob.claim} {verdict}" + (f" ({ob.source})" if ob.source else ""),
        values=dict(ob.values),
    )


def run_replay(name: str, data: Any) -> list[GateResult]:
    """Run one named replay check; a crash on odd input is a warning, never a hard error."""
    try:
        check_fn = replays.get(name)
    except KeyError as exc:
        return [GateResult(name=name, form="replay", paths=(), status="missing", severity="warning", message=str(exc))]
    if not isinstance(data, Mapping):
        return [GateResult(name=name, form="replay", paths=(), status="missing", severity="warning",
                           message=f"artifact is not a JSON object (got {type(data).__name__})")]
    try:
        return list(check_fn(data))
    except Exception as exc:  # a replay must never turn malformed input into a hard error
        return [GateResult(name=name, form="replay", paths=(), status="missing", severity="warning",
                           message=f"replay check could not read the artifact: {type(exc).__name__}: {exc}")]


def exact_view(data: Any) -> Any:
    if isinstance(data, str | bytes | bytearray):
        try:
            return loads_exact(data)
        except json.JSONDecodeError:
            return None
    return data


def _float_view(data: Any) -> Any:
    """Replay checks get plain Python numbers (Decimals become floats)."""
    if isinstance(data, Decimal):
        return float(data)
    if isinstance(data, Mapping):
        return {key: _float_view(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_float_view(value) for value in data]
    return data


def hard_errors(results: list[GateResult]) -> list[GateResult]:
    """The results that trigger the hard-gate penalty."""
    return [r for r in results if r.hard_error]
