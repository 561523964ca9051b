"""Validate candidate judges against radiologist ratings and pick one (METHODS §1.11–§1.12).

For each judge and rated axis (CF, CA, CC; raw CT reported beside them: every catalogue metric
with a ``rating_key``, and CC) the judge's scores on the items where its grade is valid are
compared with the human consensus H_i by Kendall's tau-b (two-sided, tie-corrected p; 95%
percentile bootstrap CI over items). The macro tau is the unweighted mean of the taus of the
gated rated axes (``tau_scopes``: tau_CF, tau_CA and tau_CC). A gated metric without a
``rating_key`` has no tau: it counts in the coverage, the macro coverage and the gates, and the
report says it has no radiologist rating. Coverage diagnostics, the placebo FPR and the
preregistered gates decide eligibility; screening ranks the eligible judges by macro tau and,
when the top two are within delta, consults (i) the lower FPR_sham on CA, then (ii) the higher
coverage. The leave-one-out human ceiling says how well one radiologist agrees with the others.

Judges' result frames come from ``load_judge_results``; they must cover every rated item (a
judge cannot be ranked on the items it happened to return), extra items are ignored and counted.

Pure: pandas in, a JSON-serialisable pydantic report out. ``fit_cc_scale`` and
``stratified_split`` live in their own modules and are re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd
from faithjudge_client.metric_catalogue import CC_LABEL, labels, metrics

from faithjudge.agreement.calibration import CcScaleFit, fit_cc_scale
from faithjudge.agreement.consensus import (
    Consensus,
    axis_labels,
    build_consensus,
    consensus_scores,
    tau_scopes,
    unrated_scopes,
)
from faithjudge.agreement.report import (
    AxisAgreement,
    CeilingAxis,
    JudgeReport,
    RankEntry,
    Screening,
    TauEstimate,
    ValidationReport,
)
from faithjudge.agreement.screening import screen
from faithjudge.agreement.split import stratified_split
from faithjudge.errors import UserInputError
from faithjudge.scoring.metrics import DEFAULT_CALIBRATION, CalibrationParams
from faithjudge.stats.bootstrap import (
    DEFAULT_BOOTSTRAP,
    bootstrap_tau_b,
    kendall_tau_b,
    rng_for,
    significance_code,
)
from faithjudge.stats.judge_coverage import (
    GateThresholds,
    axis_outcomes,
    coverage_diagnostics,
    evaluate_gates,
    placebo_fpr,
)

__all__ = [
    "AxisAgreement",
    "CcScaleFit",
    "CeilingAxis",
    "GateThresholds",
    "JudgeReport",
    "RankEntry",
    "Screening",
    "TauEstimate",
    "ValidationReport",
    "axis_pairs",
    "fit_cc_scale",
    "human_ceiling",
    "screen",
    "stratified_split",
    "tau_rng_label",
    "validate_judge",
]


def _tau(x: np.ndarray, y: np.ndarray, *, B: int, seed: int, label: str) -> TauEstimate:
    point = kendall_tau_b(x, y)
    low = high = None
    if point.tau is not None and B > 0:
        ci = bootstrap_tau_b(x, y, B=B, rng=rng_for(seed, label))
        low, high = ci.low, ci.high
    return TauEstimate(
        tau=point.tau, p=point.p, sig=significance_code(point.p), n=point.n, low=low, high=high
    )


def _judge_values(results: pd.DataFrame, items: list[str]) -> pd.DataFrame:
    frame = results[results["item_id"].isin(items)]
    scores = frame.pivot(index="item_id", columns="metric", values="score").reindex(items)
    out = pd.DataFrame(index=pd.Index(items, name="item_id"))
    for spec in metrics():
        metric = spec.name
        column = scores[metric] if metric in scores.columns else pd.Series(np.nan, index=items)
        out[spec.label] = column.astype("float64")
    cc = frame.groupby("item_id")["confidence_calibration"].first().reindex(items)
    out[CC_LABEL] = cc.astype("float64")
    return out


def _rating_axis(label: str) -> str:
    """The rating axis of a scope label; a label without one is refused, naming the rated."""
    for axis, scope in axis_labels().items():
        if scope == label:
            return axis
    rated = ", ".join(axis_labels().values())
    raise ValueError(f"{label} has no radiologist rating to compare with; rated: {rated}")


def _pairs(
    label: str, values: pd.Series, valid: pd.Series, consensus: Consensus
) -> tuple[pd.Series, pd.Series, np.ndarray, np.ndarray]:
    """The rated and the used items of one axis, and the (judge, consensus) pairs tau-b
    compares: items with a consensus value and a valid judge grade."""
    axis = _rating_axis(label)
    h = (
        consensus.scores[axis].reindex(values.index)
        if axis in consensus.scores
        else pd.Series(np.nan, index=values.index)
    )
    rated = h.notna()
    used = rated & valid & values.notna()
    return rated, used, values[used].to_numpy(), h[used].to_numpy(dtype=np.float64)


def axis_pairs(
    ratings: pd.DataFrame, results: pd.DataFrame, label: str, *, params: CalibrationParams
) -> tuple[np.ndarray, np.ndarray]:
    """(judge score, consensus) of the items of ``ratings`` (one split) where the judge's
    ``label`` grade (a scope of ``validated_scopes``: CF, CA, CC or CT) is valid: the pairs
    ``validate_judge`` compares."""
    consensus = build_consensus(ratings, params=params)
    items = sorted(str(i) for i in ratings["item_id"].unique())
    outcomes = axis_outcomes(results, items)
    values = _judge_values(results, items)
    _, _, x, y = _pairs(label, values[label], outcomes[label] == "valid", consensus)
    return x, y


def tau_rng_label(judge: str, axis: str) -> str:
    """The label of the seeded generator behind a judge's tau-b CI on one axis."""
    return f"tau:{judge}:{axis}"


