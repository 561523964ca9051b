"""Screening of candidate judges on the dev split (METHODS §1.12).

1. Discard the judges that violate any gate (ineligible).
2. Rank the rest by macro tau.
3. When the best and others are within delta (0.02) of it, consult in order (i) the lower
   FPR_sham on CA, (ii) the higher macro coverage Cov; if neither separates them, the highest
   macro tau stays. Tie-breaker (i) is skipped when an FPR is not estimable (no sham items).

When no judge is eligible the decision says so and names the best-ranked judge as the best
available (ineligible) with the gates it fails. Pure.
"""

from __future__ import annotations

from faithjudge.agreement.report import JudgeReport, RankEntry, Screening

__all__ = ["screen"]

_TIE = 1e-12


def _rank_key(judge: JudgeReport) -> tuple[int, float, str]:
    value = judge.macro_tau if judge.macro_tau is not None else judge.macro_tau_partial
    # judges with a full macro tau rank above those with a partial one
    full = 0 if judge.macro_tau is not None else 1
    return (full, -(value if value is not None else -2.0), judge.name)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def screen(judges: list[JudgeReport], *, delta: float = 0.02) -> Screening:
    """Rank by macro tau; only eligible judges can be selected; apply the delta tie rule."""
    ranked = sorted(judges, key=_rank_key)
    ranking = [RankEntry(judge=j.name, macro_tau=j.macro_tau, eligible=j.eligible) for j in ranked]
    eligible = [j for j in ranked if j.eligible]
    if not eligible:
        best = ranked[0]
        more = len(best.failed_gates) - 6
        shown = ", ".join(best.failed_gates[:6]) + (f" and {more} more" if more > 0 else "")
        return Screening(
            status="none_eligible",
            selected=None,
            best_available=best.name,
            failed_gates=best.failed_gates,
            ranking=ranking,
            tie_break=None,
            reason=(
                f"No judge passes every gate; the best-ranked, {best.name} (macro tau "
                f"{_fmt(best.macro_tau)}), is the best available (ineligible): it fails {shown}."
            ),
        )
    top = eligible[0]
    close = [
        j
        for j in eligible
        if top.macro_tau is not None
        and j.macro_tau is not None
        and top.macro_tau - j.macro_tau <= delta + _TIE
    ]
    tie_break = None
    chosen = top
    if len(close) > 1:
        names = ", ".join(j.name for j in close)
        fprs = [j.fpr_sham.rate.point for j in close]
        pool = close
        if all(f is not None for f in fprs):
            lowest = min(f for f in fprs if f is not None)
            pool = [
                j for j, f in zip(close, fprs, strict=True) if f is not None and f <= lowest + _TIE
            ]
            if len(pool) == 1:
                tie_break = "(i) lower FPR_sham on CA"
        if tie_break is None:
            covs = [j.coverage["macro"].rates["cov"].point or 0.0 for j in pool]
            best_cov = max(covs)
            by_cov = [j for j, c in zip(pool, covs, strict=True) if c >= best_cov - _TIE]
            if len(by_cov) == 1:
                pool = by_cov
                tie_break = "(ii) higher coverage"
        chosen = pool[0]
        reason = (
            f"{chosen.name} is selected: {names} are within delta = {delta:g} of the best macro "
            f"tau, and tie-breaker {tie_break} decides."
            if tie_break
            else f"{chosen.name} is selected: {names} are within delta = {delta:g} and the "
            "tie-breakers do not separate them, so the highest macro tau is kept."
        )
    elif len(eligible) == 1:
        reason = (
            f"{top.name} is selected: it is the only judge that passes every gate "
            f"(macro tau {_fmt(top.macro_tau)})."
        )
    else:
        second = eligible[1]
        gap = (
            top.macro_tau - second.macro_tau
            if top.macro_tau is not None and second.macro_tau is not None
            else None
        )
        reason = (
            f"{top.name} is selected: the highest macro tau among the {len(eligible)} eligible "
            f"judges ({_fmt(top.macro_tau)}), {_fmt(gap)} ahead of {second.name} "
            f"(more than delta = {delta:g})."
        )
    return Screening(
        status="selected",
        selected=chosen.name,
        best_available=None,
        failed_gates=[],
        ranking=ranking,
        tie_break=tie_break,
        reason=reason,
    )
