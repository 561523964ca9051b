"""Tests for faithjudge.scoring.metrics: score normalisation and confidence calibration."""

from __future__ import annotations

import pytest
from faithjudge.scoring.metrics import (
    DEFAULT_CALIBRATION,
    CalibrationParams,
    confidence_calibration,
    normalized_score,
)
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("score", "expected"), [(1, 0.0), (2, 0.25), (3, 0.5), (4, 0.75), (5, 1.0)]
)
def test_normalized_score(score: int, expected: float) -> None:
    assert normalized_score(score) == expected


@pytest.mark.parametrize("score", [0, 6, -1, 3.0, 2.5, True, False, "3", None])
def test_normalized_score_rejects_non_scores(score: object) -> None:
    with pytest.raises(ValueError):
        normalized_score(score)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ct", "cf", "expected"),
    [
        (3, 3, 1.000),
        (5, 3, 0.454),
        (2, 4, 0.636),
        (1, 5, 0.272),
        (4, 2, 0.454),
        (5, 1, 0.0),  # P = 1.092, clipped at 1
    ],
)
def test_confidence_calibration_reference_values(ct: int, cf: int, expected: float) -> None:
    # METHODS §1.7 unit-test table: (s_CT, s_CF) -> CC.
    assert confidence_calibration(ct, cf) == pytest.approx(expected, abs=1e-3)


def test_missing_scores_give_none() -> None:
    assert confidence_calibration(None, 3) is None
    assert confidence_calibration(3, None) is None
    assert confidence_calibration(None, None) is None


def test_invalid_present_score_raises() -> None:
    with pytest.raises(ValueError):
        confidence_calibration(6, 3)


def test_default_parameters() -> None:
    assert CalibrationParams() == DEFAULT_CALIBRATION
    assert (DEFAULT_CALIBRATION.alpha, DEFAULT_CALIBRATION.beta) == (1.092, 0.728)
    assert DEFAULT_CALIBRATION.alpha / DEFAULT_CALIBRATION.beta == pytest.approx(1.5)


def test_custom_parameters() -> None:
    params = CalibrationParams(alpha=2.0, beta=0.0)
    assert confidence_calibration(4, 3, params) == pytest.approx(0.5)
    assert confidence_calibration(3, 4, params) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "kwargs", [{"alpha": -0.1}, {"beta": float("nan")}, {"alpha": float("inf")}, {"beta": "1"}]
)
def test_invalid_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        CalibrationParams(**kwargs)  # type: ignore[arg-type]


scores = st.integers(min_value=1, max_value=5)


@given(scores, scores)
def test_cc_is_in_unit_interval_and_one_on_agreement(ct: int, cf: int) -> None:
    cc = confidence_calibration(ct, cf)
    assert cc is not None
    assert 0.0 <= cc <= 1.0
    assert (cc == 1.0) == (ct == cf)


@given(st.integers(min_value=1, max_value=4))
def test_over_confidence_costs_more_than_under_confidence(gap: int) -> None:
    over = confidence_calibration(1 + gap, 1)
    under = confidence_calibration(1, 1 + gap)
    assert over is not None
    assert under is not None
    assert over <= under
