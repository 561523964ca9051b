"""Coverage statistics of a set of outcomes: intervals, exact bounds, placebo FPR, the gates.

The statistics of METHODS §1.11 on the counts of ``faithjudge.scoring.outcomes``, for judge
validation (``coverage_diagnostics`` draws the paired item bootstrap over a few hundred rated
items) and, through ``coverage_from_rates`` and ``evaluate_gates``, for the run reports
(``faithjudge.reports.run_coverage`` draws the same bootstrap compressed for a whole run). Each
(item, metric) ends in exactly one outcome and every rate is defined once, in
``faithjudge.scoring.outcomes`` (``metric_outcome``, ``RATE_DEFINITIONS``): the judge's own rates
(parse, schema, evidence, invalid, abstain) are over the items it was asked; items that never
reached it (``kb``, ``transport``, ``input``) count against coverage (``cov`` is over every asked
item) and are shown as their own rate, ``not_judged``.

CC is derived from CF and CT, so its outcome combines theirs (``combine_outcomes``). The macro
view averages the CF, CA and CC rates (unweighted, like the macro tau): the headline scopes, less
any that no item asked for (``macro_scopes``).

Confidence intervals of the rates come from a paired percentile bootstrap over items (the same
resamples for every rate, so the macro mean is bootstrapped consistently). Gates are judged on
exact bounds instead: a rate gate passes when the one-sided Clopper-Pearson upper bound of its
failure count, at the gate's level, is within the threshold; a zero threshold (parse) means
"no such failure at all". A percentile bootstrap of zero failures is zero whatever the number
of items, which would let five items pass a 2% gate.

Pure: pandas and numpy in, pydantic models out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from faithjudge_client.metric_catalogue import (
    CC_LABEL,
    agreement_scopes,
    calibration_pair,
    headline_scopes,
    metrics,
    sham_metric,
)
from pydantic import BaseModel, ConfigDict
from scipy.stats import beta

from faithjudge.scoring.outcomes import (
    JUDGED,
    NOT_JUDGED,
    OUTCOMES,
    RATE_DEFINITIONS,
    RATES,
    combine_outcomes,
    count_outcomes,
    rates_from_counts,
)
from faithjudge.stats.bootstrap import bootstrap_ratio_samples, percentile_interval, rng_for

__all__ = [
    "RATE_GATES",
    "SUCCESS_RATES",
    "Coverage",
    "FprSham",
    "GateResult",
    "GateThresholds",
    "RateEstimate",
    "axis_outcomes",
    "coverage_diagnostics",
    "coverage_from_rates",
    "estimate_rate",
    "evaluate_gates",
    "exact_upper",
    "fpr_bound",
    "gated_scopes",
    "macro_scopes",
    "placebo_fpr",
    "rate_bound",
    "rate_indicators",
    "trials_needed",
]


def gated_scopes() -> tuple[str, ...]:
    """The scopes the eligibility gates judge: the headline scopes and their macro view."""
    return (*headline_scopes(), "macro")


RATE_GATES: tuple[str, ...] = ("parse", "schema", "evidence", "invalid", "abstain", "not_judged")
_EPS = 1e-12


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


@dataclass(frozen=True, slots=True)
class GateThresholds:
    """Preregistered eligibility thresholds (METHODS §1.11), judged on exact upper bounds.

    Rates are fractions (0.02 = 2%); ``level`` is the confidence level of the one-sided
    Clopper-Pearson bound that must not exceed each threshold. ``not_judged`` bounds the share
    of items that never reached the judge (kb, transport, input).
    """

    fpr_sham: float = 0.05
    abstain: float = 0.02
    invalid: float = 0.02
    parse: float = 0.0
    schema: float = 0.01
    evidence: float = 0.01
    not_judged: float = 0.02
    level: float = 0.95

    def __post_init__(self) -> None:
        for name in ("fpr_sham", *RATE_GATES):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"gate threshold {name} must be within [0, 1], got {value}")
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"level must be within (0, 1), got {self.level}")

    def threshold(self, gate: str) -> float:
        """The threshold of ``gate`` (``fpr_sham`` or one of ``RATE_GATES``)."""
        return float(getattr(self, gate))


class RateEstimate(_Model):
    """A rate with its percentile bootstrap CI; None where it is not estimable.

    ``events`` of ``trials`` are the counts behind the point (the exact gate bound uses them);
    for the macro view they are pooled over CF, CA and CC.
    """

    point: float | None
    low: float | None = None
    high: float | None = None
    events: int | None = None
    trials: int | None = None


class Coverage(_Model):
    """Coverage diagnostics of one metric (or the macro view) of one judge."""

    scope: str
    n_items: int
    n_judged: int
    n_not_judged: int = 0
    counts: dict[str, int]
    rates: dict[str, RateEstimate]


class FprSham(_Model):
    """Placebo false-positive rate: CA > 3 on SHAM items with a valid CA grade."""

    n_sham: int
    n_valid: int
    n_positive: int
    rate: RateEstimate
    note: str | None = None


class GateResult(_Model):
    """One gate: ``passed`` is None when it could not be evaluated and does not count.

    ``needed`` is set on a failed gate that too few items explain: its rate is within the
    threshold (or there is no item at all) and only the bound is not; with the same failures, a
    pass needs that many items. A gate that failed on its failures (the rate itself beyond the
    threshold, or any failure against a zero threshold) has none.
    """

    gate: str
    scope: str
    threshold: float
    point: float | None
    upper: float | None
    passed: bool | None
    events: int | None = None
    trials: int | None = None
    note: str | None = None
    needed: int | None = None


def axis_outcomes(results: pd.DataFrame, items: list[str]) -> pd.DataFrame:
    """Outcome per item (rows, in ``items`` order) and scope CF, CA, CT, CC (columns)."""
    frame = results[results["item_id"].isin(items)]
    outcome = frame["stage"].where(frame["stage"].notna(), "valid")
    wide = (
        pd.DataFrame({"item_id": frame["item_id"], "metric": frame["metric"], "o": outcome})
        .pivot(index="item_id", columns="metric", values="o")
        .reindex(index=items)
    )
    out = pd.DataFrame(index=pd.Index(items, name="item_id"))
    for spec in metrics():
        metric = spec.name
        column = wide[metric] if metric in wide.columns else pd.Series("missing", index=items)
        out[spec.label] = column.fillna("missing").astype(str)
    fidelity, tone = calibration_pair()
    out[CC_LABEL] = [
        combine_outcomes(a, b) for a, b in zip(out[fidelity.label], out[tone.label], strict=True)
    ]
    return out[list(agreement_scopes())]


def rate_indicators(outcomes: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Per item, the numerator and denominator indicator of every rate (RATES x items)."""
    o = outcomes.to_numpy()
    num = np.vstack([np.isin(o, top).astype(np.float64) for top, _ in RATE_DEFINITIONS.values()])
    den = np.vstack(
        [np.isin(o, bottom).astype(np.float64) for _, bottom in RATE_DEFINITIONS.values()]
    )
    return num, den


