"""Replay check for CUMCM 2025 A (smoke screen), Q5: the plan must be flyable and its totals honest.

Declared as ``smoke_screen_coverage`` (``CHECK``) and named in the task's ``tests/invariants.yaml``; run by
:func:`anchorage.invariants.gates.check` (so by the scorer on every artifact of the task). It reads the
Q5 plan ``q5.strategies`` (or ``experiment_result.q5.strategies``) and the per-missile union
``experiment_result.q5_union_duration_s`` (or ``q5.union_duration_s``), and replays, exactly (``Decimal``
in an unbounded context that traps any rounding) with stated tolerances:

* ``smoke_q5_union_le_sum_<M>`` (hard): a missile's union of shielded time is at most the sum of
  the parts (per grenade: ``durations_s[M]`` when reported, else ``individual_duration_s`` of the
  grenades aimed at M), within 0.05 s (parts are rounded), and at least the largest part;
* ``smoke_q5_total`` (hard): ``total`` = sum of the per-missile unions within 0.05 s;
* ``smoke_q5_speed`` (hard): every drone speed in [70, 140] m/s;
* ``smoke_q5_drops`` (hard): drones FY1–FY5, at most 3 grenades each, a drone's drops ≥ 1 s apart;
* ``smoke_q5_lifetime`` (hard): fuse ≥ 0, burst = drop + fuse (±1e-3 s), each part ≤ 20 s and every
  reported interval inside [burst, burst + 20 s];
* ``smoke_q5_kinematics`` (hard): drop and burst points replayed from the statement's drone start
  positions, heading, speed, drop time and fuse (free fall, g = 9.8 m/s²) within 1 m (+ the
  spread of g ∈ [9.78, 9.82] over the fall);
* ``smoke_q5_shielding_replay`` (hard; the seed's G.4 class "a smoke-screen plan that fails the independent
  coverage replay", a penalty under every profile): each grenade's cloud replayed for its missile with the
  statement's geometry (missile straight at the fake target at 300 m/s, cloud sinking 3 m/s, radius 10 m,
  20 s) and the criterion of the seed's replay (the reference's ``target_sampling``: a time counts when at
  least 25 % of 27 target samples — the axis point and 8 rim points at the bottom, middle and top of the
  cylinder — have their sight segment within 10 m of the cloud's centre; 0.02 s grid); a claimed part, or a
  missile's claimed union, may not exceed the replay by more than max(0.3 s, 25 %). The tolerance is the
  seed's leniency: it let claims pass that its replay put 10 % lower (Tencent Hy4: 62.88 s claimed, 56.42 s
  replayed) and penalised a plan the replay gave 0 s; the 27-sample layout is a reconstruction (the reference
  does not publish it) that replays the published plan's parts to within 0.08 s. A plan claiming 9.45 s for
  a cloud that hides ≥ 25 % of the target for 4.02 s fails. The whole-target replay below is a lower bound of
  this one, so this one runs only for the missiles whose claims that bound does not already support
  (record: ``values.lower_bound_for`` names the others);
* ``smoke_q5_whole_target_replay`` (warning): the same claims held to this project's stricter criterion (the
  whole 7 m × 10 m cylinder hidden by that one cloud: every sight segment to 2 × 48 rim samples within 10 m
  of the centre; 0.02 s grid), within max(0.3 s, 10 %). A warning because the shielding criterion is a
  modelling choice (the published plan's FY3 clouds hide the whole target for 0.8–1.2 s of their claimed
  3.4–3.5 s);
* ``smoke_q5_one_heading`` (hard): one heading and one speed per drone, as the statement
  requires ("一旦确定就不再调整"). The reference's imported Q5 plan (FY1 and FY3 on several
  headings) fails it; the task's anchor is therefore our reproduction (see tasks/README.md).

Missing fields are missing evidence (status ``missing``, severity ``warning``), never violations.

**Speed** (the scorer calls this on every artifact of the task, so it must cost well under 1 ms).
Every number of a row is read once (``Decimal``, exact, and its float). The whole-target replay gives
the same grid counts as testing all 96 rim samples at every 0.02 s step of the cloud's life (that
brute force, the original implementation, cost ~10 ms per grenade) but tests a few hundred
(step, sample) pairs per grenade, all grenades in one numpy batch per stage, with the brute force's
arithmetic operation for operation (so a tested pair gets the brute force's verdict):

1. *Plane window (exact).* The segment from the missile to the target's centre Q lies in the fixed
   plane through the missile's path and Q. The points X whose segment to the missile meets the ball
   form a convex set (the union of the ball's homothetic images from the missile with factor ≥ 1),
   and Q is in the hull of the rim samples, so hiding every sample hides Q and the cloud's centre
   is within 10 m of that plane. The plane is nearly horizontal and the cloud sinks at 3 m/s: one
   analytic window of ≤ ~6.7 s (padded by a step against rounding).
2. *Coarse silhouette probes.* 6 rim samples (the sides, the far top and the near bottom as seen
   along the missiles' nearly common azimuth) are tested at every 4th step of the window. A step
   hidden for all 96 samples is hidden for these 6.
3. *Ends.* The hidden steps form one run (for all 96 samples as for the 6 probes): exactly so
   for a cloud at rest (from a fixed sample, the missile positions whose segment meets the ball
   form a convex set too, so the positions that hide every sample are a convex set met by the
   missile's straight path in one interval); the 3 m/s sink (1 % of the missile's speed) does not break it in practice —
   ``tests/anchors/test_smoke_screen.py`` compares this replay with the brute force on seeded
   random clouds placed on the sight lines. So the probes' run lies within 3 steps beyond the first
   and last coarse hits, and all 96 samples are tested only on the first and last 6 steps of that
   span; the run goes from the first hidden step at the head to the last one at the tail. If an
   end has no hidden step, every step of the span is tested; a cloud without a coarse hit gets the
   probes at every step of its window and all 96 samples on each step they hide (exact).

Shielding results are memoised per grenade (missile, burst time and point) within one call only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, Inexact, InvalidOperation, Rounded, localcontext
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from anchorage.invariants.exact import Scaled
from anchorage.invariants.replays import ReplayCheck
from anchorage.invariants.results import GateResult, Severity

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Floats = npt.NDArray[np.float64]
    Ints = npt.NDArray[np.intp]
    Bools = npt.NDArray[np.bool_]
    Array = npt.NDArray[Any]

DRONES = {"FY1": (17800, 0, 1800), "FY2": (12000, 1400, 1400), "FY3": (6000, -3000, 700),
          "FY4": (11000, 2000, 1800), "FY5": (13000, -2000, 1300)}
MISSILES = ("M1", "M2", "M3")
SPEED_RANGE = (Decimal(70), Decimal(140))
DROP_GAP_S = Decimal(1)
MAX_PER_DRONE = 3
CLOUD_LIFE_S = Decimal(20)
UNION_TOL_S = Decimal("0.05")
TIME_TOL_S = Decimal("0.001")
POINT_TOL_M = 1.0
G, G_SPREAD = 9.8, 0.02
MISSILE_STARTS = {"M1": (20000, 0, 2000), "M2": (19000, 600, 2100), "M3": (18000, -600, 1900)}
MISSILE_SPEED, SINK, CLOUD_R = 300.0, 3.0, 10.0
TARGET_BASE, TARGET_R, TARGET_H, RIM = (0.0, 200.0, 0.0), 7.0, 10.0, 48
REPLAY_DT, SHORTFALL_ABS, SHORTFALL_REL = 0.02, 0.3, 0.1
_EPS = Decimal("0.000001")
_ZERO = Decimal(0)
# unbounded and trapping: every sum and difference below is exact or raises
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[Inexact, Rounded, InvalidOperation])
_NUMBERS = ("heading_deg", "speed_mps", "drop_time_s", "fuse_time_s", "explode_time_s", "individual_duration_s",
            "drop_x", "drop_y", "drop_z", "explode_x", "explode_y", "explode_z")
_PROBES = ((0.0, 90.0), (0.0, -90.0), (1.0, 90.0), (1.0, -90.0), (1.0, 180.0), (0.0, 0.0))  # (top?, azimuth°)
_COARSE = 4       # the silhouette samples are tested at every 4th step of the plane window first
_END_STEPS = _COARSE - 1 + 3   # steps tested with all 96 samples at each end of a cloud's span


def _exact(value: Any) -> Decimal | None:
    """A JSON number's exact value (floats through their shortest repr); None for non-numbers."""
    kind = type(value)
    if kind is Decimal:
        return value if value.is_finite() else None
    if kind is int:
        return Decimal(value)
    if kind is float:
        return Decimal(repr(value)) if math.isfinite(value) else None
    if isinstance(value, bool):
        return None
    if isinstance(value, Decimal):
        return Decimal(value) if value.is_finite() else None
    if isinstance(value, int):
        return Decimal(int(value))
    if isinstance(value, Scaled):
        return Decimal(value.n).scaleb(-value.k, _EXACT)
    return None


