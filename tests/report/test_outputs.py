"""Outputs of a run: leaderboard.json|csv|md, PNG plots and a self-contained HTML report, rebuilt from records."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from anchorage.report.writing import rebuild


def _record(entry: str, task: str, seed: int, raw: float, cost: float) -> dict[str, object]:
    return {"name": f"c-{entry}-{task}-s{seed}", "entry": entry, "task": task, "seed": seed, "phase": "Succeeded",
            "reason": "completed", "cost_usd": cost, "agent": {"label": entry},
            "score": {"gradable": True, "raw": raw, "oracle_raw": 1.0, "baseline_raw": 0.1, "o_eval": raw,
                      "bo_eval": 0.0, "hard_gate_failed": False}}


def _run_folder(tmp_path: Path) -> Path:
    directory = tmp_path / "c"
    records = [_record(e, t, s, raw, cost) for e, raw, cost in (("good", 0.9, 1.0), ("weak", 0.2, 0.1))
               for t in ("t1", "t2") for s in (0, 1)]
    records[0]["score"]["raw"] = records[0]["score"]["o_eval"] = 0.7  # type: ignore[index]
    for record in records:
        (directory / str(record["name"])).mkdir(parents=True)
        (directory / str(record["name"]) / "trial.json").write_text(json.dumps(record))
    meta = {"name": "c", "manifest": {"spec": {"baseline": "weak"}}, "trials": [r["name"] for r in records]}
    (directory / "campaign.json").write_text(json.dumps(meta))
    return directory


def test_rebuild_writes_every_output(tmp_path: Path) -> None:
    outputs = rebuild(_run_folder(tmp_path))
    board = json.loads(outputs["json"].read_text())
    assert [row["entry"] for row in board["rows"]] == ["good", "weak"]
    assert board["rows"][0]["o_eval_mean"] == (0.8 + 0.9) / 2  # seed 0: (0.7 + 0.9)/2, seed 1: 0.9
    table = list(csv.reader(io.StringIO(outputs["csv"].read_text())))
    assert table[0][:4] == ["rank", "entry", "Art.", "O-Eval"] and table[1][1] == "good"
    markdown = outputs["md"].read_text()
    assert "| good | 2.0/2 | 0.8500 ± 0.0707" in markdown
    column_means = re.findall(r"\| column mean \| ([0-9.]+) \|", markdown)
    assert column_means[0] == "0.8500"  # per-task column mean equals the leaderboard mean
    for name in ("leaderboard.png", "per_task_o_eval.png", "per_task_bo_eval.png"):
        assert (outputs["html"].parent / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_report_is_self_contained(tmp_path: Path) -> None:
    html = rebuild(_run_folder(tmp_path))["html"].read_text()
    assert html.count('src="data:image/png;base64,') == 3
    assert not re.search(r'(src|href)="(?!data:)', html)  # no external file or URL
    assert "c-good-t1-s0" in html and "F per task" in html
