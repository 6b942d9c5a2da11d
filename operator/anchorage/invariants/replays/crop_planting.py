"""Replay check for CUMCM 2024 C (crop planting), Q1: revenue and profit ceilings from the data.

Declared as ``crop_planting_revenue`` (``CHECK``) and named in the task's ``tests/invariants.yaml``; run by
:func:`anchorage.invariants.gates.check`. The rule, for each Q1 case (``waste``: surplus unsold;
``discount``: surplus sold at 50 %), on ``experiment_result.q1.<case>_{profit,revenue,cost}_yuan``:

* **ceilings (hard):** the seven-year profit and revenue cannot exceed what the land could earn
  under the most generous reading of the statement. Per plot and season, a fractional knapsack over
  the crops the season allows (attachment 1) fills the plot's area with the best value per mu
  (upper end of the 2023 price range x yield, minus cost for the profit ceiling), where the area of a
  crop that is sold at full price is capped by its whole 2023 output (all seasons: the largest
  expected-sales figure any reading of "stable relative to 2023" gives) and, in the discount case,
  further area earns half price. Irrigated land takes the better of rice or its two vegetable
  seasons. Rotation, legume and dispersion rules are ignored, so every feasible plan, under any
  demand-cap reading (aggregate or the paper's per-plot caps) and any price within the 2023 range,
  stays below the ceiling.
* **balance (warning):** revenue - cost = profit within max(1 yuan, 1 %).

A field that is missing or not a number is missing evidence (a warning); so is the official data
when it cannot be found (looked up under ``tasks/cumcm-2024-c-crop-planting/environment/data`` of
this repository and of every directory in ``$ANCHORAGE_TASKS``). The ceilings are computed once per
process from the xlsx files (cached).
"""

from __future__ import annotations

import functools
import os
from collections import defaultdict
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

from anchorage.invariants.exact import to_fraction
from anchorage.invariants.replays import ReplayCheck
from anchorage.invariants.results import GateResult

SLUG = "cumcm-2024-c-crop-planting"
YEARS = 7                                   # 2024-2030
SURPLUS_SHARE = 0.5                         # Q1 case 2: surplus at 50 % of the price
BALANCE_ABS, BALANCE_REL = Fraction(1), Fraction(1, 100)
CASES = ("waste", "discount")
_DRY = ("平旱地", "梯田", "山坡地")
# Seasons each land type offers, as alternatives of season lists (attachment 1's notes).
_SEASON_PLANS: dict[str, tuple[tuple[tuple[str, frozenset[int]], ...], ...]] = {
    "dry": ((("单季", frozenset(range(1, 16))),),),
    "水浇地": ((("单季", frozenset({16})),),
              (("第一季", frozenset(range(17, 35))), ("第二季", frozenset({35, 36, 37})))),
    "普通大棚": ((("第一季", frozenset(range(17, 35))), ("第二季", frozenset({38, 39, 40, 41}))),),
    "智慧大棚": ((("第一季", frozenset(range(17, 35))), ("第二季", frozenset(range(17, 35)))),),
}


@functools.cache
def _repo_tasks() -> Path:
    """The repository's ``tasks/`` (this file's place does not change: resolved once, not per artifact)."""
    return Path(__file__).resolve().parents[4] / "tasks"


def _task_data_dirs() -> list[Path]:
    roots = [_repo_tasks()]
    roots += [Path(p) for p in os.environ.get("ANCHORAGE_TASKS", "").split(":") if p]
    return [root / SLUG / "environment" / "data" for root in roots]


def _attachment(data_dir: Path, name: str) -> Path | None:
    direct = data_dir / "attachments" / name
    if direct.is_file():
        return direct
    found = sorted(data_dir.glob(f"repo/**/{name}")) if data_dir.is_dir() else []
    return found[0] if found else None


def _rows(path: Path, sheet: int) -> list[tuple[Any, ...]]:
    import openpyxl  # heavy: only when the check runs

    book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        return [tuple(r) for r in book.worksheets[sheet].iter_rows(values_only=True)][1:]
    finally:
        book.close()


def _text(value: Any) -> str:
    return str(value).strip() if value is not None else ""


Stats = dict[tuple[int, str, str], tuple[float, float, float]]   # (crop, land, season) -> yield, cost, high price


def _read_stats(stat_path: Path) -> tuple[Stats, list[tuple[str, int, float, str]]]:
    stats: Stats = {}
    for r in _rows(stat_path, 1):
        if isinstance(r[1], int):
            stats[(r[1], _text(r[3]), _text(r[4]))] = (float(r[5]), float(r[6]), float(_text(r[7]).split("-")[1]))
    for (crop, land, season), row in list(stats.items()):  # smart greenhouse season 1 = ordinary
        if land == "普通大棚" and season == "第一季":
            stats.setdefault((crop, "智慧大棚", "第一季"), row)
    history, plot = [], ""
    for r in _rows(stat_path, 0):
        if isinstance(r[1], int):
            plot = _text(r[0]) or plot
            history.append((plot, r[1], float(r[4]), _text(r[5])))
    return stats, history


def _knapsack(area: float, items: list[tuple[float, float]]) -> float:
    """Best value of ``area`` mu filled fractionally from (value per mu, available mu) items."""
    total, left = 0.0, area
    for value, available in sorted(items, reverse=True):
        if value <= 0 or left <= 0:
            break
        take = min(left, available)
        total, left = total + value * take, left - take
    return total


