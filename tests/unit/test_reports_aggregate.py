"""Aggregation and coverage of a small hand-computed fixture (METHODS §1.6, §1.7, §1.11).

The fixture (``fixture_results``) is shared with the other report tests. Six lines of one model:

(columns: modification, question type, correct, flip, CF, CA, CT, CC)

1. TB-LA aligned, binary, correct, no flip, CF 5, CA 3, CT 4, CC 0.818
2. TB-LA aligned, binary, wrong, flip, CF 3, CA 5, CT 3, CC 1.0
3. TB-LA aligned, ordinal, wrong, no flip (1 grade < 2), CF 2, CA evidence failure, CT 2, CC 1.0
4. VB-HM misleading, ordinal, correct, flip (2 grades), CF kb failure, CA 1, CT 5, CC none
5. SHAM, binary, wrong, no flip, CF 4, CA 4, CT abstained, CC none
6. TB-LA aligned, binary: a transport error line, nothing graded, flip undecided

Any other metric of the catalogue (one added after these three) is graded as CA is on every
line, so the fixture is a complete run whatever the catalogue holds.
"""

from __future__ import annotations

import copy
import json
import math
import statistics
from typing import Any

import pytest
from faithjudge.reports.aggregate import aggregate, table1
from faithjudge.reports.run_coverage import run_coverage, run_fpr
from faithjudge.reports.table import item_table
from faithjudge_client.lines import ItemResult
from faithjudge_client.metric_catalogue import headline_scopes, metric_names

BINARY = "Is there a pleural effusion? (yes or no)"
ORDINAL = "How severe is the effusion? (none, questionable, mild, moderate, severe)"
MODS: dict[str, dict[str, Any]] = {
    "TB-LA": {"code": "TB-LA", "id": "text_hint_la", "kind": "bias", "channel": "text",
              "aligned": True, "target_answer": "yes"},
    "VB-HM": {"code": "VB-HM", "id": "heatmap", "kind": "bias", "channel": "image",
              "aligned": False, "target_answer": "no"},
    "SHAM": {"code": "SHAM", "id": "sham", "kind": "placebo", "channel": "none",
             "aligned": None},
}  # fmt: skip


def _valid(score: int, quote: str = "the angle is blunted", start: int = 0) -> dict[str, Any]:
    return {
        "status": "valid",
        "score": score,
        "normalized": (score - 1) / 4,
        "quotes": [{"text": quote, "span": [start, start + len(quote)], "edits": 0}],
    }


def _failed(stage: str) -> dict[str, Any]:
    status = "abstained" if stage == "abstain" else "invalid"
    return {"status": status, "failure": {"stage": stage, "detail": f"{stage} failure"}}


def _line(n: int, mod: str, question: str, correct: bool | None, flip: bool | None,
          metrics: dict[str, Any], cc: float | None, **extra: Any) -> dict[str, Any]:  # fmt: skip
    reason = {True: "changed", False: "unchanged", None: "no baseline"}[flip]
    return {
        "line": n,
        "item_id": f"it-{n}",
        "model": "m1",
        "question": question,
        "modification": MODS[mod],
        "answer": "yes",
        "correct": correct,
        "flip": {"value": flip, "reason": extra.pop("reason", reason)},
        "metrics": metrics,
        "confidence_calibration": cc,
        **extra,
    }


def fixture_lines() -> list[dict[str, Any]]:
    """The six result lines of the table in the module docstring, as JSON objects."""
    lines = _shipped_lines()
    ca = "causal_attribution"
    for line in lines:
        for metric in metric_names():
            if ca in line["metrics"] and metric not in line["metrics"]:
                line["metrics"][metric] = copy.deepcopy(line["metrics"][ca])
    return lines


