"""Human consensus of the reader study (METHODS §1.12): per-rater z-scores, averaged per item.

For each rater r and axis k, over the items I_r that r scored::

    mu_r = mean(s_r,i),  sigma_r = std(s_r,i, ddof=1),  z_r,i = (s_r,i - mu_r) / sigma_r
    H_i  = mean of z_r,i over the raters R_i who scored item i (and were not dropped)

A rater with fewer than two ratings or zero variance on an axis has no sigma and is dropped
for that axis only; each drop is recorded with its reason. The z-scores must come from the
ratings of ONE split (dev or test): callers pass that split's ratings.

**Reader confidence calibration.** Radiologists rated confidence tone, not calibration. Their
CC is derived exactly as the service derives the judge's: per rater and item, from that
rater's CF and CT scores through ``faithjudge.scoring.metrics.confidence_calibration`` (normalised
(s - 1)/4, alpha/beta penalty, clipped at 1). Those per-rater CC values are then z-scored and
averaged like any rated axis, so tau_CC is judged against a consensus of reader CC, the same
way METHODS computes tau against the consensus for CF and CA.

Pure: pandas in, pandas out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from faithjudge_client.metric_catalogue import (
    CC_LABEL,
    agreement_scopes,
    calibration_pair,
    headline_scopes,
    metrics,
)

from faithjudge.agreement.ratings import RATINGS_COLUMNS, rating_axes
from faithjudge.scoring.metrics import (
    DEFAULT_CALIBRATION,
    CalibrationParams,
    confidence_calibration,
)

__all__ = [
    "CC_AXIS",
    "Consensus",
    "DroppedRater",
    "build_consensus",
    "consensus_scores",
    "reader_calibration",
    "standardize",
    "tau_scopes",
    "unrated_scopes",
    "validated_scopes",
]

CC_AXIS = "confidence_calibration"


def axis_labels() -> dict[str, str]:
    """Rating axis -> scope label, in the agreement order: the gated axes and CC first (the
    analysed ones), then the others (raw confidence tone), reported beside them."""
    by_label = {spec.label: spec.rating_key for spec in metrics() if spec.rating_key is not None}
    by_label[CC_LABEL] = CC_AXIS
    return {by_label[s]: s for s in agreement_scopes() if s in by_label}


def axes() -> tuple[str, ...]:
    """The rating axes, CC included, in the agreement order."""
    return tuple(axis_labels())


def validated_scopes() -> tuple[str, ...]:
    """The scope labels a judge is validated on (metrics with radiologist ratings, and CC)."""
    return tuple(axis_labels().values())


def tau_scopes() -> tuple[str, ...]:
    """The scopes the macro tau averages: the headline scopes with radiologist ratings."""
    rated = validated_scopes()
    return tuple(scope for scope in headline_scopes() if scope in rated)


def unrated_scopes() -> tuple[str, ...]:
    """Gated metrics without a ``rating_key``: in the coverage, macro coverage and gates of a
    judge, but with no radiologist rating to compute a tau against."""
    rated = validated_scopes()
    return tuple(scope for scope in headline_scopes() if scope not in rated)


# a standard deviation this small is a constant rater (CC values are floats)
_ZERO_SD = 1e-12


@dataclass(frozen=True, slots=True)
class DroppedRater:
    """A rater left out of one axis's consensus, and why."""

    rater: str
    axis: str
    reason: str
    n_ratings: int


@dataclass(frozen=True, slots=True)
class Consensus:
    """The standardised ratings of one split.

    ``z``: long frame ``item_id, rater, axis, score, z`` (only raters kept for the axis);
    ``scores``: wide frame, one row per item and one column per axis, holding H_i (NaN where
    no kept rater scored the item); ``raters``: same shape, how many z-scores H_i averages.
    """

    z: pd.DataFrame
    scores: pd.DataFrame
    raters: pd.DataFrame
    dropped: tuple[DroppedRater, ...]