def _season_bound(area: float, land: str, season: str, crops: frozenset[int], stats: Stats,
                  demand: Mapping[int, float], kind: str, case: str) -> float:
    items: list[tuple[float, float]] = []
    for crop in crops:
        if (crop, land, season) not in stats:
            continue
        yld, cost, price = stats[(crop, land, season)]
        deduct = cost if kind == "profit" else 0.0
        items.append((price * yld - deduct, demand.get(crop, 0.0) / yld))
        if case == "discount":
            items.append((SURPLUS_SHARE * price * yld - deduct, area))
    return _knapsack(area, items)


@functools.lru_cache(maxsize=4)
def _ceilings_from(land_path: Path, stat_path: Path) -> dict[str, float]:
    plots = [(_text(r[1]), float(r[2])) for r in _rows(land_path, 0) if r[0] and r[2] is not None]
    stats, history = _read_stats(stat_path)
    demand: dict[int, float] = defaultdict(float)   # whole 2023 output per crop, all seasons
    lands = {_text(r[0]): _text(r[1]) for r in _rows(land_path, 0) if r[0]}
    for plot, crop, area, season in history:
        demand[crop] += area * stats[(crop, lands[plot], season)][0]
    out = {}
    for case in CASES:
        for kind in ("profit", "revenue"):
            per_year = 0.0
            for land, area in plots:
                plans = _SEASON_PLANS["dry" if land in _DRY else land]
                per_year += max(sum(_season_bound(area, land, s, crops, stats, demand, kind, case) for s, crops in plan)
                                for plan in plans)
            out[f"{case}_{kind}"] = YEARS * per_year
    return out


def ceilings() -> dict[str, float] | None:
    """Seven-year ceilings ``{case}_{profit|revenue}`` in yuan, or None without the official data."""
    for data_dir in _task_data_dirs():
        land, stat = _attachment(data_dir, "附件1.xlsx"), _attachment(data_dir, "附件2.xlsx")
        if land is not None and stat is not None:
            return _ceilings_from(land, stat)
    return None


def _missing(name: str, paths: list[str], why: str) -> GateResult:
    return GateResult(name=name, form="replay", paths=tuple(paths), status="missing", severity="warning",
                      message=f"missing evidence: {why}")


def _ceiling_check(case: str, kind: str, q1: Mapping[str, Any], limits: dict[str, float] | None) -> GateResult:
    name, path = f"crop_planting_{case}_{kind}_ceiling", f"experiment_result.q1.{case}_{kind}_yuan"
    value = to_fraction(q1.get(f"{case}_{kind}_yuan"))
    if value is None:
        return _missing(name, [path], f"{path} not reported as a finite number")
    if limits is None:
        return _missing(name, [path], "official attachments 1-2 of the crop-planting task not found")
    limit = Fraction(limits[f"{case}_{kind}"])
    ok = value <= limit
    verdict = "within" if ok else "above"
    return GateResult(name=name, form="replay", paths=(path,), status="passed" if ok else "failed",
                      message=f"{case} {kind} {float(value):.2f} yuan is {verdict} the land's ceiling "
                              f"{float(limit):.2f} yuan (7 years, best value per mu, demand-capped)",
                      values={"value": float(value), "ceiling": float(limit)})


def _balance_check(case: str, q1: Mapping[str, Any]) -> GateResult:
    keys = [f"{case}_{k}_yuan" for k in ("revenue", "cost", "profit")]
    paths = [f"experiment_result.q1.{k}" for k in keys]
    revenue, cost, profit = (to_fraction(q1.get(k)) for k in keys)
    name = f"crop_planting_{case}_balance"
    if revenue is None or cost is None or profit is None:
        return _missing(name, paths, f"{case} revenue, cost or profit not reported")
    tol = max(BALANCE_ABS, BALANCE_REL * abs(profit))
    ok = abs(revenue - cost - profit) <= tol
    return GateResult(name=name, form="replay", paths=tuple(paths), status="passed" if ok else "failed",
                      severity="warning",
                      message=f"{case}: revenue - cost = {float(revenue - cost):.2f} vs profit {float(profit):.2f} "
                              f"(tolerance {float(tol):.2f} yuan)",
                      values={"revenue": float(revenue), "cost": float(cost), "profit": float(profit)})


def crop_planting_revenue(data: Mapping[str, Any]) -> list[GateResult]:
    """Q1 profit/revenue ceilings (hard) and revenue - cost = profit (warning), both cases."""
    result = data.get("experiment_result") if isinstance(data, Mapping) else None
    q1 = result.get("q1") if isinstance(result, Mapping) else None
    if not isinstance(q1, Mapping):
        q1 = {}
    wanted = any(to_fraction(q1.get(f"{c}_{k}_yuan")) is not None for c in CASES for k in ("profit", "revenue"))
    limits = ceilings() if wanted else None
    out = [_ceiling_check(case, kind, q1, limits) for case in CASES for kind in ("profit", "revenue")]
    out += [_balance_check(case, q1) for case in CASES]
    return out


CHECK = ReplayCheck("crop_planting_revenue", crop_planting_revenue)