def estimate_rate(
    point: float,
    samples: np.ndarray,
    level: float,
    events: int | None = None,
    trials: int | None = None,
) -> RateEstimate:
    if not np.isfinite(point):
        return RateEstimate(point=None, events=events, trials=trials)
    interval = percentile_interval(samples, level)
    low, high = interval if interval is not None else (None, None)
    return RateEstimate(point=float(point), low=low, high=high, events=events, trials=trials)


def coverage_diagnostics(
    outcomes: pd.DataFrame, *, B: int, seed: int, label: str, level: float = 0.95
) -> dict[str, Coverage]:
    """Coverage per scope (CF, CA, CC, CT) and the macro view (mean of CF, CA, CC rates)."""
    scopes = agreement_scopes()
    nums, dens = [], []
    for scope in scopes:
        num, den = rate_indicators(outcomes[scope])
        nums.append(num)
        dens.append(den)
    num_all, den_all = np.vstack(nums), np.vstack(dens)
    samples = bootstrap_ratio_samples(
        num_all, den_all, B=B, rng=rng_for(seed, f"coverage:{label}")
    ).reshape(B, len(scopes), len(RATES))
    return coverage_from_rates(outcomes, scopes, samples, level)


def coverage_from_rates(
    outcomes: pd.DataFrame,
    scopes: Sequence[str],
    samples: np.ndarray,
    level: float,
) -> dict[str, Coverage]:
    """Coverage per scope, then the macro view (the mean of the CF, CA and CC rates).

    Counts and point rates come from ``outcomes`` through ``count_outcomes`` and
    ``rates_from_counts``, the same functions the ``score`` summary uses; ``samples`` holds the
    paired bootstrap draws of the rates (B x scopes x RATES). Shared by the judge validation and
    the run reports, which differ only in how they draw the resamples.
    """
    n = len(outcomes)
    report: dict[str, Coverage] = {}
    for s, scope in enumerate(scopes):
        report[scope] = _scope_coverage(
            scope, n, count_outcomes(outcomes[scope]), samples[:, s, :], level
        )
    headline = macro_scopes(report)
    gated = [list(scopes).index(s) for s in headline]
    macro_counts = dict.fromkeys(OUTCOMES, 0)
    for scope in headline:
        for key, value in report[scope].counts.items():
            macro_counts[key] = macro_counts.get(key, 0) + value
    with np.errstate(invalid="ignore"):  # a scope with no judged item is NaN, not a warning
        macro_samples = samples[:, gated, :].mean(axis=1)
    rates: dict[str, RateEstimate] = {}
    for r, rate in enumerate(RATES):
        parts = [report[scope].rates[rate].point for scope in headline]
        known = [p for p in parts if p is not None]
        point = float(np.mean(known)) if len(known) == len(parts) else np.nan
        events, trials = _rate_counts(macro_counts, rate)
        rates[rate] = estimate_rate(point, macro_samples[:, r], level, events, trials)
    report["macro"] = Coverage(
        scope="macro",
        n_items=n,
        n_judged=sum(report[s].n_judged for s in headline),
        n_not_judged=sum(report[s].n_not_judged for s in headline),
        counts=macro_counts,
        rates=rates,
    )
    return report


