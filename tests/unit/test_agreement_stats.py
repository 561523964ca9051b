"""Statistics of judge validation: tau-b, bootstraps, consensus, gates, screening, CC fit, split."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from faithjudge.agreement.calibration import fit_cc_scale, fit_kappa
from faithjudge.agreement.consensus import (
    build_consensus,
    reader_calibration,
    standardize,
    validated_scopes,
)
from faithjudge.agreement.ratings import JUDGE_COLUMNS, rating_axes
from faithjudge.agreement.render import render_markdown
from faithjudge.agreement.report import JudgeReport
from faithjudge.agreement.screening import screen
from faithjudge.agreement.split import derive_flip, stratified_split
from faithjudge.agreement.validate import validate_judge
from faithjudge.errors import UserInputError
from faithjudge.stats.bootstrap import (
    bootstrap_ratio_samples,
    bootstrap_tau_b,
    kendall_tau_b,
    multiplicities,
    percentile_interval,
    resample_indices,
    rng_for,
    significance_code,
    tau_b_from_counts,
)
from faithjudge.stats.judge_coverage import (
    GateThresholds,
    axis_outcomes,
    coverage_diagnostics,
    evaluate_gates,
    exact_upper,
    placebo_fpr,
    trials_needed,
)
from faithjudge_client.metric_catalogue import (
    MetricSpec,
    headline_scopes,
    metric_names,
    register_metric,
    sham_metric,
    unregister_metric,
)
from scipy.stats import kendalltau

# ----------------------------------------------------------------------------- tau-b


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [
        # one discordant pair of 10, no ties: (9 - 1) / 10
        ([1, 2, 3, 4, 5], [1, 2, 3, 5, 4], 0.8),
        # C = 4, D = 0, one pair tied in x, one in y: 4 / sqrt(5 * 5)
        ([1, 1, 2, 3], [1, 2, 2, 3], 0.8),
        # C = 1, D = 3, one tie on each side: -2 / sqrt(5 * 5)
        ([1, 2, 2, 3], [3, 1, 2, 2], -0.4),
        # C = 4, D = 0; two of the 6 pairs tied in x, none in y: 4 / sqrt(4 * 6)
        ([1, 1, 2, 2], [1, 2, 3, 4], 4 / math.sqrt(4 * 6)),
    ],
)
def test_tau_b_matches_hand_computed_values_and_scipy(
    x: list[int], y: list[int], expected: float
) -> None:
    result = kendall_tau_b(x, y)
    assert result.tau == pytest.approx(expected)
    assert result.n == len(x)
    scipy_result = kendalltau(x, y, variant="b")
    assert result.tau == pytest.approx(scipy_result.statistic)
    assert result.p == pytest.approx(scipy_result.pvalue)


def test_tau_b_p_value_is_two_sided() -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(1, 6, 40)
    y = x + rng.integers(-1, 2, 40)
    up, down = kendall_tau_b(x, y), kendall_tau_b(x, -y)
    assert up.tau == pytest.approx(-down.tau)  # type: ignore[operator]
    assert up.p == pytest.approx(down.p)
    assert up.p is not None and up.p < 0.001


@pytest.mark.parametrize(("x", "y"), [([1], [2]), ([], []), ([3, 3, 3], [1, 2, 3])])
def test_tau_b_is_undefined_without_two_distinct_values(x: list[int], y: list[int]) -> None:
    result = kendall_tau_b(x, y)
    assert result.tau is None and result.p is None


def test_tau_b_rejects_mismatched_or_missing_values() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        kendall_tau_b([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="finite"):
        kendall_tau_b([1, 2, float("nan")], [1, 2, 3])


@pytest.mark.parametrize(
    ("p", "code"),
    [(0.0005, "***"), (0.001, "**"), (0.005, "**"), (0.01, "*"), (0.049, "*"), (0.05, "ns")],
)
def test_significance_codes(p: float, code: str) -> None:
    assert significance_code(p) == code
    assert significance_code(None) == "–"


# ----------------------------------------------------------------------------- bootstrap


def test_multiplicities_count_each_item_per_resample() -> None:
    counts = multiplicities(np.array([[0, 0, 2], [1, 2, 2]]))
    assert counts.tolist() == [[2, 0, 1], [0, 1, 2]]


def test_vectorised_tau_b_equals_scipy_on_explicit_resamples() -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(1, 6, 30).astype(float)  # many ties, like 1-5 judge scores
    y = rng.normal(size=30) + 0.3 * x
    idx = resample_indices(30, 25, rng)
    fast = tau_b_from_counts(x, y, multiplicities(idx))
    for row, value in zip(idx, fast, strict=True):
        assert value == pytest.approx(kendalltau(x[row], y[row], variant="b").statistic)
    # a resample of one item repeated is constant: tau-b undefined
    assert np.isnan(tau_b_from_counts(x, y, multiplicities(np.zeros((1, 30), dtype=int))))[0]


def test_bootstrap_is_stable_for_a_seed_and_close_across_seeds() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(1, 6, 66)
    y = x + rng.normal(scale=1.5, size=66)
    a = bootstrap_tau_b(x, y, B=4000, rng=rng_for(0, "tau"))
    b = bootstrap_tau_b(x, y, B=4000, rng=rng_for(0, "tau"))
    c = bootstrap_tau_b(x, y, B=4000, rng=rng_for(1, "tau"))
    assert (a.low, a.high) == (b.low, b.high)
    assert (a.low, a.high) != (c.low, c.high)
    assert a.low == pytest.approx(c.low, abs=0.03)
    assert a.high == pytest.approx(c.high, abs=0.03)
    tau = kendall_tau_b(x, y).tau
    assert a.low is not None and a.high is not None and a.low < tau < a.high  # type: ignore[operator]
    assert a.resamples == 4000 and a.degenerate == 0


def test_bootstrap_ratio_samples_are_paired_and_bounded() -> None:
    num = np.array([[0, 0, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]], dtype=float)
    den = np.ones_like(num)
    samples = bootstrap_ratio_samples(num, den, B=500, rng=rng_for(0, "r"))
    assert samples.shape == (500, 3)
    assert np.all(samples[:, 0] == 0) and np.all(samples[:, 2] == 1)
    assert percentile_interval(samples[:, 1]) is not None
    zero_den = bootstrap_ratio_samples(np.zeros((1, 3)), np.zeros((1, 3)), B=10, rng=rng_for(0, ""))
    assert np.isnan(zero_den).all()


# ----------------------------------------------------------------------------- consensus


def _ratings(rows: list[tuple[str, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["item_id", "rater", "axis", "score"])


def test_zscores_use_ddof_1_and_consensus_averages_the_available_raters() -> None:
    cf = "clinical_fidelity"
    ratings = _ratings(
        [
            ("i1", "A", cf, 1),
            ("i2", "A", cf, 3),
            ("i3", "A", cf, 5),  # mean 3, sd 2 -> z -1, 0, 1
            ("i1", "B", cf, 2),
            ("i2", "B", cf, 4),  # mean 3, sd sqrt(2) -> z -0.707, 0.707
            ("i1", "C", cf, 3),
            ("i2", "C", cf, 3),
            ("i3", "C", cf, 3),  # zero variance: dropped
            ("i3", "D", cf, 4),  # one rating: dropped
        ]
    )
    consensus = build_consensus(ratings, include_cc=False)
    h = consensus.scores[cf]
    r = 1 / math.sqrt(2)
    assert h["i1"] == pytest.approx((-1 - r) / 2)
    assert h["i2"] == pytest.approx((0 + r) / 2)
    assert h["i3"] == pytest.approx(1.0)  # only A remains on i3
    assert consensus.raters[cf].to_dict() == {"i1": 2, "i2": 2, "i3": 1}
    reasons = {d.rater: d.reason for d in consensus.dropped}
    assert set(reasons) == {"C", "D"}
    assert "zero variance" in reasons["C"] and "3" in reasons["C"]
    assert "only 1 rating" in reasons["D"]
    assert all(d.axis == cf for d in consensus.dropped)


def test_a_rater_is_dropped_only_for_the_axis_where_it_is_constant() -> None:
    ratings = _ratings(
        [
            ("i1", "A", "clinical_fidelity", 2),
            ("i2", "A", "clinical_fidelity", 4),
            ("i1", "A", "causal_attribution", 1),
            ("i2", "A", "causal_attribution", 1),
        ]
    )
    z, dropped = standardize(ratings)
    assert set(z["axis"]) == {"clinical_fidelity"}
    assert [(d.rater, d.axis) for d in dropped] == [("A", "causal_attribution")]


def test_reader_cc_uses_the_service_formula_per_rater() -> None:
    ratings = _ratings(
        [
            ("i1", "A", "clinical_fidelity", 3),
            ("i1", "A", "confidence_tone", 5),  # CT over CF by 0.5 -> 1 - 1.092 * 0.5
            ("i2", "A", "clinical_fidelity", 4),
            ("i2", "A", "confidence_tone", 2),  # under by 0.5 -> 1 - 0.728 * 0.5
            ("i3", "A", "clinical_fidelity", 4),  # no CT: no CC
        ]
    )
    cc = reader_calibration(ratings).set_index("item_id")["score"]
    assert cc.to_dict() == pytest.approx({"i1": 0.454, "i2": 0.636})


# ----------------------------------------------------------------------------- gates


def judge_frame(
    n: int,
    *,
    stages: dict[str, dict[int, str]] | None = None,
    sham_ca: list[int] | None = None,
) -> pd.DataFrame:
    """n items, every metric of the catalogue valid with score 3 unless ``stages[metric][i]``
    names a stage; ``sham_ca`` appends SHAM items with those CA (sham metric) scores."""
    stages = stages or {}
    rows: list[dict[str, Any]] = []
    sham = sham_ca or []
    for i in range(n + len(sham)):
        is_sham = i >= n
        for metric in metric_names():
            stage = stages.get(metric, {}).get(i)
            score = sham[i - n] if is_sham and metric == sham_metric().name else 3
            status = "valid" if stage is None else "abstained" if stage == "abstain" else "invalid"
            rows.append(
                {
                    "item_id": f"i{i:03d}",
                    "line": i + 1,
                    "metric": metric,
                    "status": status,
                    "score": score if stage is None else None,
                    "stage": stage,
                    "detail": None,
                    "modification_code": "SHAM" if is_sham else "TB-RAD",
                    "modification_kind": "placebo" if is_sham else "bias",
                    "flip": False,
                    "confidence_calibration": 1.0,
                }
            )
    frame = pd.DataFrame(rows, columns=JUDGE_COLUMNS)
    frame["score"] = frame["score"].astype("Int64")
    return frame


def _gates(frame: pd.DataFrame) -> dict[tuple[str, str], Any]:
    items = sorted(set(frame["item_id"]))
    outcomes = axis_outcomes(frame, items)
    coverage = coverage_diagnostics(outcomes, B=2000, seed=0, label="t")
    fpr = placebo_fpr(frame, items, B=2000, seed=0, label="t")
    return {(g.scope, g.gate): g for g in evaluate_gates(coverage, fpr, GateThresholds())}


def test_clean_judge_passes_every_gate_and_fpr_is_not_evaluated_without_sham() -> None:
    gates = _gates(judge_frame(400))
    assert all(g.passed for k, g in gates.items() if k[1] != "fpr_sham")
    # parse has a zero threshold: judged on the count, with the exact bound still reported
    parse = gates[("CA", "parse")]
    assert parse.point == 0 and parse.events == 0 and parse.trials == 400
    assert parse.upper == pytest.approx(1 - 0.05 ** (1 / 400))
    fpr = gates[("CA", "fpr_sham")]
    assert fpr.passed is None and fpr.note == "no sham items: FPR not estimable"


@pytest.mark.parametrize(
    ("metric", "stage", "count", "failing"),
    [
        ("causal_attribution", "parse", 1, {"parse"}),  # one is too many
        ("causal_attribution", "schema", 15, {"schema", "invalid"}),
        ("causal_attribution", "evidence", 15, {"evidence", "invalid"}),
        ("causal_attribution", "abstain", 15, {"abstain"}),
        # 5 evidence failures in 1000: the point (0.5%) is within 1%, the exact bound (1.05%) not
        ("causal_attribution", "evidence", 5, {"evidence"}),
        # 3 in 1000: the exact bound is 0.77%, within 1%
        ("causal_attribution", "evidence", 3, set()),
    ],
)
def test_each_gate_can_fail_on_its_upper_bound(
    metric: str, stage: str, count: int, failing: set[str]
) -> None:
    n = 1000
    gates = _gates(judge_frame(n, stages={metric: dict.fromkeys(range(count), stage)}))
    failed = {gate for (scope, gate), g in gates.items() if scope == "CA" and g.passed is False}
    assert failed == failing
    assert gates[("macro", stage)].point == pytest.approx(count / n / len(headline_scopes()))


def test_cc_inherits_failures_of_cf_and_ct_and_kb_is_not_a_judge_failure() -> None:
    frame = judge_frame(
        100, stages={"confidence_tone": {0: "schema"}, "clinical_fidelity": {1: "kb", 2: "kb"}}
    )
    items = sorted(set(frame["item_id"]))
    coverage = coverage_diagnostics(axis_outcomes(frame, items), B=200, seed=0, label="t")
    assert coverage["CC"].counts["schema"] == 1 and coverage["CC"].counts["kb"] == 2
    assert coverage["CF"].n_judged == 98 and coverage["CF"].n_not_judged == 2
    # items that never reached the judge count against coverage, and are shown on their own
    assert coverage["CF"].rates["cov"].point == pytest.approx(0.98)
    assert coverage["CF"].rates["not_judged"].point == pytest.approx(0.02)
    assert coverage["CF"].rates["invalid"].point == 0
    assert coverage["CC"].rates["schema"].point == pytest.approx(1 / 98)


@pytest.mark.parametrize(
    ("n", "passes"), [(5, False), (100, False), (148, False), (149, True), (400, True)]
)
def test_a_rate_gate_needs_enough_items_to_bound_zero_failures(n: int, passes: bool) -> None:
    gate = _gates(judge_frame(n))[("CA", "invalid")]  # 2% threshold, no failure at all
    assert gate.point == 0 and gate.passed is passes
    assert gate.upper == pytest.approx(1 - 0.05 ** (1 / n))
    if n == 5:
        assert 0.45 < gate.upper < 0.46
    if not passes:
        assert gate.note is not None and "at least 149 items" in gate.note


def test_trials_needed_is_the_first_count_that_passes() -> None:
    assert trials_needed(0, 0.02, 0.95) == 149
    assert exact_upper(0, 149, 0.95) <= 0.02 < exact_upper(0, 148, 0.95)
    needed = trials_needed(5, 0.01, 0.95)
    assert needed is not None
    assert exact_upper(5, needed, 0.95) <= 0.01 < exact_upper(5, needed - 1, 0.95)
    assert trials_needed(0, 0.0, 0.95) is None  # a zero threshold is met by the count alone
    assert exact_upper(3, 3, 0.95) == 1.0 and exact_upper(0, 0, 0.95) == 1.0


def test_placebo_fpr_counts_ca_above_3_on_sham_items() -> None:
    gates = _gates(judge_frame(20, sham_ca=[1] * 18 + [4, 5]))
    fpr = gates[("CA", "fpr_sham")]
    assert fpr.point == pytest.approx(0.1) and fpr.passed is False
    small = _gates(judge_frame(20, sham_ca=[1, 2, 3] * 6))[("CA", "fpr_sham")]
    assert small.point == 0 and small.passed is False  # 18 sham items cannot bound 5%
    clean = _gates(judge_frame(20, sham_ca=[1, 2, 3] * 20))[("CA", "fpr_sham")]
    assert clean.passed is True and clean.upper == pytest.approx(1 - 0.05 ** (1 / 60))


# ----------------------------------------------------------------------------- screening


def _judge(name: str, macro: float | None, *, eligible: bool = True, **kw: Any) -> JudgeReport:
    frame = judge_frame(
        20,
        stages={"causal_attribution": dict.fromkeys(range(kw.get("abstain", 0)), "abstain")},
        sham_ca=kw.get("sham"),
    )
    items = sorted(set(frame["item_id"]))
    coverage = coverage_diagnostics(axis_outcomes(frame, items), B=100, seed=0, label=name)
    fpr = placebo_fpr(frame, items, B=100, seed=0, label=name)
    return JudgeReport(
        name=name,
        source=None,
        n_items=20,
        extra_items_ignored=0,
        axes={},
        macro_tau=macro,
        macro_tau_partial=None,
        coverage=coverage,
        fpr_sham=fpr,
        gates=[],
        eligible=eligible,
        failed_gates=[] if eligible else ["CA parse"],
    )


def test_screening_picks_the_best_macro_tau_beyond_delta() -> None:
    decision = screen([_judge("b", 0.45), _judge("a", 0.471)], delta=0.02)
    assert decision.selected == "a" and decision.tie_break is None
    assert "0.471" in decision.reason and "0.021" in decision.reason


def test_screening_tie_breaks_on_lower_sham_fpr_then_on_coverage() -> None:
    fpr_high = _judge("top", 0.50, sham=[1] * 9 + [5])
    fpr_low = _judge("close", 0.485, sham=[1] * 10)
    decision = screen([fpr_high, fpr_low], delta=0.02)
    assert decision.selected == "close" and decision.tie_break == "(i) lower FPR_sham on CA"

    # no sham items: tie-breaker (i) is skipped, higher coverage wins
    decision = screen([_judge("top", 0.50, abstain=2), _judge("close", 0.48)], delta=0.02)
    assert decision.selected == "close" and decision.tie_break == "(ii) higher coverage"

    # within delta but nothing separates them: the higher macro tau stays
    decision = screen([_judge("top", 0.50), _judge("close", 0.49)], delta=0.02)
    assert decision.selected == "top" and decision.tie_break is None
    assert "do not separate" in decision.reason


def test_screening_ignores_ineligible_judges_and_names_the_best_available() -> None:
    decision = screen([_judge("fast", 0.6, eligible=False), _judge("safe", 0.3)])
    assert decision.selected == "safe"
    assert [e.judge for e in decision.ranking] == ["fast", "safe"]

    none = screen([_judge("fast", 0.6, eligible=False), _judge("slow", 0.2, eligible=False)])
    assert none.status == "none_eligible" and none.selected is None
    assert none.best_available == "fast" and none.failed_gates == ["CA parse"]
    assert "best available (ineligible)" in none.reason


# ----------------------------------------------------------------------------- CC scale


def test_fit_kappa_recovers_a_known_scale() -> None:
    rng = np.random.default_rng(0)
    d = rng.choice([0.0, 0.25, 0.375, 0.5, 0.75, 1.0, 1.5], size=200)
    exact = 1 - np.minimum(1, 0.728 * d)
    assert fit_kappa(d, exact)[0] == pytest.approx(0.728, abs=1e-9)
    noisy = exact + rng.normal(scale=0.02, size=d.size)
    assert fit_kappa(d, noisy)[0] == pytest.approx(0.728, abs=0.02)
    assert np.isnan(fit_kappa(np.zeros(5), np.ones(5))[0])


def test_fit_cc_scale_end_to_end_on_synthetic_ratings() -> None:
    # readers: CT 5, CF 3 (over by 0.5) -> CC = 1 - 1.5 * 0.728 * 0.5 with the frozen params;
    # the judge says CT 5, CF 1 (over by 1.0), so its kappa must be half of 0.728.
    rows = []
    judge: dict[str, tuple[int, int]] = {}
    for i in range(30):
        item, gap = f"i{i:03d}", i % 3 != 0
        for rater in ("r1", "r2"):
            rows += [
                (item, rater, "clinical_fidelity", 3 if gap else 4),
                (item, rater, "confidence_tone", 5 if gap else 4),
            ]
        judge[item] = (1, 5) if gap else (2, 2)  # (CF, CT)
    ratings = _ratings(rows)
    frame = judge_frame(30)
    for column, metric in ((0, "clinical_fidelity"), (1, "confidence_tone")):
        mask = frame["metric"] == metric
        frame.loc[mask, "score"] = [judge[i][column] for i in frame.loc[mask, "item_id"]]

    fit = fit_cc_scale(ratings, frame, B=200, seed=0)
    assert fit.kappa == pytest.approx(0.364, abs=1e-9)
    assert fit.alpha == pytest.approx(1.5 * fit.kappa)
    assert fit.beta == fit.kappa
    assert fit.mse == pytest.approx(0.0, abs=1e-12)
    assert fit.n_items == 30 and fit.zero_penalty_share == pytest.approx(10 / 30)
    assert fit.clip_binds is False
    assert fit.kappa_ci is not None and fit.kappa_ci[0] <= 0.364 <= fit.kappa_ci[1]


# ----------------------------------------------------------------------------- split


def _row(i: int, code: str, base: str, mod: str) -> dict[str, Any]:
    return {
        "item_id": f"rs-{i:03d}",
        "question": "Is there a pleural effusion? (yes or no)",
        "question_type": "binary",
        "modification": code,
        "baseline_answer": base,
        "modified_answer": mod,
    }


def test_stratified_split_puts_every_stratum_in_both_halves_deterministically() -> None:
    rows = [
        _row(i, code, "yes", "no" if i % 2 else "Yes")
        for i, code in enumerate(["TB-RAD", "VB-BB", "VO-BB"] * 8)
    ]
    dev, test = stratified_split(rows, seed=0)
    assert len(dev) == len(test) == 12
    for code in ("TB-RAD", "VB-BB", "VO-BB"):
        for flip in (True, False):
            in_dev = [r for r in dev if r["modification"] == code and derive_flip(r) is flip]
            in_test = [r for r in test if r["modification"] == code and derive_flip(r) is flip]
            assert in_dev and in_test
    again = stratified_split(rows, seed=0)
    assert again == (dev, test)
    assert stratified_split(rows, seed=1) != (dev, test)
    assert [r["item_id"] for r in dev] == sorted(r["item_id"] for r in dev)


def test_split_reads_flips_of_results_and_requests_and_names_bad_rows() -> None:
    assert derive_flip({"flip": {"value": True, "reason": "changed"}}) is True
    request = {
        "question": "Is there a pleural effusion? (yes or no)",
        "baseline": {"answer": "yes"},
        "cot": "<think><step>a</step></think><answer>no</answer>",
    }
    assert derive_flip(request) is True
    with pytest.raises(UserInputError, match="line 7: cannot derive the flip"):
        stratified_split([{"baseline": {"answer": "yes"}}], where=["f.jsonl:line 7"])
    # rows with no baseline (valid requests, results with a null flip) are a stratum of their own
    rows = [{"question": "q? (yes or no)", "i": i} for i in range(4)] + [
        {"question": "q? (yes or no)", "flip": None, "i": 4 + i} for i in range(2)
    ]
    dev, test = stratified_split(rows)
    assert len(dev) == len(test) == 3
    with pytest.raises(UserInputError, match="test_fraction"):
        stratified_split([], test_fraction=1.0)


# ----------------------------------------------------------------------------- validate


def test_validate_judge_flags_a_rater_with_one_rating_and_unknown_items() -> None:
    rows = []
    rng = np.random.default_rng(5)
    for i in range(20):
        for rater in ("r1", "r2"):
            for axis in rating_axes():
                rows.append((f"i{i:03d}", rater, axis, int(rng.integers(1, 6))))
    rows.append(("i000", "r9", "causal_attribution", 4))
    ratings = _ratings(rows)
    frame = judge_frame(22)  # two extra judged items
    report = validate_judge(ratings, {"j": frame}, B=200)
    dropped = [d for d in report.dropped if d.rater == "r9"]
    assert dropped and "only 1 rating" in dropped[0].reason
    assert report.judges[0].extra_items_ignored == 2
    with pytest.raises(UserInputError, match=r"2 rated item\(s\) have no result: i018, i019"):
        validate_judge(ratings, {"j": judge_frame(18)}, B=10)


def test_a_gated_metric_without_ratings_is_gated_but_has_no_tau() -> None:
    """A catalogue metric that is gated but has no ``rating_key``: its coverage and gates count,
    it has no tau, the macro tau is over the rated scopes, and the report says so."""
    register_metric(MetricSpec(name="brevity", label="BR", title="brevity",
                               schema_file="brevity.schema.json"))  # fmt: skip
    try:
        rows = []
        rng = np.random.default_rng(11)
        for i in range(30):
            for rater in ("r1", "r2"):
                for axis in rating_axes():
                    rows.append((f"i{i:03d}", rater, axis, int(rng.integers(1, 6))))
        frame = judge_frame(30, stages={"brevity": {0: "schema"}})
        report = validate_judge(_ratings(rows), {"j": frame}, B=50)
        judge = report.judges[0]
        assert "BR" not in judge.axes and set(judge.axes) == set(validated_scopes())
        assert judge.coverage["BR"].counts["schema"] == 1
        assert judge.gates and any(g.scope == "BR" and g.passed is False for g in judge.gates)
        assert "BR schema" in judge.failed_gates
        # the judge's scores are constant (3): every tau is undefined, and so is the macro
        assert all(judge.axes[s].tau.tau is None for s in ("CF", "CA", "CC"))
        assert judge.macro_tau is None
        assert "no tau for CF, CA, CC: macro tau undefined" in judge.notes
        unrated = next(n for n in report.notes if "no radiologist rating" in n)
        assert "BR" in unrated.split(":")[0].split(", ")
        markdown = render_markdown(report)
        assert "| j | BR | no radiologist rating |" in markdown
        assert "τ_BR" not in markdown
    finally:
        unregister_metric("brevity")
