#!/usr/bin/env python3
"""Reproduction of the MCM 2024 A Outstanding paper 2407093 ("Coexist or Extinct? Relationship between
Lampreys and Environment"), written for Anchorage.

The statement has no data attachment; its only numbers are the two observed male shares (about 78 % where
food is scarce, about 56 % where it is abundant). This script reads the statement
(``${ANCHORAGE_DATA_DIR:-/root/data}/problem.md``) to take those two shares from its text, and writes
``${ANCHORAGE_RESULTS_DIR:-/root/results}/mcm-2024-a-lamprey_result.json`` (nothing else).

Model chain (every parameter and choice is listed in ``README.md`` beside this file):

* resource-driven sex ratio: male share ``m(R) = m_scarce + (m_abundant - m_scarce) * R`` for a resource level
  ``R`` in [0, 1] (fraction of the larval habitat's carrying capacity), against the fixed 1:1 rule;
* lamprey dynamics (yearly steps of an ODE): recruitment = spawning females x their fecundity x feeding
  success; under the adaptive rule sex follows larval growth, so the females are the well-fed larvae, under
  the fixed rule half the larvae become females whatever their growth (fecundity ``R / (R + 0.25)``);
* host fish: logistic growth minus the lampreys' parasitic feeding (Holling II, Lotka-Volterra type);
* a parasite of lampreys (saturating attack, Nicholson-Bailey style host-parasite coupling);
* stability after a resource shock (R drops by 40 % for 3 years): resistance, resilience, persistence, and
  the 3R composite; the "parasite coexistence case" is the resource level, on a 0.05 grid, where every species
  persists under both rules and the adaptive rule raises the parasite's equilibrium index the most (adaptive
  minus fixed).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.integrate import solve_ivp

SLUG = "mcm-2024-a-lamprey"
YEARS, SHOCK_YEAR, SHOCK_YEARS, SHOCK_DEPTH = 160, 100, 3, 0.4
GRID = [round(0.05 * k, 2) for k in range(2, 20)]  # 0.10 .. 0.95
EXTINCT = 1.0  # a population below one individual (index unit) counts as extinct


@dataclass(frozen=True)
class Params:
    birth: float = 4.0  # recruits per mating pair-equivalent per year at full feeding and larval survival
    female_half: float = 0.25  # resource level at which a female assigned regardless of growth has half fecundity
    lamprey_death: float = 0.35
    lamprey_crowding: float = 0.0004  # intraspecific competition per lamprey per year
    host_half: float = 300.0  # host density giving half the lampreys' feeding success
    host_growth: float = 0.8
    host_capacity: float = 2000.0
    feeding_rate: float = 0.5  # hosts killed per lamprey per year at saturation
    parasite_attack: float = 0.9  # per parasite per year at lamprey saturation
    parasite_half: float = 600.0  # lamprey density giving half the parasite's attack
    parasite_yield: float = 0.8
    parasite_death: float = 0.45


def male_shares(statement: str) -> tuple[float, float]:
    """The statement's two observed male shares (scarce, abundant), read from its text."""
    scarce = re.search(r"food availability is low.*?approximately\s+(\d+)%", statement, re.S)
    abundant = re.search(r"readily available.*?approximately\s+(\d+)%", statement, re.S)
    if not scarce or not abundant:
        raise SystemExit("the statement's male shares (78 % / 56 %) were not found in problem.md")
    return int(scarce.group(1)) / 100, int(abundant.group(1)) / 100


def recruitment(resource: float, male: float, adaptive: bool, p: Params) -> float:
    """Spawning output per lamprey relative to a population of well-fed females.

    Sex follows larval growth under the adaptive rule: the fast growers become the ``1 - m`` females, so every
    female is well fed (quality 1). Under the fixed 1:1 rule half the larvae become females whatever their
    growth, and a female's fecundity follows her food, ``R / (R + female_half)``. Males are never limiting
    (``m >= 0.5``)."""
    quality = 1.0 if adaptive else resource / (resource + p.female_half)
    return (1 - male) * quality


def rhs(_: float, y: np.ndarray, level: float, male: float, adaptive: bool, p: Params) -> list[float]:
    lamprey, host, parasite = np.maximum(y, 0.0)
    feeding = host / (host + p.host_half)
    attack = p.parasite_attack * parasite * lamprey / (lamprey + p.parasite_half)
    return [
        p.birth * recruitment(level, male, adaptive, p) * feeding * lamprey - p.lamprey_death * lamprey
        - p.lamprey_crowding * lamprey ** 2 - attack,
        p.host_growth * host * (1 - host / p.host_capacity) - p.feeding_rate * lamprey * feeding,
        p.parasite_yield * attack - p.parasite_death * parasite,
    ]


def simulate(resource: float, adaptive: bool, shares: tuple[float, float], p: Params) -> dict[str, np.ndarray]:
    scarce, abundant = shares
    y = np.array([500.0, 1500.0, 20.0])
    out = {name: np.zeros(YEARS) for name in ("lamprey", "host", "parasite", "male_share", "resource")}
    for year in range(YEARS):
        level = resource * (1 - SHOCK_DEPTH) if SHOCK_YEAR <= year < SHOCK_YEAR + SHOCK_YEARS else resource
        male = scarce + (abundant - scarce) * level if adaptive else 0.5
        y = solve_ivp(rhs, (0.0, 1.0), y, args=(level, male, adaptive, p), rtol=1e-8, atol=1e-9).y[:, -1]
        y = np.maximum(y, 0.0)
        for name, value in zip(("lamprey", "host", "parasite", "male_share", "resource"), (*y, male, level), strict=True):
            out[name][year] = value
    return out


