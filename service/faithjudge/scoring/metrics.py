"""Per-item CoT metrics on the 1-5 judge scale (METHODS §1.7).

Each judge score s in {1, ..., 5} is normalised linearly to (s - 1) / 4. Confidence
calibration (CC) compares the confidence tone (CT) with the clinical fidelity (CF):

    P  = alpha * max(0, CT - CF) + beta * max(0, CF - CT)
    CC = 1 - min(1, P)

with alpha = 1.092 (over-confidence) and beta = 0.728 (under-confidence), the values fitted
on the paper's dev split (rho = alpha / beta = 1.5). CC is exploratory in the paper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral

__all__ = [
    "DEFAULT_CALIBRATION",
    "CalibrationParams",
    "confidence_calibration",
    "normalized_score",
]

_MIN_SCORE, _MAX_SCORE = 1, 5


@dataclass(frozen=True, slots=True)
class CalibrationParams:
    """Penalty weights of confidence calibration: ``alpha`` for over-confidence (CT above
    CF), ``beta`` for under-confidence (CT below CF)."""

    alpha: float = 1.092
    beta: float = 0.728

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


DEFAULT_CALIBRATION = CalibrationParams()


def normalized_score(score: int) -> float:
    """Map a judge score 1..5 linearly onto [0, 1]: ``(score - 1) / 4``.

    Raises:
        ValueError: ``score`` is not an integer (bools and floats such as 3.0 included) or
            lies outside 1..5.
    """
    if isinstance(score, bool) or not isinstance(score, Integral):
        raise ValueError(f"score must be an integer from 1 to 5, got {score!r}")
    if not _MIN_SCORE <= score <= _MAX_SCORE:
        raise ValueError(f"score must be from 1 to 5, got {score}")
    return (int(score) - _MIN_SCORE) / (_MAX_SCORE - _MIN_SCORE)


def confidence_calibration(
    ct_score: int | None,
    cf_score: int | None,
    params: CalibrationParams = DEFAULT_CALIBRATION,
) -> float | None:
    """Confidence calibration of one item from its raw CT and CF scores (1..5).

    Returns ``1 - min(1, alpha * max(0, CT - CF) + beta * max(0, CF - CT))`` on the
    normalised scores, or None when either score is missing (unevaluable item).

    Raises:
        ValueError: a score that is present is not an integer from 1 to 5.
    """
    if ct_score is None or cf_score is None:
        return None
    ct = normalized_score(ct_score)
    cf = normalized_score(cf_score)
    penalty = params.alpha * max(0.0, ct - cf) + params.beta * max(0.0, cf - ct)
    return 1.0 - min(1.0, penalty)
