"""Oracle reproduction for CUMCM 2024 C (crop planting), Q1, written for Anchorage.

Called by ``solution/solve.sh`` (Harbor convention, ``anchorage oracle``) and by
``tests/anchors/test_crop_planting.py``. Reads attachments 1 and 2 (``附件1.xlsx``, ``附件2.xlsx``)
from ``$ANCHORAGE_DATA_DIR/attachments`` (default ``/root/data``; falls back to the ``repo/`` mirror),
solves the 2024-2030 planting plan as a 0/1 program with HiGHS to proven optimality for both Q1
cases, and writes ``$ANCHORAGE_RESULTS_DIR/cumcm-2024-c-crop-planting_result.json``.

Model (the anchor of SPEC §6: exact optimum under the paper's per-plot demand caps; details and
every modelling choice in solution/README.md):

* one crop per plot and season on the whole plot, or fallow (a planting is never smaller than its
  plot, so the minimum-area rule holds); irrigated land grows rice (one season) or two vegetable
  seasons, the second being Chinese cabbage, white or red radish; ordinary greenhouses grow
  vegetables then mushrooms; smart greenhouses two vegetable seasons (season 1 data = ordinary);
* no crop on the same plot in two consecutive seasons (2023 plan included);
* every plot grows a legume in every 3-year window 2023-2025 ... 2028-2030;
* each crop is grown on at most 5 plots per season (the paper's dispersion rule);
* revenue of a planting = price x min(yield x area, d) (+ 50 % price on the surplus in case 2),
  d = the crop's 2023 output in that season (expected sales), price = middle of the 2023 range.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import highspy
import numpy as np
import openpyxl
from scipy.stats import spearmanr

SLUG = "cumcm-2024-c-crop-planting"
YEARS = tuple(range(2024, 2031))
HISTORY_YEAR = 2023
LEGUME_WINDOW = 3
MAX_PLOTS_PER_CROP = 5       # paper C038's dispersion rule
SURPLUS_PRICE = 0.5          # Q1 case 2
DRY = ("平旱地", "梯田", "山坡地")
SINGLE, FIRST, SECOND = "单季", "第一季", "第二季"
GRAINS = frozenset(range(1, 16))
RICE = 16
VEG = frozenset(range(17, 35))
WINTER_VEG = frozenset({35, 36, 37})
MUSHROOMS = frozenset({38, 39, 40, 41})


@dataclass(frozen=True)
class Slot:
    season: str                 # season label of attachment 2
    crops: frozenset[int]
    positions: tuple[int, ...]  # 0 = first half of the year, 1 = second; rice occupies both


SLOTS: dict[str, tuple[Slot, ...]] = {
    "dry": (Slot(SINGLE, GRAINS, (0,)),),
    "水浇地": (Slot(SINGLE, frozenset({RICE}), (0, 1)), Slot(FIRST, VEG, (0,)), Slot(SECOND, WINTER_VEG, (1,))),
    "普通大棚": (Slot(FIRST, VEG, (0,)), Slot(SECOND, MUSHROOMS, (1,))),
    "智慧大棚": (Slot(FIRST, VEG, (0,)), Slot(SECOND, VEG, (1,))),
}


@dataclass
class Data:
    plots: dict[str, tuple[str, float]]                      # name -> (land type, area mu)
    crop_names: dict[int, str]
    legumes: frozenset[int]
    stats: dict[tuple[int, str, str], tuple[float, float, float, float]]  # (crop, land, season) -> yield, cost, p_lo, p_hi
    history: list[tuple[str, int, float, str]]               # 2023: plot, crop, area, season
    paths: tuple[str, str]


def slots_of(land: str) -> tuple[Slot, ...]:
    return SLOTS["dry" if land in DRY else land]


def find_attachment(data_dir: Path, name: str) -> Path:
    direct = data_dir / "attachments" / name
    if direct.is_file():
        return direct
    found = sorted(data_dir.glob(f"repo/**/{name}"))
    if not found:
        sys.exit(f"error: {name} not found under {data_dir}/attachments or {data_dir}/repo; "
                 "set ANCHORAGE_DATA_DIR to the task's environment/data")
    return found[0]


def _text(value: Any) -> str:
    return str(value).strip() if value is not None else ""


def load(data_dir: Path) -> Data:
    land_path, stat_path = find_attachment(data_dir, "附件1.xlsx"), find_attachment(data_dir, "附件2.xlsx")
    land_book = openpyxl.load_workbook(land_path, read_only=True, data_only=True)
    stat_book = openpyxl.load_workbook(stat_path, read_only=True, data_only=True)
    plots = {_text(r[0]): (_text(r[1]), float(r[2]))
             for r in list(land_book.worksheets[0].iter_rows(values_only=True))[1:] if r[0] and r[2] is not None}
    crop_names, legumes = {}, set()
    for r in list(land_book.worksheets[1].iter_rows(values_only=True))[1:]:
        if isinstance(r[0], int):
            crop_names[r[0]] = _text(r[1])
            if "豆类" in _text(r[2]):
                legumes.add(r[0])
    stats = {}
    for r in list(stat_book.worksheets[1].iter_rows(values_only=True))[1:]:
        if isinstance(r[1], int):
            low, high = (float(x) for x in _text(r[7]).split("-"))
            stats[(r[1], _text(r[3]), _text(r[4]))] = (float(r[5]), float(r[6]), low, high)
    for (crop, land, season), row in list(stats.items()):   # note (2): smart season 1 = ordinary
        if land == "普通大棚" and season == FIRST:
            stats.setdefault((crop, "智慧大棚", FIRST), row)
    history, plot = [], ""
    for r in list(stat_book.worksheets[0].iter_rows(values_only=True))[1:]:
        if isinstance(r[1], int):
            plot = _text(r[0]) or plot
            history.append((plot, r[1], float(r[4]), _text(r[5])))
    if len(plots) != 54 or len(crop_names) != 41:
        sys.exit(f"error: attachment 1 should list 54 plots and 41 crops, read {len(plots)} and {len(crop_names)}")
    return Data(plots, crop_names, frozenset(legumes), stats, history, (land_path.name, stat_path.name))


def demand(data: Data) -> dict[tuple[int, str], float]:
    """Expected sales per (crop, season) = the 2023 output (area x yield of its land type)."""
    out: dict[tuple[int, str], float] = defaultdict(float)
    for plot, crop, area, season in data.history:
        out[(crop, season)] += area * data.stats[(crop, data.plots[plot][0], season)][0]
    return dict(out)


@dataclass
class Model:
    keys: list[tuple[int, str, str, int]]   # (year, plot, season, crop) of each 0/1 column
    revenue: dict[str, np.ndarray]           # case -> revenue of each column
    cost: np.ndarray
    rows: list[tuple[list[int], float, float]]  # (columns with coefficient 1, lower, upper)


def build(data: Data) -> Model:
    d = demand(data)
    keys: list[tuple[int, str, str, int]] = []
    revenue: dict[str, list[float]] = {"waste": [], "discount": []}
    cost: list[float] = []
    for year in YEARS:
        for plot, (land, area) in data.plots.items():
            for slot in slots_of(land):
                for crop in sorted(slot.crops):
                    yld, unit_cost, low, high = data.stats[(crop, land, slot.season)]
                    price, output = (low + high) / 2, area * yld
                    sold = min(output, d.get((crop, slot.season), 0.0))   # per-plot demand cap
                    keys.append((year, plot, slot.season, crop))
                    revenue["waste"].append(price * sold)
                    revenue["discount"].append(price * sold + SURPLUS_PRICE * price * (output - sold))
                    cost.append(unit_cost * area)
    index = {key: i for i, key in enumerate(keys)}
    rows = _slot_rows(data, index) + _rotation_rows(data, index) + _legume_rows(data, index) + _dispersion_rows(keys)
    return Model(keys, {k: np.array(v) for k, v in revenue.items()}, np.array(cost), rows)


def _columns(index: dict[tuple[int, str, str, int], int], year: int, plot: str, slot: Slot) -> list[int]:
    return [index[(year, plot, slot.season, c)] for c in sorted(slot.crops)]


def _slot_rows(data: Data, index: dict[tuple[int, str, str, int], int]) -> list[tuple[list[int], float, float]]:
    """At most one crop per plot and half-year (rice takes both halves of irrigated land; the
    second irrigated season holds one crop by construction)."""
    rows = []
    for year in YEARS:
        for plot, (land, _) in data.plots.items():
            for position in (0, 1):
                cols = [i for s in slots_of(land) if position in s.positions for i in _columns(index, year, plot, s)]
                if cols:
                    rows.append((cols, -np.inf, 1.0))
    return rows


def _last_crops_2023(data: Data) -> dict[str, set[int]]:
    last: dict[str, set[int]] = defaultdict(set)
    for plot, crop, _, season in data.history:
        if season in (SINGLE, SECOND):
            last[plot].add(crop)
    return last


def _rotation_rows(data: Data, index: dict[tuple[int, str, str, int], int]) -> list[tuple[list[int], float, float]]:
    """The same crop never occupies a plot in two consecutive seasons."""
    rows: list[tuple[list[int], float, float]] = []
    last = _last_crops_2023(data)
    for plot, (land, _) in data.plots.items():
        slots = slots_of(land)
        halves = sorted({p for s in slots for p in s.positions})
        previous: list[tuple[int, int | None]] = [(c, None) for c in sorted(last.get(plot, ()))]
        for year in YEARS:
            for half in halves:
                current = [(c, index[(year, plot, s.season, c)]) for s in slots if half in s.positions
                           for c in sorted(s.crops)]
                for crop, before in previous:
                    for crop_now, col in current:
                        if crop == crop_now and before != col:
                            rows.append(([col], -np.inf, 0.0) if before is None else ([before, col], -np.inf, 1.0))
                previous = list(current)
    return rows


def _legume_rows(data: Data, index: dict[tuple[int, str, str, int], int]) -> list[tuple[list[int], float, float]]:
    """Every plot grows a legume at least once in each 3-year window starting 2023."""
    had_legume = {plot for plot, crop, _, _ in data.history if crop in data.legumes}
    rows = []
    for plot, (land, _) in data.plots.items():
        for start in range(HISTORY_YEAR, YEARS[-1] - LEGUME_WINDOW + 2):
            if start == HISTORY_YEAR and plot in had_legume:
                continue
            cols = [index[(y, plot, s.season, c)] for y in range(start, start + LEGUME_WINDOW) if y in YEARS
                    for s in slots_of(land) for c in sorted(s.crops) if c in data.legumes]
            rows.append((cols, 1.0, np.inf))
    return rows


def _dispersion_rows(keys: list[tuple[int, str, str, int]]) -> list[tuple[list[int], float, float]]:
    groups: dict[tuple[int, str, int], list[int]] = defaultdict(list)
    for i, (year, _, season, crop) in enumerate(keys):
        groups[(year, season, crop)].append(i)
    return [(cols, -np.inf, float(MAX_PLOTS_PER_CROP)) for cols in groups.values() if len(cols) > MAX_PLOTS_PER_CROP]


def solve(model: Model, case: str) -> dict[str, Any]:
    n = len(model.keys)
    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 1e-6)
    h.setOptionValue("time_limit", 300.0)
    h.addVars(n, np.zeros(n), np.ones(n))
    h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kInteger))
    h.changeColsCost(n, np.arange(n, dtype=np.int32), model.revenue[case] - model.cost)
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    for cols, lower, upper in model.rows:
        h.addRow(lower, upper, len(cols), np.array(cols, dtype=np.int32), np.ones(len(cols)))
    started = time.perf_counter()
    h.run()
    seconds = time.perf_counter() - started
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        sys.exit(f"error: HiGHS ended with {h.modelStatusToString(status)} on the {case} case")
    info = h.getInfo()
    chosen = np.array(h.getSolution().col_value) > 0.5
    revenue, cost = float(model.revenue[case][chosen].sum()), float(model.cost[chosen].sum())
    return {
        "profit": round(revenue - cost, 2), "revenue": round(revenue, 2), "cost": round(cost, 2),
        "solver": {"mip_gap": float(info.mip_gap), "dual_bound_profit": round(float(info.mip_dual_bound), 2),
                   "node_count": int(info.mip_node_count), "status": 0, "model_status": h.modelStatusToString(status),
                   "solved_seconds": round(seconds, 2), "planted_rows": int(chosen.sum())},
        "plan": [list(model.keys[i]) for i in np.flatnonzero(chosen)],
    }


def correlations(data: Data) -> dict[str, float]:
    rows = [(y, c, (lo + hi) / 2) for (y, c, lo, hi) in data.stats.values()]
    yields, costs, prices = (np.array(col) for col in zip(*rows, strict=True))
    return {"spearman_price_cost": round(float(spearmanr(prices, costs)[0]), 4),
            "spearman_yield_cost": round(float(spearmanr(yields, costs)[0]), 4),
            "spearman_yield_price": round(float(spearmanr(yields, prices)[0]), 4)}


def result(data: Data, model: Model, waste: dict[str, Any], discount: dict[str, Any]) -> dict[str, Any]:
    gain = 100 * (discount["profit"] - waste["profit"]) / waste["profit"]
    return {
        "problem_id": "2024-C",
        "paper_id": "C038",
        "paper_title": "基于差分遗传算法的农作物种植策略优化",
        "official_problem": "problem.md (CUMCM 2024 C statement) with attachments 1-2",
        "reproduction_level": "exact_optimization",
        "reproduction_scope": "Anchorage's own exact 0/1 program of Q1 under per-plot demand caps, solved by HiGHS "
                              "to proven optimality (gap 0); see solution/README.md.",
        "methods": "official xlsx + whole-plot 0/1 planting program with per-plot sales caps, rotation, "
                   "3-year legume windows and <=5 plots per crop and season + HiGHS branch and bound",
        "experiment_result": {
            "data_source": {"type": "official_cumcm_xlsx", "land_path": data.paths[0], "stat_path": data.paths[1],
                            "plots": len(data.plots), "candidate_rows": len(model.keys) // len(YEARS)},
            "q1": {
                "waste_profit_yuan": waste["profit"], "discount_profit_yuan": discount["profit"],
                "waste_revenue_yuan": waste["revenue"], "discount_revenue_yuan": discount["revenue"],
                "waste_cost_yuan": waste["cost"], "discount_cost_yuan": discount["cost"],
                "discount_gain_pct": round(gain, 2),
                "sales_cap_rule": "per_plot (论文式19：min(x*y, d) 在逐地块求和之内; d = 2023 output of the crop "
                                  "in that season)",
                "solver": {"waste": waste["solver"], "discount": discount["solver"]},
                "plan_columns": ["year", "plot", "season", "crop_id"],
                "waste_plan": waste["plan"], "discount_plan": discount["plan"],
            },
            "q2_q3": correlations(data),
            "artifacts": [],
        },
        "feasibility_note": {
            "paper_full_constraints_feasible": False,
            "reason": "The paper's own rule 'output >= 0.9 x expected sales' cannot hold together with rotation, "
                      "legume and dispersion rules on the official data; the anchor drops that rule and is the "
                      "exact optimum of the remaining model.",
        },
    }


def write_template(data_dir: Path, results_dir: Path, data: Data, plan: list[list[Any]], name: str) -> str | None:
    """Fill the official answer template (attachment 3, ``name``) with the plan's areas (mu), one
    sheet per year; single-season crops go in the season-1 rows as the template asks. Returns the
    written file name, or None when the template is not in the data directory."""
    template = data_dir / "attachments" / name
    if not template.is_file():
        found = sorted(data_dir.glob(f"repo/**/{name}"))
        if not found:
            return None
        template = found[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the template's header/footer is not parseable
        book = openpyxl.load_workbook(template)
    ids = {crop_name: crop for crop, crop_name in data.crop_names.items()}
    for year in YEARS:
        sheet = book[str(year)]
        columns = {ids[_text(cell.value)]: cell.column for cell in sheet[1] if _text(cell.value) in ids}
        rows: dict[tuple[str, int], int] = {}
        for row in range(2, sheet.max_row + 1):
            plot = _text(sheet.cell(row=row, column=2).value)
            if plot in data.plots:
                rows[(plot, 2 if (plot, 1) in rows else 1)] = row
        for plan_year, plot, season, crop in plan:
            if plan_year == year:
                half = 2 if season == SECOND else 1
                sheet.cell(row=rows[(plot, half)], column=columns[crop]).value = data.plots[plot][1]
    book.save(results_dir / name)
    return name


def main() -> int:
    data_dir = Path(os.environ.get("ANCHORAGE_DATA_DIR", "/root/data"))
    results_dir = Path(os.environ.get("ANCHORAGE_RESULTS_DIR", "/root/results"))
    data = load(data_dir)
    model = build(data)
    waste, discount = solve(model, "waste"), solve(model, "discount")
    out = results_dir / f"{SLUG}_result.json"
    results_dir.mkdir(parents=True, exist_ok=True)
    artifact = result(data, model, waste, discount)
    written = [write_template(data_dir, results_dir, data, case["plan"], name)
               for case, name in ((waste, "result1_1.xlsx"), (discount, "result1_2.xlsx"))]
    artifact["experiment_result"]["artifacts"] = [name for name in written if name]
    out.write_text(json.dumps(artifact, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    for name, case in (("waste", waste), ("discount", discount)):
        s = case["solver"]
        print(f"{name}: profit {case['profit']:.2f} yuan, dual bound {s['dual_bound_profit']:.2f}, "
              f"gap {s['mip_gap']:.2e}, {s['model_status']}, {s['solved_seconds']} s")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
