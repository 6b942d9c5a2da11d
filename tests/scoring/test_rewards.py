"""Every mode and direction against hand-computed values (SPEC §4)."""

from __future__ import annotations

from typing import Any

import pytest

from anchorage.scoring import bo_eval, o_eval, panel, score_metric
from anchorage.scoring.records import MetricResult
from anchorage.scoring.scoreconfig import Metric, MetricSpec, compile_metric

LEGACY = "legacy_target_distance_to_outstanding"
MINMAX = "baseline_to_outstanding_target_minmax"


def metric(**fields: Any) -> Metric:
    return compile_metric(0, MetricSpec.model_validate({"path": "x", **fields}))


def scored(m: Metric, value: Any) -> MetricResult:
    return score_metric(m, {"x": value})


# legacy: r = 1 / (1 + |a - O| / max(abs_scale, rel_scale |O|)); O = 2, rel 0.12 -> scale 0.24
# |a - O| = 0.5 -> 1 / (1 + 0.5/0.24) = 0.24 / 0.74
LEGACY_HALF = 0.24 / 0.74


@pytest.mark.parametrize(
    ("direction", "value", "expected"),
    [
        ("higher_is_better", 1.5, LEGACY_HALF),
        ("higher_is_better", 2.0, 1.0),
        ("higher_is_better", 3.0, 1.0),          # one-sided: beating the anchor is exactly 1
        ("lower_is_better", 2.5, LEGACY_HALF),
        ("lower_is_better", 1.0, 1.0),
        ("target_value", 2.5, LEGACY_HALF),
        ("target_value", 1.5, LEGACY_HALF),      # two-sided
        ("exact_value", 2.5, LEGACY_HALF),
        ("exact_value", 2.0, 1.0),
        ("target_value", 2.0 + 0.24, 0.5),       # one scale away -> 1/2
    ],
    ids=lambda v: str(v),
)
def test_legacy_directions(direction: str, value: float, expected: float) -> None:
    m = metric(oracle_value=2.0, rel_scale=0.12, abs_scale=1e-6, direction=direction, normalization_mode=LEGACY)
    result = scored(m, value)
    assert result.status == "scored"
    assert result.reward == pytest.approx(expected, rel=1e-12)


def test_legacy_abs_scale_wins_near_zero_anchor() -> None:
    m = metric(oracle_value=0.0, rel_scale=0.12, abs_scale=1e-3, direction="target_value")
    assert scored(m, 1e-3).reward == pytest.approx(0.5)
    assert scored(m, -3e-3).reward == pytest.approx(0.25)


def test_legacy_defaults_are_reference_scales() -> None:
    m = metric(oracle_value=10.0, direction="target_value")  # rel 0.12 -> scale 1.2
    assert (m.rel_scale, m.abs_scale) == (0.12, 1e-6)
    assert scored(m, 11.2).reward == pytest.approx(0.5)


def test_legacy_degenerate_scale_is_widened_not_divided_by_zero() -> None:
    m = metric(oracle_value=0.0, rel_scale=0.0, abs_scale=0.0, direction="target_value")
    assert m.widened and m.denominator == 1e-12
    assert scored(m, 1e-12).reward == pytest.approx(0.5)
    assert scored(m, 0.0).reward == 1.0


# min-max: r = clamp(1 - |a - O| / |O - B|, 0, 1)
@pytest.mark.parametrize(
    ("direction", "norm", "outstanding", "baseline", "value", "expected"),
    [
        ("higher_is_better", "higher_is_better", 0.7, 0.4, 0.6, 1 - 0.1 / 0.3),
        ("higher_is_better", "higher_is_better", 0.7, 0.4, 0.9, 1.0),       # one-sided
        ("higher_is_better", "higher_is_better", 0.7, 0.4, 0.4, 0.0),       # at the baseline
        ("higher_is_better", "higher_is_better", 0.7, 0.4, 0.1, 0.0),       # clamped
        ("lower_is_better", "lower_is_better", 10.0, 20.0, 12.0, 0.8),
        ("lower_is_better", "lower_is_better", 10.0, 20.0, 5.0, 1.0),       # one-sided
        ("target_value", "higher_is_better", 27.6, 24.6, 27.7, 1 - 0.1 / 3.0),  # target, normalised higher
        ("target_value", "higher_is_better", 27.6, 24.6, 27.5, 1 - 0.1 / 3.0),
        ("target_value", "higher_is_better", 27.6, 27.3, 27.7, 1 - 0.1 / (0.044 * 27.6)),  # stair wear: widened
        ("target_value", "target_value", 5.0, 4.0, 5.5, 0.5),
        ("exact_value", "exact_value", 5.0, 4.0, 4.5, 0.5),
    ],
    ids=lambda v: str(v),
)
def test_minmax_directions(direction: str, norm: str, outstanding: float, baseline: float, value: float,
                           expected: float) -> None:
    m = metric(oracle_value=outstanding, outstanding_value=outstanding, baseline_value=baseline,
               direction=direction, normalization_direction=norm, normalization_mode=MINMAX)
    result = scored(m, value)
    assert result.status == "scored"
    assert result.reward == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("norm", "outstanding", "baseline"),
                         [("higher_is_better", 1.0, 2.0), ("lower_is_better", 2.0, 1.0)])
