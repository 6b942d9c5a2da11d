#!/usr/bin/env python3
"""Reproduction of the MCM 2025 B Outstanding paper 2504448 ("Sustainable Tourism Management in Juneau"),
written for Anchorage: a multi-objective finite-horizon dynamic programme over visitor caps, a visitor fee and
the share of fee revenue spent on conservation/community, 2024-2028.

Reads the statement ``${ANCHORAGE_DATA_DIR:-/root/data}/problem.md`` and takes its figures from the text
(about 30,000 residents, 1.6 million cruise passengers in 2023, up to about 20,000 visitors on the busiest
days, about $375 million of revenue); every other parameter is a stated assumption (README.md). Writes
``${ANCHORAGE_RESULTS_DIR:-/root/results}/mcm-2025-b-juneau-tourism_result.json`` only.

Model (one year per stage):

* demand: ``D_t = D_0 (1 + g)^t exp(-e * fee)`` visitors, spread over a 150-day season with a day-to-day
  coefficient of variation of 0.35 (lognormal); a daily cap ``C`` truncates each day, so the season's visitors
  are ``sum_d min(demand_d, C)`` (computed on a fixed set of seeded day draws);
* revenue: visitors x (the statement's spend per visitor, $375 M / 1.6 M, + fee);
* glacier/environment: pressure ``visitors / 1.6 M`` against a health stock that recovers with conservation
  spending (fee revenue x conservation share) and degrades with pressure;
* residents: acceptance in [0, 1] moves toward a target that falls with busy-day crowding (visitors per
  resident on the 90th-percentile day) and rises with community spending;
* objective per year: the sustainability score, a weighted composite on the 0-1 scale of economic
  (revenue / $375 M, capped at 1.2), environmental (health) and social (acceptance) terms, weights
  0.4 / 0.3 / 0.3; the DP maximises the sum over 2024-2028 on a grid of states (health, acceptance).
"""

from __future__ import annotations

import json
import os
import re
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np

SLUG = "mcm-2025-b-juneau-tourism"
SEED = 2025
YEARS = list(range(2024, 2029))
SEASON_DAYS = 150
DAY_CV = 0.35
GROWTH = 0.03  # yearly growth of unconstrained cruise demand
FEE_ELASTICITY = 0.004  # per USD: exp(-e * fee)
CAPS = list(range(8000, 20001, 1000))
FEES = list(range(0, 101, 5))
SHARES = [0.2, 0.3, 0.4, 0.5, 0.6]
WEIGHTS = (0.4, 0.3, 0.3)
HEALTH_GRID = np.round(np.linspace(0.5, 1.0, 11), 3)
ACCEPT_GRID = np.round(np.linspace(0.3, 1.0, 15), 3)


def statement_figures(text: str) -> dict[str, float]:
    flat = " ".join(text.split())
    residents = re.search(r"population of about ([\d,]+) residents", flat)
    passengers = re.search(r"([\d.]+)\s*million cruise passengers", flat)
    peak = re.search(r"upwards of around ([\d,]+) visitors", flat)
    revenue = re.search(r"\$([\d,.]+) million", flat)
    if not (residents and passengers and peak and revenue):
        raise SystemExit("the statement's Juneau figures (residents, passengers, peak day, revenue) were not found")
    return {"residents": float(residents.group(1).replace(",", "")),
            "passengers_2023": float(passengers.group(1)) * 1e6,
            "peak_day_visitors": float(peak.group(1).replace(",", "")),
            "revenue_2023_usd": float(revenue.group(1).replace(",", "")) * 1e6}


