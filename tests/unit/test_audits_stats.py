"""Audit statistics pinned against scipy and hand calculations; resampling is seed-stable and
the count-based shortcuts match the textbook resampling they replace."""

from __future__ import annotations

import numpy as np
import pytest
from faithjudge.audits.stats import (
    auroc,
    benjamini_hochberg,
    brier,
    ece,
    hanley_mcneil_se,
    mcnemar,
    paired_bootstrap,
    permutation_test,
    proportion,
    rng_for,
    wilson_interval,
)
from scipy import stats


@pytest.mark.parametrize(("k", "n"), [(0, 5), (3, 9), (125, 373), (30, 30), (1, 1)])
def test_wilson_matches_scipy(k: int, n: int) -> None:
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    low, high = wilson_interval(k, n)
    assert low == pytest.approx(ref.low, abs=1e-12)
    assert high == pytest.approx(ref.high, abs=1e-12)


def test_wilson_empty_cell() -> None:
    assert wilson_interval(0, 0) is None


def test_benjamini_hochberg_matches_scipy_and_hand_values() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.005, 0.5])
    np.testing.assert_allclose(benjamini_hochberg(p), stats.false_discovery_control(p))
    # by hand: sorted 0.005,0.01,0.03,0.04,0.5 -> 5p/r = .025,.025,.05,.05,.5
    np.testing.assert_allclose(benjamini_hochberg(p), [0.025, 0.05, 0.05, 0.025, 0.5])
    out = benjamini_hochberg([0.02, np.nan, 0.04])
    assert np.isnan(out[1])
    np.testing.assert_allclose(out[[0, 2]], [0.04, 0.04])


def test_mcnemar_exact_and_chi_square() -> None:
    method, p = mcnemar(3, 9)
    assert method == "exact"
    assert p == pytest.approx(stats.binomtest(3, 12, 0.5).pvalue)
    method, p = mcnemar(40, 20)
    assert method == "chi2_cc"
    assert p == pytest.approx(stats.chi2.sf((abs(40 - 20) - 1) ** 2 / 60, 1))
    assert p == pytest.approx(0.01417, abs=5e-5)  # 19² / 60 = 6.017 on 1 df
    assert mcnemar(0, 0) == ("exact", 1.0)


def test_ece_brier_by_hand() -> None:
    conf = np.array([0.05, 0.15, 0.15, 0.95, 1.0])
    label = np.array([0, 0, 1, 1, 1])
    # bins: [0,.1): {.05|0}; [.1,.2): {.15,.15|0,1}; [.9,1]: {.95,1.0|1,1}
    expected = (1 * 0.05 + 2 * abs(0.5 - 0.15) + 2 * abs(1 - 0.975)) / 5
    assert ece(conf, label) == pytest.approx(expected)
    assert brier(conf, label) == pytest.approx(np.mean((conf - label) ** 2))
    assert ece([], []) is None and brier([], []) is None


def test_auroc_matches_mann_whitney_and_trapezoid() -> None:
    rng = np.random.default_rng(3)
    label = rng.random(200) < 0.4
    score = np.round(rng.random(200) + 0.3 * label, 1)  # rounded: many ties
    u = stats.mannwhitneyu(score[label], score[~label]).statistic
    assert auroc(score, label) == pytest.approx(u / (label.sum() * (~label).sum()))
    # trapezoidal area under the empirical ROC
    thresholds = np.r_[np.inf, np.unique(score)[::-1]]
    tpr = [(score[label] >= t).mean() for t in thresholds]
    fpr = [(score[~label] >= t).mean() for t in thresholds]
    assert auroc(score, label) == pytest.approx(np.trapezoid(tpr, fpr))
    assert auroc([0.1, 0.2], [True, True]) is None
    assert 0 < hanley_mcneil_se(0.7, 50, 60) < 0.1