class _Row(NamedTuple):
    """One grenade of the plan, every number read once."""

    tag: str
    data: Mapping[str, Any]
    num: dict[str, Decimal | None]
    fl: dict[str, float]               # the same numbers as floats (those that are numbers)
    parts: dict[str, Decimal | None]   # claimed shielded time per missile (see the module docstring)


def _read_row(prefix: str, i: int, row: Mapping[str, Any]) -> _Row:
    num = {key: value if type(value := row.get(key)) is Decimal and value.is_finite() else _exact(value)
           for key in _NUMBERS}  # a finite Decimal (the exact parse's leaf) is its own value: no call
    per = row.get("durations_s")
    parts: dict[str, Decimal | None]
    if isinstance(per, Mapping):
        parts = {m: _ZERO if (v := _exact(per.get(m))) is None else v for m in MISSILES}
    else:
        target = row.get("target_missile")
        parts = {m: num["individual_duration_s"] if target == m else _ZERO for m in MISSILES}
    fl = {key: float(v) for key, v in num.items() if v is not None}
    return _Row(f"{prefix}[{i}]", row, num, fl, parts)


def _node(data: Mapping[str, Any], path: str) -> Any:
    node: Any = data
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _first(data: Mapping[str, Any], *paths: str) -> tuple[str, Any]:
    for path in paths:
        value = _node(data, path)
        if value is not None:
            return path, value
    return paths[0], None


def _gate(name: str, paths: tuple[str, ...], problems: list[str] | None, ok_message: str,
          severity: Severity = "hard", values: dict[str, Any] | None = None) -> GateResult:
    if problems is None:
        return GateResult(name=name, form="replay", paths=paths, status="missing", severity="warning",
                          message=f"missing evidence: {ok_message}", values=values or {})
    if problems:
        return GateResult(name=name, form="replay", paths=paths, status="failed", severity=severity,
                          message="; ".join(problems[:6]) + (f" (+{len(problems) - 6} more)" if len(problems) > 6 else ""),
                          values=values or {})
    return GateResult(name=name, form="replay", paths=paths, status="passed", severity=severity,
                      message=ok_message, values=values or {})