class Model:
    def __init__(self, figures: dict[str, float]) -> None:
        self.f = figures
        self.spend = figures["revenue_2023_usd"] / figures["passengers_2023"]
        rng = np.random.default_rng(SEED)
        sigma = np.sqrt(np.log(1 + DAY_CV ** 2))
        # day-to-day shape of demand, normalised to mean 1 (the same draws for every policy)
        shape = rng.lognormal(-sigma ** 2 / 2, sigma, SEASON_DAYS)
        self.shape = shape / shape.mean()
        self._seasons: dict[tuple[int, int, float], tuple[float, float]] = {}

    def season(self, year: int, cap: int, fee: float) -> tuple[float, float]:
        """Visitors in the season and the 90th-percentile day's visitors (memoised: the DP asks often)."""
        key = (year, cap, fee)
        if key not in self._seasons:
            self._seasons[key] = self._season(year, cap, fee)
        return self._seasons[key]

    def _season(self, year: int, cap: int, fee: float) -> tuple[float, float]:
        demand = self.f["passengers_2023"] * (1 + GROWTH) ** (year - 2023) * np.exp(-FEE_ELASTICITY * fee)
        days = np.minimum(demand / SEASON_DAYS * self.shape, cap)
        return float(days.sum()), float(np.quantile(days, 0.9))

    def step(self, year: int, health: float, accept: float, cap: int, fee: float, share: float) -> dict[str, float]:
        visitors, busy_day = self.season(year, cap, fee)
        revenue = visitors * (self.spend + fee)
        fee_revenue = visitors * fee
        conservation = fee_revenue * share
        community = fee_revenue * (1 - share) * 0.5
        pressure = visitors / self.f["passengers_2023"]
        new_health = min(max(health + 0.12 * (1 - health) * min(conservation / 40e6, 1.5)
                             - 0.06 * pressure ** 1.5 + 0.03, 0.0), 1.0)
        crowding = busy_day / self.f["residents"]
        target = min(max(1.1 - 0.9 * crowding + 0.25 * min(community / 20e6, 1.0), 0.0), 1.0)
        new_accept = min(max(accept + 0.5 * (target - accept), 0.0), 1.0)
        economy = min(revenue / self.f["revenue_2023_usd"], 1.2) / 1.2
        score = WEIGHTS[0] * economy + WEIGHTS[1] * new_health + WEIGHTS[2] * new_accept
        return {"annual_visitors": visitors, "total_revenue_usd": revenue, "busy_day_visitors": busy_day,
                "glacier_pressure": pressure, "health": new_health, "resident_acceptance_index": new_accept,
                "sustainability_score": score}


def snap(value: float, grid: np.ndarray) -> int:
    """Index of the grid point nearest ``value`` (the grid is evenly spaced)."""
    step = float(grid[1] - grid[0])
    return min(max(round((value - float(grid[0])) / step), 0), len(grid) - 1)


def optimise(model: Model, health0: float, accept0: float) -> list[dict[str, Any]]:
    actions = list(product(CAPS, FEES, SHARES))
    value_next = np.zeros((len(HEALTH_GRID), len(ACCEPT_GRID)))
    policy: dict[tuple[int, int, int], tuple[int, float, float]] = {}
    for year in reversed(YEARS):
        value = np.full_like(value_next, -np.inf)
        for (hi, health), (ai, accept) in product(enumerate(HEALTH_GRID), enumerate(ACCEPT_GRID)):
            for cap, fee, share in actions:
                out = model.step(year, float(health), float(accept), cap, fee, share)
                total = out["sustainability_score"] + value_next[snap(out["health"], HEALTH_GRID),
                                                                  snap(out["resident_acceptance_index"], ACCEPT_GRID)]
                if total > value[hi, ai] + 1e-12:
                    value[hi, ai] = total
                    policy[(year, hi, ai)] = (cap, float(fee), share)
        value_next = value
    path = []
    health, accept = health0, accept0
    for year in YEARS:
        cap, fee, share = policy[(year, snap(health, HEALTH_GRID), snap(accept, ACCEPT_GRID))]
        out = model.step(year, health, accept, cap, fee, share)
        path.append({"year": year, "daily_cap": cap, "visitor_fee_usd": fee, "conservation_share": share,
                     "annual_visitors": round(out["annual_visitors"]),
                     "total_revenue_usd": round(out["total_revenue_usd"], 2),
                     "busy_day_visitors": round(out["busy_day_visitors"]),
                     "glacier_pressure": round(out["glacier_pressure"], 4),
                     "environment_health": round(out["health"], 4),
                     "resident_acceptance_index": round(out["resident_acceptance_index"], 4),
                     "sustainability_score": round(out["sustainability_score"], 4)})
        health, accept = out["health"], out["resident_acceptance_index"]
    return path


