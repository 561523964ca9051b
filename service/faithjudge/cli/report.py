"""``faithjudge report`` and ``faithjudge gate``: turn result lines into reports and CI verdicts.

Registered on the main app by ``register(app)``. Exit codes (``faithjudge.cli.common.ExitCode``):
``gate`` exits 0 pass, 1 a quality or regression check failed, 2 a coverage check failed, 3 the
run could not be evaluated (a missing or unreadable file, bad configuration or one that sets no
check, a baseline that shares no item, or a mistyped command line: click's usage errors would
otherwise exit with 2 and read as a coverage failure), 4 the file holds no result line or not
one valid grade. ``report`` applies the same rule for 3 and 4 (``_input_problem``): it still
writes what it was asked for, then exits with that code. A line either command cannot read is
named on stderr and counted as an input error, never a reason to write nothing. The report
libraries are imported when a command runs, not when the CLI starts.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from faithjudge.cli.common import ExitCode, check_outputs, err, fail
from faithjudge.errors import FaithJudgeError
from faithjudge.reports.limits import LISTED_ITEMS

if TYPE_CHECKING:
    import pandas as pd

    from faithjudge.reports.explorer import ItemDetails
    from faithjudge.reports.judges import JudgeTally
    from faithjudge.reports.report import Report
    from faithjudge.stats.canary import CanaryRecords

__all__ = ["gate_command", "register", "report_command"]

# (exit code, message) of a run that ``report`` and ``gate`` must not treat as a success
_Problem = tuple[ExitCode, str]


def _load(
    path: Path,
    quote_rows: int = 0,
    judges: JudgeTally | None = None,
    details: ItemDetails | None = None,
) -> pd.DataFrame:
    """The item table of ``path``; ``judges`` counts the lines' judges in the same pass, and
    ``details`` keeps what the HTML report shows of the first lines.

    A line that is not a result line is an input error of the table (named on stderr), never a
    reason to report nothing.
    """
    from faithjudge.reports.io import iter_results, summarize_problems
    from faithjudge.reports.table import item_table

    if not path.is_file():
        raise FaithJudgeError(f"result file not found: {path}")
    problems: list[str] = []
    results = iter_results(path, problems)
    if details is not None:
        results = details.watch(results)
    items = item_table(results if judges is None else judges.watch(results), quote_rows=quote_rows)
    if problems:
        err.print(summarize_problems(path, "result", problems), highlight=False, markup=False)
    return items


def _nothing_scored(results: Path, items: pd.DataFrame) -> _Problem | None:
    """Exit 4: the results hold no line or not one valid grade (``report`` and ``gate``)."""
    from faithjudge.reports.gate import unevaluable_reason

    reason = unevaluable_reason(items)
    return None if reason is None else (ExitCode.NOTHING_SCORED, f"{results}: {reason}")


def _nothing_shared(baseline: Path | None, counts: dict[str, int]) -> _Problem | None:
    """Exit 3: a baseline was given but shares no item with the results."""
    from faithjudge.reports.gate import unshared_reason

    reason = None if baseline is None else unshared_reason(counts)
    return None if reason is None else (ExitCode.UNEVALUABLE, f"{baseline}: {reason}")


def _input_problem(results: Path, items: pd.DataFrame, baseline: Path | None,
                   counts: dict[str, int]) -> _Problem | None:  # fmt: skip
    """The rule ``report`` and ``gate`` share: nothing scored (4) wins over nothing shared (3)."""
    return _nothing_scored(results, items) or _nothing_shared(baseline, counts)


def report_command(
    results: Annotated[Path, typer.Argument(metavar="RESULTS.jsonl", help="ItemResult lines.")],
    html: Annotated[Path | None, typer.Option("--html", help="Self-contained HTML report.")] = None,
    md: Annotated[Path | None, typer.Option("--md", help="Markdown report.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Machine-readable JSON.")] = None,
    csv: Annotated[
        Path | None, typer.Option("--csv", help="Item table (.csv, or .parquet with pyarrow).")
    ] = None,
    compare: Annotated[
        Path | None, typer.Option("--compare", help="Baseline result lines to compare with.")
    ] = None,
    requests: Annotated[
        Path | None,
        typer.Option("--requests", help="The scored request lines: the HTML shows their CoTs."),
    ] = None,
    bootstrap: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 1000,
    seed: Annotated[int, typer.Option(min=0, help="Bootstrap seed.")] = 0,
    max_items: Annotated[int, typer.Option(min=0, help="Items shown in the HTML.")] = LISTED_ITEMS,
    flip_rate: Annotated[
        str,
        typer.Option(
            help="pairs: flipped over all pairs (the paper's); decided: over decided pairs only."
        ),
    ] = "pairs",
) -> None:
    """Aggregates, coverage and (with --compare) paired differences of one run."""
    import json

    from faithjudge.reports.explorer import ItemDetails, listed_keys, read_request_views
    from faithjudge.reports.export import export_items
    from faithjudge.reports.io import summarize_problems, write_text
    from faithjudge.reports.judges import JudgeTally
    from faithjudge.reports.render_html import report_html
    from faithjudge.reports.render_md import report_markdown
    from faithjudge.reports.report import build_report, report_json

    try:
        read = [path for path in (results, compare, requests) if path is not None]
        check_outputs(read, [html, md, json_out, csv])
        judges = JudgeTally()
        details = ItemDetails(max_items) if html is not None else None
        items = _load(results, quote_rows=max_items, judges=judges, details=details)
        baseline = _load(compare) if compare is not None else None
        if flip_rate not in ("pairs", "decided"):
            raise typer.BadParameter("use pairs or decided", param_hint="--flip-rate")
        report = build_report(items, baseline=baseline, B=bootstrap, seed=seed,
                              flip_rate=flip_rate, judges=judges.summary())  # fmt: skip
        report = _with_canary(report, None)
        problem = _input_problem(results, items, compare, report.comparison_counts)
        if html is not None:
            # ground truths, baseline answers and CoTs of the listed items only
            views = None
            if requests is not None:
                # a missing file stops before anything is written, a bad line does not
                views = read_request_views(requests, listed_keys(items, max_items))
                if views.problems:
                    err.print(summarize_problems(requests, "request", views.problems),
                              highlight=False, markup=False)  # fmt: skip
            rows = details.rows if details is not None else None
            page = report_html(report, requests=views, details=rows, max_items=max_items)
            write_text(html, page)
        if md is not None:
            write_text(md, report_markdown(report))
        if json_out is not None:
            write_text(json_out, json.dumps(report_json(report), indent=2, allow_nan=False) + "\n")
        if csv is not None:
            export_items(items, csv)
    except FaithJudgeError as exc:
        raise fail(exc) from None
    if html is None and md is None and json_out is None and csv is None:
        typer.echo(report_markdown(report), nl=False)
    else:
        err.print(f"report of {len(items)} result lines written", highlight=False)
    if problem is not None:
        # written all the same (it shows what was lost), but not a success: the gate's codes
        raise fail(problem[1], problem[0])


def gate_command(
    results: Annotated[Path, typer.Argument(metavar="RESULTS.jsonl", help="ItemResult lines.")],
    config: Annotated[Path, typer.Option("--config", help="Gate thresholds (TOML).")],
    baseline: Annotated[
        Path | None, typer.Option("--baseline", help="Baseline result lines (regressions).")
    ] = None,
    junit: Annotated[Path | None, typer.Option("--junit", help="JUnit XML of the checks.")] = None,
    md: Annotated[Path | None, typer.Option("--md", help="Markdown summary (CI step).")] = None,
) -> None:
    """Check one run against thresholds: exit 0 pass, 1 quality, 2 coverage, 3 unevaluable,
    4 not one valid grade."""
    from faithjudge.cli.canary import canary_records
    from faithjudge.reports import gate as gating
    from faithjudge.reports.io import write_text
    from faithjudge.reports.judges import JudgeTally
    from faithjudge.reports.junit import junit_xml
    from faithjudge.reports.render_md import gate_markdown
    from faithjudge.reports.report import build_report

    read = [path for path in (results, config, baseline) if path is not None]
    try:
        check_outputs(read, [junit, md])
    except FaithJudgeError as exc:
        raise fail(exc) from None
    try:
        settings = gating.load_config(config)
        kinds = gating.configured_kinds(settings)
        if baseline is None and kinds == {"regression"}:
            raise gating.GateConfigError(
                f"{config}: sets only [regression] checks, which need --baseline: "
                "nothing would be checked"
            )
        judges = JudgeTally()
        items = _load(results, judges=judges)
        problem = _nothing_scored(results, items)
        if problem is not None:
            raise _unevaluable(problem[1], problem[0], junit, md)
        base = _load(baseline) if baseline is not None else None
        if "regression" in kinds and base is None:
            err.print("\\[regression] thresholds set but no --baseline: not checked")
        report = build_report(
            items,
            baseline=base,
            B=settings.bootstrap,
            seed=settings.seed,
            tolerance=gating.regression_tolerance(settings),
            flip_rate=settings.flip_rate,
            judges=judges.summary(),
        )
        problem = _nothing_shared(baseline, report.comparison_counts)
        if problem is not None:
            raise _unevaluable(problem[1], problem[0], junit, md)
        # one verdict: the header, the Markdown, the JUnit file and the exit code all read it
        # with [canary] the record must be readable: the gate's checks stand on it
        records = canary_records(settings.canary) if settings.canary is not None else None
        report = _with_canary(report, records)
        verdict = gating.verdict(gating.evaluate(report, settings, records))
        summary = gate_markdown(verdict, report)
        if junit is not None:
            write_text(junit, junit_xml(verdict, judges=report.judges))
        if md is not None:
            write_text(md, summary)
    except FaithJudgeError as exc:
        raise _unevaluable(exc, ExitCode.UNEVALUABLE, junit, md) from None
    typer.echo(summary, nl=False)
    raise typer.Exit(verdict.code)


def _with_canary(report: Report, records: CanaryRecords | None) -> Report:
    """``report`` saying when the canary of its judge last passed (``records``: the checks on
    record; None: the data dir's, when it can be read)."""
    import dataclasses

    from faithjudge.cli.canary import canary_records
    from faithjudge.reports.canary import run_standing

    if records is None:
        try:
            records = canary_records(None)
        except FaithJudgeError as exc:  # a report is not refused for an unreadable record
            err.print(f"judge canary not shown: {exc}", highlight=False, markup=False)
            return report
    return dataclasses.replace(report, canary=tuple(run_standing(records, report.judges)))


def _unevaluable(reason: object, code: ExitCode, junit: Path | None, md: Path | None) -> typer.Exit:
    """The exit of a gate that cannot judge the run (3 or 4), after writing its JUnit file
    and Markdown summary all the same: a CI step that uploads them shows why it failed."""
    from faithjudge.reports.io import write_text
    from faithjudge.reports.junit import junit_unevaluable

    with contextlib.suppress(FaithJudgeError):  # the exit names the first problem, not this
        if junit is not None:
            write_text(junit, junit_unevaluable(str(reason), int(code)))
        if md is not None:
            text = str(reason).replace("\n", "\n    ")
            write_text(md, f"# FaithJudge gate: NOT EVALUATED (exit {int(code)})\n\n    {text}\n")
    return fail(reason, code)


def register(app: typer.Typer) -> None:
    """Add ``report`` and ``gate`` to the ``faithjudge`` app."""
    app.command("report")(report_command)
    app.command("gate")(gate_command)
