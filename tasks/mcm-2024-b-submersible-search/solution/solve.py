#!/usr/bin/env python3
"""Reproduction of the MCM 2024 B Outstanding paper 2419984 ("Time is Life: Precise Localization and Faster
Search"), written for Anchorage.

The statement has no data attachment (``${ANCHORAGE_DATA_DIR:-/root/data}/problem.md`` is checked to be the
2024 B statement); every environmental figure is a stated assumption, listed in ``README.md`` beside this
file. Writes ``${ANCHORAGE_RESULTS_DIR:-/root/results}/mcm-2024-b-submersible-search_result.json`` only.

Model chain:

1. Locate: Monte Carlo particles of a submersible that loses propulsion and sinks from cruising depth to the
   sea floor, drifting with the mean current plus an Ornstein-Uhlenbeck turbulent velocity, integrated with
   RK4 (60 s steps); the sinking speed and the failure time are uncertain; the floor is a smooth random relief
   depth under each particle is uncertain (normal around the site's mean depth with the site's relief
   standard deviation; touchdown ends the drift); the 95 % position area is reported.
2. Prepare: entropy-weighted scoring of search equipment on cost, readiness, coverage and detection.
3. Search: a Bayesian grid (500 m cells) seeded with the particle cloud; one searcher sweeps the cell with the
   largest posterior next (travel-penalised), detection probability per sweep ``1 - exp(-effort)``;
   the cumulative find probability over time and by start delay.
4. Extrapolate: the Caribbean scenario is the same simulation with the Caribbean's current and relief figures.
   ``current_multiplier`` = ratio (Caribbean / Ionian) of the drift-driven spread of the touchdown positions
   (known flat floor, so only the currents act); ``terrain_uncertainty_multiplier`` = ratio of the extra spread
   that the uncertain floor depth adds (root of the variance difference between the two runs).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SLUG = "mcm-2024-b-submersible-search"
SEED = 2024
PARTICLES = 20000
DT = 60.0  # s
CELL = 500.0  # m


@dataclass(frozen=True)
class Site:
    name: str
    current_east: float  # mean current at depth, m/s
    current_north: float
    turbulence: float  # OU velocity standard deviation, m/s
    turbulence_time: float  # OU correlation time, s
    mean_depth: float  # m
    relief_std: float  # m, standard deviation of the (unsurveyed) floor depth around its mean
    cruise_depth: float = 150.0  # m, where the submersible loses power


# Stated assumptions (README.md): typical intermediate-depth currents and floor relief of the two seas.
IONIAN = Site("Ionian Sea (Kefalonia shelf edge)", 0.10, -0.03, 0.05, 3 * 3600.0, 1200.0, 150.0)
CARIBBEAN = Site("Caribbean Sea (Cayman ridge flank)", 0.14, 0.03, 0.065, 3 * 3600.0, 1500.0, 260.0)


def drift(site: Site, *, flat: bool, seed: int) -> dict[str, np.ndarray]:
    """Touchdown positions (m, from the last known fix) and times (s) of the particle cloud."""
    rng = np.random.default_rng(seed)
    n = PARTICLES
    floor = site.mean_depth + site.relief_std * np.random.default_rng(seed + 1).standard_normal(n)
    if flat:
        floor[:] = site.mean_depth
    x = rng.normal(0, 100, n)  # last fix error
    y = rng.normal(0, 100, n)
    z = np.full(n, site.cruise_depth)
    sink = rng.uniform(0.05, 0.25, n)  # m/s, negative buoyancy after failure
    u = rng.normal(0, site.turbulence, n)
    v = rng.normal(0, site.turbulence, n)
    landed = np.zeros(n, dtype=bool)
    t_land = np.zeros(n)
    t = 0.0
    theta = 1 / site.turbulence_time
    kick = site.turbulence * np.sqrt(2 * theta * DT)
    while not landed.all() and t < 48 * 3600:
        active = ~landed

        def velocity(uu: np.ndarray, vv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return site.current_east + uu, site.current_north + vv

        # RK4 on the position with the turbulent velocity frozen over the step (it evolves as OU between steps)
        k1 = velocity(u[active], v[active])
        k2 = velocity(u[active] - 0.5 * DT * theta * u[active], v[active] - 0.5 * DT * theta * v[active])
        k4 = velocity(u[active] - DT * theta * u[active], v[active] - DT * theta * v[active])
        x[active] += DT / 6 * (k1[0] + 4 * k2[0] + k4[0])
        y[active] += DT / 6 * (k1[1] + 4 * k2[1] + k4[1])
        z[active] += DT * sink[active]
        u[active] += -theta * u[active] * DT + kick * rng.normal(size=active.sum())
        v[active] += -theta * v[active] * DT + kick * rng.normal(size=active.sum())
        t += DT
        hit = z[active] >= floor[active]
        index = np.nonzero(active)[0][hit]
        landed[index] = True
        t_land[index] = t
    return {"x": x, "y": y, "t": t_land}


def spread(cloud: dict[str, np.ndarray]) -> float:
    """Root of the trace of the touchdown positions' covariance (m)."""
    return float(np.sqrt(np.trace(np.cov(np.vstack([cloud["x"], cloud["y"]])))))