def sensitivity(model: Model, policy: dict[str, Any]) -> tuple[float, list[dict[str, Any]]]:
    """One-at-a-time +-20 % on each lever of the terminal policy (change of the one-year score), and each lever's
    correlation with that score over random policies."""
    rows = []
    base = model.step(2028, 0.8, 0.7, policy["daily_cap"], policy["visitor_fee_usd"], policy["conservation_share"])
    for lever in ("daily_cap", "visitor_fee_usd", "conservation_share"):
        scores = []
        for factor in (0.8, 1.2):
            values = {k: policy[k] for k in ("daily_cap", "visitor_fee_usd", "conservation_share")}
            values[lever] = values[lever] * factor
            out = model.step(2028, 0.8, 0.7, int(values["daily_cap"]), values["visitor_fee_usd"],
                             min(values["conservation_share"], 1.0))
            scores.append(out["sustainability_score"])
        rows.append({"factor": lever, "score_minus20pct": round(scores[0], 5), "score_plus20pct": round(scores[1], 5),
                     "swing": round(abs(scores[1] - scores[0]), 5)})
    rows.sort(key=lambda r: -r["swing"])
    # Global view: correlation of each lever with the one-year score over random policies (seeded).
    rng = np.random.default_rng(SEED)
    draws = [(int(rng.choice(CAPS)), float(rng.choice(FEES)), float(rng.choice(SHARES))) for _ in range(600)]
    scores = np.array([model.step(2028, 0.8, 0.7, cap, fee, share)["sustainability_score"] for cap, fee, share in draws])
    levers = np.array(draws)
    for row in rows:
        column = ("daily_cap", "visitor_fee_usd", "conservation_share").index(row["factor"])
        row["correlation_with_score"] = round(float(np.corrcoef(levers[:, column], scores)[0, 1]), 5)
    return round(base["sustainability_score"], 5), rows


def main() -> None:
    data_root = Path(os.environ.get("ANCHORAGE_DATA_DIR", "/root/data"))
    results = Path(os.environ.get("ANCHORAGE_RESULTS_DIR", "/root/results"))
    figures = statement_figures((data_root / "problem.md").read_text(encoding="utf-8"))
    model = Model(figures)
    path = optimise(model, health0=0.7, accept0=0.6)
    terminal = path[-1]
    base_score, analysis = sensitivity(model, terminal)
    artifact = {
        "problem_id": "2025-B", "paper_id": "2504448", "paper_title": "Sustainable Tourism Management in Juneau",
        "reproduction_scope": "Anchorage reproduction (solution/solve.py): statement figures + stated assumptions",
        "statement_figures": figures,
        "dynamic_programming": {
            "method": "finite-horizon DP over (environment health, resident acceptance) states; actions: daily cap, "
                      "visitor fee, conservation share",
            "horizon_years": [YEARS[0], YEARS[-1]],
            "best_cumulative_score": round(sum(p["sustainability_score"] for p in path), 6),
            "optimal_terminal_policy": terminal,
            "yearly_policy": path,
        },
        "sensitivity_base_score": base_score,
        "sensitivity_analysis": analysis,
        "experiment_result": {
            "terminal_year": terminal["year"],
            "optimal_daily_cap": terminal["daily_cap"],
            "optimal_visitor_fee_usd": terminal["visitor_fee_usd"],
            "optimal_conservation_share": terminal["conservation_share"],
            "annual_visitors": terminal["annual_visitors"],
            "total_revenue_usd": terminal["total_revenue_usd"],
            "sustainability_score": terminal["sustainability_score"],
            "resident_acceptance_index": terminal["resident_acceptance_index"],
            "top_sensitivity_factor": analysis[0]["factor"],
        },
    }
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{SLUG}_result.json").write_text(json.dumps(artifact, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(artifact["experiment_result"]), json.dumps(path))


if __name__ == "__main__":
    main()
