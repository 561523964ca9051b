"""Markdown rendering of a report and of a gate outcome (CI step summaries)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from faithjudge_client.metric_catalogue import headline_scopes

from faithjudge.reports.aggregate import stats, table1_columns
from faithjudge.reports.gate import TOO_FEW, Verdict, check_status
from faithjudge.reports.limits import LISTED_PROBLEMS
from faithjudge.reports.markup import fmt_ci, fmt_pct, md_escape
from faithjudge.reports.report import Report, problem_counts, problem_lines
from faithjudge.reports.run_coverage import (
    BOUND_LEVEL,
    bound_cell,
    fpr_bound,
    not_judged_cells,
    rate_cell,
)
from faithjudge.scoring.outcomes import RATES

__all__ = [
    "coverage_markdown",
    "gate_markdown",
    "judges_markdown",
    "problems_markdown",
    "report_markdown",
]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def _pm(row: pd.Series, column: str) -> str:
    value, sd = row[column], row[f"{column}_sd"]
    if value is None or pd.isna(value):
        return "–"
    return fmt_pct(value) + ("" if sd is None or pd.isna(sd) else f" ± {fmt_pct(sd)}")


def _cells(report: Report, dimension: str, split: str) -> list[list[str]]:
    frame = report.aggregates[
        (report.aggregates["dimension"] == dimension) & (report.aggregates["split"] == split)
    ]
    rows = []
    for (model, group), cell in frame.groupby(["model", "group"], sort=True):
        by = cell.set_index("stat")
        rows.append(
            [md_escape(model), md_escape(group), str(int(by["n"].iloc[0]))]
            + [fmt_ci(by.at[s, "value"], by.at[s, "low"], by.at[s, "high"])
               for s in stats()]
        )  # fmt: skip
    return rows


def report_markdown(report: Report, *, max_groups: int = 200) -> str:
    """The report as Markdown: summary, Table 1, per-modification splits, coverage, comparison."""
    s = report.summary
    out = ["# FaithJudge report", ""]
    out.append(
        f"{s['lines']} result lines, {len(s['models'])} model(s), {s['modifications']} "
        f"modification(s); flip {s['flip']}, non-flip {s['non_flip']}, undecided "
        f"{s['flip_undecided']}; answers outside the options {s['answers_off_options']} (CF "
        f"graded against the ground truth); {problem_counts(s)}. Values in %, 95% "
        "percentile "
        f"bootstrap CIs over items (B = {s['bootstrap']}, seed {s['seed']}). CC is exploratory."
    )
    out += ["", *judges_markdown(report)]
    out += ["## Table 1 (mean ± SD across modifications)", ""]
    table1_cols = [column for column, _, _ in table1_columns()]
    out += _table(
        ["Model", *table1_cols],
        [[md_escape(r["model"]), *(_pm(r, c) for c in table1_cols)]
         for _, r in report.table1.iterrows()],
    )  # fmt: skip
    header = ["Model", "Group", "n", "Acc", "Flip rate", "Flip undecided", *headline_scopes()]
    for dimension, title in (
        ("all", "Overall"),
        ("modification", "Per modification"),
        ("alignment", "Aligned vs misleading hints"),
        ("channel", "Text vs image modifications"),
        ("question_type", "Per question type"),
    ):
        for split in ("all", "flip", "non-flip"):
            rows = _cells(report, dimension, split)
            if not rows:
                continue
            out += [f"## {title} — {split}", ""]
            out += _table(header, rows[:max_groups])
            if len(rows) > max_groups:
                out += [f"({len(rows) - max_groups} more rows in the JSON report)", ""]
    out += problems_markdown(report)
    out += coverage_markdown(report)
    if report.comparison is not None:
        out += ["## Comparison with the baseline (candidate − baseline, % points)", ""]
        counts = report.comparison_counts
        out += [
            f"{counts.get('shared', 0)} shared items; baseline only "
            f"{counts.get('baseline_only', 0)}, candidate only {counts.get('candidate_only', 0)}, "
            f"without item_id {counts.get('unmatched', 0)}.",
            "",
        ]
        out += _table(
            ["Stat", "Pairs", "Baseline", "Candidate", "Diff [95% CI]", "Regression"],
            [[r["stat"], str(r["n_pairs"]), fmt_pct(r["baseline"]), fmt_pct(r["candidate"]),
              fmt_ci(r["diff"], r["low"], r["high"]), "**yes**" if r["regression"] else "no"]
             for _, r in report.comparison.iterrows()],
        )  # fmt: skip
    return _document(out)


def _document(lines: list[str]) -> str:
    """Markdown lines as one text that ends with exactly one newline (a POSIX text file)."""
    return "\n".join(lines).rstrip("\n") + "\n"


def judges_markdown(report: Report) -> list[str]:
    """The judge of the run (or each judge of a mixed run, with its line count)."""
    if report.judges is None:
        return []
    header, rows = report.judges.table()
    out = ["## Judge", "", md_escape(report.judges.headline()), ""]
    out += [line for said in report.canary for line in (md_escape(said), "")]
    return out + _table(header, [[md_escape(cell) for cell in row] for row in rows])


def problems_markdown(report: Report, *, limit: int = LISTED_PROBLEMS) -> list[str]:
    """The lines that never reached the judge because of the line itself, by line number."""
    rows = problem_lines(report)
    if not rows:
        return []
    out = [f"## Lines not judged ({problem_counts(report.summary)})", ""]
    out += _table(
        ["Line", "Item", "Model", "Problem", "Detail"],
        [["–" if r["line"] is None else str(r["line"]), md_escape(r["item_id"] or "–"),
          md_escape(r["model"] or "–"), r["problem"], md_escape(r["detail"] or "")]
         for r in rows[:limit]],
    )  # fmt: skip
    if len(rows) > limit:
        out += [f"({len(rows) - limit} more in the JSON report)", ""]
    if report.counted.lines:
        out += [f"({report.counted.lines} more input errors, counted but listed nowhere)", ""]
    return out


def coverage_markdown(report: Report, *, paper_gates: bool = True) -> list[str]:
    """Coverage diagnostics, placebo FPR and (``paper_gates``) the paper's gates as Markdown.

    Every rate is printed with the exact one-sided bound its gate is judged on.
    """
    level = f"{100 * BOUND_LEVEL:g}%"
    out = [f"## Coverage diagnostics (%, exact one-sided {level} bound in brackets)", ""]
    rows = []
    for scope, cov in report.coverage.items():
        cells = [rate_cell(r, cov.rates[r]) for r in RATES]
        rows.append([scope, str(cov.n_judged), str(cov.n_not_judged), *cells,
                     *not_judged_cells(scope, cov)])  # fmt: skip
    out += _table(
        ["Scope", "Judged", "Not judged", "Pr[parse]", "Pr[schema]", "Pr[evidence]",
         "Pr[invalid]", "Pr[abstain]", "Pr[not judged]", "Cov", "Val",
         "Transport failures", "KB misses", "Input errors"],
        rows,
    )  # fmt: skip
    f = report.fpr
    fpr = bound_cell(f.rate.point, fpr_bound(f))
    out += [f"Placebo FPR (CA > 3 on {f.n_valid} of {f.n_sham} SHAM items): {fpr}"
            + (f" — {f.note}" if f.note else ""), ""]  # fmt: skip
    if not paper_gates:
        return out
    failed = [g for g in report.gates if g.passed is False and g.needed is None]
    short = [g for g in report.gates if g.passed is False and g.needed is not None]
    said = [f"failing {', '.join(f'{g.gate} [{g.scope}]' for g in failed)}"] if failed else []
    if short:
        said.append(f"{TOO_FEW} for " + ", ".join(
            f"{g.gate} [{g.scope}] ({g.trials or 0} of {g.needed})" for g in short))  # fmt: skip
    passed = len(report.gates) - len(failed) - len(short)
    out += [f"Paper gates (METHODS §1.11): {passed} of {len(report.gates)} pass"
            + (": " + "; ".join(said) if said else "."), ""]  # fmt: skip
    return out


_RESULT = {"pass": "pass", "fail": "**FAIL**", TOO_FEW: f"**{TOO_FEW}**", "skip": "skipped"}


def gate_markdown(result: Verdict, report: Report) -> str:
    """A CI step summary of a gate run: the verdict, then every check as the verdict read it."""
    s = report.summary
    models = md_escape(", ".join(s["models"]))
    out = [f"# FaithJudge gate: {result.label}", ""]
    if result.failed:
        names = ", ".join(md_escape(c.name) for c in result.failed)
        out += [f"Failed checks ({len(result.failed)}): {names}.", ""]
    if result.too_few:
        short = ", ".join(f"{md_escape(c.scope)} {c.short_of()}" for c in result.too_few)
        out += [f"Too few items to show coverage ({len(result.too_few)} scopes): {short}.", ""]
    out += [f"{s['lines']} result lines, models: {models}; {problem_counts(s)}.", ""]
    out += judges_markdown(report)
    out += _table(
        ["Check", "Kind", "Threshold", "Value", "Result", "Detail"],
        [[md_escape(c.name), c.kind, *c.shown(), _RESULT[check_status(c)], md_escape(c.detail)]
         for c in result.checks],
    )  # fmt: skip
    out += problems_markdown(report)
    return _document(out + coverage_markdown(report, paper_gates=False))