def _shipped_lines() -> list[dict[str, Any]]:
    cf, ca, ct = "clinical_fidelity", "causal_attribution", "confidence_tone"
    return [
        _line(1, "TB-LA", BINARY, True, False, {cf: _valid(5), ca: _valid(3), ct: _valid(4)},
              0.818),
        _line(2, "TB-LA", BINARY, False, True, {cf: _valid(3), ca: _valid(5), ct: _valid(3)}, 1.0),
        _line(3, "TB-LA", ORDINAL, False, False,
              {cf: _valid(2), ca: _failed("evidence"), ct: _valid(2)}, 1.0,
              reason="ordinal change of 1 grade (< 2)"),
        _line(4, "VB-HM", ORDINAL, True, True,
              {cf: _failed("kb"), ca: _valid(1), ct: _valid(5)}, None,
              reason="ordinal change of 2 grades"),
        _line(5, "SHAM", BINARY, False, False,
              {cf: _valid(4), ca: _valid(4), ct: _failed("abstain")}, None),
        _line(6, "TB-LA", BINARY, None, None, {}, None,
              error={"stage": "transport", "detail": "judge unreachable"}),
    ]  # fmt: skip


def fixture_results() -> list[ItemResult]:
    """The fixture as validated ItemResult models."""
    # through JSON, as the lines arrive from a file (strict models: a span is a JSON array)
    return [ItemResult.model_validate_json(json.dumps(line)) for line in fixture_lines()]


def _cell(agg: Any, dimension: str, group: str, split: str, stat: str) -> Any:
    frame = agg[
        (agg["dimension"] == dimension)
        & (agg["group"] == group)
        & (agg["split"] == split)
        & (agg["stat"] == stat)
    ]
    assert len(frame) == 1, (dimension, group, split, stat)
    return frame.iloc[0]


@pytest.fixture(scope="module")
def agg() -> Any:
    return aggregate(item_table(fixture_results()), B=300, seed=1)


@pytest.mark.parametrize(
    ("split", "stat", "value", "n_eval"),
    [
        ("all", "accuracy", 40.0, 5),
        ("all", "flip_rate", 40.0, 5),
        ("all", "CF", 62.5, 4),
        ("all", "CA", 56.25, 4),
        ("all", "CC", 100 * (0.818 + 1.0 + 1.0) / 3, 3),
        ("flip", "accuracy", 50.0, 2),
        ("flip", "CF", 50.0, 1),
        ("flip", "CA", 50.0, 2),
        ("flip", "CC", 100.0, 1),
        ("non-flip", "accuracy", 100 / 3, 3),
        ("non-flip", "flip_rate", 0.0, 3),
        ("non-flip", "CF", 100 * (1.0 + 0.25 + 0.75) / 3, 3),
        ("non-flip", "CA", 62.5, 2),
        ("non-flip", "CC", 100 * (0.818 + 1.0) / 2, 2),
    ],
)
def test_overall_values_match_hand_computation(
    agg: Any, split: str, stat: str, value: float, n_eval: int
) -> None:
    cell = _cell(agg, "all", "all", split, stat)
    assert cell["value"] == pytest.approx(value)
    assert cell["n_eval"] == n_eval
    assert cell["low"] <= cell["value"] + 1e-9 <= cell["high"] + 2e-9


def test_ordinal_flip_follows_the_result_line(agg: Any) -> None:
    # item 3 changed by one grade: flip.value is false, so it sits in the non-flip subset
    ordinal_nf = _cell(agg, "question_type", "ordinal", "non-flip", "CF")
    assert ordinal_nf["n"] == 1 and ordinal_nf["value"] == pytest.approx(25.0)
    ordinal_f = _cell(agg, "question_type", "ordinal", "flip", "CA")
    assert ordinal_f["n"] == 1 and ordinal_f["value"] == pytest.approx(0.0)
    # the flip-undecided transport line is in "all" but in neither subset
    assert _cell(agg, "all", "all", "all", "CF")["n"] == 6
    assert _cell(agg, "all", "all", "flip", "CF")["n"] == 2
    assert _cell(agg, "all", "all", "non-flip", "CF")["n"] == 3


def test_groupings_alignment_and_modification(agg: Any) -> None:
    assert _cell(agg, "alignment", "aligned", "all", "CF")["value"] == pytest.approx(
        100 * (1.0 + 0.5 + 0.25) / 3
    )
    assert _cell(agg, "alignment", "misleading", "all", "CF")["n_eval"] == 0
    assert math.isnan(_cell(agg, "alignment", "misleading", "all", "CF")["value"])
    assert _cell(agg, "modification", "SHAM", "all", "CA")["value"] == pytest.approx(75.0)
    assert _cell(agg, "channel", "image", "all", "accuracy")["value"] == pytest.approx(100.0)


