"""Panel and consequence-based-utility settings: tier presets (SPEC §7) and custom thresholds.

These pydantic models are the shape of a campaign's ``verification.panel`` and ``verification.cbu``
blocks (camelCase aliases, like :mod:`anchorage.manifests`) and of the ``anchorage verify`` flags.

Tier presets (seed 002, "model tiers": the noise floor, not the budget, sets the width):

========  =======  =========  =======  ======  ===========================================
tier      solvers  verifiers  confirm  refute  extra
========  =======  =========  =======  ======  ===========================================
small     12       7          5        3       2 revision rounds before abstaining
medium    6        5          4        2       3 revision rounds (the default tier)
large     4        5          4        2       + one verifier per pattern; 4 revision rounds
========  =======  =========  =======  ======  ===========================================

The revision rounds follow the seed's summary table (abstain after 2 / 3 / 4 failed revisions).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from anchorage.verify.voting import Policy, Thresholds

Tier = Literal["small", "medium", "large"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class TierPreset(_Model):
    solvers: int
    verifiers: int
    confirm: int
    refute: int
    max_revisions: int
    pattern_sweep: bool


TIERS: dict[str, TierPreset] = {
    "small": TierPreset(solvers=12, verifiers=7, confirm=5, refute=3, max_revisions=2, pattern_sweep=False),
    "medium": TierPreset(solvers=6, verifiers=5, confirm=4, refute=2, max_revisions=3, pattern_sweep=False),
    "large": TierPreset(solvers=4, verifiers=5, confirm=4, refute=2, max_revisions=4, pattern_sweep=True),
}


class PanelSettings(_Model):
    """``verification.panel``: the adversarial panel of one problem (unset fields come from the tier)."""

    tier: Tier = Field(default="medium", description="Preset: small | medium | large (SPEC §7).")
    model: str = Field(default="mock-model", description="Model id sent through the gateway.")
    solvers: int | None = Field(default=None, ge=1, le=64, description="Parallel solvers (default: tier).")
    verifiers: int | None = Field(default=None, ge=1, le=64, description="Verifiers per vote (default: tier).")
    confirm: int | None = Field(default=None, ge=1, description="HOLDS votes that confirm (default: tier).")
    refute: int | None = Field(default=None, ge=1, description="HOLE FOUND votes that refute (default: tier).")
    max_revisions: int | None = Field(default=None, ge=0, le=10, alias="maxRevisions",
                                      description="Revision rounds before abstaining (default: tier).")
    pattern_sweep: bool | None = Field(default=None, alias="patternSweep",
                                       description="One extra verifier per pattern (default: large tier only).")
    policy: Policy = Field(default="staggered", description="Launch policy within the pigeonhole bound: staggered "
                           "(default: never more in flight than the HOLE FOUND still needed to refute), wave, eager.")
    max_parallel: int | None = Field(default=None, ge=1, alias="maxParallel",
                                     description="Verifiers in flight at most (1: sequential).")
    prompts: str = Field(default="v1", description="Prompt version under prompts/verify/.")
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature (default: the model's).")

    @model_validator(mode="after")
    def _thresholds_valid(self) -> PanelSettings:
        self.thresholds()  # raises InputError with a hint when inconsistent
        return self

    @property
    def preset(self) -> TierPreset:
        return TIERS[self.tier]

    def thresholds(self) -> Thresholds:
        preset = self.preset
        return Thresholds(verifiers=self.verifiers or preset.verifiers, confirm=self.confirm or preset.confirm,
                          refute=self.refute or preset.refute)

    @property
    def solver_count(self) -> int:
        return self.solvers or self.preset.solvers

    @property
    def revisions(self) -> int:
        return self.preset.max_revisions if self.max_revisions is None else self.max_revisions

    @property
    def sweep(self) -> bool:
        return self.preset.pattern_sweep if self.pattern_sweep is None else self.pattern_sweep


class CbuSettings(_Model):
    """``verification.cbu``: consequence-based utility (seed 003)."""

    model: str = Field(default="mock-model", description="Solver model id sent through the gateway.")
    rollouts: int = Field(default=64, ge=1, le=1024, description="Rollouts per neighbour (64 in the paper).")
    prompts: str = Field(default="v1", description="Prompt version under prompts/verify/.")
    rel_tol: float = Field(default=1e-6, ge=0, alias="relTol", description="Numeric answer match tolerance.")
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature (default: the model's).")