def test_proportion_se_reproduces_table1_and_bootstrap_is_seed_stable() -> None:
    p = proportion(125, 373, B=2000, rng=rng_for(0, "x"))
    assert 100 * p.value == pytest.approx(33.5, abs=0.05)
    assert 100 * p.se == pytest.approx(2.4, abs=0.05)
    again = proportion(125, 373, B=2000, rng=rng_for(0, "x"))
    assert (p.low, p.high) == (again.low, again.high)
    assert p.low < p.value < p.high
    assert proportion(0, 0, B=10, rng=rng_for(0, "x")).value is None


def test_binomial_bootstrap_equals_case_resampling_in_distribution() -> None:
    k, n, B = 30, 80, 20000
    binom = proportion(k, n, B=B, rng=rng_for(1, "a"))
    cases = np.r_[np.ones(k), np.zeros(n - k)]
    rng = np.random.default_rng(2)
    means = cases[rng.integers(0, n, size=(B, n))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    assert binom.low == pytest.approx(lo, abs=0.0126)
    assert binom.high == pytest.approx(hi, abs=0.0126)


def test_paired_bootstrap_shift_and_reflect() -> None:
    d = np.r_[np.ones(30), -np.ones(10), np.zeros(60)]
    r = paired_bootstrap(d, B=5000, rng=rng_for(0, "pair"))
    assert r.n == 100 and r.delta == pytest.approx(0.2)
    again = paired_bootstrap(d, B=5000, rng=rng_for(0, "pair"))
    assert r == again
    # analytic SD of the mean difference: sqrt(var(d)/n)
    assert r.sd == pytest.approx(np.std(d) / 10, rel=0.05)
    assert r.low < 0.2 < r.high
    assert r.p < 0.01 and r.p >= 1 / 5000
    null = paired_bootstrap(np.r_[np.ones(10), -np.ones(10)], B=2000, rng=rng_for(0, "n"))
    assert null.delta == 0 and null.p == 1.0
    assert paired_bootstrap([], B=10, rng=rng_for(0, "e")).delta is None


def test_permutation_test_two_groups_matches_scipy() -> None:
    rng = np.random.default_rng(5)
    x = (rng.random(120) < np.r_[np.full(60, 0.3), np.full(60, 0.55)]).astype(float)
    g = np.r_[["M"] * 60, ["F"] * 60]
    ours = permutation_test(x, g, B=4000, rng=rng_for(0, "perm"))
    ref = stats.permutation_test(
        (x[g == "M"], x[g == "F"]),
        lambda a, b: abs(a.mean() - b.mean()),
        permutation_type="independent",
        n_resamples=4000,
        alternative="greater",
        rng=np.random.default_rng(0),
    )
    assert ours["test"] == "abs_diff"
    assert ours["statistic"] == pytest.approx(abs(x[:60].mean() - x[60:].mean()))
    assert ours["p"] == pytest.approx(ref.pvalue, abs=0.03)


def test_permutation_test_anova_and_small_strata() -> None:
    rng = np.random.default_rng(6)
    x = (rng.random(90) < np.repeat([0.2, 0.4, 0.7], 30)).astype(float)
    g = np.repeat(["<50", "50-70", ">70"], 30)
    values, labels = np.append(x, 1.0), np.append(g, "unknown")
    ours = permutation_test(values, labels, B=2000, rng=rng_for(0, "f"))
    assert set(ours["strata"]) == {"<50", "50-70", ">70"}  # the single-case stratum is dropped
    assert ours["test"] == "anova_f"
    assert ours["statistic"] == pytest.approx(stats.f_oneway(x[:30], x[30:60], x[60:]).statistic)
    ref = stats.permutation_test(
        (x[:30], x[30:60], x[60:]),
        lambda a, b, c: stats.f_oneway(a, b, c).statistic,
        permutation_type="independent",
        n_resamples=2000,
        alternative="greater",
        rng=np.random.default_rng(0),
    )
    assert ours["p"] == pytest.approx(ref.pvalue, abs=0.02)
    lonely = permutation_test([1, 0, 1], ["M", "M", "F"], B=10, rng=rng_for(0, "l"))
    assert lonely["p"] is None
    constant = permutation_test([1, 1, 1, 1], ["M", "M", "F", "F"], B=50, rng=rng_for(0, "c"))
    assert constant["p"] == 1.0
