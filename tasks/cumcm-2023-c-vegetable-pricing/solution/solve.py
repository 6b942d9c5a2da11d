"""Oracle reproduction for CUMCM 2023 C (vegetable pricing and replenishment), written for Anchorage.

Called by ``solution/solve.sh`` (Harbor convention, ``anchorage oracle``). Reads the official attachments under
``$ANCHORAGE_DATA_DIR/attachments`` (default ``/root/data``) and writes
``$ANCHORAGE_RESULTS_DIR/cumcm-2023-c-vegetable-pricing_result.json`` (default ``/root/results``) — nothing else.

The paper C050's method (the task records it: item-level sales clustering, category sales/markup
correlation, linear price-demand regressions, grid-search pricing of the coming week, a 27-33 item
replenishment plan) is driven by the sales ledger, attachment 2 (销售流水明细数据: every sale's date,
item, quantity and unit price). That attachment is not in this task's data (the public reference pack lacks
it, see the task README), and nothing else in the data says how much of anything sells at any price, so the
two scored values — the coming week's maximum profit and the number of items selected for 1 July — cannot
be computed. This script computes what the official data that is present determines and writes the two
scored values as null with the reason:

* the items on sale in the week of 24-30 June 2023 (items with a wholesale price that week, attachment 3),
  per category — the candidate set of question 3 (the plan must keep 27-33 of them);
* per category, the coming week's expected unit cost: the last week's mean wholesale price divided by
  (1 - the category's loss rate, attachment 4), the cost base of the cost-plus pricing of question 2.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

SLUG = "cumcm-2023-c-vegetable-pricing"
LAST_WEEK = ("2023-06-24", "2023-06-30")
PAPER = {"future_week_max_profit_yuan": 5105.6, "problem3_selected_item_count": 29, "problem3_july1_profit_yuan": 1282.2631}


def main() -> int:
    started = time.process_time()
    attachments = Path(os.environ.get("ANCHORAGE_DATA_DIR", "/root/data")) / "attachments"
    items = pd.read_excel(attachments / "附件1.xlsx")
    prices = pd.read_excel(attachments / "附件3.xlsx")
    losses = pd.read_excel(attachments / "附件4.xlsx")
    ledger = attachments / "附件2.xlsx"
    prices["日期"] = pd.to_datetime(prices["日期"])
    week = prices[(prices["日期"] >= LAST_WEEK[0]) & (prices["日期"] <= LAST_WEEK[1])]
    week = week.merge(items[["单品编码", "单品名称", "分类名称"]], on="单品编码", how="left")
    loss = dict(zip(losses.iloc[:, 1], losses.iloc[:, 2], strict=True))
    categories: list[dict[str, Any]] = []
    for name, rows in week.groupby("分类名称"):
        mean_price = float(rows["批发价格(元/千克)"].mean())
        rate = float(loss.get(name, float("nan"))) / 100
        categories.append({"category": str(name), "items_on_sale": int(rows["单品编码"].nunique()),
                           "mean_wholesale_price_yuan_per_kg": round(mean_price, 4), "loss_rate": round(rate, 4),
                           "loss_adjusted_unit_cost_yuan_per_kg": round(mean_price / (1 - rate), 4)})
    candidates = int(week["单品编码"].nunique())
    missing = ("attachment 2 (销售流水明细数据, the sales ledger) is not in the task's data: no quantity sold at any "
               "price is known, so demand, the price-demand regressions, the week's optimal profit and the 1 July "
               "selection cannot be computed")
    null_target = {"actual": None, "paper_target": None, "absolute_error": None, "relative_error_pct": None,
                   "not_computed": missing}
    result = {
        "paper_id": "C050", "paper_title": "某商超蔬菜类商品动态定价与补货决策研究", "contest": "CUMCM",
        "problem_id": "2023-C", "paper_pdf": "not used", "paper_ocr": "not used",
        "data_sources": ["attachments/附件1.xlsx", "attachments/附件3.xlsx", "attachments/附件4.xlsx"],
        "data_missing": {"attachments/附件2.xlsx": ledger.is_file() is False},
        "reproduction_scope": "Anchorage: what the official data present determines (question 3's candidate items, "
                              "question 2's loss-adjusted category costs); the sales-driven results need attachment 2",
        "model": "not run: C050's clustering, regressions, pricing and replenishment all need the sales ledger",
        "paper_targets": PAPER,
        "reproduced": {
            "item_count": int(items["单品编码"].nunique()), "category_count": int(items["分类名称"].nunique()),
            "wholesale_price_rows": int(len(prices)),
            "last_week": list(LAST_WEEK), "problem3_candidate_item_count": candidates,
            "problem3_selection_bounds": [27, 33],
            "category_costs_next_week": categories,
            "future_week_profit_yuan": None, "selected_item_count": None, "not_computed": missing,
        },
        "target_comparison": {
            "future_week_max_profit_yuan": {**null_target, "paper_target": PAPER["future_week_max_profit_yuan"]},
            "problem3_selected_item_count": {**null_target, "paper_target": PAPER["problem3_selected_item_count"]},
        },
        "generated_files": [], "artifact_dir": "",
        "cpu_seconds": round(time.process_time() - started, 2),
    }
    out = Path(os.environ.get("ANCHORAGE_RESULTS_DIR", "/root/results"))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{SLUG}_result.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{candidates} items on sale 24-30 June 2023; scored values not computed: {missing}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
