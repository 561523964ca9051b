"""Fit the confidence-calibration scale kappa on a dev split (METHODS §1.7).

The service's CC of an item, from the judge's CF and CT (normalised (s - 1)/4), is

    CC(kappa) = 1 - min(1, kappa * d),   d = rho * max(0, CT - CF) + max(0, CF - CT)

i.e. alpha = rho * kappa (over-confidence) and beta = kappa (under-confidence), with the
trade-off rho fixed a priori (1.5). kappa minimises the squared error between CC(kappa) and the
readers' CC over the items where both exist, and its CI comes from a percentile bootstrap over
items (B = 1,000 in the paper).

**The readers' target.** Reader CC is the mean over raters of each rater's CC from their own CF
and CT. It must NOT move with kappa: if it did, both sides would shrink to 1 together and the
loss would vanish at kappa = 0. The target is therefore computed with fixed ``reader_params``
(by default the service's frozen alpha = 1.092, beta = 0.728); pass other values to test the
sensitivity of the fit to that anchor.

**The optimisation.** The loss is piecewise quadratic in kappa (a piece ends where some
kappa * d_i reaches the clip at 1). A grid over [0, 5] finds the right piece for every resample
at once (one matrix product), then the exact least-squares minimum inside that piece replaces
the grid value. Pure: pandas and numpy in, a pydantic model out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from faithjudge_client.metric_catalogue import calibration_pair
from pydantic import BaseModel, ConfigDict

from faithjudge.agreement.consensus import reader_calibration
from faithjudge.agreement.ratings import rating_axes
from faithjudge.scoring.metrics import DEFAULT_CALIBRATION, CalibrationParams
from faithjudge.stats.bootstrap import (
    multiplicities,
    percentile_interval,
    resample_indices,
    rng_for,
)

__all__ = ["CcScaleFit", "fit_cc_scale", "fit_kappa"]

KAPPA_BOUNDS = (0.0, 5.0)
_GRID = np.linspace(*KAPPA_BOUNDS, 2001)


class CcScaleFit(BaseModel):
    """The fitted scale with its bootstrap CI and the diagnostics METHODS reports."""

    model_config = ConfigDict(frozen=True)

    rho: float
    kappa: float | None
    alpha: float | None
    beta: float | None
    kappa_ci: tuple[float, float] | None
    alpha_ci: tuple[float, float] | None
    beta_ci: tuple[float, float] | None
    mse: float | None
    n_items: int
    zero_penalty_share: float | None
    """Share of items whose judge CF and CT agree (P_i = 0 for every kappa)."""
    clip_binds: bool | None
    """Whether kappa * d_i > 1 for some item (the clip at 1 is active)."""
    bootstrap: int
    seed: int
    reader_alpha: float
    reader_beta: float
    note: str | None = None


def _losses(d: np.ndarray, t: np.ndarray, counts: np.ndarray) -> np.ndarray:
    pred = 1.0 - np.minimum(1.0, _GRID[:, None] * d[None, :])
    losses: np.ndarray = counts @ ((pred - t[None, :]) ** 2).T
    return losses


def fit_kappa(d: np.ndarray, t: np.ndarray, counts: np.ndarray | None = None) -> np.ndarray:
    """Least-squares kappa for each row of ``counts`` (item multiplicities; default: one row
    of ones). ``d`` are the items' penalty gaps, ``t`` the reader CC targets. NaN where kappa
    is not identifiable (every weighted gap is 0)."""
    d = np.asarray(d, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    c = np.ones((1, d.size)) if counts is None else np.atleast_2d(counts).astype(np.float64)
    grid_best = _GRID[np.argmin(_losses(d, t, c), axis=1)]

    # exact minimum inside the piece that holds the grid optimum
    with np.errstate(divide="ignore"):
        inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), np.inf)
    clipped = grid_best[:, None] * d[None, :] >= 1.0
    lo = np.where(clipped, inv[None, :], KAPPA_BOUNDS[0]).max(axis=1)
    hi = np.where(~clipped & (d[None, :] > 0), inv[None, :], KAPPA_BOUNDS[1]).min(axis=1)
    free = (~clipped).astype(np.float64) * c
    top = free @ (d * (1.0 - t))
    bottom = free @ (d * d)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), grid_best)
    refined = np.clip(np.clip(exact, lo, hi), *KAPPA_BOUNDS)
    identifiable = (c * (d[None, :] > 0)).sum(axis=1) > 0
    return np.where(identifiable, refined, np.nan)


def _gaps(judge_results: pd.DataFrame, rho: float) -> pd.Series:
    fidelity, tone = (spec.name for spec in calibration_pair())
    valid = judge_results[
        judge_results["metric"].isin([fidelity, tone]) & (judge_results["status"] == "valid")
    ]
    wide = valid.pivot_table(index="item_id", columns="metric", values="score", aggfunc="first")
    if not {fidelity, tone} <= set(wide.columns):
        return pd.Series(dtype=np.float64)
    wide = wide.dropna().astype(np.float64)
    cf = (wide[fidelity] - 1.0) / 4.0
    ct = (wide[tone] - 1.0) / 4.0
    return rho * (ct - cf).clip(lower=0) + (cf - ct).clip(lower=0)


def fit_cc_scale(
    ratings: pd.DataFrame,
    judge_results: pd.DataFrame,
    *,
    rho: float = 1.5,
    B: int = 1_000,
    seed: int = 0,
    reader_params: CalibrationParams = DEFAULT_CALIBRATION,
    level: float = 0.95,
) -> CcScaleFit:
    """Fit kappa (alpha = rho * kappa, beta = kappa) of the service's CC to the readers' CC.

    ``ratings`` is the long ratings frame of the split, ``judge_results`` the frame of
    ``load_judge_results``. Items count when the judge's CF and CT are valid and at least one
    rater gave both CF and CT.

    Raises:
        ValueError: ``rho`` is negative or ``B`` < 1.
    """
    if rho < 0:
        raise ValueError(f"rho must be >= 0, got {rho}")
    if B < 1:
        raise ValueError(f"B must be >= 1, got {B}")
    rated = ratings[ratings["axis"].isin(rating_axes())]
    reader = reader_calibration(rated, reader_params)
    target = reader.groupby("item_id")["score"].mean()
    gaps = _gaps(judge_results, rho)
    items = sorted(set(target.index) & set(gaps.index))
    common: dict[str, Any] = {
        "rho": rho,
        "n_items": len(items),
        "bootstrap": B,
        "seed": seed,
        "reader_alpha": reader_params.alpha,
        "reader_beta": reader_params.beta,
    }
    empty: dict[str, Any] = {
        "kappa": None,
        "alpha": None,
        "beta": None,
        "kappa_ci": None,
        "alpha_ci": None,
        "beta_ci": None,
        "mse": None,
    }
    if not items:
        note: str | None = "no item has both a valid judge CF/CT and a reader CF/CT"
        return CcScaleFit(**common, **empty, zero_penalty_share=None, clip_binds=None, note=note)
    d = gaps.loc[items].to_numpy(dtype=np.float64)
    t = target.loc[items].to_numpy(dtype=np.float64)
    zero_share = float(np.mean(d == 0))
    kappa = float(fit_kappa(d, t)[0])
    if not np.isfinite(kappa):
        note = "kappa is not identifiable: the judge's CF and CT agree on every item"
        return CcScaleFit(
            **common, **empty, zero_penalty_share=zero_share, clip_binds=None, note=note
        )
    pred = 1.0 - np.minimum(1.0, kappa * d)
    samples = np.empty(B)
    rng = rng_for(seed, "cc-scale")
    for start in range(0, B, 1_000):
        size = min(1_000, B - start)
        counts = multiplicities(resample_indices(len(items), size, rng))
        samples[start : start + size] = fit_kappa(d, t, counts)
    ci = percentile_interval(samples, level)
    note = None
    if kappa in KAPPA_BOUNDS:
        note = f"kappa sits on the search bound {kappa:g}: widen the bounds or check the data"
    return CcScaleFit(
        **common,
        kappa=kappa,
        alpha=rho * kappa,
        beta=kappa,
        kappa_ci=ci,
        alpha_ci=(rho * ci[0], rho * ci[1]) if ci else None,
        beta_ci=ci,
        mse=float(np.mean((pred - t) ** 2)),
        zero_penalty_share=zero_share,
        clip_binds=bool(np.any(kappa * d > 1.0)),
        note=note,
    )
