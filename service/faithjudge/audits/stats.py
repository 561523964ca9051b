"""Statistics of the grounding audits (METHODS §2.6, §3.4, §4.5, §5.4). Pure numpy/scipy.

Resampling of 0/1 outcomes is done on counts, which gives exactly the distribution of the
textbook procedure at a cost independent of the number of cases:

* a percentile bootstrap of a proportion k/n (n cases drawn with replacement) is k* ~ Bin(n, k/n);
* a paired bootstrap of per-case differences taking few distinct values is a multinomial draw
  over those values with their observed frequencies (as in ``faithjudge.stats.resample``);
* a permutation of subgroup labels over 0/1 outcomes only moves the ones between groups: the
  number of ones per group is multivariate hypergeometric.

Seeding goes through ``faithjudge.stats.bootstrap.rng_for`` (one stream per named statistic) and
intervals through ``percentile_interval``, shared with the other reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as _st

from faithjudge.stats.bootstrap import percentile_interval, rng_for

__all__ = [
    "PairedBootstrap",
    "Proportion",
    "auroc",
    "benjamini_hochberg",
    "brier",
    "ece",
    "hanley_mcneil_se",
    "mcnemar",
    "mean_bootstrap",
    "paired_bootstrap",
    "permutation_test",
    "proportion",
    "rng_for",
    "summarise_replicates",
    "wilson_interval",
]

FloatArray = npt.NDArray[np.float64]


def wilson_interval(k: int, n: int) -> tuple[float, float] | None:
    """95% Wilson score interval of k/n as fractions; None when n = 0."""
    if n <= 0:
        return None
    ci = _st.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


@dataclass(frozen=True, slots=True)
class Proportion:
    """k/n as a fraction with its analytical SE and a percentile bootstrap CI (None if n = 0)."""

    k: int
    n: int
    value: float | None
    se: float | None
    low: float | None
    high: float | None


def proportion(
    k: int, n: int, *, B: int, rng: np.random.Generator, se: str = "analytical"
) -> Proportion:
    """Point estimate, SE and the percentile bootstrap CI of k/n.

    SE is sqrt(p(1-p)/n) (``se="analytical"``) or the SD of the bootstrap replicates
    (``se="bootstrap"``). Resampling n cases with replacement from k ones and n-k zeros gives
    k* ~ Bin(n, k/n).
    """
    if n <= 0:
        return Proportion(k, n, None, None, None, None)
    p = k / n
    samples = rng.binomial(n, p, size=B) / n
    interval = percentile_interval(samples)
    low, high = interval if interval is not None else (None, None)
    if se == "bootstrap":
        spread = float(np.std(samples, ddof=1)) if B > 1 else None
    else:
        spread = math.sqrt(p * (1 - p) / n)
    return Proportion(k, n, p, spread, low, high)


@dataclass(frozen=True, slots=True)
class PairedBootstrap:
    """Mean paired difference over ``n`` shared cases with its bootstrap SD, CI and p-value."""

    n: int
    delta: float | None
    sd: float | None
    low: float | None
    high: float | None
    p: float | None
    p_gt0: float | None
    p_lt0: float | None


def paired_bootstrap(
    differences: npt.ArrayLike, *, B: int, rng: np.random.Generator
) -> PairedBootstrap:
    """Case bootstrap of mean(d) with the shift-and-reflect p-value (Lotfinia Supp. Alg. 1).

    p = max(1/B, share of |δ*_b − δ̂| ≥ |δ̂|). ``p_gt0``/``p_lt0`` are the shares of replicates
    above/below zero (Zafar's directional summaries).
    """
    d = np.asarray(differences, dtype=np.float64).reshape(-1)
    if d.size == 0:
        return PairedBootstrap(0, None, None, None, None, None, None, None)
    delta, samples = mean_bootstrap(d, B=B, rng=rng)
    return summarise_replicates(int(d.size), delta, samples)


def mean_bootstrap(
    values: npt.ArrayLike, *, B: int, rng: np.random.Generator
) -> tuple[float, FloatArray]:
    """(mean, B bootstrap means) of ``values`` resampled with replacement; NaN entries are
    drawn like the others but left out of each mean (a replicate of only NaN gives NaN).

    Exact and fast when the values take few distinct values: the resample is a multinomial
    draw over the distinct values with their observed frequencies.
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    n = int(v.size)
    if n == 0:
        return float("nan"), np.full(B, np.nan)
    coded = np.where(np.isnan(v), np.inf, v)
    distinct, counts = np.unique(coded, return_counts=True)
    defined = np.isfinite(distinct)
    num = np.where(defined, distinct, 0.0)
    den = defined.astype(np.float64)
    draws = rng.multinomial(n, counts / n, size=B).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        point = float(counts @ num / (counts @ den)) if (counts @ den) > 0 else float("nan")
        samples = (draws @ num) / (draws @ den)
    return point, samples


def summarise_replicates(n: int, delta: float, samples: FloatArray) -> PairedBootstrap:
    """Bootstrap summary of a paired difference δ̂ from its replicates (see
    ``paired_bootstrap``); replicates that are NaN (an undefined resample) are left out."""
    samples = samples[np.isfinite(samples)]
    B = max(1, samples.size)
    interval = percentile_interval(samples)
    low, high = interval if interval is not None else (None, None)
    # a tolerance so that replicates equal to δ̂ up to rounding count as "as extreme"
    shifted = np.abs(samples - delta) >= abs(delta) - 1e-12
    p = max(1.0 / B, float(np.mean(shifted)))
    return PairedBootstrap(
        n=n,
        delta=delta,
        sd=float(np.std(samples, ddof=1)) if B > 1 else None,
        low=low,
        high=high,
        p=p,
        p_gt0=float(np.mean(samples > 0)),
        p_lt0=float(np.mean(samples < 0)),
    )


def benjamini_hochberg(p_values: npt.ArrayLike) -> FloatArray:
    """BH-adjusted q-values, q_(k) = min_{r≥k} min(m·p_(r)/r, 1); NaN entries stay NaN."""
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = _st.false_discovery_control(p[ok], method="bh")
    return out


def mcnemar(b: int, c: int, *, exact_below: int = 25) -> tuple[str, float]:
    """Two-sided McNemar test of the discordant counts b and c: (method, p).

    Exact binomial when b + c < ``exact_below``, else χ² with continuity correction.
    """
    n = b + c
    if n == 0:
        return "exact", 1.0
    if n < exact_below:
        return "exact", float(min(1.0, 2 * _st.binom.cdf(min(b, c), n, 0.5)))
    statistic = (abs(b - c) - 1) ** 2 / n
    return "chi2_cc", float(_st.chi2.sf(statistic, 1))


def _f_statistic(ones: FloatArray, sizes: FloatArray) -> FloatArray:
    """One-way ANOVA F of 0/1 data from the ones per group (rows = permutations)."""
    total_n, groups = sizes.sum(), sizes.size
    grand = ones.sum(axis=-1, keepdims=True) / total_n
    means = ones / sizes
    between = ((means - grand) ** 2 * sizes).sum(axis=-1) / (groups - 1)
    within = (ones - ones**2 / sizes).sum(axis=-1) / (total_n - groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(within > 0, between / within, np.where(between > 0, np.inf, 0.0))
    return f


def permutation_test(
    values: npt.ArrayLike, groups: npt.ArrayLike, *, B: int, rng: np.random.Generator
) -> dict[str, object]:
    """Permutation test of 0/1 ``values`` across ``groups`` (Lotfinia subgroup tests).

    Strata with fewer than 2 cases are dropped. Two strata: |difference in means|; three or
    more: one-way ANOVA F. p = (c + 1)/(B + 1), c = permutations at least as extreme.
    Returns the statistic, p, the strata kept (name -> n, rate) and the test used; p is None
    when fewer than two strata remain.
    """
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    g = np.asarray(groups, dtype=object).reshape(-1)
    names, inverse = np.unique(g.astype(str), return_inverse=True)
    sizes = np.bincount(inverse, minlength=names.size).astype(np.float64)
    ones = np.bincount(inverse, weights=x, minlength=names.size)
    keep = sizes >= 2
    names, sizes, ones = names[keep], sizes[keep], ones[keep]
    strata = {
        str(n): {"n": int(s), "rate": float(o / s)}
        for n, s, o in zip(names, sizes, ones, strict=True)
    }
    if names.size < 2:
        return {"test": None, "statistic": None, "p": None, "strata": strata, "permutations": B}
    draws = rng.multivariate_hypergeometric(sizes.astype(np.int64), int(ones.sum()), size=B)
    draws = draws.astype(np.float64)
    if names.size == 2:
        test = "abs_diff"
        observed = abs(ones[0] / sizes[0] - ones[1] / sizes[1])
        perm = np.abs(draws[:, 0] / sizes[0] - draws[:, 1] / sizes[1])
    else:
        test = "anova_f"
        observed = float(_f_statistic(ones[None, :].astype(np.float64), sizes)[0])
        perm = _f_statistic(draws.astype(np.float64), sizes)
    extreme = int(np.count_nonzero(perm >= observed - 1e-12))
    return {
        "test": test,
        "statistic": float(observed),
        "p": (extreme + 1) / (B + 1),
        "strata": strata,
        "permutations": B,
    }


# ---------------------------------------------------------------- calibration and ranking


def _bins(conf: FloatArray, n_bins: int) -> npt.NDArray[np.int64]:
    return np.minimum((conf * n_bins).astype(np.int64), n_bins - 1)


def ece(conf: npt.ArrayLike, outcome: npt.ArrayLike, *, n_bins: int = 10) -> float | None:
    """Expected calibration error with ``n_bins`` equal-width bins on [0, 1] (1.0 in the last).

    ECE = Σ_b |B_b|/N · |mean(outcome in b) − mean(conf in b)|; None without data.
    """
    c = np.asarray(conf, dtype=np.float64)
    y = np.asarray(outcome, dtype=np.float64)
    if c.size == 0:
        return None
    b = _bins(c, n_bins)
    sum_c = np.bincount(b, weights=c, minlength=n_bins)
    sum_y = np.bincount(b, weights=y, minlength=n_bins)
    return float(np.abs(sum_y - sum_c).sum() / c.size)


def brier(prob: npt.ArrayLike, outcome: npt.ArrayLike) -> float | None:
    """Mean squared difference between the probabilities and the 0/1 outcomes."""
    p = np.asarray(prob, dtype=np.float64)
    if p.size == 0:
        return None
    return float(np.mean((p - np.asarray(outcome, dtype=np.float64)) ** 2))


def auroc(score: npt.ArrayLike, label: npt.ArrayLike) -> float | None:
    """Area under the empirical ROC (trapezoidal, ties count one half); None if a class is
    missing. Computed through average ranks (the Mann–Whitney form of the same area)."""
    s = np.asarray(score, dtype=np.float64)
    y = np.asarray(label, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = _st.rankdata(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def hanley_mcneil_se(area: float, n_pos: int, n_neg: int) -> float:
    """Hanley & McNeil (1982) standard error of an AUROC."""
    q1, q2 = area / (2 - area), 2 * area * area / (1 + area)
    var = (
        area * (1 - area) + (n_pos - 1) * (q1 - area * area) + (n_neg - 1) * (q2 - area * area)
    ) / (n_pos * n_neg)
    return float(math.sqrt(max(var, 0.0)))
