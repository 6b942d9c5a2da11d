"""Oracle of the smoke-inventory task: EOQ for three products under a shared store-room limit.

Run by ``solve.sh`` inside the sandbox (``anchorage oracle tasks/smoke-inventory``) and directly by the
task-suite tests. Reads ``$ANCHORAGE_DATA_DIR/attachments/demand.csv`` (default ``/root/data``) and writes
``$ANCHORAGE_RESULTS_DIR/smoke-inventory_result.json`` (default ``/root/results``). Standard library only.

Model: product i has annual demand D_i, order cost K_i, unit cost c_i, holding rate h and space s_i. The
annual cost D_i K_i / Q_i + h c_i Q_i / 2 is convex in Q_i; with the constraint sum s_i Q_i <= W the KKT
conditions give Q_i(lam) = sqrt(2 D_i K_i / (h c_i + 2 lam s_i)), and lam >= 0 is the root of
sum s_i Q_i(lam) = W when the unconstrained EOQs overflow the room (else lam = 0). The space used is
strictly decreasing in lam, so bisection finds the root to machine precision.
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

SLUG = "smoke-inventory"
PRODUCTS = ("A", "B", "C")
UNIT_COST = {"A": 40.0, "B": 15.0, "C": 90.0}
ORDER_COST = {"A": 120.0, "B": 80.0, "C": 200.0}
SPACE = {"A": 0.5, "B": 0.2, "C": 1.2}
HOLDING_RATE = 0.22
CAPACITY_M3 = 250.0


def annual_demand(csv_path: Path) -> dict[str, int]:
    """Sum the 52 weekly sales of each product."""
    totals = dict.fromkeys(PRODUCTS, 0)
    with csv_path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            for product in PRODUCTS:
                totals[product] += int(row[product])
    return totals


def quantities(demand: dict[str, int], lam: float) -> dict[str, float]:
    return {
        p: math.sqrt(2 * demand[p] * ORDER_COST[p] / (HOLDING_RATE * UNIT_COST[p] + 2 * lam * SPACE[p])) for p in PRODUCTS
    }


def space_used(order: dict[str, float]) -> float:
    return sum(SPACE[p] * order[p] for p in PRODUCTS)


def annual_cost(demand: dict[str, int], order: dict[str, float]) -> float:
    return sum(demand[p] * ORDER_COST[p] / order[p] + HOLDING_RATE * UNIT_COST[p] * order[p] / 2 for p in PRODUCTS)


def shadow_price(demand: dict[str, int]) -> float:
    """The multiplier lam >= 0 at which the order quantities just fill the store room (0 if they fit)."""
    if space_used(quantities(demand, 0.0)) <= CAPACITY_M3:
        return 0.0
    low, high = 0.0, 1.0
    while space_used(quantities(demand, high)) > CAPACITY_M3:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if space_used(quantities(demand, mid)) > CAPACITY_M3 else (low, mid)
    return (low + high) / 2


def solve(data_dir: Path) -> dict[str, object]:
    demand = annual_demand(data_dir / "attachments" / "demand.csv")
    free = quantities(demand, 0.0)
    lam = shadow_price(demand)
    order = quantities(demand, lam)
    return {
        "problem_id": SLUG,
        "annual_demand": demand,
        "unconstrained": {
            "order_quantities": {p: round(q, 6) for p, q in free.items()},
            "total_annual_cost": round(annual_cost(demand, free), 6),
            "space_used_m3": round(space_used(free), 6),
        },
        "experiment_result": {
            "order_quantities": {p: round(q, 6) for p, q in order.items()},
            "total_annual_cost": round(annual_cost(demand, order), 6),
            "unconstrained_total_cost": round(annual_cost(demand, free), 6),
            "space_used_m3": round(space_used(order), 6),
            "space_multiplier": round(lam, 6),
            "capacity_binding": int(lam > 0),
        },
    }


def main() -> None:
    data_dir = Path(os.environ.get("ANCHORAGE_DATA_DIR", "/root/data"))
    results_dir = Path(os.environ.get("ANCHORAGE_RESULTS_DIR", "/root/results"))
    results_dir.mkdir(parents=True, exist_ok=True)
    result = solve(data_dir)
    out = results_dir / f"{SLUG}_result.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