def _union_checks(prefix: str, rows: list[_Row], upath: str, union: Any) -> list[GateResult]:
    out: list[GateResult] = []
    unions: dict[str, Decimal] = {}
    for m in MISSILES:
        value = _exact(union.get(m)) if isinstance(union, Mapping) else None
        name = f"smoke_q5_union_le_sum_{m}"
        if value is None:
            out.append(_gate(name, (f"{upath}.{m}",), None, f"{upath}.{m} not reported"))
            continue
        unions[m] = value
        parts = [r.parts[m] for r in rows]
        if any(p is None for p in parts):
            out.append(_gate(name, (f"{upath}.{m}", prefix), None, f"a grenade's duration for {m} is not a number"))
            continue
        known = [p for p in parts if p is not None]
        total, largest = sum(known, _ZERO), max(known, default=_ZERO)
        problems = []
        if value > total + UNION_TOL_S:
            problems.append(f"{m}: union {float(value):.4f} s > sum of parts {float(total):.4f} s")
        if value < largest - UNION_TOL_S:
            problems.append(f"{m}: union {float(value):.4f} s < largest part {float(largest):.4f} s")
        out.append(_gate(name, (f"{upath}.{m}", prefix), problems,
                         f"{m}: largest part {float(largest):.4f} s ≤ union {float(value):.4f} s ≤ sum {float(total):.4f} s",
                         values={"union_s": float(value), "sum_of_parts_s": float(total)}))
    total_claim = _exact(union.get("total")) if isinstance(union, Mapping) else None
    if total_claim is None or len(unions) < len(MISSILES):
        out.append(_gate("smoke_q5_total", (f"{upath}.total",), None, f"{upath}.total or a missile's union not reported"))
    else:
        summed = sum(unions.values(), _ZERO)
        bad = abs(total_claim - summed) > UNION_TOL_S
        out.append(_gate("smoke_q5_total", (f"{upath}.total",),
                         [f"total {float(total_claim):.4f} s ≠ M1+M2+M3 = {float(summed):.4f} s"] if bad else [],
                         f"total {float(total_claim):.4f} s = M1+M2+M3"))
    return out


def _plan_checks(prefix: str, rows: list[_Row]) -> list[GateResult]:
    speed, drops, life, kin, heading = [], [], [], [], []
    by_drone: dict[str, list[_Row]] = {}
    for row in rows:
        drone = row.data.get("uav")
        if drone not in DRONES:
            drops.append(f"{row.tag}: unknown drone {drone!r} (FY1–FY5)")
        else:
            by_drone.setdefault(str(drone), []).append(row)
        v = row.num["speed_mps"]
        if v is not None and not SPEED_RANGE[0] - _EPS <= v <= SPEED_RANGE[1] + _EPS:
            speed.append(f"{row.tag}: speed {float(v):.3f} m/s outside 70–140 m/s")
        life.extend(_lifetime(row))
        if drone in DRONES:
            kin.extend(_kinematics(str(drone), row))
    for drone, items in by_drone.items():
        if len(items) > MAX_PER_DRONE:
            drops.append(f"{drone}: {len(items)} grenades (at most {MAX_PER_DRONE})")
        times = sorted(t for t in (r.num["drop_time_s"] for r in items) if t is not None)
        for a, b in itertools.pairwise(times):
            if b - a < DROP_GAP_S - _EPS:
                drops.append(f"{drone}: drops at {float(a):.3f} s and {float(b):.3f} s are < 1 s apart")
        heading.extend(_one_heading(drone, items))
    return [
        _gate("smoke_q5_speed", (f"{prefix}[*].speed_mps",), speed, "every drone speed in [70, 140] m/s"),
        _gate("smoke_q5_drops", (f"{prefix}[*].uav", f"{prefix}[*].drop_time_s"), drops,
              "≤ 3 grenades per drone, drops ≥ 1 s apart"),
        _gate("smoke_q5_lifetime", (f"{prefix}[*].explode_time_s", f"{prefix}[*].individual_duration_s"), life,
              "bursts after the drop; every part and interval inside the 20 s cloud life"),
        _gate("smoke_q5_kinematics", (f"{prefix}[*].drop_x", f"{prefix}[*].explode_x"), kin,
              "drop and burst points replay from heading, speed, drop time and fuse within 1 m"),
        _gate("smoke_q5_one_heading", (f"{prefix}[*].heading_deg", f"{prefix}[*].speed_mps"), heading,
              "one heading and one speed per drone"),
    ]


def _lifetime(row: _Row) -> list[str]:
    out = []
    tag, num = row.tag, row.num
    drop, fuse, burst = num["drop_time_s"], num["fuse_time_s"], num["explode_time_s"]
    if fuse is not None and fuse < 0:
        out.append(f"{tag}: negative fuse {float(fuse):.3f} s")
    if drop is not None and fuse is not None and burst is not None and abs(drop + fuse - burst) > TIME_TOL_S:
        out.append(f"{tag}: burst {float(burst):.3f} s ≠ drop + fuse {float(drop + fuse):.3f} s")
    part = num["individual_duration_s"]
    if part is not None and not 0 <= part <= CLOUD_LIFE_S:
        out.append(f"{tag}: part {float(part):.3f} s outside [0, 20] s")
    intervals = row.data.get("intervals_s")
    if burst is not None and isinstance(intervals, Mapping):
        for missile, spans in intervals.items():
            for span in spans if isinstance(spans, list) else []:
                lo, hi = (_exact(x) for x in span) if isinstance(span, list) and len(span) == 2 else (None, None)
                if lo is None or hi is None:
                    continue
                if lo > hi or lo < burst - TIME_TOL_S or hi > burst + CLOUD_LIFE_S + TIME_TOL_S:
                    out.append(f"{tag}: {missile} interval [{float(lo):.3f}, {float(hi):.3f}] s outside the cloud "
                               f"life [{float(burst):.3f}, {float(burst + CLOUD_LIFE_S):.3f}] s")
    return out