def _axis_agreement(
    label: str,
    values: pd.Series,
    valid: pd.Series,
    consensus: Consensus,
    *,
    B: int,
    seed: int,
    name: str,
) -> AxisAgreement:
    axis = _rating_axis(label)
    rated, used, x, y = _pairs(label, values, valid, consensus)
    point = kendall_tau_b(x, y)
    ci_low = ci_high = None
    degenerate = 0
    if point.tau is not None:
        ci = bootstrap_tau_b(x, y, B=B, rng=rng_for(seed, tau_rng_label(name, label)))
        ci_low, ci_high, degenerate = ci.low, ci.high, ci.degenerate
    per_rater: dict[str, TauEstimate] = {}
    usable = valid & values.notna()
    rows = consensus.z[consensus.z["axis"] == axis]
    for rater, group in sorted(rows.groupby("rater"), key=lambda g: str(g[0])):
        scores = group.set_index("item_id")["score"].astype(np.float64)
        common = [i for i in scores.index if i in usable.index and bool(usable[i])]
        # Tab. S7 reports significance only, so the per-rater taus get no bootstrap
        per_rater[str(rater)] = _tau(
            values[common].to_numpy(), scores[common].to_numpy(), B=0, seed=seed, label=""
        )
    n_rated, n_used = int(rated.sum()), int(used.sum())
    tau = TauEstimate(
        tau=point.tau,
        p=point.p,
        sig=significance_code(point.p),
        n=point.n,
        low=ci_low,
        high=ci_high,
    )
    return AxisAgreement(
        axis=label,
        tau=tau,
        n_rated=n_rated,
        n_used=n_used,
        coverage=n_used / n_rated if n_rated else None,
        per_rater=per_rater,
        degenerate_resamples=degenerate,
    )


def _judge_report(
    name: str,
    results: pd.DataFrame,
    items: list[str],
    consensus: Consensus,
    *,
    B: int,
    seed: int,
    thresholds: GateThresholds,
) -> JudgeReport:
    source = results.attrs.get("source")
    judged = set(results["item_id"])
    missing = [i for i in items if i not in judged]
    if missing:
        shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        where = f" ({source})" if source else ""
        raise UserInputError(
            f"judge {name}{where}: {len(missing)} rated item(s) have no result: {shown}; "
            "the judge file must cover every rated item",
            field=name,
        )
    extra = len(judged - set(items))
    outcomes = axis_outcomes(results, items)
    values = _judge_values(results, items)
    axes: dict[str, AxisAgreement] = {}
    notes: list[str] = []
    for label in axis_labels().values():
        axes[label] = _axis_agreement(
            label,
            values[label],
            outcomes[label] == "valid",
            consensus,
            B=B,
            seed=seed,
            name=name,
        )
    macro_axes = tau_scopes()
    taus = [axes[a].tau.tau for a in macro_axes]
    present = [t for t in taus if t is not None]
    macro = float(np.mean(present)) if len(present) == len(taus) else None
    partial = float(np.mean(present)) if present and macro is None else None
    if macro is None:
        lacking = [a for a, t in zip(macro_axes, taus, strict=True) if t is None]
        notes.append(f"no tau for {', '.join(lacking)}: macro tau undefined")
    coverage = coverage_diagnostics(outcomes, B=B, seed=seed, label=name, level=thresholds.level)
    for scope in labels():
        cov = coverage[scope]
        outside = cov.n_items - cov.n_judged
        if outside:
            parts = [
                f"{k} {cov.counts[k]}"
                for k in ("kb", "transport", "input", "missing")
                if cov.counts[k]
            ]
            notes.append(
                f"{scope}: {outside} of {cov.n_items} items never reached the judge "
                f"({', '.join(parts)}); rates are over the {cov.n_judged} judged"
            )
    if extra:
        notes.append(f"{extra} judged item(s) without ratings ignored")
    fpr = placebo_fpr(results, items, B=B, seed=seed, label=name, level=thresholds.level)
    gates = evaluate_gates(coverage, fpr, thresholds)
    failed = [f"{g.scope} {g.gate}" for g in gates if g.passed is False]
    return JudgeReport(
        name=name,
        source=source,
        n_items=len(items),
        extra_items_ignored=extra,
        axes=axes,
        macro_tau=macro,
        macro_tau_partial=partial,
        coverage=coverage,
        fpr_sham=fpr,
        gates=gates,
        eligible=not failed,
        failed_gates=failed,
        notes=notes,
    )