def reader_calibration(
    ratings: pd.DataFrame, params: CalibrationParams = DEFAULT_CALIBRATION
) -> pd.DataFrame:
    """Per-rater CC rows (axis ``confidence_calibration``) from each rater's own CF and CT.

    Items where the rater gave only one of CF and CT get no CC.
    """
    wide = ratings.pivot_table(
        index=["item_id", "rater"], columns="axis", values="score", aggfunc="first"
    )
    fidelity, tone = (spec.rating_key for spec in calibration_pair())
    if not {fidelity, tone} <= set(wide.columns):
        return pd.DataFrame(columns=RATINGS_COLUMNS)
    both = wide[[fidelity, tone]].dropna()
    values = [
        confidence_calibration(int(ct), int(cf), params)
        for cf, ct in both.itertuples(index=False, name=None)
    ]
    out = both.index.to_frame(index=False)
    out["axis"] = CC_AXIS
    out["score"] = np.asarray(values, dtype=np.float64)
    return out[RATINGS_COLUMNS]


def standardize(ratings: pd.DataFrame) -> tuple[pd.DataFrame, tuple[DroppedRater, ...]]:
    """z-score every (rater, axis) with ddof=1; drop raters with < 2 ratings or zero variance.

    Returns the long frame ``item_id, rater, axis, score, z`` of the kept raters and the
    drops, ordered by axis then rater.
    """
    kept: list[pd.DataFrame] = []
    dropped: list[DroppedRater] = []
    order = {axis: i for i, axis in enumerate(axes())}
    groups = sorted(
        ratings.groupby(["axis", "rater"], sort=False),
        key=lambda g: (order.get(g[0][0], len(order)), g[0][0], g[0][1]),
    )
    for (axis, rater), group in groups:
        scores = group["score"].astype(np.float64)
        n = int(scores.size)
        if n < 2:
            reason = f"only {n} rating on this axis; a standard deviation needs at least 2"
            dropped.append(DroppedRater(str(rater), str(axis), reason, n))
            continue
        sd = float(scores.std(ddof=1))
        if not np.isfinite(sd) or sd <= _ZERO_SD:
            value = scores.iloc[0]
            shown = int(value) if float(value).is_integer() else round(float(value), 3)
            reason = f"zero variance: all {n} scores are {shown}"
            dropped.append(DroppedRater(str(rater), str(axis), reason, n))
            continue
        frame = group[["item_id", "rater", "axis"]].copy()
        frame["score"] = scores.to_numpy()
        frame["z"] = ((scores - scores.mean()) / sd).to_numpy()
        kept.append(frame)
    if not kept:
        empty = pd.DataFrame(columns=[*RATINGS_COLUMNS, "z"])
        return empty, tuple(dropped)
    return pd.concat(kept, ignore_index=True), tuple(dropped)


def consensus_scores(
    z: pd.DataFrame, *, exclude: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """H_i per item and axis (mean of the available z-scores), optionally without one rater.

    Returns ``(scores, counts)``: wide frames indexed by item_id with one column per axis.
    """
    frame = z if exclude is None else z[z["rater"] != exclude]
    if frame.empty:
        empty = pd.DataFrame(columns=list(axes()), dtype=np.float64)
        return empty, empty.copy()
    grouped = frame.groupby(["item_id", "axis"])["z"]
    scores = grouped.mean().unstack("axis")
    counts = grouped.count().unstack("axis").fillna(0).astype(np.int64)
    known = axes()
    columns = [a for a in known if a in scores.columns] + [
        a for a in scores.columns if a not in known
    ]
    return scores[columns], counts[columns]


def build_consensus(
    ratings: pd.DataFrame,
    *,
    params: CalibrationParams = DEFAULT_CALIBRATION,
    include_cc: bool = True,
) -> Consensus:
    """Standardise a split's ratings (CF, CA, CT and, by default, reader CC) into H_i per item.

    ``ratings`` is the long frame of ``load_ratings``/``load_reader_study``; axes other than
    the three rated ones are ignored.
    """
    rated = ratings[ratings["axis"].isin(rating_axes())][RATINGS_COLUMNS]
    parts = [rated]
    if include_cc:
        cc = reader_calibration(rated, params)
        if not cc.empty:
            parts.append(cc)
    combined = pd.concat(parts, ignore_index=True) if len(parts) > 1 else rated
    z, dropped = standardize(combined)
    scores, counts = consensus_scores(z)
    return Consensus(z=z, scores=scores, raters=counts, dropped=dropped)