def _kinematics(drone: str, row: _Row) -> list[str]:
    fl = row.fl
    if not all(k in fl for k in ("heading_deg", "speed_mps", "drop_time_s", "fuse_time_s")):
        return []
    heading, speed, drop, fuse = fl["heading_deg"], fl["speed_mps"], fl["drop_time_s"], fl["fuse_time_s"]
    x0, y0, z0 = DRONES[drone]
    ux, uy = math.cos(math.radians(heading)), math.sin(math.radians(heading))
    drop_pt = (x0 + speed * drop * ux, y0 + speed * drop * uy, float(z0))
    burst_pt = (drop_pt[0] + speed * fuse * ux, drop_pt[1] + speed * fuse * uy, z0 - 0.5 * G * fuse**2)
    out = []
    for label, point, expect, slack in (("drop", ("drop_x", "drop_y", "drop_z"), drop_pt, 0.0),
                                        ("burst", ("explode_x", "explode_y", "explode_z"), burst_pt,
                                         0.5 * G_SPREAD * fuse**2)):
        if not all(k in fl for k in point):
            continue
        dist = math.dist([fl[k] for k in point], expect)
        if dist > POINT_TOL_M + slack:
            out.append(f"{row.tag}: {label} point is {dist:.1f} m from the replayed "
                       f"({expect[0]:.1f}, {expect[1]:.1f}, {expect[2]:.1f})")
    return out


def _one_heading(drone: str, rows: list[_Row]) -> list[str]:
    headings = [r.fl["heading_deg"] % 360 for r in rows if "heading_deg" in r.fl]
    speeds = [r.fl["speed_mps"] for r in rows if "speed_mps" in r.fl]
    out = []
    if headings and max(abs((h - headings[0] + 180) % 360 - 180) for h in headings) > 1e-3:
        out.append(f"{drone} flies several headings {sorted(set(round(h, 3) for h in headings))} "
                   "(the statement fixes one heading per drone)")
    if speeds and max(speeds) - min(speeds) > 1e-3:
        out.append(f"{drone} flies several speeds {sorted(set(round(v, 3) for v in speeds))}")
    return out


# ---------------------------------------------------------------------------------------------
# Shielding replay (see "Speed" in the module docstring)

class _Geometry(NamedTuple):
    rim: tuple[Floats, Floats, Floats]     # the 96 rim samples (x, y, z), as the brute-force grid uses them
    probes: tuple[Floats, Floats, Floats]  # the silhouette samples of step 2 (a subset of the rim)
    start: dict[str, tuple[float, float, float]]
    unit: dict[str, tuple[float, float, float]]   # the missile's start direction (it flies the opposite way)
    arrival: dict[str, float]              # seconds until the missile reaches the fake target
    plane: dict[str, tuple[float, float, float]]  # unit normal (n_z > 0) of the plane (missile path, Q)


class _Cloud(NamedTuple):
    missile: str
    burst_t: float
    x: float
    y: float
    z: float


class _Grid(NamedTuple):
    """A cloud's time grid ``burst_t + k * step`` for k < size (exactly ``np.arange``'s values) and the
    slice [lo, hi) of it inside the plane window."""

    step: float
    size: int
    lo: int
    hi: int


@cache
def _geometry() -> _Geometry:
    import numpy as np

    ang = np.linspace(0, 2 * math.pi, RIM, endpoint=False)
    ring = np.stack([TARGET_R * np.cos(ang), TARGET_R * np.sin(ang)], axis=1)
    pts = np.vstack([np.column_stack([ring, np.full(RIM, z)]) for z in (0.0, TARGET_H)]) + np.array(TARGET_BASE)
    centre = np.array(TARGET_BASE) + np.array([0.0, 0.0, TARGET_H / 2])
    start, unit, arrival, plane, azimuths = {}, {}, {}, {}, []
    for m, xyz in MISSILE_STARTS.items():
        m0 = np.array(xyz, dtype=float)
        norm = np.linalg.norm(m0)
        start[m] = (float(m0[0]), float(m0[1]), float(m0[2]))
        u = m0 / norm
        unit[m] = (float(u[0]), float(u[1]), float(u[2]))
        arrival[m] = float(norm) / MISSILE_SPEED
        n = np.cross(m0, centre)   # the path passes through the origin (the fake target)
        n = n / np.linalg.norm(n) * (1 if n[2] > 0 else -1)
        plane[m] = (float(n[0]), float(n[1]), float(n[2]))
        azimuths.append(math.degrees(math.atan2(m0[1] - centre[1], m0[0] - centre[0])))
    view = sum(azimuths) / len(azimuths)   # the missiles' azimuths from the target differ by < 4°
    index = [round((view + da) / (360 / RIM)) % RIM + (RIM if top else 0) for top, da in _PROBES]
    probes = pts[sorted(set(index))]
    return _Geometry((pts[:, 0].copy(), pts[:, 1].copy(), pts[:, 2].copy()),
                     (probes[:, 0].copy(), probes[:, 1].copy(), probes[:, 2].copy()),
                     start, unit, arrival, plane)


