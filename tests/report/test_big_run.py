"""A campaign of 10,000 trials: report.html stays one file a browser opens at once (under 3 MB: the trials table's
rows travel as compact JSON, detail sections are held within a budget, one per entry × task first), still lists
every trial and says how many detail sections it holds. (The viewer's server time for the same campaign is
measured in bench/viewer.py: timings belong in bench/, not in a timed test.)"""

from __future__ import annotations

import json
import re

from tests.report.bigrun import ENTRIES, TASKS, make_trials, manifest

from anchorage.campaigns.aggregation import TrialResult, leaderboard
from anchorage.report import html


def test_a_10000_trial_report_is_under_3_mb_and_lists_every_trial() -> None:
    made = make_trials(10_000)
    records = [record for record, _ in made]
    scores = {record["name"]: score for record, score in made}
    seeds = manifest("big", 10_000)["spec"]["seeds"]
    board = leaderboard([TrialResult.from_record(r) for r in records], "mock",
                        [(r["entry"], r["task"], r["seed"]) for r in records])
    asked: list[str] = []

    def section(trial: str) -> html.TrialSection:
        asked.append(trial)
        return html.TrialSection(scores[trial], [("stdout.log", "mock agent: wrote the result\n", 30)])

    text = html.render("big", board, records, [], meta={"campaign": "big", "trials": 10_000, "planned": 10_000},
                       sections=section, log_window=2048)
    size = len(text.encode("utf-8"))
    assert size < 3_000_000, size
    data = json.loads(re.search(r'<script type="application/json" id="data-trials">(.*?)</script>', text).group(1))
    assert len(data["rows"]) == 10_000                                     # every trial is in the table
    held = re.findall(r"<section class='trial' id='trial-([^']+)'>", text)
    assert 8 <= len(held) < 10_000 and len(asked) == len(held)             # only the held sections were read
    assert f"Detail sections: {len(held)} of 10000 trials" in text and "anchorage view" in text
    firsts = {(r["entry"], r["task"]) for r in records if r["name"] in held and r["seed"] == 0}
    assert firsts == {(e, t) for e in ENTRIES for t in TASKS}              # one per entry × task first
    assert all(f"href=\"#trial-{r['name']}\"" in text for r in records if r["seed"] == 0)   # the per-task cells link
    assert board.cells_planned == 10_000 == board.cells_scored and seeds == 1250
