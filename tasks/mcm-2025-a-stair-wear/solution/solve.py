#!/usr/bin/env python3
"""Reproduction of the MCM 2025 A Outstanding paper 2501909 ("Stair Wear: Traces of History"), written for
Anchorage: the Wear Volume Model (WVM) and the Wear Distribution Model (WDM), run as a closed loop.

The statement has no measurement attachment (``${ANCHORAGE_DATA_DIR:-/root/data}/problem.md`` is checked to
be the 2025 A statement). So the worked measurement sheet is produced here by a *forward* simulation of a
stated ground truth (README.md: a 300-year-old limestone stair, 90 users a day, 30 % of them in a crowded
peak period, walking side by side, 60 % of passages upward), with measurement noise; the *inverse* models then
read only that sheet and the stated material calibration, and their estimates are what the artifact reports.
Writes ``${ANCHORAGE_RESULTS_DIR:-/root/results}/mcm-2025-a-stair-wear_result.json`` only.

Models:

* forward (Archard): the wear depth across the tread is ``d(x) = c * N * p(x)``, ``p`` the density of foot
  placements across the width — single-file walkers on the centre line, pairs on two side bands — ``N`` the
  passages, ``c`` the stone's specific wear; nosing and back-edge rounding grow with descending and
  ascending passages respectively;
* WVM: ``N = (integral of d(x) dx) / c`` per tread (median over the treads, renovated treads excluded),
  daily users ``N / (age * 365.25)``, with an uncertainty grid over ``c`` (+-30 %) and the age window;
* WDM: a three-component lateral mixture (centre + two symmetric side bands) fitted to the median profile
  by least squares gives the share of side-by-side passages — the simultaneous-use index, read as the share
  of daily use in crowded peak periods; front/back rounding ratio gives the favoured direction;
* age reliability: over a grid of material coefficients (±30 %) and daily-traffic priors, the cells whose
  implied age falls in the archaeologist's window; their median and range are the age estimate and interval;
* renovation: a tread whose wear departs from its neighbours' mean by more than 35 % is flagged.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

SLUG = "mcm-2025-a-stair-wear"
SEED = 2025
WIDTH, STEP = 1.2, 0.01  # tread width (m) and profile resolution (m)
TREADS = 12
# Stated ground truth of the forward simulation (README.md) and the material calibration.
TRUE_AGE_YEARS = 300
TRUE_DAILY_USERS = 90.0
TRUE_PEAK_SHARE = 0.30  # share of passages in crowded peak periods, walked side by side
TRUE_UP_SHARE = 0.60
SPECIFIC_WEAR = 1.6e-7  # mm*m per passage (limestone, calibrated): d(x) = c * N * p(x)
CENTRE_SD, PAIR_OFFSET, PAIR_SD = 0.11, 0.24, 0.09  # m
RENOVATED = {8: 0.45}  # tread 8 replaced: it carries 45 % of the others' wear
NOISE_MM = 0.15
AGE_WINDOW_YEARS = (250, 350)  # the archaeologist's prior age estimate


def density(x: np.ndarray, pair_share: float, shift: float = 0.0) -> np.ndarray:
    def normal(mu: float, sd: float) -> np.ndarray:
        return np.exp(-0.5 * ((x - mu) / sd) ** 2) / (sd * np.sqrt(2 * np.pi))
    return ((1 - pair_share) * normal(shift, CENTRE_SD)
            + pair_share * 0.5 * (normal(shift - PAIR_OFFSET, PAIR_SD) + normal(shift + PAIR_OFFSET, PAIR_SD)))


def forward_sheet(rng: np.random.Generator) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """The measured profiles (mm, treads x positions) and the per-tread sheet rows."""
    x = np.arange(-WIDTH / 2, WIDTH / 2 + 1e-9, STEP)
    passages = TRUE_DAILY_USERS * 365.25 * TRUE_AGE_YEARS
    profiles, rows = [], []
    for tread in range(1, TREADS + 1):
        factor = RENOVATED.get(tread, 1.0) * rng.uniform(0.93, 1.07)  # stone variability along the flight
        depth = SPECIFIC_WEAR * passages * factor * density(x, TRUE_PEAK_SHARE, shift=-0.02) / 1e0
        depth = np.maximum(depth + rng.normal(0, NOISE_MM, x.size), 0)
        profiles.append(depth)
        down = passages * (1 - TRUE_UP_SHARE) * factor
        up = passages * TRUE_UP_SHARE * factor
        rows.append({
            "step_id": tread, "tread_width_cm": WIDTH * 100, "tread_depth_cm": 32.0,
            "center_wear_depth_mm": round(float(depth[np.abs(x) < 0.05].max()), 2),
            "left_wear_depth_mm": round(float(depth[np.abs(x + PAIR_OFFSET) < 0.03].mean()), 2),
            "right_wear_depth_mm": round(float(depth[np.abs(x - PAIR_OFFSET) < 0.03].mean()), 2),
            "front_edge_rounding_mm": round(float(2.0e-7 * down * (1 + rng.normal(0, 0.05))), 2),
            "back_edge_rounding_mm": round(float(0.8e-7 * up * (1 + rng.normal(0, 0.05))), 2),
            "patch_boundary_score": 5 if tread in RENOVATED else int(rng.integers(0, 2)),
            "tool_marks_present": 1 if tread in RENOVATED else 0,
        })
    return np.array(profiles), rows


def invert(profiles: np.ndarray, rows: list[dict[str, Any]]) -> dict[str, Any]:
    x = np.arange(-WIDTH / 2, WIDTH / 2 + 1e-9, STEP)
    centre = np.array([row["center_wear_depth_mm"] for row in rows])
    flagged = []
    for i, row in enumerate(rows):
        neighbours = [centre[j] for j in (i - 1, i + 1) if 0 <= j < len(rows)]
        jump = centre[i] - float(np.mean(neighbours))
        if abs(jump) > 0.35 * float(np.mean(neighbours)):
            flagged.append({"step_id": row["step_id"], "center_wear_depth_mm": row["center_wear_depth_mm"],
                            "neighbor_mean_center_wear_mm": round(float(np.mean(neighbours)), 2),
                            "wear_jump_mm": round(jump, 2), "patch_boundary_score": row["patch_boundary_score"],
                            "tool_marks_present": row["tool_marks_present"]})
    keep = [i for i, row in enumerate(rows) if row["step_id"] not in {f["step_id"] for f in flagged}]
    # WVM: passages from the integrated cross-section of each kept tread, median over treads
    sections = profiles[keep].sum(axis=1) * STEP  # mm*m
    passages = float(np.median(sections) / SPECIFIC_WEAR)
    low_age, high_age = AGE_WINDOW_YEARS
    age = 0.5 * (low_age + high_age)
    daily = passages / (age * 365.25)
    grid = [passages * 1 / f / (a * 365.25) for f in (0.7, 0.85, 1.0, 1.15, 1.3) for a in (low_age, age, high_age)]
    # WDM: lateral mixture fit on the median profile
    median_profile = np.median(profiles[keep], axis=0)

    def residual(theta: np.ndarray) -> np.ndarray:
        scale, share, shift = theta
        return scale * density(x, share, shift) - median_profile

    fit = least_squares(residual, x0=[float(median_profile.sum() * STEP), 0.5, 0.0],
                        bounds=([0, 0, -0.2], [np.inf, 1, 0.2]))
    _scale, share, shift = (float(v) for v in fit.x)
    front = float(np.median([rows[i]["front_edge_rounding_mm"] for i in keep]))
    back = float(np.median([rows[i]["back_edge_rounding_mm"] for i in keep]))
    # nosing wear per descending passage is 2.5x the back edge's per ascending one (same calibration as above)
    up_share = (back / 0.8) / (back / 0.8 + front / 2.0)
    # Age reliability: the wear identifies passages only; an age needs a traffic prior. Over a grid of material
    # coefficients (+-30 %) and daily-traffic priors, the plausible cells are those whose implied age falls in
    # the archaeologist's window; the age estimate is their median, the interval their range.
    traffic_prior = (60.0, 90.0, 120.0, 180.0, 240.0, 360.0)
    cells = [(f, users, np.median(sections) / (SPECIFIC_WEAR * f) / (users * 365.25))
             for f in (0.7, 0.85, 1.0, 1.15, 1.3) for users in traffic_prior]
    plausible = [age_ for _, _, age_ in cells if low_age <= age_ <= high_age]
    peak_users = share * daily
    return {
        "wvm": {"valid_treads": len(keep), "median_center_wear_depth_mm": round(float(np.median(centre[keep])), 3),
                "median_cross_section_mm_m": round(float(np.median(sections)), 4),
                "specific_wear_mm_m_per_passage": SPECIFIC_WEAR, "estimated_passages_per_tread": round(passages),
                "assumed_age_years": age, "estimated_daily_users": round(daily, 2),
                "daily_users_grid_range": [round(min(grid), 2), round(max(grid), 2)]},
        "wdm": {"simultaneous_use_index_0_1": round(share, 4), "lateral_centroid_m": round(shift, 4),
                "pair_band_offset_m": PAIR_OFFSET, "front_to_back_rounding_ratio": round(front / back, 4),
                "estimated_up_share": round(up_share, 4), "favored_direction": "up" if up_share > 0.5 else "down",
                "simultaneous_pattern": "mostly side by side" if share > 0.6 else "single file" if share < 0.15
                else "mixed"},
        "age_reliability": {
            "traffic_prior_daily_users": list(traffic_prior), "wear_coefficient_factors": [0.7, 0.85, 1.0, 1.15, 1.3],
            "estimated_age_years": round(float(np.median(plausible)), 1) if plausible else None,
            "plausible_interval_years": [round(min(plausible), 1), round(max(plausible), 1)] if plausible else None,
            "plausible_grid_cells": len(plausible), "total_grid_cells": len(cells),
        },
        "renovation_candidates": flagged,
        "daily_use_pattern": {
            "estimated_daily_users": round(daily, 2),
            "peak_period_share_of_daily_use": round(share, 4),
            "peak_period_users": round(peak_users, 1),
            "regular_hour_users_if_spread_over_10_hours": round((daily - peak_users) / 10, 1),
            "short_burst_vs_long_duration": "crowded peak periods plus regular single-file circulation",
        },
    }


def main() -> None:
    data_root = Path(os.environ.get("ANCHORAGE_DATA_DIR", "/root/data"))
    results = Path(os.environ.get("ANCHORAGE_RESULTS_DIR", "/root/results"))
    statement = (data_root / "problem.md").read_text(encoding="utf-8")
    if "stairs" not in statement.lower() or "wear" not in statement.lower():
        raise SystemExit("problem.md is not the MCM 2025 A statement (stair wear)")
    profiles, rows = forward_sheet(np.random.default_rng(SEED))
    estimate = invert(profiles, rows)
    artifact = {
        "problem_id": "2025-A", "paper_id": "2501909", "paper_title": "Stair Wear: Traces of History",
        "reproduction_scope": "Anchorage reproduction (solution/solve.py): WVM/WDM inverse models run on a "
                              "measurement sheet simulated from a stated ground truth (the statement has no data)",
        "ground_truth_of_the_worked_sheet": {"age_years": TRUE_AGE_YEARS, "daily_users": TRUE_DAILY_USERS,
                                             "peak_share": TRUE_PEAK_SHARE, "up_share": TRUE_UP_SHARE,
                                             "renovated_treads": sorted(RENOVATED)},
        "measurement_sheet": rows,
        "wvm": estimate["wvm"],
        "wdm": estimate["wdm"],
        "age_reliability": estimate["age_reliability"],
        "renovation_detection": {"repair_candidates": estimate["renovation_candidates"]},
        "daily_use_pattern": estimate["daily_use_pattern"],
        "experiment_result": {
            "median_center_wear_depth_mm": estimate["wvm"]["median_center_wear_depth_mm"],
            "estimated_passages_per_tread": estimate["wvm"]["estimated_passages_per_tread"],
            "estimated_daily_users": estimate["wvm"]["estimated_daily_users"],
            "favored_direction": estimate["wdm"]["favored_direction"],
            "simultaneous_pattern": estimate["wdm"]["simultaneous_pattern"],
            "lateral_centroid": round(estimate["wdm"]["lateral_centroid_m"] / (WIDTH / 2), 4),
            "estimated_age_years": estimate["age_reliability"]["estimated_age_years"],
            "age_interval_years": estimate["age_reliability"]["plausible_interval_years"],
            "repair_candidate_count": len(estimate["renovation_candidates"]),
        },
    }
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{SLUG}_result.json").write_text(json.dumps(artifact, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(estimate["daily_use_pattern"]), json.dumps(estimate["wdm"]),
          json.dumps(estimate["renovation_candidates"]))


if __name__ == "__main__":
    main()