def _grid(geo: _Geometry, cloud: _Cloud, reach: float = CLOUD_R) -> _Grid:
    """The brute force's grid (``np.arange(burst, min(burst + 20, arrival), 0.02)``) and its plane window: the
    steps at which the cloud's centre is within ``reach`` of the plane (``CLOUD_R`` for the whole target)."""
    first = cloud.burst_t
    stop = min(first + float(CLOUD_LIFE_S), geo.arrival[cloud.missile])
    size = max(0, math.ceil((stop - first) / REPLAY_DT))
    step = (first + REPLAY_DT) - first   # np.arange fills start + k * (its second value - start)
    nx, ny, nz = geo.plane[cloud.missile]
    height = nx * cloud.x + ny * cloud.y + nz * cloud.z   # signed distance of the burst point to the plane
    lo, hi = (height - reach) / (SINK * nz), (height + reach) / (SINK * nz)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return _Grid(step, size, 0, 0)
    ka = max(0, min(size, math.floor(lo / REPLAY_DT) - 1))
    return _Grid(step, size, ka, max(ka, min(size, math.ceil(hi / REPLAY_DT) + 2)))


def _constants(geo: _Geometry, clouds: list[_Cloud], grids: list[_Grid]) -> Floats:
    """Per cloud (columns): missile start x, y, z, its unit vector x, y, z, burst t, x, y, z, grid step."""
    import numpy as np

    return np.array([[*geo.start[c.missile], *geo.unit[c.missile], c.burst_t, c.x, c.y, c.z, g.step]
                     for c, g in zip(clouds, grids, strict=True)]).T.copy()


def _hidden(consts: Floats, which: Ints, step: Ints, points: tuple[Floats, Floats, Floats], limit: float) -> Bools:
    """Per (cloud ``which[i]``, grid step ``step[i]``), grouped by cloud in cloud order: does the cloud hide
    every one of ``points`` (squared distance to the sight segment ≤ ``limit``)?

    The arithmetic is the brute-force grid's, operation for operation, so a rim sample gets the same
    verdict here as there.
    """
    import numpy as np

    counts = np.bincount(which, minlength=consts.shape[1])
    m0x, m0y, m0z, ex, ey, ez, burst_t, bx, by, bz, dt = np.repeat(consts, counts, axis=1)
    t = burst_t + step * dt
    mx, my, mz = m0x - t * ex * MISSILE_SPEED, m0y - t * ey * MISSILE_SPEED, m0z - t * ez * MISSILE_SPEED
    wx, wy, wz = bx - mx, by - my, (bz - (t - burst_t) * SINK) - mz
    ux, uy, uz = points[0][:, None] - mx, points[1][:, None] - my, points[2][:, None] - mz  # (point, pair)
    s = wx * ux
    s += wy * uy
    s += wz * uz
    norm = ux * ux
    norm += uy * uy
    norm += uz * uz
    s /= norm
    np.clip(s, 0.0, 1.0, out=s)
    ux *= s
    uy *= s
    uz *= s
    dx, dy, dz = np.subtract(wx, ux, out=ux), np.subtract(wy, uy, out=uy), np.subtract(wz, uz, out=uz)
    dx *= dx
    dy *= dy
    dz *= dz
    dx += dy
    dx += dz
    hidden: Bools = np.all(dx <= limit, axis=0)
    return hidden


def _pairs(steps: list[Ints]) -> tuple[Ints, Ints]:
    """(cloud, grid step) pairs of every cloud's steps, grouped by cloud."""
    import numpy as np

    return np.repeat(np.arange(len(steps), dtype=np.intp), [len(k) for k in steps]), np.concatenate(steps)


def _split(which: Ints, values: Array, clouds: int) -> list[Array]:
    """``values`` (one per pair, grouped by cloud) cut into one array per cloud."""
    import numpy as np

    bounds = np.searchsorted(which, np.arange(clouds + 1))
    return [values[bounds[i]:bounds[i + 1]] for i in range(clouds)]


def _shielded_steps(geo: _Geometry, consts: Floats, grids: list[_Grid]) -> list[Ints]:
    """Per cloud: the grid steps at which it alone hides every rim sample (see the module docstring)."""
    import numpy as np

    which, step = _pairs([np.arange(g.lo, g.hi, _COARSE) for g in grids])
    probed = _hidden(consts, which, step, geo.probes, CLOUD_R**2) if step.size else np.zeros(0, dtype=bool)
    hits = _split(which[probed], step[probed], len(grids))
    # no coarse hit: the probes may still hide a short run between coarse steps, so test every step
    lonely = [np.arange(g.lo, g.hi) if not len(h) else h[:0] for g, h in zip(grids, hits, strict=True)]
    which, step = _pairs(lonely)
    if step.size:
        probed = _hidden(consts, which, step, geo.probes, CLOUD_R**2)
        lonely = _split(which[probed], step[probed], len(grids))
    spans = [_span(g, h) for g, h in zip(grids, hits, strict=True)]
    tests = [k if not len(h) else _end_steps(span) for k, h, span in zip(lonely, hits, spans, strict=True)]
    verdicts = _verify(geo, consts, tests)
    out: list[Ints] = []
    full: list[int] = []
    for i, (h, test, ok) in enumerate(zip(hits, tests, verdicts, strict=True)):
        steps = test[ok] if not len(h) else _run(spans[i], test, ok)
        if steps is None:
            full.append(i)
            steps = test[:0]
        out.append(steps)
    if full:   # no hidden step near an end: test every step of the span (exact)
        everything = _verify(geo, consts, [spans[i] if i in full else spans[i][:0] for i in range(len(grids))])
        for i in full:
            out[i] = spans[i][everything[i]]
    return out


