#!/usr/bin/env python3
"""Reproduction of the MCM 2023 C Outstanding paper 2307946 ("Words Behind Wordle"), written for Anchorage.

Reads the official attachment ``2023_MCM_Problem_C_Data.xlsx`` from ``${ANCHORAGE_DATA_DIR:-/root/data}``
and writes ``${ANCHORAGE_RESULTS_DIR:-/root/results}/mcm-2023-c-wordle_result.json`` (nothing else).

Model chain (see ``README.md`` beside this file for every choice):

1. reported-results count: ARIMA(0,1,1) on the log count, 80 % prediction interval for 2023-03-01;
2. word attributes: letter statistics computed from the 359 solution words themselves;
3. difficulty groups: k-means (k = 3) on the standardised try distribution (1..6, X), groups numbered by
   mean number of tries (1 easy, 2 medium, 3 hard);
4. difficulty classifier: a LightGBM-style histogram gradient-boosting classifier (scikit-learn) from the
   word attributes to the group, scored on a stratified 30 % holdout; EERIE is classified by it;
5. EERIE's distribution: the mean distribution of the words of its predicted group.

Deterministic: every random component takes ``SEED``.
"""

from __future__ import annotations

import json
import os
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.cluster import KMeans
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.model_selection import StratifiedKFold, cross_val_score, train_test_split
from statsmodels.tsa.arima.model import ARIMA

SLUG = "mcm-2023-c-wordle"
SEED = 2023
TRY_COLUMNS = ["1", "2", "3", "4", "5", "6", "X"]
TARGET_DATE = pd.Timestamp("2023-03-01")
VOWELS = set("aeiou")
# The ARIMA likelihood's optimiser: the analytic (Harvey) score and a tight stop. With statsmodels' default
# numerical gradient, L-BFGS stopped where the gradient's rounding noise hid the slope, and the MA coefficient
# moved by up to 1e-5 between processors (BLAS kernels); with these it agrees to 1e-12 on every kernel tried.
ARIMA_FIT = {"optim_score": "harvey", "maxiter": 1000, "pgtol": 1e-10, "factr": 10.0}


def data_file(root: Path) -> Path:
    for candidate in (root / "attachments" / "2023_MCM_Problem_C_Data.xlsx",
                      *root.rglob("2023_MCM_Problem_C_Data.xlsx")):
        if candidate.is_file():
            return candidate
    raise SystemExit(f"2023_MCM_Problem_C_Data.xlsx not found under {root}")