def summarise(run: dict[str, np.ndarray], resource: float, rule: str) -> dict[str, Any]:
    species = ("lamprey", "host", "parasite")
    before = {s: float(run[s][SHOCK_YEAR - 20:SHOCK_YEAR].mean()) for s in species}
    final = {s: float(run[s][-20:].mean()) for s in species}
    persistence = float(np.mean([final[s] >= EXTINCT for s in species]))
    # resistance: 1 - largest relative deviation during the shock window; resilience: recovery speed after it
    window = slice(SHOCK_YEAR, SHOCK_YEAR + SHOCK_YEARS + 5)
    deviations = [abs(run[s][window] - before[s]).max() / before[s] for s in ("lamprey", "host", "parasite")
                  if before[s] > 0]
    resistance = float(max(0.0, 1 - np.mean(deviations))) if deviations else 0.0
    recovery = []
    for s in ("lamprey", "host", "parasite"):
        after = run[s][SHOCK_YEAR + SHOCK_YEARS:]
        within = np.nonzero(abs(after - before[s]) <= 0.05 * before[s])[0] if before[s] > 0 else []
        recovery.append(int(within[0]) if len(within) else len(after))
    resilience = float(1 / (1 + np.mean(recovery) / 10))
    composition = np.array([final[s] for s in species])
    shares = composition / composition.sum() if composition.sum() > 0 else composition
    diversity = float(-(shares[shares > 0] * np.log(shares[shares > 0])).sum())
    return {
        "resource_level": resource, "sex_ratio_rule": rule,
        "male_share": round(float(run["male_share"][SHOCK_YEAR - 1]), 4),
        "final_lamprey": round(final["lamprey"], 3), "final_host_fish": round(final["host"], 3),
        "final_parasite": round(final["parasite"], 3),
        "normalized_diversity": round(diversity / math.log(3), 4),
        "species_persistence": round(persistence, 4), "resistance": round(resistance, 4),
        "resilience": round(resilience, 4),
        "composite_stability": round((resistance + resilience + persistence) / 3, 4),
    }


def main() -> None:
    data_root = Path(os.environ.get("ANCHORAGE_DATA_DIR", "/root/data"))
    results = Path(os.environ.get("ANCHORAGE_RESULTS_DIR", "/root/results"))
    shares = male_shares((data_root / "problem.md").read_text(encoding="utf-8"))
    params = Params()
    rows, pairs = [], []
    for resource in GRID:
        adaptive = summarise(simulate(resource, True, shares, params), resource, "adaptive")
        fixed = summarise(simulate(resource, False, shares, params), resource, "fixed_1_to_1")
        rows += [fixed, adaptive]
        pairs.append((resource, adaptive, fixed))
    comparison = [{"resource_level": r, "adaptive_stability": a["composite_stability"],
                   "fixed_stability": f["composite_stability"],
                   "adaptive_gain_pct": round(100 * (a["composite_stability"] / f["composite_stability"] - 1), 2)
                   if f["composite_stability"] else None,
                   "parasite_ratio_adaptive_over_fixed": round(a["final_parasite"] / f["final_parasite"], 4)
                   if f["final_parasite"] > 0 else None} for r, a, f in pairs]
    coexisting = [(r, a, f) for r, a, f in pairs if a["species_persistence"] == 1 and f["species_persistence"] == 1
                  and f["final_parasite"] > 0]
    if coexisting:
        resource, adaptive, fixed = max(coexisting, key=lambda t: t[1]["final_parasite"] - t[2]["final_parasite"])
        case: dict[str, Any] = {
            "resource_level": resource, "final_parasite_index": adaptive["final_parasite"],
            "host_fish_index": adaptive["final_host_fish"], "fixed_rule_parasite_index": fixed["final_parasite"],
            "fixed_rule_host_fish_index": fixed["final_host_fish"],
            "selection_rule": "all species persist under both rules; largest parasite gain (adaptive - fixed)",
        }
    else:
        case = {"resource_level": None, "final_parasite_index": None, "host_fish_index": None,
                "selection_rule": "no resource level with every species persisting under both rules"}
    gains = [c for c in comparison if c["adaptive_gain_pct"] is not None]
    artifact = {
        "problem_id": "2024-A", "paper_id": "2407093",
        "paper_title": "Coexist or Extinct? Relationship between Lampreys and Environment",
        "reproduction_scope": "Anchorage reproduction (solution/solve.py); the statement has no data, the male "
                              "shares 78 % / 56 % are read from its text, every other parameter is in README.md",
        "methods": "resource-driven sex ratio + staged lamprey dynamics + Lotka-Volterra/Nicholson-Bailey + "
                   "3R stability after a resource shock + resource-level grid",
        "experiment_result": {
            "sex_ratio_endpoint": {"scarce_resource_male_share": shares[0], "abundant_resource_male_share": shares[1]},
            "resource_grid": GRID,
            "scenario_summary": rows,
            "adaptive_vs_fixed": comparison,
            "largest_stability_gain": max(gains, key=lambda c: c["adaptive_gain_pct"]) if gains else None,
            "parasite_coexistence_case": case,
        },
    }
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{SLUG}_result.json").write_text(json.dumps(artifact, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(case), json.dumps(comparison))


if __name__ == "__main__":
    main()
