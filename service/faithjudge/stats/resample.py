"""Pattern-compressed percentile bootstrap for report-sized runs.

``faithjudge.stats.bootstrap.bootstrap_ratio_samples`` materialises a (resamples x items) matrix
of multiplicities, which is right for a few hundred validation items but needs gigabytes for
300,000 result lines. Report statistics are ratios of sums of per-item values that take few
distinct values (0/1 indicators, scores on a 5-point scale, CC from a 5 x 5 grid), so items are
first grouped into distinct value patterns. Resampling n items with replacement is then exactly
a multinomial draw of n over the patterns with their observed frequencies: the same bootstrap
distribution, at a cost of (resamples x patterns) instead of (resamples x items).

Generalises the agreement bootstrap (seeding via ``rng_for``, intervals via
``percentile_interval`` are reused unchanged); pure numpy, no I/O.
"""

from __future__ import annotations

import warnings

import numpy as np
import numpy.typing as npt

from faithjudge.stats.bootstrap import percentile_interval

__all__ = ["Interval", "bootstrap_means", "pattern_ids"]

FloatArray = npt.NDArray[np.float64]
Interval = tuple[float | None, float | None, float | None]
# stands in for NaN while finding distinct rows (values are normalised scores, never this)
_NAN_CODE = -1.0e300


def pattern_ids(values: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """Distinct rows of an (n x k) matrix with NaNs: (pattern id per row, patterns (P x k))."""
    matrix = np.atleast_2d(np.asarray(values, dtype=np.float64))
    if matrix.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, matrix.shape[1]))
    # round CC-like floats so that equal values computed in different orders share a pattern
    coded = np.where(np.isnan(matrix), _NAN_CODE, np.round(matrix, 9))
    patterns, inverse = np.unique(coded, axis=0, return_inverse=True)
    patterns = np.where(patterns == _NAN_CODE, np.nan, patterns)
    return inverse.reshape(-1).astype(np.int64), patterns


def bootstrap_means(
    ids: npt.NDArray[np.int64],
    patterns: FloatArray,
    *,
    B: int,
    rng: np.random.Generator,
    level: float = 0.95,
) -> list[Interval]:
    """Mean of each column over the rows ``ids`` (NaN = not evaluable, left out of that column
    only) with a paired percentile bootstrap CI over the rows: [(point, low, high), ...].

    Every column is computed on the same resample of rows, so they stay jointly consistent.
    A column without evaluable rows gives (None, None, None).

    Raises:
        ValueError: ``B`` < 1.
    """
    if B < 1:
        raise ValueError(f"B must be >= 1, got {B}")
    k = patterns.shape[1]
    n = int(ids.size)
    if n == 0:
        return [(None, None, None)] * k
    freq = np.bincount(ids, minlength=patterns.shape[0]).astype(np.float64)
    used = freq > 0
    freq, sub = freq[used], patterns[used]
    mask = (~np.isnan(sub)).astype(np.float64)
    num, den = np.nan_to_num(sub) * mask, mask
    points = (freq @ num) / np.where(freq @ den > 0, freq @ den, np.nan)
    counts = rng.multinomial(n, freq / n, size=B).astype(np.float64)
    top, bottom = counts @ num, counts @ den
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        samples = np.where(bottom > 0, top / bottom, np.nan)
    out: list[Interval] = []
    for j in range(k):
        if not np.isfinite(points[j]):
            out.append((None, None, None))
            continue
        interval = percentile_interval(samples[:, j], level)
        low, high = interval if interval is not None else (None, None)
        out.append((float(points[j]), low, high))
    return out
