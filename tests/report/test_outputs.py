"""Outputs of a run: leaderboard.json|csv|md, plots (SVG + high-DPI PNG, titled), and a self-contained HTML report
with run metadata and one section per trial, rebuilt from the records."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from anchorage.report.writing import rebuild


def _record(entry: str, task: str, seed: int, raw: float, cost: float | None) -> dict[str, object]:
    return {"name": f"c-{entry}-{task}-s{seed}", "entry": entry, "task": task, "seed": seed, "phase": "Succeeded",
            "reason": "completed", "cost_usd": cost, "agent": {"label": entry},
            "cost_unknown_reason": None if cost is not None else "2 request(s) of this trial could not be metered",
            "scoring_profile": "paper@1", "versions": {"anchorage": "9.9.9", "price_snapshot": "2026-11-01"},
            "started_at": f"2026-11-0{seed + 1}T10:00:00+00:00", "finished_at": f"2026-11-0{seed + 1}T10:05:00+00:00",
            "score": {"gradable": True, "raw": raw, "oracle_raw": 1.0, "baseline_raw": 0.1, "o_eval": raw,
                      "bo_eval": 0.0, "hard_gate_failed": False}}


GATES = [{"name": "bit_is_binary", "form": "finite_domain", "paths": ["q2.bit"], "status": "failed", "severity": "hard",
          "message": "0.37 ∈ {0, 1} violated (a decision bit)", "values": {}, "hard_error": True},
         {"name": "speed_positive", "form": "sign", "paths": ["q5.v"], "status": "passed", "severity": "hard",
          "message": "0 < 1.2 holds", "values": {}, "hard_error": False}]


def _run_folder(tmp_path: Path) -> Path:
    directory = tmp_path / "c"
    records = [_record(e, t, s, raw, cost) for e, raw, cost in (("good", 0.9, 1.0), ("weak", 0.2, 0.1))
               for t in ("t1", "t2") for s in (0, 1)]
    records[0]["score"]["raw"] = records[0]["score"]["o_eval"] = 0.7  # type: ignore[index]
    records[-1]["cost_usd"] = None
    records[-1]["cost_unknown_reason"] = "2 request(s) of this trial could not be metered"
    for record in records:
        folder = directory / str(record["name"])
        (folder / "agent").mkdir(parents=True)
        (folder / "trial.json").write_text(json.dumps(record))
        (folder / "agent" / "stderr.log").write_text("x" * 5000 + "LAST LINE OF STDERR\n")
    score = {"metrics": [{"path": "q5.v", "value": 1.2, "number": 1.2, "anchor": 1.246266, "reward": 0.77,
                          "status": "scored", "reason": "", "weight": 1.0, "mode": "legacy_target", "direction":
                          "target_value"}], "gates": GATES, "penalty": "hard gate failed: bit_is_binary", "raw": 0.0,
             "hard_gate_failed": True, "profile_ref": "paper@1", "obligations": {}}
    (directory / str(records[4]["name"]) / "score.json").write_text(json.dumps(score))
    meta = {"name": "c", "manifest": {"spec": {"baseline": "weak"}}, "trials": [r["name"] for r in records]}
    (directory / "campaign.json").write_text(json.dumps(meta))
    return directory


def test_rebuild_writes_every_output(tmp_path: Path) -> None:
    outputs = rebuild(_run_folder(tmp_path))
    board = json.loads(outputs["json"].read_text())
    assert [row["entry"] for row in board["rows"]] == ["good", "weak"]
    assert board["rows"][0]["o_eval_mean"] == (0.8 + 0.9) / 2  # seed 0: (0.7 + 0.9)/2, seed 1: 0.9
    markdown = outputs["md"].read_text()
    assert "| good | 2.0/2 | 0.8500 ± 0.0707" in markdown
    column_means = re.findall(r"\| column mean \| ([0-9.]+) \|", markdown)
    assert column_means[0] == "0.8500"  # per-task column mean equals the leaderboard mean
    plots = outputs["html"].parent / "plots"
    for name in ("leaderboard", "per_task_o_eval", "per_task_bo_eval"):
        png, svg = plots / f"{name}.png", plots / f"{name}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        width = int.from_bytes(png.read_bytes()[16:20], "big")
        assert width >= 1300  # high-DPI: 220 dpi on a figure at least 6.5 in wide
        text = svg.read_text()
        assert text.lstrip().startswith("<?xml") and "<svg" in text
    # every plot has a title naming the campaign and what it shows (matplotlib writes titles as text comments)
    assert "per task and entry" in (plots / "per_task_bo_eval.svg").read_text()
    assert "Robust BO-Eval per task" in (plots / "per_task_bo_eval.svg").read_text()
    assert "per entry (mean" in (plots / "leaderboard.svg").read_text()


def test_csv_holds_plain_numbers(tmp_path: Path) -> None:
    outputs = rebuild(_run_folder(tmp_path))
    rows = list(csv.DictReader(io.StringIO(outputs["csv"].read_text())))
    assert [r["entry"] for r in rows] == ["good", "weak"]
    for row in rows:
        for column in ("artifacts_mean", "o_eval_mean", "o_eval_std", "bo_eval_mean", "bo_eval_std",
                       "cost_per_seed_usd"):
            float(row[column])  # a number, not "4.0/4" or "+1.0000" or "≥ ..."
            assert not row[column].startswith("+") and "/" not in row[column]
    assert float(rows[0]["o_eval_mean"]) == (0.8 + 0.9) / 2
    assert (rows[0]["cost_is_lower_bound"], rows[1]["cost_is_lower_bound"]) == ("false", "true")
    assert rows[1]["costs_unknown"] == "1" and rows[0]["tasks"] == "2"


def test_html_report_is_self_contained(tmp_path: Path) -> None:
    html = rebuild(_run_folder(tmp_path))["html"].read_text()
    assert html.count('src="data:image/svg+xml;base64,') == 3
    assert not re.search(r'(src|href)="(?!data:|#)', html)  # no external file or URL; links stay inside
    assert "c-good-t1-s0" in html and "F per task" in html


def test_html_report_has_metadata_and_a_section_per_trial(tmp_path: Path) -> None:
    html = rebuild(_run_folder(tmp_path))["html"].read_text()
    for fact in ("scoring profile", "paper@1", "price snapshot", "2026-11-01", "9.9.9", "2026-11-01T10:00:00"):
        assert fact in html
    names = re.findall(r"<section class='trial' id='trial-([^']+)'>", html)
    assert len(names) == 8 and "c-weak-t1-s0" in names
    assert 'href="#trial-c-good-t1-s0"' in html   # the trials table links to the sections
    weak = html[html.index("id='trial-c-weak-t1-s0'"):]
    weak = weak[:weak.index("</section>")]
    assert "bit_is_binary" in weak and "0.37 ∈ {0, 1} violated (a decision bit)" in weak  # the failed gate, why
    assert weak.index("bit_is_binary") < weak.index("speed_positive")                       # failed gates first
    assert "1.246266" in weak and "0.7700" in weak                                           # metric: anchor, reward
    assert "LAST LINE OF STDERR" in weak and "last 2048 shown" in weak                        # a bounded log tail
    unknown = html[html.index("id='trial-c-weak-t2-s1'"):]
    assert "unknown</span> — 2 request(s) of this trial could not be metered" in unknown[:unknown.index("</section>")]


def test_a_symlinked_score_is_not_followed(tmp_path: Path) -> None:
    directory = _run_folder(tmp_path)
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"gates": [{"name": "SECRET-GATE", "status": "failed"}]}))
    (directory / "c-good-t1-s0" / "score.json").symlink_to(secret)
    html = rebuild(directory)["html"].read_text()
    assert "SECRET-GATE" not in html and "symlink" in html.lower()


def test_the_paper_table_has_every_number_a_reader_needs(tmp_path: Path) -> None:
    """report --table csv|latex: per entry × task and over all tasks, n seeds, mean, std and the 95 % t interval
    of O-Eval and Robust BO-Eval, cost, profile and price snapshot; a cell without a scored trial has no numbers."""
    import statistics

    from scipy.stats import t as student
    from tests.conftest import anchorage_cli

    directory = _run_folder(tmp_path)
    done = anchorage_cli("report", str(directory), "--table", "csv")
    assert done.returncode == 0, done.stderr
    rows = {(r["entry"], r["task"]): r for r in csv.DictReader(io.StringIO(done.stdout))}
    good = rows[("good", "t1")]
    values = [0.7, 0.9]                                          # good × t1: seeds 0 and 1
    half = student.ppf(0.975, 1) * statistics.stdev(values) / 2 ** 0.5
    assert good["n_seeds"] == "2" and float(good["o_eval_mean"]) == 0.8
    assert float(good["o_eval_ci95_low"]) == pytest.approx(0.8 - half)
    assert float(good["o_eval_std"]) == pytest.approx(statistics.stdev(values))
    assert (good["profile"], good["price_snapshot"], good["cost_is_lower_bound"]) == ("paper@1", "2026-11-01", "false")
    overall = rows[("good", "(all tasks)")]
    board = json.loads(rebuild(directory)["json"].read_text())
    assert float(overall["o_eval_mean"]) == board["rows"][0]["o_eval_mean"]   # the leaderboard's numbers
    assert rows[("weak", "t2")]["cost_is_lower_bound"] == "true"
    latex = anchorage_cli("report", str(directory), "--table", "latex", "-o", str(tmp_path / "t.tex"))
    assert latex.returncode == 0, latex.stderr
    text = (tmp_path / "t.tex").read_text()
    assert r"\begin{tabular}" in text and r"$0.800 \pm 0.141$ [" in text and r"\emph{all tasks}" in text
    assert "95\\% t interval" in text and "Total cost" in text and "-0.000" not in text
    bad = anchorage_cli("report", str(directory), "--table", "tex")
    assert bad.returncode == 2 and "--table" in bad.stderr


def test_a_cell_without_a_scored_trial_has_no_numbers_in_the_paper_table(tmp_path: Path) -> None:
    from anchorage.report import paper
    from anchorage.report.runs import LocalRuns

    directory = _run_folder(tmp_path)
    for seed in (0, 1):
        path = directory / f"c-weak-t1-s{seed}" / "trial.json"
        record = json.loads(path.read_text())
        record.update(phase="InfrastructureFailed", reason="sandbox_error", score=None)
        path.write_text(json.dumps(record))
    run = LocalRuns(directory).campaign("c")
    rows = {(r.entry, r.task): r for r in paper.paper_rows(run.records, run.board)}
    empty = rows[("weak", "t1")]
    assert empty.o_eval.n == 0 and empty.o_eval.mean is None and empty.bo_eval.mean is None
    line = next(x for x in paper.to_latex(list(rows.values()), run.board, "c").splitlines() if x.startswith("weak & t1"))
    assert line.split(" & ")[2:5] == ["0", "--", "--"]


def test_plot_titles_fit_their_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long campaign name and profile: every title line is drawn inside the figure (none clipped)."""
    from anchorage.campaigns.aggregation import TrialResult, leaderboard
    from anchorage.report import plots

    results = [TrialResult(entry=e, task=t, seed=0, phase="Succeeded", reason=None, gradable=True, raw=0.5,
                           oracle_raw=1.0, config_baseline_raw=0.1, o_eval=0.5, hard_gate_failed=False, cost_usd=0.0)
               for e in ("a", "b") for t in ("t1", "t2")]
    board = leaderboard(results, None)
    figures = []
    real = plots._save

    def keep(fig: object, path: Path) -> Path:
        written = real(fig, path)                                   # after the layout and the wrapping
        figures.append([(ax.title.get_window_extent(), fig.bbox) for ax in fig.axes   # type: ignore[attr-defined]
                        if ax.title.get_text()])
        return written

    monkeypatch.setattr(plots, "_save", keep)
    name = "tbmm-2026-11-a-rather-long-campaign-name-for-the-paper"
    plots.leaderboard_bars(board, tmp_path / "l.png", name)
    plots.per_task_heatmap(board, tmp_path / "h.png", "bo_eval", name)
    assert len(figures) == 2
    for titles in figures:
        for extent, figure in titles:
            assert extent.x0 >= figure.x0 - 1 and extent.x1 <= figure.x1 + 1, (extent, figure)
            assert extent.y1 <= figure.y1 + 1
