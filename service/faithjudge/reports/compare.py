"""Paired comparison of two runs on the same items (baseline vs candidate).

Items are matched on (model, item_id, modification); lines without an item_id cannot be
matched and are left out (counted). For each statistic the difference candidate − baseline is
the mean over the pairs where both runs could evaluate it, with a paired percentile bootstrap
CI over the shared items (both runs resampled together). A regression is a difference in the
worse direction whose whole CI lies beyond the tolerance (default 0 percentage points), so noise
alone does not fail a CI run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from faithjudge_client.metric_catalogue import headline_scopes, higher_is_better

from faithjudge.reports.aggregate import stats
from faithjudge.stats.bootstrap import rng_for
from faithjudge.stats.resample import bootstrap_means, pattern_ids

__all__ = ["compare_runs", "compared_stats"]


def compared_stats() -> dict[str, bool]:
    """Every compared statistic and whether higher is better."""
    return {
        "accuracy": True,
        "flip_rate": False,
        **{scope: higher_is_better(scope) for scope in headline_scopes()},
    }


_KEY = ["model", "item_id", "modification"]


def _keyed(items: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    named = items[items["item_id"].notna()]
    unique = named.drop_duplicates(subset=_KEY, keep="last")
    return unique.set_index(_KEY), len(items) - len(unique)


def compare_runs(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    B: int = 1000,
    seed: int = 0,
    tolerance: dict[str, float] | None = None,
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Paired differences per statistic (in % points) and the matching counts.

    ``tolerance`` maps a statistic to the worsening (in % points) that is still accepted.
    Returns a frame with columns stat, n_pairs, baseline, candidate, diff, low, high,
    regression, and counts {shared, baseline_only, candidate_only, unmatched}.
    """
    tolerance = tolerance or {}
    base, base_lost = _keyed(baseline)
    cand, cand_lost = _keyed(candidate)
    shared = base.index.intersection(cand.index)
    counts = {
        "shared": len(shared),
        "baseline_only": len(base.index.difference(cand.index)),
        "candidate_only": len(cand.index.difference(base.index)),
        "unmatched": int(base_lost + cand_lost),
    }
    directions = compared_stats()
    compared = list(directions)
    columns = [stats()[stat] for stat in compared]
    b = base.loc[shared, columns].to_numpy(dtype=np.float64)
    c = cand.loc[shared, columns].to_numpy(dtype=np.float64)
    both = ~(np.isnan(b) | np.isnan(c))
    # a pair counts for a statistic only where both runs could evaluate it
    b, c = np.where(both, b, np.nan), np.where(both, c, np.nan)
    ids, patterns = pattern_ids(np.hstack([b, c, c - b]))
    estimates = bootstrap_means(ids, patterns, B=B, rng=rng_for(seed, "compare"))
    k = len(columns)
    rows: list[dict[str, object]] = []
    for j, stat in enumerate(compared):
        base_mean, cand_mean, diff = (estimates[j][0], estimates[k + j][0], estimates[2 * k + j])
        point, low, high = (None if v is None else 100.0 * v for v in diff)
        worse = low is not None and high is not None
        allowed = float(tolerance.get(stat, 0.0))
        if worse:
            worse = bool(
                high < -allowed if directions[stat] else low > allowed  # type: ignore[operator]
            )
        rows.append(
            {
                "stat": stat,
                "n_pairs": int(both[:, j].sum()),
                "baseline": None if base_mean is None else 100.0 * base_mean,
                "candidate": None if cand_mean is None else 100.0 * cand_mean,
                "diff": point,
                "low": low,
                "high": high,
                "tolerance": allowed,
                "regression": worse,
            }
        )
    return pd.DataFrame(rows), counts
