"""The judge-validation report: pydantic models, JSON-serialisable with ``model_dump_json``.

``render.render_markdown`` turns a ``ValidationReport`` into Markdown tables.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from faithjudge.agreement.calibration import CcScaleFit
from faithjudge.agreement.consensus import DroppedRater
from faithjudge.stats.judge_coverage import Coverage, FprSham, GateResult, GateThresholds

__all__ = [
    "AxisAgreement",
    "CeilingAxis",
    "JudgeReport",
    "RankEntry",
    "Screening",
    "TauEstimate",
    "ValidationReport",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class TauEstimate(_Model):
    """tau-b with p, significance code, n items and (where computed) the bootstrap CI."""

    tau: float | None
    p: float | None
    sig: str
    n: int
    low: float | None = None
    high: float | None = None


class AxisAgreement(_Model):
    """Judge vs consensus on one axis; ``coverage`` = n_used / n_rated."""

    axis: str
    tau: TauEstimate
    n_rated: int
    n_used: int
    coverage: float | None
    per_rater: dict[str, TauEstimate]
    degenerate_resamples: int = 0


class JudgeReport(_Model):
    """Everything measured about one candidate judge."""

    name: str
    source: str | None
    n_items: int
    extra_items_ignored: int
    axes: dict[str, AxisAgreement]
    macro_tau: float | None
    macro_tau_partial: float | None
    """Mean over the macro axes that have a tau, when one of them has none."""
    coverage: dict[str, Coverage]
    fpr_sham: FprSham
    gates: list[GateResult]
    eligible: bool
    failed_gates: list[str]
    notes: list[str] = Field(default_factory=list)


class CeilingAxis(_Model):
    """Leave-one-out tau of each rater vs the others' consensus; mean and range over raters."""

    axis: str
    per_rater: dict[str, TauEstimate]
    mean: float | None
    min: float | None
    max: float | None


class RankEntry(_Model):
    judge: str
    macro_tau: float | None
    eligible: bool


class Screening(_Model):
    """The decision: a selected judge, or none eligible with the best available named."""

    status: Literal["selected", "none_eligible"]
    selected: str | None
    best_available: str | None
    failed_gates: list[str]
    ranking: list[RankEntry]
    tie_break: str | None
    reason: str


class ValidationReport(_Model):
    """The judge-validation report (JSON via ``model_dump_json``, Markdown via ``render``)."""

    n_items: int
    raters: list[str]
    bootstrap: int
    seed: int
    delta: float
    thresholds: GateThresholds
    dropped: list[DroppedRater]
    judges: list[JudgeReport]
    ceiling: dict[str, CeilingAxis]
    screening: Screening
    cc_scale: dict[str, CcScaleFit] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
