"""Rescore a benchmark entry's published answers under every scoring profile, side by side.

Run by hand: ``.venv/bin/python tools/rescore_published.py [ANSWERS.json [SCORES.json]] [--entry NAME] [--json]``.
Defaults: ``tests/scoring/published/v4-pro-{answers,scores}.json`` (the "v4 pro" entry, each value with its
file, commit and line). Any answers file of that shape works (:mod:`anchorage.scoring.published`): per task
the published cell (``report@4a3807d``, when a scores file is given) and raw / O-Eval / BO-Eval under each
profile, then the means over the tasks the entry answered; tasks without answers are listed as missing, never
scored as 0. One profile at a time, with the details: ``anchorage rescore-published ANSWERS --profile P``.
``tests/scoring/test_tbmm_report.py`` checks the compatibility column against the report;
``tools/profile_table.py`` writes the v4 pro means into tasks/README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "tests" / "scoring" / "published"
sys.path.insert(0, str(REPO / "operator"))


def rescore(answers: Path = PUBLISHED / "v4-pro-answers.json", scores: Path | None = PUBLISHED / "v4-pro-scores.json",
            entry: str | None = None) -> tuple[list[dict[str, Any]], dict[str, float | None]]:
    """Per task: the published cell and [raw, O-Eval, BO-Eval, hard gates failed] under each profile (None: no
    answers); and the mean O-Eval (%) per column over the tasks answered. Also called by ``tools/profile_table.py``."""
    from anchorage.scoring.profiles import PROFILES
    from anchorage.scoring.published import load_answers, load_scores, rescore_entry

    entries = load_answers(answers)
    name = entry or next(iter(entries))
    published = load_scores(scores).get(name) if scores is not None else None
    by_profile = {p: rescore_entry(name, entries[name], p, tasks_dir=REPO / "tasks", published=published)
                  for p in PROFILES}
    rows: list[dict[str, Any]] = []
    first = next(iter(by_profile.values()))
    for index, task in enumerate(first.tasks):
        cell = task.published
        row: dict[str, Any] = {"task": task.task, "status": task.status,
                               "published": None if cell is None else [cell["raw"], cell["o_eval"], cell["bo_eval"]]}
        for profile, result in by_profile.items():
            record = result.tasks[index].record
            row[profile] = None if record is None else [
                round(record.raw, 6), round(record.o_eval, 4), round(record.bo_eval, 4),
                [g.name for g in record.gates if g.hard_error]]
        rows.append(row)
    scored = [r for r in rows if r[next(iter(PROFILES))] is not None]
    means: dict[str, float | None] = {}
    cells = [r["published"] for r in scored]
    means["published"] = (round(100 * sum(c[1] for c in cells) / len(cells), 2)
                          if scored and all(c is not None for c in cells) else None)
    for profile in PROFILES:
        means[profile] = round(100 * sum(r[profile][1] for r in scored) / len(scored), 2) if scored else None
    return rows, means


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answers", nargs="?", type=Path, default=PUBLISHED / "v4-pro-answers.json")
    parser.add_argument("scores", nargs="?", type=Path, default=None,
                        help="published scores (default: v4-pro-scores.json with the default answers, else none)")
    parser.add_argument("--entry", help="the entry of the answers file (default: its first)")
    parser.add_argument("--json", action="store_true", help="print the table as JSON")
    args = parser.parse_args(argv)
    scores = args.scores or (PUBLISHED / "v4-pro-scores.json" if args.answers == PUBLISHED / "v4-pro-answers.json"
                             else None)
    from anchorage.errors import AnchorageError

    try:
        rows, means = rescore(args.answers, scores, args.entry)
    except AnchorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        json.dump({"tasks": rows, "mean_o_eval_pct": means}, sys.stdout, indent=2)
        print()
        return 0
    names = list(means)
    print("task".ljust(34) + "".join(n.ljust(24) for n in names))
    for row in rows:
        cells = [(("—" if n == "published" else "missing") if c is None
                  else f"{c[0]:.4f}/{100 * c[1]:.1f}/{100 * c[2]:+.1f}" + ("!" if len(c) > 3 and c[3] else ""))
                 for n, c in ((n, row[n]) for n in names)]
        print(row["task"].ljust(34) + "".join(c.ljust(24) for c in cells)
              + (" (partial)" if row["status"] == "partial" else ""))
    print("mean O-Eval %".ljust(34) + "".join(("—" if means[n] is None else f"{means[n]:.2f}").ljust(24) for n in names))
    print("cells: raw/O-Eval %/BO-Eval %; ! = a hard gate of that profile failed; missing = no answers (not in the "
          "means); partial = some scored metrics unanswered (they earn 0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