def _span(grid: _Grid, hits: Ints) -> Ints:
    """The steps that can be hidden for the probes, given the coarse steps that are: from the step after
    the coarse miss before the first hit to the step before the coarse miss after the last."""
    import numpy as np

    if not len(hits):
        return hits
    return np.arange(max(grid.lo, int(hits[0]) - _COARSE + 1), min(grid.hi, int(hits[-1]) + _COARSE))


def _end_steps(k: Ints) -> Ints:
    """The steps tested with all samples: all of them for a short span, else the first and last few."""
    import numpy as np

    if len(k) <= 2 * _END_STEPS:
        return k
    return np.concatenate([k[:_END_STEPS], k[-_END_STEPS:]])


def _verify(geo: _Geometry, consts: Floats, steps: list[Ints]) -> list[Array]:
    """All-sample verdicts of the given grid steps of every cloud, in one batch."""
    import numpy as np

    which, step = _pairs(steps)
    hidden = _hidden(consts, which, step, geo.rim, CLOUD_R**2) if step.size else np.zeros(0, dtype=bool)
    return _split(which, hidden, len(steps))


def _run(span: Ints, test: Ints, ok: Array) -> Ints | None:
    """The hidden steps of ``span`` implied by the tests of its ends; None when every step must be tested."""
    import numpy as np

    if len(test) == len(span):   # every step of the span was tested
        hidden: Ints = test[ok]
        return hidden
    head, tail = test[:_END_STEPS][ok[:_END_STEPS]], test[_END_STEPS:][ok[_END_STEPS:]]
    if len(head) == 0 or len(tail) == 0:
        return None   # no hidden step near an end
    return np.arange(int(head[0]), int(tail[-1]) + 1)


def _replay(clouds: list[_Cloud]) -> tuple[list[int], dict[str, int]]:
    """Per cloud, its number of shielded grid steps; per missile, the number of distinct 0.02 s slots
    (``round(t / 0.02)``) shielded by any of its clouds — the brute force's part and union."""
    geo = _geometry()
    grids = [_grid(geo, c) for c in clouds]
    consts = _constants(geo, clouds, grids)
    return _parts_and_unions(consts, clouds, _shielded_steps(geo, consts, grids))


# ---------------------------------------------------------------------------------------------
# The seed's coverage replay (G.4: "a smoke-screen plan that fails the independent coverage replay")

SEED_RING = 8           # rim points per level (every 45°), plus the axis point: 9 per level
SEED_LEVELS = (0.0, TARGET_H / 2, TARGET_H)
SEED_SAMPLES = len(SEED_LEVELS) * (SEED_RING + 1)    # 27, as the reference's target sampling states
SEED_THRESHOLD = 0.25   # the reference's coverage_threshold: a time counts when 25 % of the samples are hidden
SEED_HIDDEN = math.ceil(SEED_THRESHOLD * SEED_SAMPLES)   # 7 of 27
SEED_REACH = CLOUD_R + math.hypot(TARGET_R, TARGET_H / 2)   # a sample's segment is within 8.6 m of the centre's
SEED_TOL_ABS, SEED_TOL_REL = 0.3, 0.25
_SEED_CHUNK = 512   # steps per batch of the 27-sample count: its (27, steps) temporaries stay small (~110 kB)


@cache
def _seed_samples() -> tuple[Floats, Floats, Floats]:
    """The 27 target samples (column vectors): the axis point and 8 rim points at the bottom, middle and top."""
    import numpy as np

    points = []
    for z in SEED_LEVELS:
        points.append((TARGET_BASE[0], TARGET_BASE[1], z))
        points += [(TARGET_BASE[0] + TARGET_R * math.cos(2 * math.pi * k / SEED_RING),
                    TARGET_BASE[1] + TARGET_R * math.sin(2 * math.pi * k / SEED_RING), z) for k in range(SEED_RING)]
    xyz = np.array(points, dtype=float).T
    return xyz[0][:, None].copy(), xyz[1][:, None].copy(), xyz[2][:, None].copy()