def macro_scopes(coverage: dict[str, Coverage]) -> tuple[str, ...]:
    """The headline scopes the macro view averages: those the result lines hold.

    A metric that no line holding grades has (results written before the metric existed, or
    requests that named other metrics) stays out, as ``missing`` stays out of every
    denominator, so the macro view of an older results file is the mean over the metrics it
    holds instead of undefined. Such a scope's outcomes are ``missing``, and ``input`` or
    ``transport`` only on the lines that failed as a whole (which hold no grade of any metric).
    With no scope held, it is every headline scope (and undefined).
    """
    headline = headline_scopes()
    held = tuple(scope for scope in headline if _held(coverage[scope].counts))
    return held or headline


def _held(counts: dict[str, int]) -> bool:
    graded = sum(n for outcome, n in counts.items() if outcome not in _LINE_OUTCOMES)
    return graded > 0 or counts["missing"] == 0


# the outcomes of a metric on a line that holds no grade of it
_LINE_OUTCOMES = ("missing", "input", "transport")


def _rate_counts(counts: dict[str, int], rate: str) -> tuple[int, int]:
    numerator, denominator = RATE_DEFINITIONS[rate]
    return sum(counts[o] for o in numerator), sum(counts[o] for o in denominator)


def _scope_coverage(
    scope: str, n: int, counts: dict[str, int], samples: np.ndarray, level: float
) -> Coverage:
    points = rates_from_counts(counts)
    rates = {}
    for r, rate in enumerate(RATES):
        point = points[rate]
        events, trials = _rate_counts(counts, rate)
        rates[rate] = estimate_rate(
            np.nan if point is None else point, samples[:, r], level, events, trials
        )
    return Coverage(
        scope=scope,
        n_items=n,
        n_judged=sum(counts[o] for o in JUDGED),
        n_not_judged=sum(counts[o] for o in NOT_JUDGED),
        counts=counts,
        rates=rates,
    )


def placebo_fpr(
    results: pd.DataFrame,
    items: list[str],
    *,
    B: int,
    seed: int,
    label: str,
    level: float = 0.95,
) -> FprSham:
    """FPR_sham = share of SHAM items with a valid CA grade whose CA score is above 3."""
    ca = results[(results["metric"] == sham_metric().name) & results["item_id"].isin(items)]
    sham = ca[ca["modification_kind"] == "placebo"]
    if sham.empty:
        return FprSham(
            n_sham=0,
            n_valid=0,
            n_positive=0,
            rate=RateEstimate(point=None),
            note="no sham items: FPR not estimable",
        )
    valid = sham[sham["status"] == "valid"]
    positive = (valid["score"].astype("float64") > 3).to_numpy(dtype=np.float64)
    if positive.size == 0:
        return FprSham(
            n_sham=len(sham),
            n_valid=0,
            n_positive=0,
            rate=RateEstimate(point=None),
            note="no sham item has a valid CA grade: FPR not estimable",
        )
    samples = bootstrap_ratio_samples(
        positive[None, :], np.ones((1, positive.size)), B=B, rng=rng_for(seed, f"fpr:{label}")
    )[:, 0]
    return FprSham(
        n_sham=len(sham),
        n_valid=int(positive.size),
        n_positive=int(positive.sum()),
        rate=estimate_rate(
            float(positive.mean()), samples, level, int(positive.sum()), int(positive.size)
        ),
    )