def test_minmax_outstanding_not_better_than_baseline_scores_zero(norm: str, outstanding: float,
                                                                 baseline: float) -> None:
    m = metric(oracle_value=outstanding, baseline_value=baseline, direction=norm,
               normalization_direction=norm, normalization_mode=MINMAX)
    result = scored(m, outstanding)
    assert (result.reward, result.status) == (0.0, "endpoint_invalid")
    assert "not" in result.reason


def test_minmax_degeneracy_band_widens_and_is_recorded() -> None:
    # |O - B| = 1e-4 is far below 4.4 % of |O| = 4.4: the band widens the denominator to 4.4 (G.6)
    m = metric(oracle_value=100.0, baseline_value=100.0001, direction="target_value", normalization_mode=MINMAX)
    result = scored(m, 102.2)
    assert result.reward == pytest.approx(0.5)
    assert result.band["widened"] is True and result.band["width"] == pytest.approx(4.4)
    assert "|O - B|" in result.band["rule"]


def test_degeneracy_band_override() -> None:
    m = metric(oracle_value=10.0, baseline_value=9.99, direction="target_value", normalization_mode=MINMAX,
               degeneracy_band={"rel": 0.0, "abs": 2.0})
    assert m.denominator == 2.0 and m.widened
    assert scored(m, 11.0).reward == pytest.approx(0.5)


def test_minmax_without_degeneracy_keeps_raw_gap() -> None:
    m = metric(oracle_value=0.7, baseline_value=0.4, direction="higher_is_better", normalization_mode=MINMAX)
    assert not m.widened and m.denominator == pytest.approx(0.3)


def test_constant_endpoint_is_excluded() -> None:
    m = metric(oracle_value=2.0, outstanding_value=2.0, baseline_value=2.0, direction="exact_value",
               normalization_mode="constant_endpoint", weight=1.0, score_weight=0.0)
    result = scored(m, 2.0)
    assert (result.status, result.reward, result.weight) == ("excluded", None, 0.0)
    assert "constant endpoint" in result.reason


def test_minmax_with_equal_endpoints_is_treated_as_constant() -> None:
    m = metric(oracle_value=3.0, baseline_value=3.0, direction="higher_is_better", normalization_mode=MINMAX)
    assert m.weight == 0.0 and m.excluded_reason is not None


@pytest.mark.parametrize(
    ("fields", "reason_part"),
    [({"exclude_reason": "anchor magnitude > 5 with no unit pinned"}, "anchor magnitude"),
     ({"score_weight": 0.0}, "weight 0"),
     ({"weight": 0.0}, "weight 0")],
)
def test_exclusions(fields: dict[str, Any], reason_part: str) -> None:
    m = metric(oracle_value=1.0, direction="higher_is_better", **fields)
    result = scored(m, 1.0)
    assert result.status == "excluded" and result.weight == 0.0 and reason_part in result.reason


def test_score_weight_wins_over_weight() -> None:
    m = metric(oracle_value=1.0, weight=1.0, score_weight=3.0)
    assert (m.weight, m.configured_weight) == (3.0, 3.0)


@pytest.mark.parametrize(
    ("domain", "bad", "good"),
    [("correlation", 1.2, -0.9), ("correlation", -1.01, 1.0), ("unit_interval", -0.1, 0.0),
     ("unit_interval", 1.5, 1.0), ("count", -1, 0), ("positive", 0.0, 1e-9), ("nonnegative", -0.5, 0.0)],
)
def test_domains(domain: str, bad: float, good: float) -> None:
    m = metric(oracle_value=good, direction="target_value", domain=domain)
    violated = scored(m, bad)
    assert (violated.reward, violated.status) == (0.0, "domain_violation")
    assert violated.reason
    assert scored(m, good).reward == 1.0


def test_panel_is_weighted_mean_of_included() -> None:
    assert panel([(1.0, 1.0), (3.0, 0.5)]) == pytest.approx((1.0 + 1.5) / 4.0)
    assert panel([(1.0, 0.2), (0.0, 1.0)]) == pytest.approx(0.2)   # weight 0 is not in the panel
    assert panel([]) == 0.0


@pytest.mark.parametrize(("raw", "oracle", "expected"),
                         [(0.5, 1.0, 0.5), (0.9, 0.8, 1.0), (0.0, 1.0, 0.0), (0.4, 0.0, 0.0)])
def test_o_eval(raw: float, oracle: float, expected: float) -> None:
    assert o_eval(raw, oracle) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("raw", "oracle", "baseline", "expected", "branch"),
    [
        (0.8, 1.0, 0.6, 0.5, "normalized"),          # (0.8-0.6)/0.4
        (0.2, 1.0, 0.6, -1.0, "normalized"),         # -0.4/0.4 clipped at -1
        (1.0, 1.0, 0.0, 1.0, "normalized"),
        (1.0, 1.0, 0.9, 1.0, "normalized"),          # gap 0.1 (0.0999.. in floats) is >= 0.10
        (1.0, 1.0, 0.95, 0.05, "small_gap"),         # R - F
        (0.5, 1.0, 0.95, -0.10, "small_gap"),        # clipped at -0.10
        (1.0, 0.9, 0.95, 0.05, "small_gap"),         # negative gap
    ],
)
def test_bo_eval(raw: float, oracle: float, baseline: float, expected: float, branch: str) -> None:
    value, taken = bo_eval(raw, oracle, baseline)
    assert value == pytest.approx(expected)
    assert taken == branch