def _seed_replay(clouds: list[_Cloud]) -> tuple[list[int], dict[str, int]]:
    """The seed's replay: per cloud its covered grid steps (≥ 7 of the 27 samples hidden), per missile the
    distinct 0.02 s slots any of its clouds covers (the brute force's grid and slots, see :func:`_replay`).

    Exact: the 27 samples are counted on every step that can be covered — inside the plane window widened to
    ``SEED_REACH`` (the centre's sight segment lies in the plane) and with the cloud's centre C within
    ``10 m + 8.6 m · s_max`` of that segment, where 8.6 m bounds a sample's distance from the target's centre Q
    and ``s_max = |C − M| / (|Q − M| − 8.6 m)`` bounds the fraction of a sample's segment at which C can be
    within 10 m of it (M the missile): a sample's segment strays from the centre's by at most 8.6 m · s there.
    ``tests/invariants/test_seed_penalties.py`` compares the result with counting every sample at every step.
    """
    import numpy as np

    geo = _geometry()
    grids = [_grid(geo, c, SEED_REACH) for c in clouds]
    consts = _constants(geo, clouds, grids)
    which, step = _pairs([np.arange(g.lo, g.hi) for g in grids])
    if step.size:
        mx, my, mz, wx, wy, wz = _sight(consts, which, step)
        qx, qy, qz = TARGET_BASE[0] - mx, TARGET_BASE[1] - my, TARGET_BASE[2] + TARGET_H / 2 - mz
        qq = qx * qx + qy * qy + qz * qz
        s = np.clip((wx * qx + wy * qy + wz * qz) / qq, 0.0, 1.0)
        dx, dy, dz = wx - s * qx, wy - s * qy, wz - s * qz
        spread = SEED_REACH - CLOUD_R
        s_max = np.minimum(1.0, np.sqrt(wx * wx + wy * wy + wz * wz) / (np.sqrt(qq) - spread))
        near = dx * dx + dy * dy + dz * dz <= (CLOUD_R + spread * s_max + 1e-6) ** 2
        which, step = which[near], step[near]
    if step.size:
        mx, my, mz, wx, wy, wz = _sight(consts, which, step)
        covered = np.concatenate([_seed_covered(mx[at], my[at], mz[at], wx[at], wy[at], wz[at])
                                  for at in (slice(i, i + _SEED_CHUNK) for i in range(0, step.size, _SEED_CHUNK))])
        which, step = which[covered], step[covered]
    return _parts_and_unions(consts, clouds, _split(which, step, len(clouds)))


def _seed_covered(mx: Floats, my: Floats, mz: Floats, wx: Floats, wy: Floats, wz: Floats) -> Bools:
    """Per step (missile M, and the vector from M to the cloud's centre): are ≥ 7 of the 27 samples' sight segments
    within 10 m of the centre? (the arithmetic of :func:`_hidden`, counted instead of required of all)"""
    import numpy as np

    px, py, pz = _seed_samples()
    ux, uy, uz = px - mx, py - my, pz - mz   # (sample, step)
    t = wx * ux
    t += wy * uy
    t += wz * uz
    t /= ux * ux + uy * uy + uz * uz
    np.clip(t, 0.0, 1.0, out=t)
    ux *= t
    uy *= t
    uz *= t
    ux -= wx
    uy -= wy
    uz -= wz
    ux *= ux
    uy *= uy
    uz *= uz
    ux += uy
    ux += uz
    covered: Bools = np.count_nonzero(ux <= CLOUD_R**2, axis=0) >= SEED_HIDDEN
    return covered


def _sight(consts: Floats, which: Ints, step: Ints) -> tuple[Floats, Floats, Floats, Floats, Floats, Floats]:
    """Per (cloud, step) pair: the missile's position M and the vector from M to the cloud's centre (as
    :func:`_hidden` computes them)."""
    import numpy as np

    counts = np.bincount(which, minlength=consts.shape[1])
    m0x, m0y, m0z, ex, ey, ez, burst_t, bx, by, bz, dt = np.repeat(consts, counts, axis=1)
    t = burst_t + step * dt
    mx, my, mz = m0x - t * ex * MISSILE_SPEED, m0y - t * ey * MISSILE_SPEED, m0z - t * ez * MISSILE_SPEED
    return mx, my, mz, bx - mx, by - my, (bz - (t - burst_t) * SINK) - mz


def _parts_and_unions(consts: Floats, clouds: list[_Cloud], steps: list[Ints]) -> tuple[list[int], dict[str, int]]:
    """Per cloud its number of steps; per missile the distinct ``round(t / 0.02)`` slots of its clouds' steps."""
    import numpy as np

    which, step = _pairs(steps)
    t = consts[6][which] + step * consts[10][which]
    missile = np.array([MISSILES.index(c.missile) for c in clouds], dtype=np.intp)[which]
    slots = np.round(t / REPLAY_DT) * len(MISSILES) + missile   # (slot, missile) as one exact float64 integer
    slots.sort()
    distinct = slots[np.concatenate(([True], slots[1:] != slots[:-1]))] if slots.size else slots
    per_missile = np.bincount(np.mod(distinct, len(MISSILES)).astype(np.intp), minlength=len(MISSILES))
    return [len(k) for k in steps], {m: int(per_missile[i]) for i, m in enumerate(MISSILES)}


class _Criterion(NamedTuple):
    """A shielding replay the plan's claims are held to: its gate, how it counts, and the shortfall it allows."""

    gate: str
    label: str
    replay: Callable[[list[_Cloud]], tuple[list[int], dict[str, int]]]
    tol_abs: float
    tol_rel: float
    severity: Severity


SEED_CRITERION = _Criterion(
    "smoke_q5_shielding_replay", f"the coverage replay ({SEED_HIDDEN} of {SEED_SAMPLES} target samples hidden)",
    _seed_replay, SEED_TOL_ABS, SEED_TOL_REL, "hard")
WHOLE_TARGET_CRITERION = _Criterion(
    "smoke_q5_whole_target_replay", "the whole-target replay", _replay, SHORTFALL_ABS, SHORTFALL_REL, "warning")