def area95(cloud: dict[str, np.ndarray]) -> float:
    """Area (km^2) of the 95 % normal ellipse of the touchdown positions."""
    cov = np.cov(np.vstack([cloud["x"], cloud["y"]]))
    return float(np.pi * 5.991 * np.sqrt(np.linalg.det(cov)) / 1e6)


def equipment() -> dict[str, Any]:
    """Entropy-weighted scoring: columns are cost (lower better), readiness, coverage, detection."""
    names = ["side_scan_sonar", "multibeam_echosounder", "rov", "auv", "magnetometer", "acoustic_pinger_receiver"]
    table = np.array([
        # cost kUSD, readiness 0-1, coverage km2/h, detection probability per sweep
        [150, 0.9, 2.0, 0.80],
        [400, 0.7, 3.0, 0.70],
        [900, 0.6, 0.2, 0.95],
        [1200, 0.5, 1.5, 0.85],
        [60, 0.9, 0.8, 0.50],
        [30, 0.95, 4.0, 0.60],
    ])
    benefit = np.array([False, True, True, True])
    norm = np.empty_like(table)
    for j in range(table.shape[1]):
        column = table[:, j]
        span = column.max() - column.min()
        norm[:, j] = (column - column.min()) / span if benefit[j] else (column.max() - column) / span
    share = (norm + 1e-12) / (norm + 1e-12).sum(axis=0)
    entropy = -(share * np.log(share)).sum(axis=0) / np.log(len(names))
    weights = (1 - entropy) / (1 - entropy).sum()
    scores = norm @ weights
    order = np.argsort(-scores, kind="stable")   # ties in row order on any processor
    return {"method": "entropy weighted cost-benefit score", "weights": dict(zip(
        ["cost", "readiness", "coverage", "detection"], (round(float(w), 4) for w in weights), strict=True)),
            "scores": {names[i]: round(float(scores[i]), 4) for i in order},
            "top_equipment": names[order[0]], "top_score": round(float(scores[order[0]]), 4),
            "host_ship_ready_items": [names[i] for i in order[:2]]}


def search(cloud: dict[str, np.ndarray], *, start_h: float, hours: float, sweep_effort: float = 1.2,
           speed_kmh: float = 6.0, sweep_h: float = 0.25) -> dict[str, Any]:
    """Greedy Bayesian search on the posterior grid; returns the cumulative find probability by hour."""
    x, y = cloud["x"], cloud["y"]
    ix = np.floor(x / CELL).astype(int)
    iy = np.floor(y / CELL).astype(int)
    cells, counts = np.unique(np.vstack([ix, iy]).T, axis=0, return_counts=True)
    prior = counts / counts.sum()
    posterior = prior.copy()
    found = 0.0
    clock = start_h
    position = np.array([0.0, 0.0])
    curve = [(round(start_h, 2), 0.0)]
    first = None
    detect = 1 - np.exp(-sweep_effort)
    while clock < start_h + hours:
        centres = (cells + 0.5) * CELL / 1000
        travel = np.linalg.norm(centres - position, axis=1) / speed_kmh
        gain = posterior * (1 - found) * detect / (sweep_h + travel)
        best = int(np.argmax(gain))
        if first is None:
            first = f"{cells[best][0]}_{cells[best][1]}"
        clock += travel[best] + sweep_h
        found += (1 - found) * posterior[best] * detect
        posterior[best] *= 1 - detect
        posterior /= posterior.sum()
        position = centres[best]
        curve.append((round(clock, 2), round(found, 4)))
    return {"first_deployment_cell": first, "curve": curve, "probability": round(found, 4)}


