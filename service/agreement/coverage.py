"""Coverage diagnostics, placebo FPR and eligibility gates of a judge (METHODS §1.11).

Each (item, metric) ends in exactly one outcome, classified in the verdict's order: ``parse``,
``schema``, ``abstain``, ``evidence`` or ``valid``. These are the judge's own outcomes and
their rates are over the items the judge was asked (``n_judged``):

    Pr[invalid] = Pr[parse] + Pr[schema] + Pr[evidence]
    Cov = 1 - Pr[abstain] - Pr[invalid]        Val = 1 - Pr[invalid] / (1 - Pr[abstain])

Items the judge never saw are counted but kept out of the rates, because they say nothing
about the judge: ``kb`` (no knowledge-base entry, CF only), ``transport`` (the evaluator stayed
unreachable or, for replay, has no record), ``input`` (the request line was unreadable) and
``missing`` (the request did not ask for the metric). Reports show them beside the rates.

CC is derived from CF and CT, so its outcome combines theirs: a not-judged outcome of either
wins, then the first of parse, schema, abstain, evidence; valid only when both are valid.
The macro view averages the CF, CA and CC rates (unweighted, like the macro tau).

Upper bounds come from a paired percentile bootstrap over items (the same resamples for every
rate, so the macro mean is bootstrapped consistently). A gate passes when both the point value
and the upper bound of its 95% CI are within the threshold; for ``Pr[parse] = 0`` that means no
parse failure at all.

Pure: pandas and numpy in, pydantic models out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from service.agreement.consensus import AXIS_LABELS, CC_AXIS
from service.agreement.stats import bootstrap_ratio_samples, percentile_interval, rng_for

__all__ = [
    "GATED_SCOPES",
    "JUDGE_STAGES",
    "NOT_JUDGED",
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
    "placebo_fpr",
]

JUDGE_STAGES: tuple[str, ...] = ("parse", "schema", "abstain", "evidence")
NOT_JUDGED: tuple[str, ...] = ("kb", "transport", "input", "missing")
RATES: tuple[str, ...] = ("parse", "schema", "evidence", "invalid", "abstain", "cov", "val")
GATED_SCOPES: tuple[str, ...] = ("CF", "CA", "CC", "macro")
_SCOPES: tuple[str, ...] = ("CF", "CA", "CC", "CT")
_EPS = 1e-12


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


@dataclass(frozen=True, slots=True)
class GateThresholds:
    """Preregistered eligibility thresholds (METHODS §1.11), judged on the CI upper bound.

    Rates are fractions (0.02 = 2%); ``level`` is the confidence level of the bootstrap CI
    whose upper bound must not exceed each threshold.
    """

    fpr_sham: float = 0.05
    abstain: float = 0.02
    invalid: float = 0.02
    parse: float = 0.0
    schema: float = 0.01
    evidence: float = 0.01
    level: float = 0.95

    def __post_init__(self) -> None:
        for name in ("fpr_sham", "abstain", "invalid", "parse", "schema", "evidence"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"gate threshold {name} must be within [0, 1], got {value}")
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"level must be within (0, 1), got {self.level}")

    def threshold(self, gate: str) -> float:
        """The threshold of ``gate`` (``fpr_sham``, ``abstain``, ``invalid``, ``parse``,
        ``schema`` or ``evidence``)."""
        return float(getattr(self, gate))


class RateEstimate(_Model):
    """A rate with its percentile bootstrap CI; None where it is not estimable."""

    point: float | None
    low: float | None = None
    high: float | None = None


class Coverage(_Model):
    """Coverage diagnostics of one metric (or the macro view) of one judge."""

    scope: str
    n_items: int
    n_judged: int
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
    """One gate: ``passed`` is None when it could not be evaluated and does not count."""

    gate: str
    scope: str
    threshold: float
    point: float | None
    upper: float | None
    passed: bool | None
    note: str | None = None


def _combine(cf: str, ct: str) -> str:
    for stage in (*NOT_JUDGED, *JUDGE_STAGES):
        if stage in (cf, ct):
            return stage
    return "valid"


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
    for metric in ("clinical_fidelity", "causal_attribution", "confidence_tone"):
        column = wide[metric] if metric in wide.columns else pd.Series("missing", index=items)
        out[AXIS_LABELS[metric]] = column.fillna("missing").astype(str)
    out[AXIS_LABELS[CC_AXIS]] = [_combine(a, b) for a, b in zip(out["CF"], out["CT"], strict=True)]
    return out[list(_SCOPES)]


def _indicators(outcomes: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    o = outcomes.to_numpy()
    judged = np.isin(o, ("valid", *JUDGE_STAGES)).astype(np.float64)
    parse, schema = (o == "parse").astype(float), (o == "schema").astype(float)
    evidence, abstain = (o == "evidence").astype(float), (o == "abstain").astype(float)
    valid = (o == "valid").astype(float)
    invalid = parse + schema + evidence
    attempted = judged - abstain
    num = np.vstack([parse, schema, evidence, invalid, abstain, valid, valid])
    den = np.vstack([judged] * 6 + [attempted])
    return num, den


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    top, bottom = num.sum(axis=1), den.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1), np.nan)


def estimate_rate(point: float, samples: np.ndarray, level: float) -> RateEstimate:
    if not np.isfinite(point):
        return RateEstimate(point=None)
    interval = percentile_interval(samples, level)
    low, high = interval if interval is not None else (None, None)
    return RateEstimate(point=float(point), low=low, high=high)


def coverage_diagnostics(
    outcomes: pd.DataFrame, *, B: int, seed: int, label: str, level: float = 0.95
) -> dict[str, Coverage]:
    """Coverage per scope (CF, CA, CC, CT) and the macro view (mean of CF, CA, CC rates)."""
    nums, dens = [], []
    for scope in _SCOPES:
        num, den = _indicators(outcomes[scope])
        nums.append(num)
        dens.append(den)
    num_all, den_all = np.vstack(nums), np.vstack(dens)
    points = _ratio(num_all, den_all).reshape(len(_SCOPES), len(RATES))
    samples = bootstrap_ratio_samples(
        num_all, den_all, B=B, rng=rng_for(seed, f"coverage:{label}")
    ).reshape(B, len(_SCOPES), len(RATES))

    n_judged = [int(dens[s][0].sum()) for s in range(len(_SCOPES))]
    return coverage_from_rates(outcomes, _SCOPES, n_judged, points, samples, level)


def coverage_from_rates(
    outcomes: pd.DataFrame,
    scopes: Sequence[str],
    n_judged: Sequence[int],
    points: np.ndarray,
    samples: np.ndarray,
    level: float,
) -> dict[str, Coverage]:
    """Coverage per scope, then the macro view (the mean of the CF, CA and CC rates).

    ``points`` holds the rates (scopes x RATES) and ``samples`` their paired bootstrap draws
    (B x scopes x RATES); ``outcomes`` gives the counts. Shared by the judge validation and the
    run reports, which differ only in how they draw the resamples.
    """
    n = len(outcomes)
    report: dict[str, Coverage] = {}
    for s, scope in enumerate(scopes):
        counts = outcomes[scope].value_counts().to_dict()
        report[scope] = Coverage(
            scope=scope,
            n_items=n,
            n_judged=int(n_judged[s]),
            counts={k: int(counts.get(k, 0)) for k in ("valid", *JUDGE_STAGES, *NOT_JUDGED)},
            rates={
                rate: estimate_rate(points[s, r], samples[:, s, r], level)
                for r, rate in enumerate(RATES)
            },
        )
    gated = [list(scopes).index(s) for s in ("CF", "CA", "CC")]
    with np.errstate(invalid="ignore"):  # a scope with no judged item is NaN, not a warning
        macro_points = points[gated].mean(axis=0)
        macro_samples = samples[:, gated, :].mean(axis=1)
    macro_counts: dict[str, int] = {}
    for scope in ("CF", "CA", "CC"):
        for key, value in report[scope].counts.items():
            macro_counts[key] = macro_counts.get(key, 0) + value
    report["macro"] = Coverage(
        scope="macro",
        n_items=n,
        n_judged=sum(report[s].n_judged for s in ("CF", "CA", "CC")),
        counts=macro_counts,
        rates={
            rate: estimate_rate(macro_points[r], macro_samples[:, r], level)
            for r, rate in enumerate(RATES)
        },
    )
    return report


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
    ca = results[(results["metric"] == "causal_attribution") & results["item_id"].isin(items)]
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
        rate=estimate_rate(float(positive.mean()), samples, level),
    )


def _gate(gate: str, scope: str, threshold: float, rate: RateEstimate) -> GateResult:
    if rate.point is None or rate.high is None:
        return GateResult(
            gate=gate,
            scope=scope,
            threshold=threshold,
            point=rate.point,
            upper=rate.high,
            passed=False,
            note="no judged items: the rate cannot be bounded",
        )
    passed = rate.point <= threshold + _EPS and rate.high <= threshold + _EPS
    return GateResult(
        gate=gate,
        scope=scope,
        threshold=threshold,
        point=rate.point,
        upper=rate.high,
        passed=bool(passed),
    )


def evaluate_gates(
    coverage: dict[str, Coverage], fpr: FprSham, thresholds: GateThresholds
) -> list[GateResult]:
    """Every gate on CF, CA, CC and the macro view, then the placebo FPR (on CA)."""
    gates: list[GateResult] = []
    for scope in GATED_SCOPES:
        for gate in ("parse", "schema", "evidence", "invalid", "abstain"):
            gates.append(
                _gate(gate, scope, thresholds.threshold(gate), coverage[scope].rates[gate])
            )
    threshold = thresholds.threshold("fpr_sham")
    if fpr.n_sham == 0:
        gates.append(
            GateResult(
                gate="fpr_sham",
                scope="CA",
                threshold=threshold,
                point=None,
                upper=None,
                passed=None,
                note=fpr.note,
            )
        )
    else:
        result = _gate("fpr_sham", "CA", threshold, fpr.rate)
        if fpr.note is not None:
            result = result.model_copy(update={"note": fpr.note})
        gates.append(result)
    return gates
