"""Coverage as counts: the one outcome of each (item, metric) and the one definition of a rate.

No statistics here (intervals, bounds and gates are ``faithjudge.stats.judge_coverage``'s) and
no rendering. Every output that counts coverage (the ``score`` summary, the run report, the gate
and ``validate-judge``) classifies grades with ``metric_outcome`` and turns counts into rates with
``RATE_DEFINITIONS``, so they cannot disagree.

Outcomes (the judged ones in the order grading, ``faithjudge.scoring.grading``, checks a reply):

- judged: ``valid`` or the judge's own failure ``parse``, ``schema``, ``evidence``, ``abstain``;
- not judged (``NOT_JUDGED_NAMES`` names them): ``kb``, a KB miss (no knowledge-base entry),
  ``transport``, a transport failure (the judge stayed unreachable or, for replay, has no
  record), ``input``, an input error (the request line was unreadable, or rejected at upload);
- ``missing``: the request did not ask for the metric. It is neither judged nor a failure and
  stays out of every denominator.

Rates (METHODS §1.11, with the items that never reached the judge counted against coverage):

    over the judged items:      parse, schema, evidence, invalid (= their sum), abstain
    over every asked item:      not_judged, cov (= valid / asked)
    over judged, not abstained: val (= valid / (judged - abstain))

so ``cov`` is the share of asked items that ended with a verified grade, whatever stopped the
others, and the judge's own rates still describe the judge alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

__all__ = [
    "JUDGED",
    "JUDGE_STAGES",
    "LINE_PROBLEMS",
    "NOT_JUDGED",
    "NOT_JUDGED_NAMES",
    "OUTCOMES",
    "RATES",
    "RATE_DEFINITIONS",
    "combine_outcomes",
    "count_outcomes",
    "line_problem_counts",
    "metric_outcome",
    "outcome_name",
    "rates_from_counts",
    "unjudged_reason",
]

JUDGE_STAGES: tuple[str, ...] = ("parse", "schema", "abstain", "evidence")
NOT_JUDGED: tuple[str, ...] = ("kb", "transport", "input")
JUDGED: tuple[str, ...] = ("valid", *JUDGE_STAGES)
ASKED: tuple[str, ...] = (*JUDGED, *NOT_JUDGED)
OUTCOMES: tuple[str, ...] = (*ASKED, "missing")

_INVALID = ("parse", "schema", "evidence")
_ATTEMPTED = ("valid", *_INVALID)

# rate -> (outcomes counted in the numerator, outcomes counted in the denominator)
RATE_DEFINITIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "parse": (("parse",), JUDGED),
    "schema": (("schema",), JUDGED),
    "evidence": (("evidence",), JUDGED),
    "invalid": (_INVALID, JUDGED),
    "abstain": (("abstain",), JUDGED),
    "not_judged": (NOT_JUDGED, ASKED),
    "cov": (("valid",), ASKED),
    "val": (("valid",), _ATTEMPTED),
}
RATES: tuple[str, ...] = tuple(RATE_DEFINITIONS)


class _Failure(Protocol):
    @property
    def stage(self) -> str: ...


class _Graded(Protocol):
    @property
    def status(self) -> str: ...
    @property
    def failure(self) -> _Failure | None: ...


def metric_outcome(graded: _Graded | None, line_error_stage: str | None = None) -> str:
    """The outcome of one metric of one result line.

    ``graded`` is the line's ``MetricResult`` for the metric (None when it has none);
    ``line_error_stage`` the stage of the line's own error (``input``), when it has one.
    """
    if graded is None:
        return line_error_stage or "missing"
    if graded.status == "valid":
        return "valid"
    if graded.failure is not None:
        return graded.failure.stage
    return "abstain" if graded.status == "abstained" else "schema"


def combine_outcomes(*outcomes: str) -> str:
    """The outcome of a derived metric (CC from CF and CT): a not-judged outcome of either wins,
    then the first judge failure in grading's order; valid only when all are valid."""
    for stage in (*NOT_JUDGED, "missing", *JUDGE_STAGES):
        if stage in outcomes:
            return stage
    return "valid"


def count_outcomes(outcomes: Iterable[str]) -> dict[str, int]:
    """How many of each outcome (every known outcome present, zero or not)."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for outcome in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def rates_from_counts(counts: Mapping[str, int]) -> dict[str, float | None]:
    """Every rate of ``RATES`` from outcome counts; None where its denominator is empty."""
    rates: dict[str, float | None] = {}
    for rate, (numerator, denominator) in RATE_DEFINITIONS.items():
        bottom = sum(counts.get(o, 0) for o in denominator)
        top = sum(counts.get(o, 0) for o in numerator)
        rates[rate] = top / bottom if bottom else None
    return rates


def unjudged_reason(grades: Mapping[str, int], stages: Mapping[str, int]) -> str | None:
    """Why a finished batch judged nothing, or None when at least one grade reached the judge.

    ``grades`` counts the grades by status (an ``error`` entry, lines without grades, is left
    out); ``stages`` counts the failed grades by stage. The batch status and ``submit`` both
    read a batch's outcome with it.
    """
    total = sum(n for status, n in grades.items() if status != "error")
    not_judged = sum(stages.get(stage, 0) for stage in NOT_JUDGED)
    if total - not_judged > 0:
        return None
    listed = ", ".join(f"{outcome_name(stage)} {n}" for stage, n in sorted(stages.items()) if n)
    return f"not one grade was judged ({listed or 'no grade'})"


NOT_JUDGED_NAMES: dict[str, str] = {
    "input": "input errors",
    "kb": "KB misses",
    "transport": "transport failures",
}
"""The one name every output (the score summary, submit, the batch status, reports and the gate)
gives each not-judged outcome: the request line could not be read (a batch line rejected at
upload is one too), the question has no knowledge-base entry, the judge never answered."""

LINE_PROBLEMS: dict[str, str] = {outcome: NOT_JUDGED_NAMES[outcome] for outcome in ("input", "kb")}
"""The not-judged outcomes that come from the line itself (a transport failure is the judge's
side): the lines the reports list by number."""


def outcome_name(outcome: str) -> str:
    """How outputs name ``outcome`` (or a failure stage): its ``NOT_JUDGED_NAMES`` name, else
    the stage itself (``parse``, ``schema``, ``evidence``, ``abstain``, ``valid``)."""
    return NOT_JUDGED_NAMES.get(outcome, outcome)


def line_problem_counts(per_metric: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Lines per ``LINE_PROBLEMS`` outcome, from per-metric outcome counts.

    Every metric of an unreadable line is an ``input`` outcome, and every KB-graded metric of a
    question outside the KB is a ``kb`` one, so the lines are the largest count over metrics.
    """
    return {
        outcome: max((counts.get(outcome, 0) for counts in per_metric.values()), default=0)
        for outcome in LINE_PROBLEMS
    }