def _unrated_note() -> str | None:
    """What the report says of the gated metrics without a radiologist rating (None: none)."""
    unrated = unrated_scopes()
    if not unrated:
        return None
    return (
        f"{', '.join(unrated)}: no radiologist rating; gated on coverage only, "
        f"not in the macro tau (over {', '.join(tau_scopes())})"
    )


def human_ceiling(consensus: Consensus, *, B: int, seed: int) -> dict[str, CeilingAxis]:
    """Leave-one-out tau per rater and axis: the rater's scores vs the mean z-score of the
    other raters, on the items the rater scored that some other rater scored too."""
    out: dict[str, CeilingAxis] = {}
    z = consensus.z
    for axis, label in axis_labels().items():
        rows = z[z["axis"] == axis]
        per_rater: dict[str, TauEstimate] = {}
        for rater in sorted(rows["rater"].unique(), key=str):
            others, _ = consensus_scores(rows, exclude=rater)
            own = rows[rows["rater"] == rater].set_index("item_id")["score"].astype(np.float64)
            if axis not in others:
                continue
            h = others[axis].reindex(own.index)
            keep = h.notna()
            per_rater[str(rater)] = _tau(
                own[keep].to_numpy(),
                h[keep].to_numpy(dtype=np.float64),
                B=B,
                seed=seed,
                label=f"ceiling:{label}:{rater}",
            )
        taus = [t.tau for t in per_rater.values() if t.tau is not None]
        out[label] = CeilingAxis(
            axis=label,
            per_rater=per_rater,
            mean=float(np.mean(taus)) if taus else None,
            min=float(min(taus)) if taus else None,
            max=float(max(taus)) if taus else None,
        )
    return out


def validate_judge(
    ratings: pd.DataFrame,
    judges: Mapping[str, pd.DataFrame],
    *,
    B: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    delta: float = 0.02,
    gates: GateThresholds | None = None,
    params: CalibrationParams = DEFAULT_CALIBRATION,
    fit_cc: bool = False,
) -> ValidationReport:
    """Validate each judge's results against one split's ratings and screen the candidates.

    ``ratings``: the long frame of ``load_ratings``/``load_reader_study`` (one split);
    ``judges``: name -> frame of ``load_judge_results``; ``B``: bootstrap resamples for every
    CI and gate upper bound; ``params``: the CC weights used for the readers' CC;
    ``fit_cc``: also fit the CC scale kappa per judge (B = 1,000 as in the paper).

    Raises:
        UserInputError: no ratings, no judges, or a judge that misses rated items.
    """
    thresholds = gates or GateThresholds()
    if ratings.empty:
        raise UserInputError("no ratings to validate against", field="ratings")
    if not judges:
        raise UserInputError("no judges to validate: give at least one", field="judge")
    if B < 1:
        raise UserInputError(f"the bootstrap needs B >= 1, got {B}", field="bootstrap")
    if not (math.isfinite(delta) and delta >= 0):
        raise UserInputError(f"delta must be a number >= 0, got {delta}", field="delta")
    consensus = build_consensus(ratings, params=params)
    items = sorted(str(i) for i in ratings["item_id"].unique())
    reports = [
        _judge_report(name, frame, items, consensus, B=B, seed=seed, thresholds=thresholds)
        for name, frame in judges.items()
    ]
    notes: list[str] = []
    unrated = _unrated_note()
    if unrated:
        notes.append(unrated)
    if all(r.fpr_sham.n_sham == 0 for r in reports):
        notes.append("no sham items: FPR not estimable; the FPR gate was not evaluated")
    cc_scale = (
        {name: fit_cc_scale(ratings, frame, seed=seed) for name, frame in judges.items()}
        if fit_cc
        else {}
    )
    return ValidationReport(
        n_items=len(items),
        raters=sorted(str(r) for r in ratings["rater"].unique()),
        bootstrap=B,
        seed=seed,
        delta=delta,
        thresholds=thresholds,
        dropped=list(consensus.dropped),
        judges=reports,
        ceiling=human_ceiling(consensus, B=B, seed=seed),
        screening=screen(reports, delta=delta),
        cc_scale=cc_scale,
        notes=notes,
    )
