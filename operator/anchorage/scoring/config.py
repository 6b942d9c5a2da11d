"""The scoring configuration (``tests/score_config.json``): the reference format plus our extensions.

Read by :mod:`anchorage.scoring.scorer` (compiled once per task and cached) and by ``anchorage tasks
validate`` (which also checks the file against ``score_config.schema.json``). The reference format is
read as it is — v3 ``legacy_target_distance_to_outstanding`` and v5
``baseline_to_outstanding_target_minmax`` configurations, every field either uses — and unknown keys
are kept, so descriptive fields (``direction_basis``, ``final_question`` ...) never break loading.

Per-metric extensions (Anchorage's, documented in docs/design-notes.md "Scoring"):

* ``domain``: ``correlation`` [-1, 1], ``unit_interval`` [0, 1], ``count`` (≥ 0), ``positive`` (> 0),
  ``nonnegative`` (≥ 0). A value outside it gets r = 0 with the reason (SPEC §4, G.3).
* ``exclude_reason``: forces weight 0; the metric is recorded and reported as ``excluded``, never in
  the panel.
* ``degeneracy_band``: ``{"rel": r, "abs": a}`` — the smallest denominator the metric normalises by is
  ``max(a, r·|O|)`` (G.6). Defaults: legacy mode ``rel 0, abs 1e-12`` (its own scales already bound
  it); min-max mode ``rel 0.005, abs = abs_scale``.
* ``unit`` and ``range``: informative only (shown in records and tables).

Effective weight = ``score_weight`` when present (v5), else ``weight``; 0 when excluded or when the
mode is ``constant_endpoint``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from anchorage.errors import InputError

Mode = Literal[
    "legacy_target_distance_to_outstanding", "baseline_to_outstanding_target_minmax", "constant_endpoint"
]
Direction = Literal["higher_is_better", "lower_is_better", "target_value", "exact_value"]
Domain = Literal["correlation", "unit_interval", "count", "positive", "nonnegative"]

LEGACY: Mode = "legacy_target_distance_to_outstanding"
MINMAX: Mode = "baseline_to_outstanding_target_minmax"
CONSTANT: Mode = "constant_endpoint"
DEFAULT_REL_SCALE = 0.12
DEFAULT_ABS_SCALE = 1e-6
LEGACY_BAND = (0.0, 1e-12)           # (rel, abs) floor of the legacy denominator
MINMAX_BAND_REL = 0.005              # min-max: |O - B| is widened to at least 0.5 % of |O| ...
PATH_PATTERN = r"^[^.\[\]]+(\[\d+\])*(\.[^.\[\]]+(\[\d+\])*)*$"
_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


class _Finite(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class Band(_Finite):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    rel: float = Field(0.0, ge=0)
    abs: float = Field(0.0, ge=0)


class MetricSpec(_Finite):
    """One ``metrics[]`` entry as written."""

    path: str = Field(pattern=PATH_PATTERN)
    oracle_value: float | None = None
    outstanding_value: float | None = None
    baseline_value: float | None = None
    rel_scale: float = DEFAULT_REL_SCALE
    abs_scale: float = DEFAULT_ABS_SCALE
    weight: float = Field(1.0, ge=0)
    score_weight: float | None = Field(None, ge=0)
    direction: Direction | None = None
    semantic_direction: Direction | None = None
    normalization_direction: Direction | None = None
    normalization_mode: Mode = LEGACY
    domain: Domain | None = None
    exclude_reason: str | None = None
    degeneracy_band: Band | None = None
    unit: str | None = None
    range: Any = None

    @model_validator(mode="after")
    def _endpoints_present(self) -> MetricSpec:
        if self.oracle_value is None and self.outstanding_value is None:
            raise ValueError("a metric needs an oracle_value (or an outstanding_value)")
        if self.normalization_mode == MINMAX and self.baseline_value is None:
            raise ValueError(f"normalization_mode {MINMAX} needs a baseline_value")
        return self


class Endpoint(_Finite):
    panel_score: float | None = None
    normalized_panel_score: float | None = None


class ScoreConfigModel(_Finite):
    """The whole file as written."""

    scoring_version: str = ""
    metrics: list[MetricSpec] = Field(min_length=1)
    baseline_endpoint: Endpoint | None = None
    outstanding_endpoint: Endpoint | None = None


@dataclass(frozen=True, slots=True)
class Metric:
    """A metric compiled for fast scoring: every input of its reward, resolved once."""

    index: int
    path: str
    tokens: tuple[str | int, ...]
    mode: Mode
    direction: Direction
    normalization_direction: Direction
    anchor: float                  # O: oracle_value (legacy) / outstanding_value (min-max)
    oracle_value: float | None
    outstanding_value: float | None
    baseline_value: float | None
    rel_scale: float
    abs_scale: float
    configured_weight: float
    weight: float                  # effective: 0 when excluded
    excluded_reason: str | None
    domain: Domain | None
    band_rule: str
    band_rel: float
    band_abs: float
    denominator: float             # the scale (legacy) or |O - B| (min-max), after widening
    widened: bool                  # True when the degeneracy band raised the denominator
    endpoint_error: str | None     # min-max: O not better than B → every value scores 0
    unit: str | None

    @property
    def band(self) -> dict[str, Any]:
        """The degeneracy band as recorded per metric: rule, parameters, width, whether it widened."""
        return {"rule": self.band_rule, "rel": self.band_rel, "abs": self.band_abs, "width": self.denominator,
                "widened": self.widened}


@dataclass(frozen=True, slots=True)
class ScoreConfig:
    scoring_version: str
    metrics: tuple[Metric, ...]
    baseline_panel_score: float | None
    baseline_panel_key: str | None
    outstanding_panel_score: float | None


def parse_path(path: str) -> tuple[str | int, ...]:
    """``a.b[0].c`` → ``("a", "b", 0, "c")``. Raises ``ValueError`` on bad syntax."""
    if not re.fullmatch(PATH_PATTERN, path):
        raise ValueError(f"bad JSON path {path!r}: use dotted keys and [i] indexes, e.g. a.b[0].c")
    return tuple(key if key else int(idx) for key, idx in _TOKEN.findall(path))


def parse_score_config(raw: Any, source: str = "score_config.json") -> ScoreConfig:
    """Validate and compile a parsed score_config.json; raise :class:`InputError` with every problem."""
    try:
        model = ScoreConfigModel.model_validate(raw)
    except ValidationError as exc:
        lines = "\n".join(
            f"  {'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors()
        )
        raise InputError(f"{source} is not a valid scoring configuration:\n{lines}",
                         hint="fix the fields listed; the JSON Schema is anchorage/scoring/score_config.schema.json"
                         ) from exc
    return compile_config(model)


def compile_config(model: ScoreConfigModel) -> ScoreConfig:
    metrics = tuple(compile_metric(i, spec) for i, spec in enumerate(model.metrics))
    base = model.baseline_endpoint
    key, value = None, None
    if base is not None and base.normalized_panel_score is not None:
        key, value = "baseline_endpoint.normalized_panel_score", base.normalized_panel_score
    elif base is not None and base.panel_score is not None:
        key, value = "baseline_endpoint.panel_score", base.panel_score
    out = model.outstanding_endpoint
    out_value = None if out is None else (
        out.normalized_panel_score if out.normalized_panel_score is not None else out.panel_score)
    return ScoreConfig(model.scoring_version, metrics, value, key, out_value)


def compile_metric(index: int, spec: MetricSpec) -> Metric:
    direction: Direction = spec.direction or spec.semantic_direction or "target_value"
    norm_direction: Direction = spec.normalization_direction or direction
    anchor = _anchor(spec)
    configured = spec.score_weight if spec.score_weight is not None else spec.weight
    excluded = _exclusion(spec, configured)
    band_rel, band_abs = _band(spec)
    rel_scale, abs_scale = abs(spec.rel_scale), abs(spec.abs_scale)
    if spec.normalization_mode == MINMAX:
        assert spec.baseline_value is not None  # checked by MetricSpec
        raw_den = abs(anchor - spec.baseline_value)
        endpoint_error = _endpoint_error(norm_direction, anchor, spec.baseline_value)
        rule = f"max(|O - B|, {band_abs:g}, {band_rel:g}·|O|)"
    else:
        raw_den = max(abs_scale, rel_scale * abs(anchor))
        endpoint_error = None
        rule = f"max(abs_scale, rel_scale·|O|, {band_abs:g}, {band_rel:g}·|O|)"
    floor = max(band_abs, band_rel * abs(anchor))
    return Metric(
        index=index, path=spec.path, tokens=parse_path(spec.path), mode=spec.normalization_mode,
        direction=direction, normalization_direction=norm_direction, anchor=anchor,
        oracle_value=spec.oracle_value, outstanding_value=spec.outstanding_value,
        baseline_value=spec.baseline_value, rel_scale=rel_scale, abs_scale=abs_scale,
        configured_weight=configured, weight=0.0 if excluded else configured, excluded_reason=excluded,
        domain=spec.domain, band_rule=rule, band_rel=band_rel, band_abs=band_abs,
        denominator=max(raw_den, floor), widened=floor > raw_den, endpoint_error=endpoint_error,
        unit=spec.unit,
    )


def _anchor(spec: MetricSpec) -> float:
    if spec.normalization_mode == LEGACY and spec.oracle_value is not None:
        return spec.oracle_value
    value = spec.outstanding_value if spec.outstanding_value is not None else spec.oracle_value
    assert value is not None  # checked by MetricSpec
    return value


def _exclusion(spec: MetricSpec, configured: float) -> str | None:
    if spec.exclude_reason:
        return spec.exclude_reason
    if spec.normalization_mode == CONSTANT:
        return "constant endpoint (baseline == outstanding): nothing to normalise by"
    if spec.normalization_mode == MINMAX and spec.baseline_value == _anchor(spec):
        return "baseline_value equals the outstanding value: treated as a constant endpoint"
    if configured == 0:
        return "weight 0 in the configuration"
    return None


def _band(spec: MetricSpec) -> tuple[float, float]:
    if spec.degeneracy_band is not None:
        return spec.degeneracy_band.rel, spec.degeneracy_band.abs
    if spec.normalization_mode == MINMAX:
        return MINMAX_BAND_REL, max(abs(spec.abs_scale), LEGACY_BAND[1])
    return LEGACY_BAND


def _endpoint_error(direction: Direction, outstanding: float, baseline: float) -> str | None:
    if direction == "higher_is_better" and not outstanding > baseline:
        return f"outstanding {outstanding:g} is not above baseline {baseline:g} (higher_is_better)"
    if direction == "lower_is_better" and not outstanding < baseline:
        return f"outstanding {outstanding:g} is not below baseline {baseline:g} (lower_is_better)"
    return None