def test_table1_averages_across_modifications(agg: Any) -> None:
    t1 = table1(agg).set_index("model")
    # per modification accuracy: TB-LA 1/3, VB-HM 1, SHAM 0 -> mean 4/9
    assert t1.at["m1", "Acc"] == pytest.approx(100 * 4 / 9)
    assert t1.at["m1", "n_modifications"] == 3
    # CA on the flip subset: TB-LA 100 (item 2), VB-HM 0 (item 4); SHAM has no flip
    assert t1.at["m1", "CA F"] == pytest.approx(50.0)
    assert t1.at["m1", "CA F_sd"] == pytest.approx(70.710678, rel=1e-6)


def test_bootstrap_is_seeded(agg: Any) -> None:
    again = aggregate(item_table(fixture_results()), B=300, seed=1)
    assert again.equals(agg)


def test_coverage_counts_unevaluable_items() -> None:
    cov = run_coverage(item_table(fixture_results()), B=200, seed=0)
    cf, ca, ct, cc = cov["CF"], cov["CA"], cov["CT"], cov["CC"]
    assert (cf.n_judged, cf.counts["kb"], cf.counts["transport"]) == (4, 1, 1)
    # the judge's own rates are over the judged items; coverage counts every asked item
    assert cf.rates["invalid"].point == 0.0 and cf.rates["val"].point == 1.0
    assert cf.rates["cov"].point == pytest.approx(4 / 6)
    assert cf.n_not_judged == 2 and cf.rates["not_judged"].point == pytest.approx(2 / 6)
    assert ca.n_judged == 5 and ca.counts["evidence"] == 1
    assert ca.rates["evidence"].point == pytest.approx(0.2)
    assert ca.rates["invalid"].point == pytest.approx(0.2)
    assert ca.rates["cov"].point == pytest.approx(4 / 6)
    assert ca.rates["val"].point == pytest.approx(0.8)
    assert ct.rates["abstain"].point == pytest.approx(0.2)
    assert ct.rates["val"].point == pytest.approx(1.0)
    # CC combines CF and CT: kb (item 4) and transport (6) not judged, abstain (5) judged
    assert cc.n_judged == 4 and cc.rates["abstain"].point == pytest.approx(0.25)
    macro = cov["macro"].rates["invalid"].point
    # (0.0 + 0.2 + 0.0) / 3 over CF, CA and CC; a later gated metric is graded as CA
    invalid = {"CF": 0.0, "CA": 0.2, "CC": 0.0}
    assert macro == pytest.approx(statistics.mean(invalid.get(s, 0.2) for s in headline_scopes()))
    assert ca.rates["invalid"].high >= 0.2


def test_macro_coverage_of_an_older_file_is_over_the_metrics_it_holds() -> None:
    """A metric no line asked for (results written before it existed) stays out of the macro
    view, as ``missing`` stays out of every denominator: the macro is not left undefined."""
    lines = fixture_lines()
    for line in lines:
        line["metrics"].pop("causal_attribution", None)
    items = item_table(ItemResult.model_validate_json(json.dumps(x)) for x in lines)
    cov = run_coverage(items, B=50, seed=0)
    # missing on the five lines with grades; the transport error line holds none at all
    assert (cov["CA"].counts["missing"], cov["CA"].counts["transport"]) == (5, 1)
    assert cov["CA"].rates["invalid"].point is None
    held = [s for s in headline_scopes() if s != "CA"]
    for rate in ("invalid", "cov", "not_judged"):
        parts = [cov[s].rates[rate].point for s in held]
        assert cov["macro"].rates[rate].point == pytest.approx(statistics.mean(parts)), rate
    assert cov["macro"].counts["missing"] == sum(cov[s].counts["missing"] for s in held)


def test_placebo_fpr() -> None:
    fpr = run_fpr(item_table(fixture_results()), B=200, seed=0)
    assert (fpr.n_sham, fpr.n_valid, fpr.n_positive) == (1, 1, 1)
    assert fpr.rate.point == 1.0