def find_by(curve: list[tuple[float, float]], hour: float) -> float:
    return max([p for h, p in curve if h <= hour] or [0.0])


def main() -> None:
    data_root = Path(os.environ.get("ANCHORAGE_DATA_DIR", "/root/data"))
    results = Path(os.environ.get("ANCHORAGE_RESULTS_DIR", "/root/results"))
    statement = (data_root / "problem.md").read_text(encoding="utf-8")
    if "Ionian" not in statement or "Caribbean" not in statement:
        raise SystemExit("problem.md is not the MCM 2024 B statement (Ionian Sea / Caribbean Sea)")

    runs: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    for site in (IONIAN, CARIBBEAN):
        runs[site.name] = {"relief": drift(site, flat=False, seed=SEED), "flat": drift(site, flat=True, seed=SEED)}
    ionian = runs[IONIAN.name]["relief"]
    current = {name: spread(run["flat"]) for name, run in runs.items()}
    terrain = {name: float(np.sqrt(max(spread(run["relief"]) ** 2 - spread(run["flat"]) ** 2, 0.0)))
               for name, run in runs.items()}
    current_multiplier = current[CARIBBEAN.name] / current[IONIAN.name]
    terrain_multiplier = terrain[CARIBBEAN.name] / terrain[IONIAN.name]

    plan = search(ionian, start_h=1.0, hours=17.0)
    delays = {start: search(ionian, start_h=start, hours=10.0)["probability"] for start in (1.0, 3.0, 5.0)}
    artifact = {
        "problem_id": "2024-B", "paper_id": "2419984",
        "paper_title": "Time is Life: Precise Localization and Faster Search",
        "reproduction_scope": "Anchorage reproduction (solution/solve.py); the statement has no data: the sites' "
                              "current and relief figures are stated assumptions (README.md)",
        "methods": "RK4 drift + OU turbulence + Monte Carlo particles + entropy-weighted equipment score + Bayesian "
                   "grid search + Caribbean re-run",
        "experiment_result": {
            "location_model": {
                "method": "RK4 drift with Ornstein-Uhlenbeck turbulence, Monte Carlo sinking particles, random relief",
                "particles": PARTICLES,
                "final_mean_x_m": round(float(ionian["x"].mean()), 2),
                "final_mean_y_m": round(float(ionian["y"].mean()), 2),
                "mean_touchdown_h": round(float(ionian["t"].mean() / 3600), 3),
                "final_p95_area_km2": round(area95(ionian), 4),
            },
            "equipment_selection": equipment(),
            "search_strategy": {
                "method": "Bayesian cell posterior, greedy travel-penalised sweeps (500 m cells, one searcher)",
                "first_deployment_cell": plan["first_deployment_cell"],
                "find_probability_6h": find_by(plan["curve"], 6.0),
                "find_probability_10h_start_1h": delays[1.0],
                "find_probability_10h_start_3h": delays[3.0],
                "find_probability_10h_start_5h": delays[5.0],
                "find_probability_18h": find_by(plan["curve"], 18.0),
            },
            "caribbean_adaptation": {
                "sites": {site.name: {"current_m_s": [site.current_east, site.current_north],
                                      "turbulence_m_s": site.turbulence, "mean_depth_m": site.mean_depth,
                                      "relief_std_m": site.relief_std} for site in (IONIAN, CARIBBEAN)},
                "drift_spread_m": {k: round(v, 2) for k, v in current.items()},
                "terrain_spread_m": {k: round(v, 2) for k, v in terrain.items()},
                "current_multiplier": round(current_multiplier, 4),
                "terrain_uncertainty_multiplier": round(terrain_multiplier, 4),
                "multi_submersible_rule": "partition posterior cells by nearest last-known ping and keep unique "
                                          "acoustic identifiers",
            },
        },
    }
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{SLUG}_result.json").write_text(json.dumps(artifact, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(artifact["experiment_result"]["caribbean_adaptation"]),
          json.dumps(artifact["experiment_result"]["search_strategy"]))


if __name__ == "__main__":
    main()
