"""Split-half agreement: each judge validated on each half of a seeded split, and the mean.

A rule set tuned on one half of the reader study is honest only on the other half. This module
validates every judge on each half separately (its own consensus, z-scored within the half, as
``validate_judge`` does for one split) and reports, per judge and axis, tau-b on each half with
its percentile bootstrap CI and the mean of the halves. The CI of the mean comes from the same
resamples as the halves' CIs (same seeded generators): the halves hold different items, so each
mean resample is the average of one independent resample of each half.

Pure: pandas in, a JSON-serialisable pydantic report out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from faithjudge.agreement.consensus import validated_scopes
from faithjudge.agreement.report import AxisAgreement, TauEstimate
from faithjudge.agreement.validate import axis_pairs, tau_rng_label, validate_judge
from faithjudge.errors import UserInputError
from faithjudge.scoring.metrics import DEFAULT_CALIBRATION, CalibrationParams
from faithjudge.stats.bootstrap import (
    DEFAULT_BOOTSTRAP,
    bootstrap_tau_b_samples,
    percentile_interval,
    rng_for,
)

__all__ = ["HalfAxis", "HalfJudge", "SplitHalfReport", "half_axes", "split_half_agreement"]


def half_axes() -> tuple[str, ...]:
    """The axes of a split-half report: those a judge is validated on (every catalogue metric
    with a radiologist rating key, and CC), in the agreement order."""
    return validated_scopes()


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class HalfAxis(_Model):
    """One judge on one axis: tau-b per half (with CI and items used / rated) and the mean."""

    axis: str
    halves: dict[str, TauEstimate]
    used: dict[str, int]
    rated: dict[str, int]
    mean: float | None
    low: float | None
    high: float | None


class HalfJudge(_Model):
    name: str
    axes: dict[str, HalfAxis]


class SplitHalfReport(_Model):
    """Every judge on every half; ``halves`` names the items of each half."""

    halves: dict[str, list[str]]
    bootstrap: int
    seed: int
    judges: list[HalfJudge]


def split_half_agreement(
    ratings: pd.DataFrame,
    judges: Mapping[str, pd.DataFrame],
    halves: Mapping[str, Sequence[str]],
    *,
    B: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    params: CalibrationParams = DEFAULT_CALIBRATION,
) -> SplitHalfReport:
    """Validate each judge on each half of ``halves`` (name -> item ids) and average the halves.

    Raises:
        UserInputError: fewer than two halves, a half with no rated item, or what
            ``validate_judge`` raises (a judge that misses rated items).
    """
    if len(halves) < 2:
        raise UserInputError("a split-half report needs at least two halves", field="halves")
    per_half: dict[str, tuple[pd.DataFrame, dict[str, dict[str, AxisAgreement]]]] = {}
    for half, items in halves.items():
        subset = ratings[ratings["item_id"].isin(set(items))]
        if subset.empty:
            raise UserInputError(f"half {half!r} has no rated item", field="halves")
        report = validate_judge(subset, judges, B=B, seed=seed, params=params)
        per_half[half] = (subset, {j.name: dict(j.axes) for j in report.judges})
    out: list[HalfJudge] = []
    for name, results in judges.items():
        axes: dict[str, HalfAxis] = {}
        for axis in half_axes():
            estimates: dict[str, TauEstimate] = {}
            used: dict[str, int] = {}
            rated: dict[str, int] = {}
            samples: list[np.ndarray] = []
            for half, (subset, agreements) in per_half.items():
                agreement = agreements[name][axis]
                estimates[half] = agreement.tau
                used[half], rated[half] = agreement.n_used, agreement.n_rated
                if agreement.tau.tau is not None:
                    x, y = axis_pairs(subset, results, axis, params=params)
                    rng = rng_for(seed, tau_rng_label(name, axis))
                    samples.append(bootstrap_tau_b_samples(x, y, B=B, rng=rng))
            points = [e.tau for e in estimates.values()]
            complete = all(p is not None for p in points) and len(samples) == len(points)
            mean = float(np.mean([p for p in points if p is not None])) if complete else None
            interval = percentile_interval(np.mean(samples, axis=0)) if complete else None
            axes[axis] = HalfAxis(
                axis=axis,
                halves=estimates,
                used=used,
                rated=rated,
                mean=mean,
                low=interval[0] if interval else None,
                high=interval[1] if interval else None,
            )
        out.append(HalfJudge(name=name, axes=axes))
    return SplitHalfReport(
        halves={h: sorted(str(i) for i in items) for h, items in halves.items()},
        bootstrap=B,
        seed=seed,
        judges=out,
    )
