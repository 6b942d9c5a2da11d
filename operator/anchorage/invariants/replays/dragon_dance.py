"""Replay check for CUMCM 2024 A (bench dragon), Q5: no handle may exceed 2 m/s.

Declared as ``dragon_dance_speed`` (``CHECK``) and named in the task's ``tests/invariants.yaml``; run by
:func:`anchorage.invariants.gates.check`. It reads ``experiment_result.q5.max_head_speed_mps``
(v) and ``experiment_result.q5.max_speed_ratio_when_head_1mps`` (k, the claimed peak
handle/head speed ratio).

Decision (SPEC §6): the handle speeds scale linearly with the head speed (the path and the chain
are speed-free), so the peak ratio on the Q4 path is one number, ``PEAK_RATIO = 1.604793``, the
continuous-time maximum (t ≈ 14.48 s after the head enters the turn) computed by the task's own
reproduction ``tasks/cumcm-2024-a-dragon-dance/solution/solve.py`` (≈15 s, too slow for a gate,
so the constant is pinned here and ``tests/anchors/test_dragon_dance.py`` checks it against a fresh
run). The checks:

* ``dragon_q5_handle_limit`` (hard): the replayed peak handle speed v · PEAK_RATIO ≤ 2 m/s within
  1 %. The paper's integer-second answer 1.406276 m/s replays to ≈ 2.2568 m/s and is rejected,
  whatever ratio the artifact claims (its own 1.422195 was sampled at integer seconds only);
* ``dragon_q5_claimed_limit`` (hard): v · k ≤ 2 m/s within 1 % (the artifact's own claim);
* ``dragon_q5_ratio_replay`` (warning): k within 1 % of PEAK_RATIO — an under-estimated peak
  ratio is flagged, but the hard verdict stays with the physical check above.

Missing or non-numeric fields are missing evidence (a warning), never a violation.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from anchorage.invariants.exact import to_fraction
from anchorage.invariants.replays import ReplayCheck
from anchorage.invariants.results import GateResult, Severity

PEAK_RATIO = Fraction("1.604793")
PEAK_TIME_S = 14.48
SPEED_LIMIT_MPS = Fraction(2)
REL_TOL = Fraction(1, 100)
HEAD_PATH = "experiment_result.q5.max_head_speed_mps"
RATIO_PATH = "experiment_result.q5.max_speed_ratio_when_head_1mps"


def _get(data: Mapping[str, Any], path: str) -> Fraction | None:
    node: Any = data
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return to_fraction(node)


def _f(value: Fraction | None) -> str | None:
    return None if value is None else f"{float(value):.6f}"


def _gate(name: str, paths: tuple[str, ...], ok: bool | None, message: str, values: dict[str, Any],
          severity: Severity = "hard") -> GateResult:
    if ok is None:
        return GateResult(name=name, form="replay", paths=paths, status="missing", severity="warning",
                          message=f"missing evidence: {message}", values=values)
    return GateResult(name=name, form="replay", paths=paths, status="passed" if ok else "failed",
                      severity=severity, message=message, values=values)


def _handle_limit(head: Fraction | None) -> GateResult:
    bound = SPEED_LIMIT_MPS * (1 + REL_TOL)
    if head is None:
        return _gate("dragon_q5_handle_limit", (HEAD_PATH,), None, f"{HEAD_PATH} not reported as a number", {})
    peak = head * PEAK_RATIO
    ok = peak <= bound
    verdict = "within" if ok else "EXCEEDS"
    return _gate("dragon_q5_handle_limit", (HEAD_PATH,), ok,
                 f"head speed {_f(head)} m/s drives the fastest handle to {float(peak):.4f} m/s "
                 f"(continuous-time peak ratio {float(PEAK_RATIO)} at t ≈ {PEAK_TIME_S} s), {verdict} "
                 f"the 2 m/s limit (+1 %)" + ("" if ok else "; integer-second sampling misses the peak"),
                 {"max_head_speed_mps": _f(head), "replayed_peak_handle_speed_mps": _f(peak)})


def _claimed_limit(head: Fraction | None, ratio: Fraction | None) -> GateResult:
    paths = (HEAD_PATH, RATIO_PATH)
    if head is None or ratio is None:
        return _gate("dragon_q5_claimed_limit", paths, None, "head speed or peak ratio not reported", {})
    claimed = head * ratio
    ok = claimed <= SPEED_LIMIT_MPS * (1 + REL_TOL)
    return _gate("dragon_q5_claimed_limit", paths, ok,
                 f"claimed head speed × claimed ratio = {float(claimed):.6f} m/s "
                 f"{'≤' if ok else '>'} 2 m/s (+1 %)",
                 {"max_head_speed_mps": _f(head), "max_speed_ratio_when_head_1mps": _f(ratio)})


def _ratio_replay(ratio: Fraction | None) -> GateResult:
    if ratio is None:
        return _gate("dragon_q5_ratio_replay", (RATIO_PATH,), None, f"{RATIO_PATH} not reported as a number", {})
    ok = abs(ratio - PEAK_RATIO) <= REL_TOL * PEAK_RATIO
    return _gate("dragon_q5_ratio_replay", (RATIO_PATH,), ok,
                 f"claimed peak ratio {_f(ratio)} vs replayed continuous-time peak {float(PEAK_RATIO)} "
                 f"({'within' if ok else 'outside'} 1 %)",
                 {"max_speed_ratio_when_head_1mps": _f(ratio), "replayed_peak_ratio": _f(PEAK_RATIO)},
                 severity="warning")


def dragon_dance_speed(data: Mapping[str, Any]) -> list[GateResult]:
    """Q5 handle-speed limit replayed at the artifact's head speed, plus its own claim."""
    head, ratio = _get(data, HEAD_PATH), _get(data, RATIO_PATH)
    return [_handle_limit(head), _claimed_limit(head, ratio), _ratio_replay(ratio)]


CHECK = ReplayCheck("dragon_dance_speed", dragon_dance_speed)
