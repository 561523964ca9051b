"""Coverage of one scored run as the reports print it: from the item table, run-sized, as cells.

The run's side of ``faithjudge.stats.judge_coverage``: it reads the outcomes off the report's
item table (``faithjudge.reports.table``) and formats the rates as the cells of the Markdown and
HTML tables. The statistics are reused unchanged: the outcome of CC combined from CF and CT
(``axis_outcomes``), the rate indicators, the result models and ``evaluate_gates`` (pass when
the point value and the 95% upper bound are within the threshold); the reports print each rate
with the same exact bound (``rate_bound``). Only the bootstrap is drawn another way: per-item
outcome tuples take few distinct values, so the paired item bootstrap is drawn as a multinomial
over the distinct tuples (see ``faithjudge.stats.resample``), which keeps 300,000 lines within
memory.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from faithjudge_client.metric_catalogue import metrics, report_scopes, sham_metric

from faithjudge.scoring.outcomes import RATES
from faithjudge.stats.bootstrap import rng_for
from faithjudge.stats.judge_coverage import (
    SUCCESS_RATES,
    Coverage,
    FprSham,
    GateResult,
    GateThresholds,
    RateEstimate,
    axis_outcomes,
    coverage_from_rates,
    estimate_rate,
    evaluate_gates,
    fpr_bound,
    rate_bound,
    rate_indicators,
)

__all__ = [
    "BOUND_LEVEL",
    "bound_cell",
    "coverage_bounds",
    "fpr_bound",
    "not_judged_cells",
    "rate_bound",
    "rate_cell",
    "run_coverage",
    "run_fpr",
    "run_gates",
]

# The level of the gates' exact bounds, which the reports print beside every coverage rate.
BOUND_LEVEL = GateThresholds().level


def _outcomes(items: pd.DataFrame) -> pd.DataFrame:
    keys = [str(i) for i in range(len(items))]
    long = pd.concat(
        [
            pd.DataFrame(
                {
                    "item_id": keys,
                    "metric": spec.name,
                    "stage": items[f"{spec.label}_outcome"].where(
                        items[f"{spec.label}_outcome"] != "valid"
                    ),
                }
            )
            for spec in metrics()
        ],
        ignore_index=True,
    )
    return axis_outcomes(long, keys)


def _ratios(weights: np.ndarray, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    top, bottom = weights @ num.T, weights @ den.T
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1), np.nan)


def run_coverage(
    items: pd.DataFrame,
    *,
    B: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    input_lines: int = 0,
) -> dict[str, Coverage]:
    """Coverage per scope (every metric, then CC) and macro (mean over the headline scopes).

    ``input_lines`` counts input-error lines that have no row in ``items``: each is ``input`` in
    every scope, exactly as its row would be, so the rates and draws are those of the full run.
    """
    scopes = report_scopes()
    outcomes = _outcomes(items)[list(scopes)]
    if input_lines:
        # one shared string per cell: a row costs a few pointers, whatever the number of lines
        counted = pd.DataFrame({s: np.full(input_lines, "input", dtype=object) for s in scopes})
        outcomes = pd.concat([outcomes, counted], ignore_index=True)
    n = len(outcomes)
    grouped = outcomes.groupby(list(scopes), sort=True).size()
    patterns = grouped.index.to_frame(index=False)
    freq = grouped.to_numpy(dtype=np.float64)
    nums, dens = [], []
    for scope in scopes:
        num, den = rate_indicators(patterns[scope])
        nums.append(num)
        dens.append(den)
    num_all, den_all = np.vstack(nums), np.vstack(dens)
    k = len(RATES)
    if n:
        draws = rng_for(seed, "coverage:run").multinomial(n, freq / n, size=B).astype(float)
        samples = _ratios(draws, num_all, den_all).reshape(B, len(scopes), k)
    else:
        samples = np.full((B, len(scopes), k), np.nan)
    return coverage_from_rates(outcomes, scopes, samples, level)


def run_fpr(items: pd.DataFrame, *, B: int = 1000, seed: int = 0, level: float = 0.95) -> FprSham:
    """Placebo FPR: share of SHAM (placebo) items with a valid grade of the catalogue's sham
    metric (CA) whose score is > 3."""
    sham = items[items["kind"] == "placebo"]
    if sham.empty:
        return FprSham(n_sham=0, n_valid=0, n_positive=0, rate=RateEstimate(point=None),
                       note="no sham items: FPR not estimable")  # fmt: skip
    label = sham_metric().label
    scores = sham[f"{label}_score"].dropna().to_numpy(dtype=np.float64)
    if scores.size == 0:
        note = f"no sham item has a valid {label} grade: FPR not estimable"
        return FprSham(n_sham=len(sham), n_valid=0, n_positive=0,
                       rate=RateEstimate(point=None), note=note)  # fmt: skip
    positive = int((scores > 3).sum())
    draws = rng_for(seed, "fpr:run").binomial(scores.size, positive / scores.size, size=B)
    return FprSham(
        n_sham=len(sham),
        n_valid=int(scores.size),
        n_positive=positive,
        rate=estimate_rate(
            positive / scores.size, draws / scores.size, level, positive, int(scores.size)
        ),
    )


def bound_cell(point: float | None, bound: float | None, *, lower: bool = False) -> str:
    """A rate in % with its exact bound: ``0.0 [≤ 63.2]`` (``≥`` for a lower bound)."""
    if point is None:
        return "–"
    if bound is None:
        return f"{100 * point:.1f}"
    return f"{100 * point:.1f} [{'≥' if lower else '≤'} {100 * bound:.1f}]"


def rate_cell(rate: str, estimate: RateEstimate, level: float = BOUND_LEVEL) -> str:
    """``bound_cell`` of one coverage rate."""
    bound = rate_bound(rate, estimate, level)
    return bound_cell(estimate.point, bound, lower=rate in SUCCESS_RATES)


def not_judged_cells(scope: str, coverage: Coverage) -> list[str]:
    """The transport failures, KB misses and input errors of a scope, as lines. The macro view
    pools three scopes' grades, which would count each line thrice: it shows none."""
    if scope == "macro":
        return ["–", "–", "–"]
    return [str(coverage.counts[o]) for o in ("transport", "kb", "input")]


def coverage_bounds(
    coverage: dict[str, Coverage], level: float = BOUND_LEVEL
) -> dict[str, dict[str, float | None]]:
    """``rate_bound`` of every rate of every scope (for the JSON report)."""
    return {
        scope: {rate: rate_bound(rate, cov.rates[rate], level) for rate in RATES}
        for scope, cov in coverage.items()
    }


def run_gates(
    coverage: dict[str, Coverage], fpr: FprSham, thresholds: GateThresholds | None = None
) -> list[GateResult]:
    """The paper's eligibility gates (defaults of ``GateThresholds``) on this run."""
    return evaluate_gates(coverage, fpr, thresholds or GateThresholds())
