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
  ``max(a, r·|O|)`` (G.6). Defaults per mode (:mod:`anchorage.scoring.modes`): legacy ``rel 0, abs
  1e-12`` (its own scales already bound it); min-max (the endpoint metrics) ``rel 0.044, abs abs_scale``.
* ``unit`` and ``range``: informative only (shown in records and tables).

Effective weight = ``score_weight`` when present (v5), else ``weight``; 0 when excluded or when the
mode excludes the metric by construction (``constant_endpoint``, a min-max metric with B = O). Each mode's
parse rules, reward and schema text live in :mod:`anchorage.scoring.modes`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from anchorage.errors import InputError
from anchorage.scoring.modes import MODES, MetricMode, get_mode

Mode = str
"""A ``normalization_mode``: a key of :data:`anchorage.scoring.modes.MODES`."""
Direction = Literal["higher_is_better", "lower_is_better", "target_value", "exact_value"]
Domain = Literal["correlation", "unit_interval", "count", "positive", "nonnegative"]

LEGACY: Mode = "legacy_target_distance_to_outstanding"
MINMAX: Mode = "baseline_to_outstanding_target_minmax"
CONSTANT: Mode = "constant_endpoint"
DEFAULT_REL_SCALE = 0.12
DEFAULT_ABS_SCALE = 1e-6
PATH_PATTERN = r"^[^.\[\]]+(\[\d+\])*(\.[^.\[\]]+(\[\d+\])*)*$"
_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


