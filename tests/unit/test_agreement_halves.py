"""Split-half agreement: per-half tau-b equals validate_judge on that half; the mean and its CI."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from faithjudge.agreement import validate_judge
from faithjudge.agreement.halves import split_half_agreement
from faithjudge.agreement.ratings import JUDGE_COLUMNS
from faithjudge.errors import UserInputError
from faithjudge.stats.bootstrap import bootstrap_tau_b, bootstrap_tau_b_samples, rng_for

AXES = ("clinical_fidelity", "causal_attribution", "confidence_tone")


def _data(n: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two raters on n items and a judge that follows rater A on CA, is noise on CF and CT
    (and fails CF on item 0)."""
    rng = np.random.default_rng(seed)
    ratings: list[tuple[str, str, str, int]] = []
    judge: list[dict[str, Any]] = []
    for i in range(n):
        item = f"i{i:03d}"
        truth = {axis: int(rng.integers(1, 6)) for axis in AXES}
        for rater in ("A", "B"):
            for axis in AXES:
                noise = 0 if rater == "A" else int(rng.integers(-1, 2))
                ratings.append((item, rater, axis, min(5, max(1, truth[axis] + noise))))
        for axis in AXES:
            failed = axis == "clinical_fidelity" and i == 0
            score = truth[axis] if axis == "causal_attribution" else int(rng.integers(1, 6))
            judge.append(
                {
                    "item_id": item,
                    "line": i + 1,
                    "metric": axis,
                    "status": "invalid" if failed else "valid",
                    "score": None if failed else score,
                    "stage": "evidence" if failed else None,
                    "detail": None,
                    "modification_code": "TB-RAD",
                    "modification_kind": "bias",
                    "flip": False,
                    "confidence_calibration": 0.5 + 0.1 * (i % 5),
                }
            )
    frame = pd.DataFrame(judge, columns=JUDGE_COLUMNS)
    frame["score"] = frame["score"].astype("Int64")
    return pd.DataFrame(ratings, columns=["item_id", "rater", "axis", "score"]), frame


def test_each_half_is_validated_alone_and_the_mean_averages_them() -> None:
    ratings, judge = _data(40, seed=1)
    items = sorted(ratings["item_id"].unique())
    halves = {"A": items[::2], "B": items[1::2]}
    report = split_half_agreement(ratings, {"j": judge}, halves, B=500, seed=3)
    axes = report.judges[0].axes
    for half, members in halves.items():
        subset = ratings[ratings["item_id"].isin(members)]
        alone = validate_judge(subset, {"j": judge}, B=500, seed=3)
        for axis in ("CA", "CF", "CT", "CC"):
            assert axes[axis].halves[half] == alone.judges[0].axes[axis].tau
            assert axes[axis].used[half] == alone.judges[0].axes[axis].n_used
    ca = axes["CA"]
    assert ca.halves["A"].tau is not None and ca.halves["A"].tau > 0.8  # follows rater A
    assert ca.mean == pytest.approx((ca.halves["A"].tau + ca.halves["B"].tau) / 2)
    assert ca.low is not None and ca.high is not None and ca.low <= ca.mean <= ca.high
    # the failed CF grade of item 0 (half A) is left out of that half only
    assert axes["CF"].used == {"A": 19, "B": 20} and axes["CF"].rated == {"A": 20, "B": 20}
    # averaging two independent halves narrows the interval
    widths = [h.high - h.low for h in ca.halves.values() if None not in (h.low, h.high)]
    assert ca.high - ca.low < max(widths)
    assert report.halves == {k: sorted(v) for k, v in halves.items()}


def test_undefined_half_leaves_the_mean_undefined() -> None:
    ratings, judge = _data(20, seed=2)
    judge.loc[judge["metric"] == "confidence_tone", "score"] = 3  # constant: tau-b undefined
    items = sorted(ratings["item_id"].unique())
    report = split_half_agreement(ratings, {"j": judge}, {"A": items[:10], "B": items[10:]}, B=200)
    ct = report.judges[0].axes["CT"]
    assert ct.halves["A"].tau is None and ct.mean is None and ct.low is None


def test_bad_halves_are_named() -> None:
    ratings, judge = _data(10, seed=0)
    with pytest.raises(UserInputError, match="at least two halves"):
        split_half_agreement(ratings, {"j": judge}, {"A": ["i000"]}, B=10)
    with pytest.raises(UserInputError, match="half 'B' has no rated item"):
        split_half_agreement(ratings, {"j": judge}, {"A": ["i000", "i001"], "B": ["x"]}, B=10)


def test_bootstrap_samples_behind_the_interval() -> None:
    x, y = np.arange(12.0), np.array([1, 3, 2, 5, 4, 6, 8, 7, 9, 12, 10, 11.0])
    samples = bootstrap_tau_b_samples(x, y, B=300, rng=rng_for(0, "s"))
    ci = bootstrap_tau_b(x, y, B=300, rng=rng_for(0, "s"))
    assert samples.shape == (300,)
    assert ci.low == pytest.approx(np.percentile(samples[np.isfinite(samples)], 2.5))
    assert np.isnan(bootstrap_tau_b_samples([1.0], [2.0], B=5, rng=rng_for(0, "s"))).all()
    with pytest.raises(ValueError, match="B must be"):
        bootstrap_tau_b_samples(x, y, B=0, rng=rng_for(0, "s"))
