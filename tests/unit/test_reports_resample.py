"""The pattern-compressed bootstrap against the item bootstrap, and the scale benchmark's code."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from faithjudge.stats.bootstrap import bootstrap_ratio_samples, percentile_interval, rng_for
from faithjudge.stats.resample import bootstrap_means, pattern_ids

from benchmarks.report_scale import generate, run_report


def test_pattern_bootstrap_matches_the_item_bootstrap() -> None:
    rng = np.random.default_rng(7)
    scores = rng.integers(1, 6, size=400).astype(float)
    values = (scores - 1) / 4
    values[rng.random(400) < 0.1] = np.nan
    ids, patterns = pattern_ids(values[:, None])
    assert patterns.shape[0] == 6  # five scores and NaN
    ((point, low, high),) = bootstrap_means(ids, patterns, B=4000, rng=rng_for(0, "a"))
    mask = ~np.isnan(values)
    assert point == pytest.approx(float(np.nanmean(values)))
    samples = bootstrap_ratio_samples(
        np.nan_to_num(values)[None, :], mask[None, :].astype(float), B=4000, rng=rng_for(0, "b")
    )[:, 0]
    ref_low, ref_high = percentile_interval(samples)
    # same sampling distribution: the intervals agree up to Monte Carlo error
    assert low == pytest.approx(ref_low, abs=0.01)
    assert high == pytest.approx(ref_high, abs=0.01)


def test_empty_and_all_missing_columns() -> None:
    ids, patterns = pattern_ids(np.array([[np.nan], [np.nan]]))
    assert bootstrap_means(ids, patterns, B=10, rng=rng_for(0, "x")) == [(None, None, None)]
    ids, patterns = pattern_ids(np.zeros((0, 2)))
    assert bootstrap_means(ids, patterns, B=10, rng=rng_for(0, "x")) == [(None, None, None)] * 2
    with pytest.raises(ValueError, match="B must be"):
        bootstrap_means(ids, patterns, B=0, rng=rng_for(0, "x"))


def test_scale_benchmark_runs_small(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    generate(results, 600)
    times = run_report(results, tmp_path, bootstrap=50)
    assert times["rows"] == 600
    data = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert data["summary"]["lines"] == 600 and len(data["summary"]["models"]) == 6
    assert (tmp_path / "report.html").stat().st_size > 10_000