class _Finite(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class Band(_Finite):
    """Anchorage extension: the smallest denominator the metric normalises by is ``max(abs, rel·|O|)`` (G.6)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    rel: float = Field(0.0, ge=0)
    abs: float = Field(0.0, ge=0)


def _metric_schema(schema: dict[str, Any]) -> None:
    """What pydantic cannot say about a metric: one of the two anchors, and min-max needs a baseline."""
    schema["anyOf"] = [{"required": ["oracle_value"]}, {"required": ["outstanding_value"]}]
    schema["allOf"] = [{"if": {"properties": {"normalization_mode": {"const": name}}, "required": ["normalization_mode"]},
                        "then": {"required": ["baseline_value"]}} for name, mode in MODES.items() if mode.needs_baseline]


class MetricSpec(BaseModel):
    """One ``metrics[]`` entry as written. Only the fields below are accepted (a misspelt extension is an
    error); the descriptive ones the reference writes are listed so they load."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, json_schema_extra=_metric_schema)

    path: str = Field(pattern=PATH_PATTERN, description="JSON path into the artifact: dotted keys and [i] indexes")
    oracle_value: float | None = Field(None, description="the anchor O (legacy mode)")
    outstanding_value: float | None = Field(
        None, description="the outstanding endpoint O (min-max mode); defaults to oracle_value")
    baseline_value: float | None = Field(None, description="the baseline endpoint B (min-max mode)")
    rel_scale: float = Field(DEFAULT_REL_SCALE, ge=0)
    abs_scale: float = Field(DEFAULT_ABS_SCALE, ge=0)
    weight: float = Field(1.0, ge=0)
    score_weight: float | None = Field(None, ge=0, description="v5: the effective weight, wins over weight")
    direction: Direction | None = None
    semantic_direction: Direction | None = None
    normalization_direction: Direction | None = None
    normalization_mode: str = Field(LEGACY, json_schema_extra={"enum": list(MODES)},
                                    description="how the reward normalises: " + "; ".join(
                                        f"{name}: {mode.formula}" for name, mode in MODES.items()))
    domain: Domain | None = Field(None, description=(
        "Anchorage extension: correlation [-1,1], unit_interval [0,1], count >= 0, positive > 0, nonnegative >= 0; "
        "a value outside gets r = 0 with the reason"))
    exclude_reason: str | None = Field(None, min_length=1, description=(
        "Anchorage extension: forces weight 0; recorded and reported as excluded, never in the panel"))
    degeneracy_band: Band | None = Field(None, description=(
        "Anchorage extension: the smallest denominator is max(abs, rel*|O|); defaults per mode "
        "(legacy rel 0, abs 1e-12; min-max rel 0.044, abs abs_scale)"))
    unit: str | None = Field(None, description="Anchorage extension (informative): the unit of the scored field")
    range: tuple[float | None, float | None] | None = Field(None, description=(
        "Anchorage extension (informative): [lo, hi] of the field, null for an open end, e.g. [0, null]"))
    baseline_source_path: str | None = None
    normalization_formula: str | None = None
    normalization_basis: str | None = None
    direction_basis: str | None = None
    semantic_direction_basis: str | None = None
    question_scope: str | None = None
    final_question_label: str | None = None
    note: str | None = None
    source: str | None = None
    description: str | None = None

    @field_validator("normalization_mode")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        get_mode(value)
        return value

    @model_validator(mode="after")
    def _endpoints_present(self) -> MetricSpec:
        if self.oracle_value is None and self.outstanding_value is None:
            raise ValueError("a metric needs an oracle_value (or an outstanding_value)")
        problem = get_mode(self.normalization_mode).problem(self)
        if problem:
            raise ValueError(problem)
        return self


class Endpoint(_Finite):
    """Baseline / outstanding endpoint. F (the zero point of Robust BO-Eval) defaults to
    ``normalized_panel_score`` when present (v5), else ``panel_score``."""

    kind: str | None = None
    panel_score: float | None = None
    normalized_panel_score: float | None = None


class ScoreConfigModel(_Finite):
    """The whole file as written: the fields below, and any descriptive top-level field the reference adds."""

    scoring_version: str = Field("", description=(
        "e.g. tb-mathmodeling-v3-final-question-legacy-baseline-panel or "
        "tb-mathmodeling-v5-final-question-endpoint-target-minmax"))
    metrics: list[MetricSpec] = Field(min_length=1)
    baseline_endpoint: Endpoint | None = None
    outstanding_endpoint: Endpoint | None = None
    raw_panel_aggregation: Literal["weighted_mean"] | None = Field(
        None, description="R = sum(w r) / sum(w) over included metrics")
    missing_or_nonnumeric_metric_reward: float | None = Field(None, ge=0, le=0, description="always 0")
    metric_reward: str | None = Field(None, description="informative: the reward formula in words")


@dataclass(frozen=True, slots=True)
class Metric:
    """A metric compiled for fast scoring: every input of its reward, resolved once."""

    index: int
    path: str
    tokens: tuple[str | int, ...]
    mode: Mode
    rule: MetricMode               # the registered mode: rewards through it
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
    return compile_config(validate_config(raw, source))


def validate_config(raw: Any, source: str = "score_config.json") -> ScoreConfigModel:
    """Validate a parsed score_config.json into its model (not compiled); :class:`InputError` lists every problem."""
    try:
        return ScoreConfigModel.model_validate(raw)
    except ValidationError as exc:
        lines = "\n".join(
            f"  {'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors()
        )
        raise InputError(f"{source} is not a valid scoring configuration:\n{lines}",
                         hint="fix the fields listed; the JSON Schema is anchorage/scoring/score_config.schema.json"
                         ) from exc


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
    rule = get_mode(spec.normalization_mode)
    direction: Direction = spec.direction or spec.semantic_direction or "target_value"
    norm_direction: Direction = spec.normalization_direction or direction
    anchor = rule.anchor(spec)
    configured = spec.score_weight if spec.score_weight is not None else spec.weight
    excluded = spec.exclude_reason or rule.exclusion(spec) or ("weight 0 in the configuration" if configured == 0 else None)
    band_rel, band_abs = _band(spec, rule)
    raw_den, rule_text = rule.denominator(spec, anchor)
    floor = max(band_abs, band_rel * abs(anchor))
    return Metric(
        index=index, path=spec.path, tokens=parse_path(spec.path), mode=spec.normalization_mode, rule=rule,
        direction=direction, normalization_direction=norm_direction, anchor=anchor,
        oracle_value=spec.oracle_value, outstanding_value=spec.outstanding_value,
        baseline_value=spec.baseline_value, rel_scale=abs(spec.rel_scale), abs_scale=abs(spec.abs_scale),
        configured_weight=configured, weight=0.0 if excluded else configured, excluded_reason=excluded,
        domain=spec.domain, band_rule=rule_text.format(band=f", {band_abs:g}, {band_rel:g}·|O|"),
        band_rel=band_rel, band_abs=band_abs, denominator=max(raw_den, floor), widened=floor > raw_den,
        endpoint_error=rule.endpoint_error(spec, anchor, norm_direction), unit=spec.unit,
    )


def _band(spec: MetricSpec, rule: MetricMode) -> tuple[float, float]:
    if spec.degeneracy_band is not None:
        return spec.degeneracy_band.rel, spec.degeneracy_band.abs
    return rule.default_band(spec)
