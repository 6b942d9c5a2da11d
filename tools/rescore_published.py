"""Rescore the published answers of one benchmark entry under every scoring profile, side by side.

Run by hand: ``.venv/bin/python tools/rescore_published.py [--json]``. Reads
``tests/scoring/published/v4-pro-{answers,scores}.json`` (the "v4 pro" entry, each value with its file,
commit and line), rebuilds one artifact per task from the per-metric answers and prints, per task, the
published cell of the report (``report@4a3807d``) and raw / O-Eval / BO-Eval under each profile, then the
18-task means. ``tests/scoring/test_tbmm_report.py`` checks the compatibility column against the report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "tests" / "scoring" / "published"


def rescore() -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Per task: the published cell and [raw, O-Eval, BO-Eval, hard gates failed] under each profile; and the
    18-task mean O-Eval (%) per column. Also called by ``tools/profile_table.py`` (the means in tasks/README.md)."""
    from anchorage.scoring import score_data
    from anchorage.scoring.profiles import PROFILES
    from anchorage.scoring.rebuild import artifact_from_values

    answers = json.loads((PUBLISHED / "v4-pro-answers.json").read_text(encoding="utf-8"))["v4 pro"]
    scores = json.loads((PUBLISHED / "v4-pro-scores.json").read_text(encoding="utf-8"))["v4 pro"]
    rows: list[dict[str, Any]] = []
    for slug in sorted(scores):
        cells = scores[slug]["views"]["report@4a3807d"]
        row: dict[str, Any] = {"task": slug, "published": [cells["raw"], cells["o_eval"], cells["bo_eval"]]}
        for name in PROFILES:
            record = score_data(REPO / "tasks" / slug, artifact_from_values(answers[slug]), profile=name)
            row[name] = [round(record.raw, 6), round(record.o_eval, 4), round(record.bo_eval, 4),
                         [g.name for g in record.gates if g.hard_error]]
        rows.append(row)
    means = {name: round(100 * sum(r[name][1] for r in rows) / len(rows), 2) for name in ["published", *PROFILES]}
    return rows, means


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the table as JSON")
    args = parser.parse_args(argv)
    rows, means = rescore()
    if args.json:
        json.dump({"tasks": rows, "mean_o_eval_pct": means}, sys.stdout, indent=2)
        print()
        return 0
    names = list(means)
    print("task".ljust(34) + "".join(n.ljust(24) for n in names))
    for row in rows:
        cells = [f"{c[0]:.4f}/{100 * c[1]:.1f}/{100 * c[2]:+.1f}" + ("!" if len(c) > 3 and c[3] else "")
                 for c in (row[n] for n in names)]
        print(row["task"].ljust(34) + "".join(c.ljust(24) for c in cells))
    print("mean O-Eval %".ljust(34) + "".join(f"{means[n]:.2f}".ljust(24) for n in names))
    print("cells: raw/O-Eval %/BO-Eval %; ! = a hard gate of that profile failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
