"""Scoring: metric rewards, the panel, O-Eval and Robust BO-Eval, domains, exclusions, gates penalty.

Public API (see docs/design-notes.md "Scoring"): :func:`score_artifact` → :class:`ScoreRecord`
(``to_dict()`` is the JSON record), :func:`score_data` for an already-parsed artifact,
:func:`load_score_config`, :data:`MAX_ARTIFACT_BYTES`, :data:`SCORER_VERSION`. Used by ``anchorage
score``, the local engine, the operator and the leaderboard.
"""

from anchorage.scoring.records import SCORER_VERSION, MetricResult, ScoreRecord
from anchorage.scoring.rewards import bo_eval, metric_reward, o_eval, panel
from anchorage.scoring.scoreconfig import Metric, ScoreConfig, parse_score_config
from anchorage.scoring.scorer import (
    MAX_ARTIFACT_BYTES,
    load_score_config,
    read_json_file,
    score_artifact,
    score_data,
    score_metric,
)

__all__ = [
    "MAX_ARTIFACT_BYTES",
    "SCORER_VERSION",
    "Metric",
    "MetricResult",
    "ScoreConfig",
    "ScoreRecord",
    "bo_eval",
    "load_score_config",
    "metric_reward",
    "o_eval",
    "panel",
    "parse_score_config",
    "read_json_file",
    "score_artifact",
    "score_data",
    "score_metric",
]
