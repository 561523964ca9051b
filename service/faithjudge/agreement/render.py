"""Markdown tables of a ``ValidationReport`` (pure: report in, text out).

Layout follows the paper's tables: a screening summary like Tab. S8, agreement with the
consensus like Table 2, judge vs individual raters like Tab. S7, the human ceiling like Tab. S9,
then coverage, gates and the decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from faithjudge_client.metric_catalogue import agreement_scopes, headline_scopes, sham_metric

from faithjudge.agreement.consensus import tau_scopes, unrated_scopes, validated_scopes
from faithjudge.agreement.report import JudgeReport, TauEstimate, ValidationReport
from faithjudge.stats.judge_coverage import (
    RATE_GATES,
    RateEstimate,
    fpr_bound,
    gated_scopes,
    rate_bound,
)

__all__ = ["render_markdown"]

_GATES = RATE_GATES
_GATE_NAMES = {
    "parse": "Pr[parse]",
    "schema": "Pr[schema]",
    "evidence": "Pr[evidence]",
    "invalid": "Pr[invalid]",
    "abstain": "Pr[abstain]",
    "not_judged": "Pr[not judged]",
    "fpr_sham": "FPR_sham",
}


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str | None = None) -> str:
    marks = align or ("l" + "r" * (len(header) - 1))
    rule = ["---" if a == "l" else "---:" for a in marks]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _tau(t: TauEstimate, *, ci: bool = True) -> str:
    if t.tau is None:
        return "–"
    sig = "" if t.sig == "–" else (" ns" if t.sig == "ns" else t.sig)
    text = f"{t.tau:.3f}{sig}"
    if ci and t.low is not None and t.high is not None:
        text += f" [{t.low:.3f}, {t.high:.3f}]"
    return text


def _rate(name: str, rate: RateEstimate) -> str:
    # the exact bound the gate judges, not a bootstrap (which puts 0 failures at 0 for any n)
    if rate.point is None:
        return "–"
    return f"{_pct(rate.point)} (≤ {_pct(rate_bound(name, rate))})"


def _summary(report: ValidationReport) -> str:
    header = [
        "Judge",
        "τ̄",
        *(f"τ_{scope}" for scope in tau_scopes()),
        "FPR_sham",
        "Cov",
        "Val",
        "Pr[parse]",
        "Pr[schema]",
        "Pr[evidence]",
        "Pr[abstain]",
        "eligible",
    ]
    rows = []
    for judge in report.judges:
        macro = judge.coverage["macro"].rates
        fpr = judge.fpr_sham.rate.point
        rows.append(
            [
                judge.name,
                _num(judge.macro_tau)
                if judge.macro_tau is not None
                else f"({_num(judge.macro_tau_partial)})",
                *(_num(judge.axes[a].tau.tau) for a in tau_scopes()),
                "n/e" if fpr is None else _pct(fpr),
                _pct(macro["cov"].point),
                _pct(macro["val"].point),
                _pct(macro["parse"].point),
                _pct(macro["schema"].point),
                _pct(macro["evidence"].point),
                _pct(macro["abstain"].point),
                "✓" if judge.eligible else "✗",
            ]
        )
    return _table(header, rows, "l" + "r" * (len(header) - 2) + "l")


def _agreement(report: ValidationReport) -> str:
    header = ["Judge", "Axis", "τ_b", "95% CI", "p", "n used / rated"]
    rows = []
    for judge in report.judges:
        for axis in validated_scopes():
            a = judge.axes[axis]
            ci = "–" if a.tau.low is None else f"[{a.tau.low:.3f}, {a.tau.high:.3f}]"
            p = "–" if a.tau.p is None else f"{a.tau.p:.2g} {a.tau.sig}"
            label = axis if axis in headline_scopes() else f"{axis} (raw)"
            rows.append([judge.name, label, _num(a.tau.tau), ci, p, f"{a.n_used} / {a.n_rated}"])
        for scope in unrated_scopes():
            rows.append([judge.name, scope, "no radiologist rating", "", "", ""])
        rows.append([judge.name, "**macro τ̄**", _num(judge.macro_tau), "", "", ""])
    return _table(header, rows, "llrrrr")


def _per_rater(report: ValidationReport) -> str:
    raters = report.raters
    rows = []
    for judge in report.judges:
        for axis in validated_scopes():
            per = judge.axes[axis].per_rater
            cells = [
                _tau(per[r], ci=False) + f" (n={per[r].n})" if r in per else "–" for r in raters
            ]
            rows.append([judge.name, axis, *cells])
    return _table(["Judge", "Axis", *raters], rows, "ll" + "r" * len(raters))


def _ceiling(report: ValidationReport) -> str:
    raters = report.raters
    rows = []
    for axis in validated_scopes():
        c = report.ceiling.get(axis)
        if c is None:
            continue
        span = "–" if c.min is None else f"[{c.min:.3f}, {c.max:.3f}]"
        cells = [_tau(c.per_rater[r]) if r in c.per_rater else "–" for r in raters]
        rows.append([axis, _num(c.mean), span, *cells])
    header = ["Axis", "Mean", "Range (min, max)", *(f"{r} vs others" for r in raters)]
    return _table(header, rows, "lrr" + "r" * len(raters))


def _coverage(judge: JudgeReport) -> str:
    header = [
        "Scope",
        "judged / items",
        "Pr[parse]",
        "Pr[schema]",
        "Pr[evidence]",
        "Pr[invalid]",
        "Pr[abstain]",
        "Pr[not judged]",
        "Cov",
        "Val",
        "kb",
        "transport",
        "input",
    ]
    rows = []
    for scope in (*agreement_scopes(), "macro"):
        cov = judge.coverage[scope]
        r = cov.rates
        # the macro view pools its scopes' grades: one per item and averaged scope
        pooled = sum(cov.counts.values()) if scope == "macro" else cov.n_items
        rows.append(
            [
                scope,
                f"{cov.n_judged} / {pooled}",
                *(_rate(k, r[k]) for k in ("parse", "schema", "evidence", "invalid", "abstain")),
                _pct(r["not_judged"].point),
                _pct(r["cov"].point),
                _pct(r["val"].point),
                *(str(cov.counts[k]) for k in ("kb", "transport", "input")),
            ]
        )
    return _table(header, rows)


def _gate_header(gate: str, threshold: float) -> str:
    op = "=" if threshold == 0 else "≤"
    return f"{_GATE_NAMES[gate]} {op} {_pct(threshold)}%"


def _gates(report: ValidationReport) -> str:
    t = report.thresholds
    header = [
        "Judge",
        "Scope",
        *(
            f"{_GATE_NAMES[g]} {'=' if t.threshold(g) == 0 else '≤'} {_pct(t.threshold(g))}%"
            for g in _GATES
        ),
        f"FPR_sham ≤ {_pct(t.fpr_sham)}%",
    ]
    rows = []
    for judge in report.judges:
        by_key = {(g.scope, g.gate): g for g in judge.gates}
        for scope in gated_scopes():
            cells = []
            for gate in (*_GATES, "fpr_sham"):
                g = by_key.get((scope, gate))
                if g is None:
                    cells.append("")
                elif g.passed is None:
                    cells.append("– (not evaluated)")
                else:
                    mark = "✓" if g.passed else "✗"
                    cells.append(f"{mark} {_pct(g.point)} (≤ {_pct(g.upper)} exact)")
            rows.append([judge.name, scope, *cells])
    return _table(header, rows, "ll" + "r" * (len(header) - 2))


def _cc_scale(report: ValidationReport) -> str:
    header = ["Judge", "κ", "95% CI", "α", "β", "MSE", "n", "P = 0", "clip binds"]
    rows = []
    for name, fit in report.cc_scale.items():
        ci = "–" if fit.kappa_ci is None else f"[{fit.kappa_ci[0]:.3f}, {fit.kappa_ci[1]:.3f}]"
        rows.append(
            [
                name,
                _num(fit.kappa),
                ci,
                _num(fit.alpha),
                _num(fit.beta),
                _num(fit.mse, 4),
                str(fit.n_items),
                _pct(fit.zero_penalty_share) + "%" if fit.zero_penalty_share is not None else "–",
                "–" if fit.clip_binds is None else ("yes" if fit.clip_binds else "no"),
            ]
        )
    return _table(header, rows)


def render_markdown(report: ValidationReport) -> str:
    """The whole report as Markdown: summary, agreement, raters, ceiling, coverage, gates,
    screening decision, CC scale (when fitted) and notes."""
    b = f"{report.bootstrap:,}"
    sham = sham_metric().label
    ungated = [scope for scope in validated_scopes() if scope not in headline_scopes()]
    raw = f"; {', '.join(ungated)} (raw) is rated but not gated" if ungated else ""
    parts = [
        "## Judge validation",
        f"{report.n_items} items; raters {', '.join(report.raters)}; percentile bootstrap "
        f"over items, B = {b}, seed {report.seed}; screening delta = {report.delta:g}.",
        f"### Screening summary (rates in %, point values; macro τ̄ over {', '.join(tau_scopes())}"
        f", macro rates over {', '.join(headline_scopes())})",
        _summary(report),
        "τ̄ in parentheses: mean over the axes that have a τ (some axis has none); "
        f"n/e: FPR_sham not estimable (no sham items with a valid {sham} grade).",
        "### Agreement with the radiologist consensus (Kendall τ_b, 95% CI)",
        "Significance (two-sided, tie-corrected): *** p < 0.001, ** p < 0.01, * p < 0.05, "
        f"ns not significant. CC is exploratory{raw}.",
        _agreement(report),
        "### Judge vs individual raters (τ_b)",
        _per_rater(report),
        "### Human ceiling (leave-one-out τ_b vs the other raters' consensus, 95% CI)",
        _ceiling(report),
    ]
    if report.dropped:
        parts.append("Raters left out of an axis's consensus:")
        parts.append("\n".join(f"- {d.rater} on {d.axis}: {d.reason}" for d in report.dropped))
    parts.append(
        "### Coverage diagnostics (%, point (≤ exact one-sided 95% upper bound); rates over judged)"
    )
    for judge in report.judges:
        parts += [f"**{judge.name}**", _coverage(judge)]
    parts += [
        "### Gates (judged on the exact one-sided 95% upper bound; ✓ pass, ✗ fail)",
        _gates(report),
        f"### Placebo FPR (SHAM items, positive = {sham} > 3)",
        "\n".join(
            f"- {j.name}: "
            + (
                j.fpr_sham.note
                if j.fpr_sham.rate.point is None and j.fpr_sham.note
                else f"{j.fpr_sham.n_positive} / {j.fpr_sham.n_valid} = "
                f"{_pct(j.fpr_sham.rate.point)}% (≤ {_pct(fpr_bound(j.fpr_sham))}%)"
            )
            for j in report.judges
        ),
        "### Screening decision",
    ]
    s = report.screening
    if s.status == "selected":
        parts.append(f"**Selected: {s.selected}.** {s.reason}")
    else:
        parts.append(f"**No judge passes the gates.** {s.reason}")
        parts.append(f"Best available (ineligible): **{s.best_available}**.")
    parts.append(
        "Ranking by macro τ̄: "
        + ", ".join(
            f"{i}. {e.judge} ({_num(e.macro_tau)}{'' if e.eligible else ', ineligible'})"
            for i, e in enumerate(s.ranking, start=1)
        )
    )
    if report.cc_scale:
        parts += ["### Confidence-calibration scale (α = ρκ, β = κ)", _cc_scale(report)]
    notes = list(report.notes) + [f"{j.name}: {n}" for j in report.judges for n in j.notes]
    notes += [
        f"{name}: {fit.note}" for name, fit in report.cc_scale.items() if fit.note is not None
    ]
    if notes:
        parts += ["### Notes", "\n".join(f"- {n}" for n in notes)]
    return "\n\n".join(parts) + "\n"