def load(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """The daily table, cleaned. Returns the rows and a log of every cleaning step."""
    raw = pd.read_excel(path, header=None, skiprows=2).iloc[:, 1:]
    raw.columns = ["date", "contest", "word", "reported", "hard", *TRY_COLUMNS]
    df = raw.dropna(subset=["date"]).copy()
    df["date"] = pd.to_datetime(df["date"])
    df["word"] = df["word"].astype(str).str.strip().str.lower()
    log: list[str] = []
    for column in ["reported", "hard", *TRY_COLUMNS]:
        df[column] = pd.to_numeric(df[column]).astype(float)
    bad = ~df["word"].str.fullmatch(r"[a-z]{5}")
    for _, row in df[bad].iterrows():
        log.append(f"word {row['word']!r} ({row['date'].date()}) is not five letters a-z: kept for the count "
                   "series, dropped from the word models")
    df["valid_word"] = ~bad
    # A count that is an order of magnitude off both neighbours is a typing slip of the sheet.
    counts = df.sort_values("date", kind="stable")["reported"].to_numpy(dtype=float)
    order = df.sort_values("date", kind="stable").index
    for position in range(1, len(counts) - 1):
        neighbours = (counts[position - 1] + counts[position + 1]) / 2
        if counts[position] < neighbours / 5:
            log.append(f"reported count {int(counts[position])} on {df.loc[order[position], 'date'].date()} is below "
                       f"a fifth of its neighbours' mean {neighbours:.0f}: replaced by that mean in the count series")
            df.loc[order[position], "reported"] = neighbours
    return df.sort_values("date", kind="stable").reset_index(drop=True), log


def forecast(df: pd.DataFrame) -> dict[str, Any]:
    series = np.log(df["reported"].to_numpy(dtype=float))
    horizon = int((TARGET_DATE - df["date"].iloc[-1]).days)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = ARIMA(series, order=(0, 1, 1), trend="t").fit(method_kwargs=ARIMA_FIT)
    prediction = fitted.get_forecast(horizon)
    mean = float(np.exp(prediction.predicted_mean[-1]))
    low, high = (float(np.exp(v)) for v in prediction.conf_int(alpha=0.2)[-1])
    return {"target_date": str(TARGET_DATE.date()), "last_observed_date": str(df["date"].iloc[-1].date()),
            "horizon_days": horizon, "model": "ARIMA(0,1,1) with drift on log(reported results)",
            "ma1": round(float(fitted.params[1]), 6), "point_forecast": round(mean, 2),
            "interval80": [round(low, 2), round(high, 2)]}


def word_features(words: list[str], vocabulary: list[str]) -> pd.DataFrame:
    """Attributes of each word, letter statistics taken from ``vocabulary`` (the solution words)."""
    letters = Counter("".join(vocabulary))
    total = sum(letters.values())
    positional = [Counter(word[i] for word in vocabulary) for i in range(5)]
    rows = []
    for word in words:
        counts = Counter(word)
        neighbours = sum(1 for other in vocabulary
                         if other != word and sum(a == b for a, b in zip(word, other, strict=True)) == 4)
        rows.append({
            "vowels": sum(ch in VOWELS for ch in word),
            "distinct_letters": len(counts),
            "max_repeat": max(counts.values()),
            "letter_frequency": sum(letters[ch] / total for ch in word),
            "positional_frequency": sum(positional[i][ch] / len(vocabulary) for i, ch in enumerate(word)),
            "rarest_letter": min(letters[ch] / total for ch in word),
            "neighbours": neighbours,
        })
    return pd.DataFrame(rows, index=words)


def difficulty_groups(df: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    shares = df[TRY_COLUMNS].to_numpy(dtype=float)
    shares = shares / shares.sum(axis=1, keepdims=True) * 100
    standardised = (shares - shares.mean(axis=0)) / shares.std(axis=0)
    labels = KMeans(n_clusters=3, n_init=20, random_state=SEED).fit_predict(standardised)
    mean_tries = shares @ np.array([1, 2, 3, 4, 5, 6, 7]) / 100
    order = np.argsort([mean_tries[labels == k].mean() for k in range(3)])
    rank = {int(k): position + 1 for position, k in enumerate(order)}
    groups = np.array([rank[int(k)] for k in labels])
    centres = pd.DataFrame(shares).groupby(groups).mean()
    centres.columns = TRY_COLUMNS
    return groups, centres


def main() -> None:
    data_root = Path(os.environ.get("ANCHORAGE_DATA_DIR", "/root/data"))
    results = Path(os.environ.get("ANCHORAGE_RESULTS_DIR", "/root/results"))
    df, cleaning = load(data_file(data_root))
    count_model = forecast(df)

    words_df = df[df["valid_word"]].drop_duplicates("word").reset_index(drop=True)
    words = words_df["word"].tolist()
    groups, centres = difficulty_groups(words_df)
    features = word_features(words, words)
    x, y = features.to_numpy(dtype=float), groups
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.3, stratify=y, random_state=SEED)
    classifiers = {
        "HistGradientBoosting (LightGBM-style)": HistGradientBoostingClassifier(
            max_iter=200, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=10, random_state=SEED),
        "RandomForest": RandomForestClassifier(n_estimators=300, min_samples_leaf=3, random_state=SEED),
    }
    metrics = []
    for name, model in classifiers.items():
        model.fit(x_train, y_train)
        metrics.append({"classifier": name, "train_accuracy": round(float(model.score(x_train, y_train)), 6),
                        "holdout_accuracy": round(float(model.score(x_test, y_test)), 6)})
    boosting = classifiers["HistGradientBoosting (LightGBM-style)"]
    # How much the single holdout figure can move: 5-fold stratified cross-validation of the same model.
    folds = cross_val_score(HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_leaf_nodes=15,
                                                           min_samples_leaf=10, random_state=SEED),
                            x, y, cv=StratifiedKFold(n_splits=5, shuffle=True, random_state=SEED))
    boosting_accuracy = metrics[0]["holdout_accuracy"]
    eerie_x = word_features(["eerie"], words).to_numpy(dtype=float)
    eerie_group = int(boosting.predict(eerie_x)[0])
    eerie_distribution = [round(float(v), 4) for v in centres.loc[eerie_group]]
    majority = float(np.bincount(y_test).max() / len(y_test))

    def compare(actual: float, target: float) -> dict[str, float]:
        error = abs(actual - target)
        return {"actual": actual, "paper_target": target, "absolute_error": round(error, 6),
                "relative_error_pct": round(100 * error / abs(target), 4) if target else 0.0}

    low, high = count_model["interval80"]
    artifact: dict[str, Any] = {
        "paper_id": "2307946",
        "paper_title": "Words Behind Wordle",
        "contest": "MCM",
        "problem_id": "2023-C",
        "data_sources": ["attachments/2023_MCM_Problem_C_Data.xlsx"],
        "reproduction_scope": "Anchorage reproduction (solution/solve.py): ARIMA(0,1,1) count interval, word "
                              "attributes, k-means difficulty groups and a LightGBM-style classifier",
        "model": "ARIMA(0,1,1) on log counts + lexical features + KMeans(3) on try distributions + "
                 "histogram gradient boosting",
        "paper_targets": {"reported_results_2023_03_01_80_interval": [10139.23, 30808.07],
                          "eerie_difficulty_group": 2, "lightgbm_like_accuracy": 0.7},
        "reproduced": {
            "row_count": len(df),
            "word_rows": len(words),
            "date_range": [str(df["date"].iloc[0].date()), str(df["date"].iloc[-1].date())],
            "cleaning": cleaning,
            "forecast_record": count_model,
            "difficulty_groups": {
                "sizes": {str(k): int((groups == k).sum()) for k in (1, 2, 3)},
                "centres_pct": {str(k): [round(float(v), 3) for v in centres.loc[k]] for k in (1, 2, 3)},
            },
            "features": list(features.columns),
            "holdout_share": 0.3,
            "majority_class_holdout_accuracy": round(majority, 6),
            "difficulty_metrics": metrics,
            "lightgbm_like_accuracy": boosting_accuracy,
            "cross_validated_accuracy": {"folds": [round(float(v), 6) for v in folds],
                                         "mean": round(float(folds.mean()), 6), "sd": round(float(folds.std()), 6)},
            "eerie": {"difficulty_group": eerie_group, "group_mean_distribution_pct": eerie_distribution},
        },
        "target_comparison": {
            "forecast_lower": compare(low, 10139.23),
            "forecast_upper": compare(high, 30808.07),
            "eerie_distribution_sum_pct": compare(round(sum(eerie_distribution), 4), 100.0),
            "eerie_group": compare(float(eerie_group), 2.0),
            "lightgbm_like_accuracy": compare(boosting_accuracy, 0.7),
        },
    }
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{SLUG}_result.json").write_text(json.dumps(artifact, indent=2, ensure_ascii=False) + "\n",
                                                encoding="utf-8")
    print(json.dumps({"interval80": count_model["interval80"], "eerie_group": eerie_group,
                      "accuracy": boosting_accuracy, "metrics": metrics}))


if __name__ == "__main__":
    main()
