"""One report of a run: every table the renderers need, as plain data.

``build_report`` is a pure function of the item tables (and therefore of the result lines);
the renderers (Markdown, HTML, JSON) only format what it returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from faithjudge_client.metric_catalogue import labels

from faithjudge.reports.aggregate import aggregate, table1
from faithjudge.reports.compare import compare_runs
from faithjudge.reports.judges import JudgeSummary
from faithjudge.reports.run_coverage import (
    coverage_bounds,
    fpr_bound,
    run_coverage,
    run_fpr,
    run_gates,
)
from faithjudge.scoring.outcomes import LINE_PROBLEMS
from faithjudge.stats.judge_coverage import Coverage, FprSham, GateResult

__all__ = [
    "CountedInputErrors",
    "Report",
    "build_report",
    "problem_counts",
    "problem_lines",
    "report_json",
]


@dataclass(frozen=True)
class CountedInputErrors:
    """Input-error lines counted without a row in the item table (a batch's rejected lines past
    the first ones): each is one line of no answer and no flip whose every metric is ``input``.
    They count in the summary and the coverage; the aggregates and the listings leave them out.
    """

    lines: int = 0
    models: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Report:
    """Everything a renderer shows; frames hold % values, coverage holds fractions."""

    items: pd.DataFrame
    aggregates: pd.DataFrame
    table1: pd.DataFrame
    coverage: dict[str, Coverage]
    fpr: FprSham
    gates: list[GateResult]
    comparison: pd.DataFrame | None = None
    comparison_counts: dict[str, int] = field(default_factory=dict)
    bootstrap: int = 1000
    seed: int = 0
    judges: JudgeSummary | None = None
    """Who graded the run (from the lines' provenance); None when the caller did not count."""
    counted: CountedInputErrors = field(default_factory=CountedInputErrors)
    canary: tuple[str, ...] = ()
    """When the judge canary of the run's judge last passed (``reports.canary.run_standing``);
    empty when no check of it is on record."""

    @property
    def summary(self) -> dict[str, Any]:
        """Counts shown at the top of every report."""
        items, counted = self.items, self.counted
        problems = {key: int(mask.sum()) for key, mask in _problem_masks(items).items()}
        if counted.lines:
            problems[_problem_key(LINE_PROBLEMS["input"])] += counted.lines
        models = set(items["model"].dropna().unique().tolist()) | counted.models
        modifications = set(items["modification"].dropna().unique().tolist())
        return {
            "lines": len(items) + counted.lines,
            "models": sorted(models),
            "modifications": len(modifications | ({"(none)"} if counted.lines else set())),
            "line_errors": int(items["error_stage"].notna().sum()) + counted.lines,
            **problems,
            "flip": int((items["flip"] == 1.0).sum()),
            "non_flip": int((items["flip"] == 0.0).sum()),
            "flip_undecided": int(items["flip"].isna().sum()) + counted.lines,
            "answers_off_options": int((items["answer_in_options"] == 0.0).sum()),
            "bootstrap": self.bootstrap,
            "seed": self.seed,
            **({"unlisted_problem_lines": counted.lines} if counted.lines else {}),
        }


def _problem_key(name: str) -> str:
    return name.replace(" ", "_").lower()


def _problem_masks(items: pd.DataFrame) -> dict[str, pd.Series]:
    """Per ``LINE_PROBLEMS`` outcome (as ``input_errors``, ``kb_misses``), its lines."""
    outcomes = [items[f"{label}_outcome"] for label in labels()]
    masks: dict[str, pd.Series] = {}
    for outcome, name in LINE_PROBLEMS.items():
        mask = pd.Series(False, index=items.index)
        for column in outcomes:
            mask |= column == outcome
        masks[_problem_key(name)] = mask
    return masks


def _present(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def problem_lines(report: Report) -> list[dict[str, Any]]:
    """The lines that never reached the judge because of the line itself, in file order:
    ``line``, ``item_id``, ``model``, ``problem`` (a ``LINE_PROBLEMS`` name) and ``detail``."""
    items = report.items
    problem = pd.Series(None, index=items.index, dtype=object)
    for (_, name), mask in zip(LINE_PROBLEMS.items(), _problem_masks(items).values(), strict=True):
        problem = problem.where(~mask | problem.notna(), name)
    rows: list[dict[str, Any]] = []
    for index in items.index[problem.notna()]:
        row = items.loc[index]
        detail = _present(row["error_detail"])
        if detail is None and problem[index] == LINE_PROBLEMS["kb"]:
            detail = "the question has no knowledge-base entry"
        line = _present(row["line"])
        rows.append({
            "line": None if line is None else int(line),
            "item_id": _present(row["item_id"]),
            "model": _present(row["model"]),
            "problem": problem[index],
            "detail": detail,
        })  # fmt: skip
    return rows


def problem_counts(summary: dict[str, Any]) -> str:
    """``input errors 2, KB misses 1``: the line problems under their one name."""
    return ", ".join(
        f"{name} {summary[name.replace(' ', '_').lower()]}" for name in LINE_PROBLEMS.values()
    )


def build_report(
    items: pd.DataFrame,
    *,
    baseline: pd.DataFrame | None = None,
    B: int = 1000,
    seed: int = 0,
    tolerance: dict[str, float] | None = None,
    flip_rate: str = "pairs",
    judges: JudgeSummary | None = None,
    counted: CountedInputErrors | None = None,
) -> Report:
    """Aggregates, Table 1, coverage, placebo FPR, the paper's gates and an optional comparison.

    ``flip_rate``: ``pairs`` (the paper's: flipped over all pairs) or ``decided`` (flipped over
    the pairs whose flip could be decided). ``judges`` (``reports.judges.JudgeTally``, counted
    while the item table was read) is shown by every renderer. ``counted``: input-error lines
    without a row in ``items``.
    """
    aggregates = aggregate(items, B=B, seed=seed, flip_rate=flip_rate)
    baseline_codes = frozenset(items.loc[items["kind"] == "baseline", "modification"].unique())
    counted = counted or CountedInputErrors()
    coverage = run_coverage(items, B=B, seed=seed, input_lines=counted.lines)
    fpr = run_fpr(items, B=B, seed=seed)
    comparison: pd.DataFrame | None = None
    counts: dict[str, int] = {}
    if baseline is not None:
        comparison, counts = compare_runs(baseline, items, B=B, seed=seed, tolerance=tolerance)
    return Report(
        items=items,
        aggregates=aggregates,
        table1=table1(aggregates, skip=baseline_codes),
        coverage=coverage,
        fpr=fpr,
        gates=run_gates(coverage, fpr),
        comparison=comparison,
        comparison_counts=counts,
        bootstrap=B,
        seed=seed,
        judges=judges,
        counted=counted,
    )


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    def clean(value: Any) -> Any:
        if isinstance(value, float) and math.isnan(value):
            return None
        return value.item() if hasattr(value, "item") else value

    return [{k: clean(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def report_json(report: Report) -> dict[str, Any]:
    """The machine-readable report (JSON-safe: NaN becomes null)."""
    return {
        "summary": report.summary,
        "problem_lines": problem_lines(report),
        "judges": None if report.judges is None else report.judges.to_json(),
        "canary": list(report.canary),
        "table1": _records(report.table1),
        "aggregates": _records(report.aggregates),
        "coverage": {k: v.model_dump() for k, v in report.coverage.items()},
        # the exact one-sided bounds the gates judge (upper; lower for cov and val)
        "coverage_bounds": coverage_bounds(report.coverage),
        "fpr_sham": report.fpr.model_dump(),
        "fpr_sham_upper": fpr_bound(report.fpr),
        "gates": [g.model_dump() for g in report.gates],
        "comparison": None
        if report.comparison is None
        else {"counts": report.comparison_counts, "stats": _records(report.comparison)},
    }
