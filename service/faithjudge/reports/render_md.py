"""Markdown rendering of a report and of a gate outcome (CI step summaries)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from faithjudge_client.metric_catalogue import headline_scopes

from faithjudge.markup import fmt_ci, fmt_pct, md_escape
from faithjudge.reports.aggregate import stats, table1_columns
from faithjudge.reports.gate import Check, failed_kinds
from faithjudge.reports.report import Report
from faithjudge.scoring.outcomes import RATES

__all__ = ["gate_markdown", "gate_verdict", "judges_markdown", "report_markdown"]


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
        f"graded against the ground truth); line errors {s['line_errors']}. Values in %, 95% "
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
    return out + _table(header, [[md_escape(cell) for cell in row] for row in rows])


def coverage_markdown(report: Report) -> list[str]:
    """Coverage diagnostics, placebo FPR and the paper's gates as Markdown lines."""
    rates = RATES
    out = ["## Coverage diagnostics (%, 95% upper bound in brackets)", ""]
    rows = []
    for scope, cov in report.coverage.items():
        cells = [
            "–" if (point := cov.rates[r].point) is None
            else f"{100 * point:.1f} [{fmt_pct(_hundred(cov.rates[r].high))}]"
            for r in rates
        ]  # fmt: skip
        c = cov.counts
        rows.append([scope, str(cov.n_judged), str(cov.n_not_judged), *cells,
                     str(c["transport"]), str(c["kb"]), str(c["input"])])  # fmt: skip
    out += _table(
        ["Scope", "Judged", "Not judged", "Pr[parse]", "Pr[schema]", "Pr[evidence]",
         "Pr[invalid]", "Pr[abstain]", "Pr[not judged]", "Cov", "Val", "Transport", "KB",
         "Input"],
        rows,
    )  # fmt: skip
    f = report.fpr
    fpr = (
        "–"
        if f.rate.point is None
        else f"{100 * f.rate.point:.1f} [{fmt_pct(_hundred(f.rate.high))}]"
    )
    out += [f"Placebo FPR (CA > 3 on {f.n_valid} of {f.n_sham} SHAM items): {fpr}"
            + (f" — {f.note}" if f.note else ""), ""]  # fmt: skip
    failed = [g for g in report.gates if g.passed is False]
    out += [f"Paper gates (METHODS §1.11): {len(report.gates) - len(failed)} of "
            f"{len(report.gates)} pass" + (": failing " + ", ".join(
                f"{g.gate} [{g.scope}]" for g in failed) if failed else "."), ""]  # fmt: skip
    return out


def _hundred(value: float | None) -> float | None:
    return None if value is None else 100 * value


def gate_verdict(checks: Sequence[Check], code: int) -> str:
    """PASSED, or FAILED naming every kind of check that failed (coverage first), or ERROR."""
    failed = failed_kinds(list(checks))
    if code == 0 and not failed:
        return "PASSED"
    if code in (1, 2) and failed:
        return f"FAILED ({', '.join(failed)})"
    return "ERROR"


def gate_markdown(checks: Sequence[Check], code: int, report: Report) -> str:
    """A CI step summary of a gate run."""
    verdict = gate_verdict(checks, code)
    s = report.summary
    models = md_escape(", ".join(s["models"]))
    out = [f"# FaithJudge gate: {verdict}", "", f"{s['lines']} result lines, models: {models}.", ""]
    out += judges_markdown(report)
    out += _table(
        ["Check", "Kind", "Threshold", "Value", "Result", "Detail"],
        [[md_escape(c.name), c.kind, fmt_pct(c.threshold, 2), fmt_pct(c.value, 2),
          {True: "pass", False: "**FAIL**", None: "n/a"}[c.passed], md_escape(c.detail)]
         for c in checks],
    )  # fmt: skip
    return _document(out + coverage_markdown(report))
