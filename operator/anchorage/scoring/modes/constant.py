"""The constant-endpoint mode, ``constant_endpoint``: baseline = outstanding, so the metric is recorded and excluded
(weight 0); it reads and rewards like the legacy mode (:mod:`anchorage.scoring.modes.legacy`) otherwise. Declared as
``MODE`` (:mod:`anchorage.scoring.modes`)."""

from __future__ import annotations

from typing import ClassVar

from anchorage.scoring.modes import MetricSpec, Scales
from anchorage.scoring.modes.legacy import Legacy


class Constant(Legacy):
    """``constant_endpoint``: baseline = outstanding, nothing to normalise by — recorded, weight 0."""

    name: ClassVar[str] = "constant_endpoint"
    formula: ClassVar[str] = "excluded (weight 0): baseline = outstanding leaves nothing to normalise by"

    def anchor(self, spec: MetricSpec) -> float:
        value = spec.outstanding_value if spec.outstanding_value is not None else spec.oracle_value
        assert value is not None
        return value

    def exclusion(self, spec: MetricSpec) -> str | None:
        return "constant endpoint (baseline == outstanding): nothing to normalise by"

    def tolerance(self, anchor: float, scales: Scales) -> float | None:
        """Nothing to normalise by: only the anchor itself matches (None without a baseline)."""
        return None if scales.baseline_value is None else abs(anchor - scales.baseline_value) / 2


MODE = Constant()
