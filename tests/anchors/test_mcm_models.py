"""The models inside the MCM reproductions (tasks/mcm-*/solution/solve.py) behave as their READMEs say.

Each script is imported as a module and its building blocks are checked on cases worked out by hand or
built here (the full runs, their artifacts, their comparison with the published anchors and that no
reproduction names the answer key are checked by ``test_reproductions.py``, which runs every reproduction
through ``anchorage oracle``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from .solutions import TASKS, load


def test_wordle_cleaning_and_features() -> None:
    wordle = load("mcm-2023-c-wordle")
    df, log = wordle.load(TASKS / "mcm-2023-c-wordle" / "environment" / "data" / "attachments"
                          / "2023_MCM_Problem_C_Data.xlsx")
    assert len(df) == 359 and df["date"].is_monotonic_increasing
    assert sorted(df.loc[~df["valid_word"], "word"]) == sorted(["rprobe", "naïve", "clen", "tash"])
    assert any("2569" in line for line in log)
    assert df["reported"].min() > 5000  # the slip is repaired in the count series
    features = wordle.word_features(["eerie", "abbey"], ["eerie", "eerio", "abbey"])
    assert features.loc["eerie", "vowels"] == 4 and features.loc["eerie", "max_repeat"] == 3
    assert features.loc["eerie", "neighbours"] == 1 and features.loc["abbey", "neighbours"] == 0


def test_tennis_residual_and_runs_test() -> None:
    tennis = load("mcm-2024-c-tennis-momentum")
    match = pd.DataFrame({"point_victor": [1, 1, 2, 1, 2, 2, 2, 1], "server": [1, 1, 1, 1, 2, 2, 2, 2]})
    residual = tennis.residuals(match)
    # player 1 holds 3 of 4 service points and wins 1 of 4 on return: the residual sums to zero per server
    assert residual[:4].sum() == pytest.approx(0) and residual[4:].sum() == pytest.approx(0)
    assert residual[0] == pytest.approx(0.25) and residual[2] == pytest.approx(-0.75)
    alternating = np.array([0, 1] * 30)
    assert tennis.runs_test(alternating) < 1e-6  # far too many runs to be random
    assert tennis.runs_test(np.array([0] * 30 + [1] * 30)) < 1e-6  # far too few
    assert tennis.runs_test(np.ones(10, dtype=int)) == 1.0


def test_lamprey_adaptive_sex_ratio_helps_most_when_food_is_scarce() -> None:
    lamprey = load("mcm-2024-a-lamprey")
    statement = (TASKS / "mcm-2024-a-lamprey" / "environment" / "data" / "problem.md").read_text(encoding="utf-8")
    scarce, abundant = lamprey.male_shares(statement)
    assert (scarce, abundant) == (0.78, 0.56)
    p = lamprey.Params()

    def output(resource: float, adaptive: bool) -> float:
        male = scarce + (abundant - scarce) * resource if adaptive else 0.5
        return float(lamprey.recruitment(resource, male, adaptive, p))

    advantage = {r: output(r, True) / output(r, False) for r in (0.1, 0.3, 0.5, 0.7, 0.95)}
    assert advantage[0.1] > 1.5  # scarce food: the well-fed females of the adaptive rule outbreed 1:1
    assert advantage[0.5] < 1  # middling food: the fewer females of the adaptive rule cost more than they gain
    assert max(advantage[r] for r in (0.3, 0.5, 0.7, 0.95)) < 1.1


def test_submersible_flat_floor_adds_no_terrain_spread() -> None:
    sub = load("mcm-2024-b-submersible-search")
    sub.PARTICLES = 2000
    flat = sub.drift(sub.IONIAN, flat=True, seed=7)
    rough = sub.drift(sub.IONIAN, flat=False, seed=7)
    assert (flat["t"] > 0).all() and (rough["t"] > 0).all()
    # on a flat floor every particle sinks the same height: touchdown time is height / sinking speed
    assert flat["t"].max() <= (sub.IONIAN.mean_depth - sub.IONIAN.cruise_depth) / 0.05 + sub.DT
    assert sub.spread(rough) > sub.spread(flat)
    plan = sub.search(flat, start_h=1.0, hours=6.0)
    probabilities = [p for _, p in plan["curve"]]
    assert probabilities == sorted(probabilities) and 0 < probabilities[-1] <= 1


def test_stair_wear_inverse_models_recover_the_simulated_truth() -> None:
    stair = load("mcm-2025-a-stair-wear")
    profiles, rows = stair.forward_sheet(np.random.default_rng(stair.SEED))
    estimate = stair.invert(profiles, rows)
    assert estimate["wvm"]["estimated_daily_users"] == pytest.approx(stair.TRUE_DAILY_USERS, rel=0.05)
    assert estimate["wdm"]["simultaneous_use_index_0_1"] == pytest.approx(stair.TRUE_PEAK_SHARE, abs=0.03)
    assert estimate["wdm"]["favored_direction"] == "up"
    assert 8 in [c["step_id"] for c in estimate["renovation_candidates"]]


def test_juneau_figures_come_from_the_statement_and_the_cap_binds() -> None:
    juneau = load("mcm-2025-b-juneau-tourism")
    statement = (TASKS / "mcm-2025-b-juneau-tourism" / "environment" / "data" / "problem.md").read_text(encoding="utf-8")
    figures = juneau.statement_figures(statement)
    assert figures == {"residents": 30000.0, "passengers_2023": 1.6e6, "peak_day_visitors": 20000.0,
                       "revenue_2023_usd": 375e6}
    model = juneau.Model(figures)
    assert model.spend == pytest.approx(234.375)
    visitors = [model.season(2024, cap, 0.0)[0] for cap in (6000, 10000, 30000)]
    assert visitors[0] < visitors[1] < visitors[2]
    assert visitors[2] == pytest.approx(1.6e6 * 1.03, rel=1e-9)  # a cap above every day changes nothing
    assert model.season(2024, 30000, 50.0)[0] == pytest.approx(1.6e6 * 1.03 * np.exp(-0.2), rel=1e-9)


def test_olympics_great_coach_screen_on_a_small_table() -> None:
    olympics = load("mcm-2025-c-olympic-medals")
    rows = []
    # A team gold (three athletes) counts once: 3 points; USA volleyball jumps from 0 to 3 in 2008.
    for year in (1996, 2000, 2004):
        rows.append(("A", "USA", year, "Volleyball", "Volleyball Women", "No medal"))
        rows.append(("B", "CHN", year, "Volleyball", "Volleyball Women", "Silver"))
    for name in ("P", "Q", "R"):
        rows.append((name, "USA", 2008, "Volleyball", "Volleyball Women", "Gold"))
    rows.append(("S", "CHN", 2008, "Volleyball", "Volleyball Women", "Bronze"))
    athletes = pd.DataFrame(rows, columns=["Name", "NOC", "Year", "Sport", "Event", "Medal"])
    scores = olympics.jumps(olympics.medal_scores(athletes), athletes)
    usa = scores[(scores["NOC"] == "USA") & (scores["Year"] == 2008)].iloc[0]
    assert (usa["medal_score"], usa["medals"], usa["prev3_score"], usa["jump"]) == (3.0, 1.0, 0.0, 3.0)
    chn = scores[(scores["NOC"] == "CHN") & (scores["Year"] == 2008)].iloc[0]
    assert chn["prev3_score"] == pytest.approx(2.0) and chn["jump"] == pytest.approx(-1.0)
    coach = olympics.great_coach(athletes)
    assert coach["lang_ping_validation"][0]["estimated_jump_score"] == 3.0
    assert coach["global_top_jump_75pct"] == 3.0


def test_olympics_reports_the_missing_athletes_file_instead_of_inventing(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    olympics = load("mcm-2025-c-olympic-medals")
    data = TASKS / "mcm-2025-c-olympic-medals" / "environment" / "data"
    monkeypatch.setenv("ANCHORAGE_DATA_DIR", str(data))
    monkeypatch.setenv("ANCHORAGE_RESULTS_DIR", str(tmp_path))
    olympics.main()
    artifact = json.loads((tmp_path / "mcm-2025-c-olympic-medals_result.json").read_text(encoding="utf-8"))
    if (data / "attachments" / "summerOly_athletes.csv").is_file():
        pytest.skip("summerOly_athletes.csv is present: the great-coach model ran")
    assert artifact["missing_inputs"] == ["summerOly_athletes.csv"]
    assert artifact["great_coach_model"]["global_top_jump_75pct"] is None
    assert artifact["host_effect_model"]["Total"]["host_bonus_coefficient"] > 0
    assert [p.name for p in tmp_path.iterdir()] == ["mcm-2025-c-olympic-medals_result.json"]


def test_published_tennis_indicators_are_inside_the_chance_band() -> None:
    """The erratum's check (solution/comparison.json): the published top-3 indicator correlations are what the
    published number of warnings, placed at random, gives with the candidate indicators."""
    task = TASKS / "mcm-2024-c-tennis-momentum"
    published = json.loads((task / "tests" / "expected_result.json").read_text(encoding="utf-8"))["experiment_result"]
    bayes, features = published["dual_temporal_bayes"], published["top_swing_features"]
    df = pd.read_csv(task / "environment" / "data" / "attachments" / "2024_Wimbledon_featured_matches.csv")
    warnings = round(bayes["swing_warning_rate"] * len(df))
    assert warnings == 23
    excluded = {"point_victor", "server", "p1_points_won", "p2_points_won", "set_no", "game_no", "point_no",
                "p1_sets", "p2_sets", "p1_games", "p2_games"}
    columns = [c for c in df.columns if c not in excluded and pd.api.types.is_numeric_dtype(df[c]) and df[c].nunique() > 1]
    x = df[columns].to_numpy(dtype=float)
    x = np.where(np.isnan(x), np.nanmean(x, axis=0), x)
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    rng = np.random.default_rng(0)
    top = []
    for _ in range(1000):
        flag = np.zeros(len(df))
        flag[rng.choice(len(df), warnings, replace=False)] = 1
        flag = (flag - flag.mean()) / flag.std()
        top.append(np.sort(np.abs(x.T @ flag) / len(df))[::-1][:3])
    q95 = np.quantile(np.array(top), 0.95, axis=0)
    for rank in range(3):
        assert abs(features[rank]["warning_correlation"]) < q95[rank], (rank, q95)