def exact_upper(events: int, trials: int, level: float) -> float:
    """One-sided Clopper-Pearson upper bound of a binomial rate at ``level`` (0 of 5 -> 45%)."""
    if trials <= 0:
        return 1.0
    if events >= trials:
        return 1.0
    return float(beta.ppf(level, events + 1, trials - events))


SUCCESS_RATES: tuple[str, ...] = ("cov", "val")
"""The rates where higher is better: their bound is the lower one."""


def rate_bound(rate: str, estimate: RateEstimate, level: float = 0.95) -> float | None:
    """The exact one-sided Clopper-Pearson bound of a coverage rate, from its counts: the upper
    bound of a failure rate (the one its gate judges), the lower bound of ``cov`` and ``val``.

    A bootstrap of 0 failures is 0 however few the items, so reports print this bound instead.
    """
    events, trials = estimate.events, estimate.trials
    if estimate.point is None or not trials or events is None:
        return None
    if rate in SUCCESS_RATES:
        return 1.0 - exact_upper(trials - events, trials, level)
    return exact_upper(events, trials, level)


def fpr_bound(fpr: FprSham, level: float = 0.95) -> float | None:
    """The exact upper bound of the placebo FPR (the one its gate judges)."""
    if fpr.rate.point is None or fpr.n_valid == 0:
        return None
    return exact_upper(fpr.n_positive, fpr.n_valid, level)


def trials_needed(events: int, threshold: float, level: float) -> int | None:
    """The fewest trials with which ``events`` failures would pass ``threshold`` (None: never)."""
    if threshold <= 0.0 or threshold >= 1.0:
        return None if threshold <= 0.0 else max(events, 1)
    low = max(events, 1)
    high = low
    while exact_upper(events, high, level) > threshold:
        high *= 2
        if high > 10**9:
            return None
    while low < high:  # the bound falls as trials grow: bisect for the first that passes
        middle = (low + high) // 2
        if exact_upper(events, middle, level) <= threshold:
            high = middle
        else:
            low = middle + 1
    return low


def _gate(gate: str, scope: str, threshold: float, rate: RateEstimate, level: float) -> GateResult:
    events, trials = rate.events, rate.trials
    if rate.point is None or not trials or events is None:
        # no item at all is the extreme of too few: a zero threshold needs one item to show it
        return GateResult(
            gate=gate,
            scope=scope,
            threshold=threshold,
            point=rate.point,
            upper=None,
            passed=False,
            note="no item to judge it on: the rate cannot be bounded",
            needed=trials_needed(0, threshold, level) if threshold > _EPS else 1,
        )
    upper = exact_upper(events, trials, level)
    short: int | None = None
    if threshold <= _EPS:
        passed, note = events == 0, None
    else:
        passed = rate.point <= threshold + _EPS and upper <= threshold + _EPS
        needed = trials_needed(events, threshold, level)
        note = None
        if not passed and needed is not None and needed > trials:
            failures = "no failure" if events == 0 else f"{events} failure{'s' * (events > 1)}"
            note = f"{events} of {trials}: with {failures} a pass needs at least {needed} items"
            if rate.point <= threshold + _EPS:
                short = needed
    return GateResult(
        gate=gate,
        scope=scope,
        threshold=threshold,
        point=rate.point,
        upper=upper,
        passed=bool(passed),
        events=events,
        trials=trials,
        note=note,
        needed=short,
    )


def evaluate_gates(
    coverage: dict[str, Coverage], fpr: FprSham, thresholds: GateThresholds
) -> list[GateResult]:
    """Every gate on CF, CA, CC and the macro view, then the placebo FPR (on CA)."""
    gates: list[GateResult] = []
    for scope in gated_scopes():
        for gate in RATE_GATES:
            gates.append(
                _gate(
                    gate,
                    scope,
                    thresholds.threshold(gate),
                    coverage[scope].rates[gate],
                    thresholds.level,
                )
            )
    threshold = thresholds.threshold("fpr_sham")
    sham_label = sham_metric().label
    if fpr.n_sham == 0:
        gates.append(
            GateResult(
                gate="fpr_sham",
                scope=sham_label,
                threshold=threshold,
                point=None,
                upper=None,
                passed=None,
                note=fpr.note,
            )
        )
    else:
        result = _gate("fpr_sham", sham_label, threshold, fpr.rate, thresholds.level)
        if fpr.note is not None:
            result = result.model_copy(update={"note": fpr.note})
        gates.append(result)
    return gates
