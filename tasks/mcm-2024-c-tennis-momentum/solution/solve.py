#!/usr/bin/env python3
"""Reproduction of the MCM 2024 C Outstanding paper 2401298 ("Momentum exists in tennis as a residual effect:
a dual-temporal Bayesian network model"), written for Anchorage.

Reads the official ``2024_Wimbledon_featured_matches.csv`` from ``${ANCHORAGE_DATA_DIR:-/root/data}`` and
writes ``${ANCHORAGE_RESULTS_DIR:-/root/results}/mcm-2024-c-tennis-momentum_result.json`` (nothing else).

Model chain (choices in ``README.md`` beside this file):

1. serve-corrected residual: for every point, ``r = 1[player 1 wins] - P(player 1 wins | server)``, the
   serve-win probabilities being each player's own share of service points won in that match;
2. dual-temporal momentum: a short (span 4 points) and a long (span 16 points) exponentially weighted mean of
   the residual, blended half and half;
3. randomness tests per match on the point-winner sequence: Ljung-Box (lag 10) and the Wald-Wolfowitz runs test;
4. dual-temporal Bayesian transition: the next point's winner given (short state, long state, server), the
   states being which player each window favours; Beta(1, 1) prior per cell, counts from every *other* match
   (leave-one-match-out, so a match never predicts itself);
5. swing warning: the two windows disagree and the posterior says the next point goes to the short window's
   player with probability >= 0.6 — the flow is about to change;
6. indicators: Pearson correlation of the warning with every numeric per-point column, largest |r| first.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.diagnostic import acorr_ljungbox

SLUG = "mcm-2024-c-tennis-momentum"
FINAL_MATCH = "2023-wimbledon-1701"
SHORT_SPAN, LONG_SPAN = 4, 16
WARNING_PROBABILITY = 0.6
NEUTRAL_BAND = 0.02  # |EWMA| below this is "neutral"


def data_file(root: Path) -> Path:
    for candidate in (root / "attachments" / "2024_Wimbledon_featured_matches.csv",
                      *root.rglob("*Wimbledon_featured_matches.csv")):
        if candidate.is_file():
            return candidate
    raise SystemExit(f"Wimbledon_featured_matches.csv not found under {root}")


def residuals(match: pd.DataFrame) -> np.ndarray:
    won = (match["point_victor"] == 1).to_numpy(dtype=float)
    server = match["server"].to_numpy()
    p1_hold = won[server == 1].mean() if (server == 1).any() else 0.5
    p2_hold = 1 - won[server == 2].mean() if (server == 2).any() else 0.5
    expected = np.where(server == 1, p1_hold, 1 - p2_hold)
    return won - expected


def state(values: np.ndarray, prefix: str) -> list[str]:
    return [f"{prefix}_p1" if v > NEUTRAL_BAND else f"{prefix}_p2" if v < -NEUTRAL_BAND else f"{prefix}_even"
            for v in values]


def runs_test(sequence: np.ndarray) -> float:
    """Two-sided Wald-Wolfowitz runs test p-value of a 0/1 sequence."""
    n1, n2 = int(sequence.sum()), int(len(sequence) - sequence.sum())
    if n1 == 0 or n2 == 0:
        return 1.0
    runs = 1 + int(np.count_nonzero(np.diff(sequence)))
    mean = 2 * n1 * n2 / (n1 + n2) + 1
    variance = 2 * n1 * n2 * (2 * n1 * n2 - n1 - n2) / ((n1 + n2) ** 2 * (n1 + n2 - 1))
    return float(2 * stats.norm.sf(abs(runs - mean) / np.sqrt(variance)))


def main() -> None:
    data_root = Path(os.environ.get("ANCHORAGE_DATA_DIR", "/root/data"))
    results = Path(os.environ.get("ANCHORAGE_RESULTS_DIR", "/root/results"))
    df = pd.read_csv(data_file(data_root))
    df["_order"] = np.arange(len(df))
    frames = []
    tests = []
    for match_id, match in df.groupby("match_id", sort=False):
        match = match.sort_values("_order").copy()
        residual = residuals(match)
        short = pd.Series(residual).ewm(span=SHORT_SPAN, adjust=False).mean().to_numpy()
        long = pd.Series(residual).ewm(span=LONG_SPAN, adjust=False).mean().to_numpy()
        match["residual"] = residual
        match["momentum"] = 0.5 * short + 0.5 * long
        match["short_state"] = state(short, "short")
        match["long_state"] = state(long, "long")
        match["next_victor"] = match["point_victor"].shift(-1)
        frames.append(match)
        sequence = (match["point_victor"] == 1).to_numpy(dtype=int)
        lb = acorr_ljungbox(sequence - sequence.mean(), lags=[10])
        tests.append({"match_id": match_id, "points": len(match), "ljung_box_p": float(lb["lb_pvalue"].iloc[0]),
                      "runs_p": runs_test(sequence)})
    points = pd.concat(frames).sort_values("_order")
    table = points.dropna(subset=["next_victor"]).copy()
    table["next_state"] = np.where(table["next_victor"] == 1, "p1", "p2")
    key = ["short_state", "long_state", "server"]

    # Whole-data transition table (reported) and leave-one-match-out posteriors (used for warnings).
    grouped = table.groupby([*key, "next_state"]).size().unstack(fill_value=0)
    for column in ("p1", "p2"):
        if column not in grouped:
            grouped[column] = 0
    per_match = table.groupby(["match_id", *key, "next_state"]).size().unstack(fill_value=0)
    warnings_flag = np.zeros(len(points), dtype=bool)
    posterior_p1 = np.full(len(points), np.nan)
    position = {index: i for i, index in enumerate(points.index)}
    for match_id, match in table.groupby("match_id", sort=False):
        own = per_match.loc[match_id]
        for index, row in match.iterrows():
            cell = (row["short_state"], row["long_state"], row["server"])
            total = grouped.loc[cell] if cell in grouped.index else pd.Series({"p1": 0, "p2": 0})
            mine = own.loc[cell] if cell in own.index else pd.Series({"p1": 0, "p2": 0})
            wins_p1 = float(total.get("p1", 0) - mine.get("p1", 0))
            wins_p2 = float(total.get("p2", 0) - mine.get("p2", 0))
            p1 = (wins_p1 + 1) / (wins_p1 + wins_p2 + 2)
            i = position[index]
            posterior_p1[i] = p1
            short_side, long_side = row["short_state"][-2:], row["long_state"][-2:]
            if short_side in ("p1", "p2") and long_side in ("p1", "p2") and short_side != long_side:
                toward_short = p1 if short_side == "p1" else 1 - p1
                warnings_flag[i] = toward_short >= WARNING_PROBABILITY
    points["swing_warning"] = warnings_flag.astype(int)
    points["posterior_next_p1"] = posterior_p1

    transitions = []
    for cell, row in grouped.iterrows():
        for next_state in ("p1", "p2"):
            count = int(row[next_state])
            if count:
                transitions.append({"short_state": cell[0], "long_state": cell[1], "server": int(cell[2]),
                                    "next_state": next_state, "count": count,
                                    "probability": round((count + 1) / (int(row.sum()) + 2), 4)})
    strongest = max(transitions, key=lambda t: (t["probability"], t["count"]))

    # Indicators: every numeric per-point column except the model's own inputs and running totals.
    excluded = {"_order", "point_victor", "server", "p1_points_won", "p2_points_won", "set_no", "game_no", "point_no",
                "p1_sets", "p2_sets", "p1_games", "p2_games"}
    numeric = [c for c in df.columns if c not in excluded
               and pd.api.types.is_numeric_dtype(df[c]) and df[c].nunique() > 1]
    warning = points["swing_warning"].to_numpy(dtype=float)
    features = []
    for column in numeric:
        values = points[column].to_numpy(dtype=float)
        ok = ~np.isnan(values)
        if warning[ok].std() == 0 or values[ok].std() == 0:
            continue
        correlation = float(np.corrcoef(warning[ok], values[ok])[0, 1])
        features.append({"feature": column, "warning_correlation": round(correlation, 4),
                         "mean_when_warning": round(float(values[ok & (warning == 1)].mean()), 4),
                         "mean_otherwise": round(float(values[ok & (warning == 0)].mean()), 4)})
    features.sort(key=lambda f: -abs(f["warning_correlation"]))

    final = points[points["match_id"] == FINAL_MATCH]
    tests_df = pd.DataFrame(tests)
    artifact: dict[str, Any] = {
        "problem_id": "2024-C",
        "paper_id": "2401298",
        "paper_title": "\"Momentum\" Exists In Tennis Game As Residual Effect - A Dual-Temporal Bayesian Network Model",
        "reproduction_scope": "Anchorage reproduction (solution/solve.py) on the official COMAP point-by-point CSV",
        "methods": "serve-corrected residual + short/long EWMA momentum + Ljung-Box/runs tests + dual-temporal "
                   "Bayesian transition (leave-one-match-out) + swing warning",
        "experiment_result": {
            "data_source": {"type": "official_comap_csv", "path": "attachments/2024_Wimbledon_featured_matches.csv",
                            "points": len(df), "matches": int(df["match_id"].nunique())},
            "momentum_model": {
                "definition": "point result residual after match/server context, blended with short and long EWMA",
                "short_span_points": SHORT_SPAN, "long_span_points": LONG_SPAN,
                "final_match_id": FINAL_MATCH,
                "final_momentum_range": round(float(final["momentum"].max() - final["momentum"].min()), 4),
            },
            "randomness_tests": {
                "median_ljung_box_p": round(float(tests_df["ljung_box_p"].median()), 6),
                "matches_rejecting_iid_at_5pct": int((tests_df["ljung_box_p"] < 0.05).sum()),
                "median_runs_p": round(float(tests_df["runs_p"].median()), 6),
                "matches_rejecting_runs_at_5pct": int((tests_df["runs_p"] < 0.05).sum()),
            },
            "dual_temporal_bayes": {
                "state_definition": "short/long EWMA side (p1, p2, even within +-0.02) x server",
                "prior": "Beta(1, 1) per cell; warnings use leave-one-match-out counts",
                "warning_rule": f"windows disagree and posterior P(next point to the short window's player) >= "
                                f"{WARNING_PROBABILITY}",
                "transition_rows": len(transitions),
                "strongest_transition": strongest,
                "warnings": int(points["swing_warning"].sum()),
                "swing_warning_rate": round(float(points["swing_warning"].mean()), 4),
                "final_match_points": len(final),
                "final_match_warnings": int(final["swing_warning"].sum()),
                "final_match_warning_rate": round(float(final["swing_warning"].mean()), 4),
            },
            "top_swing_features": features[:5],
        },
    }
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{SLUG}_result.json").write_text(json.dumps(artifact, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(artifact["experiment_result"]["dual_temporal_bayes"]), json.dumps(features[:5]))


if __name__ == "__main__":
    main()
