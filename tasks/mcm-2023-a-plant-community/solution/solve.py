"""Oracle reproduction for MCM 2023 A (drought-stricken plant communities), written for Anchorage.

Called by ``solution/solve.sh`` (Harbor convention, ``anchorage oracle``). The problem has no data: the
statement (``$ANCHORAGE_DATA_DIR/problem.md``, default ``/root/data``) asks for a model. Writes
``$ANCHORAGE_RESULTS_DIR/mcm-2023-a-plant-community_result.json`` (default ``/root/results``) — nothing else.

Model (the Outstanding paper 2309229's "GIID"-style community dynamics as the task records it: Lotka-Volterra
competition, drought pulses, habitat capacity steps, a water-absorption sensitivity beta; every rate is
ours, listed in solution/README.md):

    dB_i/dt = r_i g_i(W) B_i (1 - sum_j a_ij B_j / K_i) - d_i (1 - W) B_i - beta B_i

monthly Euler steps over 50 years; W = 1 in a normal month and 0.3 in the growing season (April-September)
of a drought year; species i sits at s_i = 0, 1/4, ..., 1 on one trade-off axis (fast, resource-hungry growers are
drought-sensitive): r_i = 1 - 0.4 s_i per year, K_i = 1000 (1 - 0.6 s_i), tolerance tau_i = 0.2 + 0.8 s_i,
g_i(W) = tau_i + (1 - tau_i) W, drought mortality d_i = 0.15 (1 - tau_i) per month; competition
a_ii = 1, a_ij = 0.6 (partial niche overlap); the habitat capacity scales every K_i (1000 = the full habitat). A community of n species holds the n fastest
growers. Drought years are drawn once (seed 2023) and shared by every community.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

SLUG = "mcm-2023-a-plant-community"
Array = NDArray[np.float64]
SEED = 2023
YEARS, STEPS_PER_YEAR = 50, 12
AXIS = np.linspace(0.0, 1.0, 5)                        # one trade-off axis: fast and competitive -> drought-tolerant
GROWTH = 1.0 - 0.4 * AXIS                              # per year
TOLERANCE = 0.2 + 0.8 * AXIS
CAPACITY_SHARE = 1.0 - 0.6 * AXIS                      # tolerant species use resources conservatively
DROUGHT_MORTALITY = 0.15                               # per month at W = 0, intolerant species
COMPETITION = 0.6
CAPACITY = 1000.0
DROUGHT_WATER = 0.3
SEASON = range(3, 9)                                   # April-September
BASE_DROUGHTS = 3                                      # drought years per 50 (moderate)
BETA_BASE, BETA_HIGH = 1e-3, 2e-2                      # per month
CAPACITY_STEPS = (1000.0, 600.0, 500.0, 400.0, 300.0)  # per decade (habitat reduction scenario)
PAPER = {"minimum_species_for_community_benefit": 2, "pielou_evenness_five_species": 0.87,
         "beta_1e_minus_3_to_2e_minus_2_biomass_decline_pct": 32.0}


def drought_years(count: int, rng_seed: int = SEED) -> set[int]:
    rng = np.random.default_rng(rng_seed + count)
    return set(int(y) for y in rng.choice(YEARS, size=count, replace=False)) if count else set()


def simulate(n: int, droughts: set[int], beta: float = BETA_BASE,
             capacity: tuple[float, ...] | None = None) -> Array:
    """Biomass (YEARS * STEPS_PER_YEAR + 1, n) of the n fastest-growing species."""
    r, tau = GROWTH[:n] / STEPS_PER_YEAR, TOLERANCE[:n]
    alpha = np.full((n, n), COMPETITION)
    np.fill_diagonal(alpha, 1.0)
    b = np.full(n, 50.0 / n)                            # the same initial total for every community
    out = [b.copy()]
    for step in range(YEARS * STEPS_PER_YEAR):
        year, month = divmod(step, STEPS_PER_YEAR)
        water = DROUGHT_WATER if (year in droughts and month in SEASON) else 1.0
        k = CAPACITY if capacity is None else capacity[min(year // 10, len(capacity) - 1)]
        growth = r * (tau + (1 - tau) * water) * b * (1 - alpha @ b / (k * CAPACITY_SHARE[:n]))
        loss = DROUGHT_MORTALITY * (1 - tau) * (1 - water) * b + beta * b
        b = np.maximum(b + growth - loss, 0.0)
        out.append(b.copy())
    return np.array(out)


def last_years(path: Array, years: int = 20) -> Array:
    """Annual means over the last ``years`` years."""
    annual = path[1:].reshape(YEARS, STEPS_PER_YEAR, -1).mean(axis=1)
    return annual[-years:]


def pielou(biomass: Array) -> float:
    p = biomass / biomass.sum()
    p = p[p > 0]
    return 1.0 if len(biomass) == 1 else float(-(p * np.log(p)).sum() / math.log(len(biomass)))


def main() -> int:
    started = time.process_time()
    base = drought_years(BASE_DROUGHTS)
    summary: list[dict[str, Any]] = []
    trajectories = 0
    for n in range(1, 6):
        path = simulate(n, base)
        trajectories += len(path)
        tail = last_years(path)
        totals = tail.sum(axis=1)
        summary.append({"species_count": n, "mean_total_biomass_last20y": round(float(totals.mean()), 4),
                        "coefficient_of_variation": round(float(totals.std() / totals.mean()), 4),
                        "pielou_evenness": round(pielou(tail.mean(axis=0)), 4),
                        "final_biomass_by_species": [round(float(v), 3) for v in path[-1]]})
    best = max(summary, key=lambda row: row["mean_total_biomass_last20y"])
    buffer = []
    normal = {n: last_years(simulate(n, set())).sum(axis=1).mean() for n in (1, 5)}
    for name, count in (("normal", 0), ("moderate_drought", 3), ("severe_frequent_drought", 6)):
        years = drought_years(count)
        mono = last_years(simulate(1, years)).sum(axis=1).mean() / normal[1]
        five = last_years(simulate(5, years)).sum(axis=1).mean() / normal[5]
        buffer.append({"scenario": name, "drought_frequency_per_50y": count,
                       "monoculture_biomass_index": round(float(mono), 4), "five_species_biomass_index": round(float(five), 4),
                       "diversity_buffer_gain_pct": round(100 * float(five - mono), 2)})
    low = last_years(simulate(5, base, BETA_BASE)).sum(axis=1).mean()
    high = last_years(simulate(5, base, BETA_HIGH)).sum(axis=1).mean()
    decline = 100 * (1 - high / low)
    habitat = simulate(5, base, capacity=CAPACITY_STEPS)
    decades = [{"decade": d, "environmental_capacity": CAPACITY_STEPS[d],
                "mean_total_biomass": round(float(habitat[1 + d * 120:1 + (d + 1) * 120].sum(axis=1).mean()), 3)}
               for d in range(5)]
    cvs = [row["coefficient_of_variation"] for row in summary]
    five_evenness = summary[4]["pielou_evenness"]
    result = {
        "paper_id": "2309229", "paper_title": "The Warriors against Drought: Plant Communities", "contest": "MCM",
        "problem_id": "2023-A", "paper_pdf": "not used", "paper_ocr": "not used",
        "data_sources": ["the statement (no data attachment)"],
        "reproduction_scope": "Anchorage reproduction: Lotka-Volterra competition with drought pulses, a growth / "
                              "drought-tolerance trade-off, habitat capacity steps and a loss rate beta; every rate "
                              "is this reproduction's choice (solution/README.md)",
        "model": "monthly Euler steps of logistic Lotka-Volterra competition with water-dependent growth and "
                 "drought mortality, 50 years, seeded drought years",
        "paper_targets": {**PAPER, "habitat_capacity_steps": [{"decade": d, "environmental_capacity": c}
                                                             for d, c in enumerate(CAPACITY_STEPS)]},
        "reproduced": {
            "species_count_summary": summary, "drought_buffer": buffer, "habitat_capacity_run": decades,
            "optimal_species_count": best["species_count"], "coefficient_of_variation_1_to_5": [cvs[0], cvs[-1]],
            "five_species_pielou_evenness": five_evenness, "beta_decline_pct": round(decline, 2),
            "beta_range_per_month": [BETA_BASE, BETA_HIGH], "base_drought_years": sorted(base),
            "trajectory_rows": trajectories},
        "target_comparison": {
            "optimal_species_count": {"actual": float(best["species_count"]), "paper_target": 2.0},
            "five_species_pielou_evenness": {"actual": five_evenness, "paper_target": 0.87},
            "beta_decline_pct": {"actual": round(decline, 2), "paper_target": 32.0},
            "cov_decrease_1_to_5": {"actual": round(cvs[0] - cvs[-1], 4), "paper_target": "positive"}},
        "generated_files": [], "artifact_dir": "",
        "cpu_seconds": round(time.process_time() - started, 2),
    }
    out = Path(os.environ.get("ANCHORAGE_RESULTS_DIR", "/root/results"))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{SLUG}_result.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"optimal species count {best['species_count']}, five-species evenness {five_evenness}, "
          f"beta decline {decline:.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
