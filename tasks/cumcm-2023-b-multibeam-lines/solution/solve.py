"""Oracle reproduction for CUMCM 2023 B (multibeam survey lines), written for Anchorage.

Called by ``solution/solve.sh`` (Harbor convention, ``anchorage oracle``). Reads the official depth grid
(``$ANCHORAGE_DATA_DIR/attachments/附件.xlsx``, default ``/root/data``: 201 x 251 soundings every 0.02 nmi
over 4 nmi west-east x 5 nmi south-north) and writes
``$ANCHORAGE_RESULTS_DIR/cumcm-2023-b-multibeam-lines_result.json`` (default ``/root/results``) — nothing else.

Method (B226's chain as the task describes it: coverage-width geometry, greedy line spacing, simulated
annealing; the choices the statement leaves open are listed in solution/README.md):

* Q1/Q2 — the swath of a transducer with opening angle 120 degrees over a plane seabed: across-track slope
  ``gamma`` (Q2: ``tan gamma = tan alpha sin beta``), the beam edges reach ``D tan 60 / (1 -+ tan 60 tan gamma)``
  horizontally on the deep/shallow side; coverage width along the seabed and overlap ``1 - d / W``.
* Q3 — north-south lines on the 1.5 degree west-deep slope, placed greedily from the deep west edge so that
  each pair of adjacent swaths overlaps exactly 10 % (the shortest set meeting 10-20 %).
* Q4 — the area is cut into k x k equal rectangles (k = 2..4, the k with the least missed area % + share of
  line length overlapping over 20 % is kept); in each rectangle parallel straight lines at the shortest of
  three headings (along the mean depth contour, north-south, east-west); each next line is placed where the
  mean overlap with the previous swath along the line is 10 %. Simulated annealing (fixed seed) then shifts line offsets to reduce the missed area and the
  length of overlap above 20 % at constant line count. Coverage is measured on the official grid's cells.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from openpyxl import load_workbook

SLUG = "cumcm-2023-b-multibeam-lines"
Array = NDArray[np.float64]
NM = 1852.0
HALF = math.radians(60.0)          # half the 120 degree opening angle
TAN_HALF = math.tan(HALF)
MIN_OVERLAP = 0.10                 # the statement's 10 %-20 % band
MAX_OVERLAP = 0.20
STEP = 0.02 * NM                   # along-line sampling = the grid spacing
SEED = 20230907
SA_ITERATIONS = 2000
PARTITIONS = (2, 3, 4)             # k x k rectangles tried for Q4 (one block: far more overlap, see README)


# ----------------------------------------------------------------------------- Q1-Q3 (closed form)

def swath(depth: float | Array, slope_across: float | Array) -> tuple[Any, Any]:
    """Horizontal reach of the beam edges on the side where depth increases (deep) and decreases (shallow)."""
    t = np.tan(slope_across)
    return depth * TAN_HALF / (1 - TAN_HALF * t), depth * TAN_HALF / (1 + TAN_HALF * t)


def q1() -> list[dict[str, float | None]]:
    alpha, d0, spacing = math.radians(1.5), 70.0, 200.0
    rows: list[dict[str, float | None]] = []
    previous: tuple[float, float, float] | None = None
    for x in range(-800, 801, 200):            # x grows toward the shallow side (figure 7)
        depth = d0 - x * math.tan(alpha)
        deep, shallow = swath(depth, alpha)
        width = float((deep + shallow) / math.cos(alpha))       # along the sloping seabed
        overlap = None
        if previous is not None:
            # overlap of this swath with the previous line's (horizontal extents, measured on the seabed)
            prev_x, prev_shallow, _ = previous
            shared = (prev_x + prev_shallow) - (x - float(deep))
            overlap = round(100 * shared / (float(deep + shallow)), 2)
        rows.append({"distance_m": x, "depth_m": round(depth, 2), "coverage_width_m": round(width, 2),
                     "overlap_pct": overlap})
        previous = (x, float(shallow), float(deep))
    del spacing
    return rows


def q2() -> list[dict[str, Any]]:
    alpha, d0 = math.radians(1.5), 120.0
    rows = []
    for beta_deg in range(0, 360, 45):
        beta = math.radians(beta_deg)
        gamma = math.atan(math.tan(alpha) * abs(math.sin(beta)))
        widths = []
        for miles in (0, 0.3, 0.6, 0.9, 1.2, 1.5, 1.8, 2.1):
            # the ship moves along its line; the depth changes with the slope component along the line
            depth = d0 - miles * NM * math.tan(alpha) * math.cos(beta)
            deep, shallow = swath(depth, gamma)
            widths.append(round(float(deep + shallow), 2))
        rows.append({"beta_deg": beta_deg, "coverage_width_m": widths})
    return rows


def q3() -> dict[str, Any]:
    """North-south lines over the west-deep 1.5 degree slope, 10 % overlap between neighbours."""
    alpha, d0, width_ew, length_ns = math.radians(1.5), 110.0, 4 * NM, 2 * NM

    def depth(x: float) -> float:          # x from the west edge; deeper to the west
        return d0 + (width_ew / 2 - x) * math.tan(alpha)

    def reach(x: float) -> tuple[float, float]:
        deep, shallow = swath(depth(x), alpha)
        return float(deep), float(shallow)       # west (deep) and east (shallow) reach

    # first line: its west edge reaches x = 0
    x = 0.0
    for _ in range(60):
        x = reach(x)[0]
    positions = [x]
    while positions[-1] + reach(positions[-1])[1] < width_ew:
        prev = positions[-1]
        lo, hi = prev, prev + 2 * sum(reach(prev))
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            west, east = reach(mid)
            shared = prev + reach(prev)[1] - (mid - west)
            lo, hi = (mid, hi) if shared / (west + east) > MIN_OVERLAP else (lo, mid)
        positions.append(lo)
    return {"line_count": len(positions), "total_length_m": round(len(positions) * length_ns, 1),
            "first_positions_m": [round(p, 2) for p in positions[:9]], "last_position_m": round(positions[-1], 2)}


# ----------------------------------------------------------------------------- Q4 (the official grid)

@dataclass(frozen=True)
class Seabed:
    x: Array          # metres, west -> east
    y: Array          # metres, south -> north
    depth: Array      # [y, x]
    gx: Array         # d depth / dx
    gy: Array         # d depth / dy

    def sample(self, px: Array, py: Array) -> tuple[Array, Array, Array]:
        """Bilinear depth and gradient at points (clipped to the grid)."""
        fx = np.clip(px / (self.x[1] - self.x[0]), 0, len(self.x) - 1.000001)
        fy = np.clip(py / (self.y[1] - self.y[0]), 0, len(self.y) - 1.000001)
        i, j = fx.astype(int), fy.astype(int)
        ax, ay = fx - i, fy - j

        def bilinear(field: Array) -> Array:
            return ((1 - ax) * (1 - ay) * field[j, i] + ax * (1 - ay) * field[j, i + 1]
                    + (1 - ax) * ay * field[j + 1, i] + ax * ay * field[j + 1, i + 1])

        return bilinear(self.depth), bilinear(self.gx), bilinear(self.gy)


def read_seabed(path: Path) -> Seabed:
    rows = list(load_workbook(path, read_only=True, data_only=True).worksheets[0].iter_rows(values_only=True))
    xs = np.array([float(v) for v in rows[1][2:] if v is not None]) * NM
    ys = np.array([float(r[1]) for r in rows[2:] if r[1] is not None]) * NM
    depth = np.array([[float(v) for v in r[2:2 + len(xs)]] for r in rows[2:2 + len(ys)]])
    gy, gx = np.gradient(depth, ys, xs)
    return Seabed(xs, ys, depth, gx, gy)


@dataclass
class Block:
    """A rectangle of the area and its plan: lines ``n . p = c`` with heading ``u`` clipped to the rectangle."""

    x0: float
    x1: float
    y0: float
    y1: float
    heading: float = 0.0
    offsets: Array | None = None

    def frame(self) -> tuple[Array, Array, Array]:
        """Unit heading u, unit normal n, and the along-line stations t covering the rectangle."""
        h = math.radians(self.heading)
        u, n = np.array([math.cos(h), math.sin(h)]), np.array([-math.sin(h), math.cos(h)])
        corners = np.array([[self.x0, self.y0], [self.x1, self.y0], [self.x0, self.y1], [self.x1, self.y1]])
        t = corners @ u
        return u, n, np.arange(t.min() + STEP / 2, t.max(), STEP)

    def normal_range(self) -> tuple[float, float]:
        _, n, _ = self.frame()
        corners = np.array([[self.x0, self.y0], [self.x1, self.y0], [self.x0, self.y1], [self.x1, self.y1]])
        c = corners @ n
        return float(c.min()), float(c.max())


def line_profile(seabed: Seabed, block: Block, c: float) -> tuple[Array, Array, Array]:
    """For the line n.p = c of ``block``: inside-mask, reach toward -n and toward +n at every station."""
    u, n, t = block.frame()
    px, py = t * u[0] + c * n[0], t * u[1] + c * n[1]
    inside = (px >= block.x0) & (px <= block.x1) & (py >= block.y0) & (py <= block.y1)
    depth, gx, gy = seabed.sample(px, py)
    slope = np.arctan(gx * n[0] + gy * n[1])        # depth increase per metre toward +n
    plus, minus = swath(depth, slope)                 # toward +n (deep if slope > 0) and toward -n
    return inside, minus, plus


def overlap_from(profile_a: tuple[Array, Array, Array], c_prev: float, profile_b: tuple[Array, Array, Array],
                 c: float) -> tuple[Array, Array, Array]:
    """Overlap ratio (of the new swath's width) of lines c_prev < c at each station, the shared-station mask,
    and the overlap width in metres (negative: a gap between the swaths)."""
    inside_a, _, plus_a = profile_a
    inside_b, minus_b, plus_b = profile_b
    shared = (c_prev + plus_a) - (c - minus_b)
    return shared / (minus_b + plus_b), inside_a & inside_b, shared


def overlap_along(seabed: Seabed, block: Block, c_prev: float, c: float) -> tuple[Array, Array]:
    eta, both, _ = overlap_from(line_profile(seabed, block, c_prev), c_prev, line_profile(seabed, block, c), c)
    return eta, both


def greedy(seabed: Seabed, block: Block) -> Array:
    """Lines from the -n edge: each next one where the mean overlap with the previous swath is 10 %."""
    lo, hi = block.normal_range()
    c = lo
    for _ in range(30):                                   # first line: its -n reach touches the edge
        inside, minus, _ = line_profile(seabed, block, c)
        c = lo + float(np.median(minus[inside])) if inside.any() else c + STEP
    offsets = [c]
    while True:
        previous = line_profile(seabed, block, offsets[-1])
        inside, _, plus = previous
        if not inside.any() or offsets[-1] + float(np.median(plus[inside])) >= hi:
            break
        a, b = offsets[-1], offsets[-1] + 2.5 * float(np.max(plus[inside])) + STEP
        while b - a > 0.05:
            mid = 0.5 * (a + b)
            eta, both, _ = overlap_from(previous, offsets[-1], line_profile(seabed, block, mid), mid)
            mean = float(eta[both].mean()) if both.any() else -1.0
            a, b = (mid, b) if mean > MIN_OVERLAP else (a, mid)
        offsets.append(a)
    return np.array(offsets)


def plan_length(seabed: Seabed, block: Block) -> float:
    assert block.offsets is not None
    return float(sum(line_profile(seabed, block, c)[0].sum() for c in block.offsets) * STEP)


def contour_heading(seabed: Seabed, block: Block) -> float:
    """Heading of the depth contours in the block: perpendicular to its mean (doubled-angle) gradient direction."""
    ix = (seabed.x >= block.x0) & (seabed.x <= block.x1)
    iy = (seabed.y >= block.y0) & (seabed.y <= block.y1)
    gx, gy = seabed.gx[np.ix_(iy, ix)], seabed.gy[np.ix_(iy, ix)]
    angle = np.arctan2(gy, gx)
    weight = np.hypot(gx, gy)
    mean = 0.5 * math.atan2(float((weight * np.sin(2 * angle)).sum()), float((weight * np.cos(2 * angle)).sum()))
    return float((round(math.degrees(mean) / 5.0) * 5.0 + 90.0) % 180.0)


def best_heading(seabed: Seabed, block: Block) -> Block:
    """The shortest greedy plan among the contour heading and the two grid axes."""
    best: tuple[float, Block] | None = None
    for heading in sorted({contour_heading(seabed, block), 0.0, 90.0}):
        trial = Block(block.x0, block.x1, block.y0, block.y1, heading)
        trial.offsets = greedy(seabed, trial)
        length = plan_length(seabed, trial)
        if best is None or length < best[0] - 1e-6:
            best = (length, trial)
    assert best is not None
    return best[1]


def partition(seabed: Seabed, k: int) -> list[Block]:
    """The area cut into k x k equal rectangles, each planned at its best heading."""
    xs = np.linspace(0.0, float(seabed.x[-1]), k + 1)
    ys = np.linspace(0.0, float(seabed.y[-1]), k + 1)
    return [best_heading(seabed, Block(float(xs[i]), float(xs[i + 1]), float(ys[j]), float(ys[j + 1])))
            for i in range(k) for j in range(k)]


def coverage_mask(seabed: Seabed, blocks: list[Block]) -> Array:
    """Grid cells inside at least one swath."""
    gx, gy = np.meshgrid(seabed.x, seabed.y)
    covered = np.zeros(gx.shape, dtype=bool)
    for block in blocks:
        u, n, t = block.frame()
        assert block.offsets is not None
        tc, nc = gx * u[0] + gy * u[1], gx * n[0] + gy * n[1]
        for c in block.offsets:
            inside, minus, plus = line_profile(seabed, block, c)
            if not inside.any():
                continue
            lo, hi = t[inside].min() - STEP / 2, t[inside].max() + STEP / 2
            band = (tc >= lo) & (tc <= hi) & (nc >= c - 2.5 * minus.max()) & (nc <= c + 2.5 * plus.max())
            reach_minus = np.interp(tc[band], t, np.where(inside, minus, 0.0))
            reach_plus = np.interp(tc[band], t, np.where(inside, plus, 0.0))
            covered[band] |= (nc[band] >= c - reach_minus) & (nc[band] <= c + reach_plus)
    return covered


def overlap_stats(seabed: Seabed, blocks: list[Block]) -> tuple[float, float]:
    """Mean overlap (%) of adjacent swaths and the length (nmi) of line where it exceeds 20 %."""
    values, over = [], 0.0
    for block in blocks:
        assert block.offsets is not None
        for a, b in zip(block.offsets[:-1], block.offsets[1:], strict=True):
            eta, both = overlap_along(seabed, block, float(a), float(b))
            values.append(eta[both])
            over += float((eta[both] > MAX_OVERLAP).sum()) * STEP
    joined = np.concatenate(values) if values else np.zeros(1)
    return 100 * float(joined.mean()), over / NM


def objective(seabed: Seabed, blocks: list[Block]) -> tuple[float, float, float]:
    missed = 100 * (1 - float(coverage_mask(seabed, blocks).mean()))
    mean, over = overlap_stats(seabed, blocks)
    return missed, over, mean


def anneal(seabed: Seabed, blocks: list[Block], area_m2: float, total_nm: float) -> list[Block]:
    """Simulated annealing of single line offsets (the line count stays), on the partition's objective:
    gap area between adjacent swaths (% of the sea area) + line length where adjacent swaths overlap by more
    than 20 % (% of the total length)."""
    rng = np.random.default_rng(SEED)

    def pair_cost(block: Block, a: float, b: float) -> float:
        if b <= a:
            return 1e9
        eta, both, shared = overlap_from(line_profile(seabed, block, a), a, line_profile(seabed, block, b), b)
        gap = float(np.clip(-shared[both], 0, None).sum()) * STEP
        return 100 * gap / area_m2 + 100 * float((eta[both] > MAX_OVERLAP).sum()) * STEP / NM / total_nm

    costs = []
    for block in blocks:
        assert block.offsets is not None
        offs = block.offsets
        costs.append([pair_cost(block, float(offs[k]), float(offs[k + 1])) for k in range(len(offs) - 1)])
    lines = [(i, k) for i, b in enumerate(blocks) for k in range(len(b.offsets if b.offsets is not None else []))]
    temperature = 0.02
    for step in range(SA_ITERATIONS):
        i, k = lines[int(rng.integers(len(lines)))]
        block, offs = blocks[i], blocks[i].offsets
        assert offs is not None
        if k == 0 or k == len(offs) - 1:      # the outermost lines hold the block's edges
            continue
        old = float(offs[k])
        new = old + float(rng.normal(0.0, 15.0))
        left = pair_cost(block, float(offs[k - 1]), new)
        right = pair_cost(block, new, float(offs[k + 1]))
        delta = left + right - costs[i][k - 1] - costs[i][k]
        t = temperature * (1 - step / SA_ITERATIONS) + 1e-9
        if delta <= 0 or rng.random() < math.exp(-delta / t):
            offs[k] = new
            costs[i][k - 1], costs[i][k] = left, right
    return blocks


def q4(seabed: Seabed) -> dict[str, Any]:
    candidates = []
    for k in PARTITIONS:
        blocks = partition(seabed, k)
        missed, over, _ = objective(seabed, blocks)
        total = sum(plan_length(seabed, b) for b in blocks) / NM
        # the statement's two quality requirements, both as percentages: area missed, line length over 20 %
        candidates.append((missed + 100 * over / total, k, blocks))
    _, k_best, blocks = min(candidates, key=lambda item: item[0])
    greedy_missed, greedy_over, greedy_mean = objective(seabed, blocks)
    greedy_offsets = [b.offsets.copy() for b in blocks if b.offsets is not None]
    total_nm = sum(plan_length(seabed, b) for b in blocks) / NM
    blocks = anneal(seabed, blocks, float(seabed.x[-1] * seabed.y[-1]), total_nm)
    missed, over, mean = objective(seabed, blocks)
    moved = np.concatenate([np.abs(b.offsets - g) for b, g in zip(blocks, greedy_offsets, strict=True)
                            if b.offsets is not None])
    annealed = {"missed_area_pct": round(missed, 3), "overlap_over_20pct_nautical_miles": round(over, 2),
                "avg_overlap_pct": round(mean, 2), "avg_line_shift_m": round(float(moved.mean()), 2)}
    annealed_kept = missed + 100 * over / total_nm <= greedy_missed + 100 * greedy_over / total_nm
    if not annealed_kept:   # measured on the grid the annealed plan is worse: keep the greedy one
        for block, offsets in zip(blocks, greedy_offsets, strict=True):
            block.offsets = offsets.copy()
        missed, over, mean = greedy_missed, greedy_over, greedy_mean
        moved = np.zeros(1)
    total = sum(plan_length(seabed, b) for b in blocks) / NM
    # coverage identity: a plan covering the area with mean overlap eta needs ~ sum dA / ((1 - eta) W(D))
    cell = float((seabed.x[1] - seabed.x[0]) * (seabed.y[1] - seabed.y[0]))
    bound = float((cell / (2 * seabed.depth * TAN_HALF)).sum()) / NM
    return {
        "length_identity_nautical_miles": {"flat_swath_no_overlap": round(bound, 2),
                                           "at_paper_mean_overlap_10_48pct": round(bound / (1 - 0.1048), 2),
                                           "at_our_mean_overlap": round(bound / (1 - mean / 100), 2),
                                           "mean_overlap_implied_by_622_nmi_pct": round(100 * (1 - bound / 622), 1)},
        "partition": f"{k_best} x {k_best}",
        "partition_scores": {f"{k} x {k}": round(score, 3) for score, k, _ in candidates},
        "blocks": [{"x_nm": [round(b.x0 / NM, 3), round(b.x1 / NM, 3)], "y_nm": [round(b.y0 / NM, 3), round(b.y1 / NM, 3)],
                    "heading_deg": b.heading, "line_count": len(b.offsets if b.offsets is not None else [])}
                   for b in blocks],
        "total_length_nautical_miles": round(total, 2), "missed_area_pct": round(missed, 3),
        "overlap_over_20pct_length_nautical_miles": round(over, 2), "greedy_avg_overlap_pct": round(greedy_mean, 2),
        "greedy_missed_area_pct": round(greedy_missed, 3), "greedy_overlap_over_20pct_nautical_miles": round(greedy_over, 2),
        "sa_avg_overlap_pct": round(mean, 2), "avg_position_error_m": round(float(moved.mean()), 2),
        "annealed_plan_kept": bool(annealed_kept), "annealed_plan": annealed,
        "line_count": int(sum(len(b.offsets if b.offsets is not None else []) for b in blocks)),
    }


def comparison(actual: float, target: float) -> dict[str, float]:
    return {"actual": actual, "paper_target": target, "absolute_error": round(actual - target, 4),
            "relative_error_pct": round(100 * (actual - target) / target, 4)}


def main() -> int:
    started = time.process_time()
    data = Path(os.environ.get("ANCHORAGE_DATA_DIR", "/root/data"))
    seabed = read_seabed(data / "attachments" / "附件.xlsx")
    table1, table2, plan3 = q1(), q2(), q3()
    plan4 = q4(seabed)
    targets = {"problem3_line_count": 34, "problem3_total_length_m": 125936, "problem3_last_position_m": 7226.14,
               "problem4_total_length_nautical_miles": 622, "problem4_missed_area_pct": 3.48,
               "problem4_overlap_over_20pct_length_nautical_miles": 30}
    result = {
        "paper_id": "B226", "paper_title": "多波束测线布设", "contest": "CUMCM", "problem_id": "2023-B",
        "paper_pdf": "not used", "paper_ocr": "not used",
        "data_sources": ["attachments/附件.xlsx"],
        "reproduction_scope": "Anchorage reproduction from the statement: swath geometry (Q1-Q2), greedy 10 % overlap "
                              "lines (Q3), rectangle split + per-block heading + greedy mean-overlap spacing + "
                              "simulated annealing of line offsets on the official depth grid (Q4)",
        "model": "multibeam coverage-width geometry + greedy line spacing + simulated annealing",
        "paper_targets": {**targets, "problem3_first_positions_m": plan3["first_positions_m"]},
        "reproduced": {
            "seabed_grid_summary": {"x_count": len(seabed.x), "y_count": len(seabed.y),
                                    "min_depth_m": round(float(seabed.depth.min()), 2),
                                    "max_depth_m": round(float(seabed.depth.max()), 2),
                                    "mean_depth_m": round(float(seabed.depth.mean()), 3),
                                    "x_range_nm": round(float(seabed.x[-1] / NM), 3),
                                    "y_range_nm": round(float(seabed.y[-1] / NM), 3)},
            "problem1_table": table1, "problem2_table": table2,
            "coverage_table_rows": len(table1) + len(table2),
            "problem3_line_count": plan3["line_count"], "problem3_total_length_m": plan3["total_length_m"],
            "problem3_last_position_m": plan3["last_position_m"], "problem3_first_positions_m": plan3["first_positions_m"],
            "problem4_summary": {"method": "rectangle split + greedy 10 % mean overlap + simulated annealing", **plan4},
        },
        "target_comparison": {
            "problem3_line_count": comparison(float(plan3["line_count"]), 34.0),
            "problem3_total_length_m": comparison(float(plan3["total_length_m"]), 125936.0),
            "problem3_last_position_m": comparison(float(plan3["last_position_m"]), 7226.14),
            "problem4_total_length_nm": comparison(plan4["total_length_nautical_miles"], 622.0),
            "problem4_missed_area_pct": comparison(plan4["missed_area_pct"], 3.48),
        },
        "generated_files": [], "artifact_dir": "",
        "cpu_seconds": round(time.process_time() - started, 2),
    }
    out = Path(os.environ.get("ANCHORAGE_RESULTS_DIR", "/root/results"))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{SLUG}_result.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"Q3 {plan3['line_count']} lines, {plan3['total_length_m']} m; Q4 {plan4['total_length_nautical_miles']} nmi, "
          f"missed {plan4['missed_area_pct']} %, overlap>20 % {plan4['overlap_over_20pct_length_nautical_miles']} nmi, "
          f"mean overlap {plan4['sa_avg_overlap_pct']} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