def _replay_claims(prefix: str, rows: list[_Row], upath: str, union: Any) -> list[GateResult]:
    """The claimed parts and unions held to each replay (the seed's, then the whole-target one).

    The whole-target replay runs first: a cloud that hides the whole target hides all 27 samples (the points
    hidden from the missile by a ball form a convex set, and the samples lie in the hull of the 96 rim points),
    so it is a lower bound of the seed's replay, part by part and slot by slot. The seed's replay runs only for
    the missiles with a claim the lower bound does not already support (less two grid steps against rounding);
    for the others the verdict cannot differ, and the record says the figures are that lower bound.
    """
    clouds: dict[_Cloud, int] = {}   # memo within this call: one replay per distinct cloud
    todo: list[tuple[_Row, str, Decimal, int]] = []
    for row in rows:
        missile = row.data.get("target_missile")
        claimed = row.parts[missile] if missile in MISSILES else None
        fl = row.fl
        if claimed is None or not all(k in fl for k in ("explode_time_s", "explode_x", "explode_y", "explode_z")):
            continue
        cloud = _Cloud(str(missile), fl["explode_time_s"], fl["explode_x"], fl["explode_y"], fl["explode_z"])
        todo.append((row, str(missile), claimed, clouds.setdefault(cloud, len(clouds))))
    if not todo:
        return [_gate(c.gate, (prefix,), None, "no grenade with a burst time and point to replay")
                for c in (SEED_CRITERION, WHOLE_TARGET_CRITERION)]
    every = list(clouds)
    counts, slots = _replay(every)
    claims = _claims(todo, union)
    margin = 2 * REPLAY_DT
    short = {m for m, claimed, replayed in _pairs_of(claims, counts, slots)
             if claimed > replayed + _slack(SEED_CRITERION, claimed) - margin}
    seed_counts, seed_slots = list(counts), dict(slots)
    if short:
        chosen = [i for i, c in enumerate(every) if c.missile in short]
        part, per = _seed_replay([every[i] for i in chosen])
        for i, n in zip(chosen, part, strict=True):
            seed_counts[i] = n
        seed_slots.update({m: per[m] for m in short})
    bound = sorted(set(MISSILES) - short)
    return [_held_to(SEED_CRITERION, seed_counts, seed_slots, claims, prefix, upath,
                     {"lower_bound_for": bound} if bound else {}),
            _held_to(WHOLE_TARGET_CRITERION, counts, slots, claims, prefix, upath, {})]


class _Claim(NamedTuple):
    label: str          # the message's name of the claim
    key: str            # its key in the record's values
    missile: str
    seconds: float
    cloud: int | None   # the cloud of a part; None for a missile's union


def _claims(todo: list[tuple[_Row, str, Decimal, int]], union: Any) -> list[_Claim]:
    out = [_Claim(f"{row.tag} ({row.data.get('uav')}→{missile})", row.tag, missile, float(claimed), index)
           for row, missile, claimed, index in todo]
    for m in MISSILES:
        claimed_union = _exact(union.get(m)) if isinstance(union, Mapping) else None
        if claimed_union is not None:
            out.append(_Claim(f"{{upath}}.{m}", f"{{upath}}.{m}", m, float(claimed_union), None))
    return out


def _pairs_of(claims: list[_Claim], counts: list[int], slots: dict[str, int]) -> list[tuple[str, float, float]]:
    """(missile, claimed seconds, replayed seconds) of every claim."""
    return [(c.missile, c.seconds, (counts[c.cloud] if c.cloud is not None else slots[c.missile]) * REPLAY_DT)
            for c in claims]


def _slack(criterion: _Criterion, claimed: float) -> float:
    return max(criterion.tol_abs, criterion.tol_rel * claimed)


def _held_to(criterion: _Criterion, counts: list[int], slots: dict[str, int], claims: list[_Claim], prefix: str,
             upath: str, extra: dict[str, Any]) -> GateResult:
    problems: list[str] = []
    replayed: dict[str, float] = {}
    for claim, (_, claimed, replay) in zip(claims, _pairs_of(claims, counts, slots), strict=True):
        replayed[claim.key.format(upath=upath)] = round(replay, 2)
        if claimed > replay + _slack(criterion, claimed):
            name = claim.label.format(upath=upath)
            problems.append(f"{name}: claims {claimed:.2f} s, {criterion.label} gives {replay:.2f} s"
                            if claim.cloud is not None else
                            f"{name}: claims {claimed:.2f} s, the replayed union is {replay:.2f} s")
    allowed = f"max({criterion.tol_abs:g} s, {100 * criterion.tol_rel:g} %)"
    if problems:
        problems[0] += f" (a claim may exceed the replay by {allowed})"
    return _gate(criterion.gate, (prefix, upath), problems,
                 f"every claimed part and union is met by {criterion.label} within {allowed}",
                 severity=criterion.severity, values={"replayed_s": replayed, **extra})


def smoke_screen_coverage(data: Mapping[str, Any]) -> list[GateResult]:
    """Q5 plan feasibility and union-of-coverage honesty (see the module docstring)."""
    prefix, plan = _first(data, "q5.strategies", "experiment_result.q5.strategies")
    upath, union = _first(data, "experiment_result.q5_union_duration_s", "q5.union_duration_s")
    if not isinstance(plan, list) or not all(isinstance(r, Mapping) for r in plan):
        plan_missing = _gate("smoke_q5_plan", (prefix,), None, f"{prefix} (the Q5 plan) not reported as a list")
        return [plan_missing] + [_gate(f"smoke_q5_union_le_sum_{m}", (f"{upath}.{m}",), None,
                                       "no Q5 plan to replay") for m in MISSILES]
    with localcontext(_EXACT):
        rows = [_read_row(prefix, i, r) for i, r in enumerate(plan)]
        return (_union_checks(prefix, rows, upath, union) + _plan_checks(prefix, rows)
                + _replay_claims(prefix, rows, upath, union))


CHECK = ReplayCheck("smoke_screen_coverage", smoke_screen_coverage)
