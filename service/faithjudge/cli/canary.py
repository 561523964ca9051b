"""``faithjudge canary record|check``: pin a judge's grades of a few items, and show later that
the judge still gives them (the work lives in ``faithjudge.runners.canary``; the rule in
``faithjudge.stats.canary``).

Exit codes (``faithjudge.exit_codes.ExitCode``): ``record`` 0 pinned, 3 the judge could not be
reached or left grades unanswered (nothing pinned), or bad input; ``check`` 0 the grades agree
within the tolerance, 1 drift (each differing item, metric and grade named), 3 the judge could
not be reached (or left grades unanswered), or bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from faithjudge.cli.common import (
    ExitCode,
    check_outputs,
    err,
    exit_with,
    fail,
    renamed_option,
    settings_from,
)
from faithjudge.judges import judge_help

if TYPE_CHECKING:
    from faithjudge.reports.canary import CanaryTable
    from faithjudge.settings import Settings
    from faithjudge.stats.canary import CanaryCheck, CanaryRecords

__all__ = ["canary_records", "register"]

canary_app = typer.Typer(
    help="Pin a judge's grades of canary items, and check later that it still gives them.",
    no_args_is_help=True,
)


@canary_app.command("record")
def record_command(
    items: Annotated[
        Path, typer.Argument(metavar="ITEMS.jsonl", help="Canary request lines (ScoreRequest).")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="The pinned canary file.")],
    judge: Annotated[str | None, typer.Option(help=judge_help())] = None,
    evaluator: Annotated[str | None, typer.Option(hidden=True, help="Deprecated: --judge.")] = None,
    prompt_set: Annotated[str | None, typer.Option(help="Prompt set name or folder.")] = None,
    knowledge_base: Annotated[str | None, typer.Option(help="KB name or JSON file.")] = None,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Judge calls in flight.")] = None,
) -> None:
    """Grade ITEMS with real calls (never from the response cache) and pin the grades, the
    judge (spec, model, judge_sha256, system_fingerprint) and the time in OUTPUT.

    Exit 0 pinned; 3 when the judge cannot be reached or left a grade unanswered (nothing is
    written), or ITEMS cannot be read.
    """
    judge = renamed_option(judge, evaluator, "--judge", "--evaluator")
    from faithjudge.errors import FaithJudgeError
    from faithjudge.event_loop import run_async
    from faithjudge.runners.canary import record_canary, write_pinned

    try:
        check_outputs([items], [output])
        settings = settings_from(
            judge=judge,
            prompt_set=prompt_set,
            knowledge_base=knowledge_base,
            concurrency=concurrency,
        )
        graded, pinned, recorded_at = run_async(record_canary, settings, items)
        write_pinned(output, graded, pinned, recorded_at)
    except FaithJudgeError as exc:
        raise fail(exc) from None
    grades = sum(len(item.grades or {}) for item in graded)
    prints = ", ".join(pinned.fingerprints) or "none sent"
    err.print(
        f"pinned {grades} grades of {len(graded)} items -> {output}\njudge: {pinned.judge}"
        f" (model {pinned.model or 'not recorded'}, judge_sha256 {pinned.judge_sha256}, "
        f"system_fingerprint {prints}) at {recorded_at}",
        highlight=False,
        markup=False,
    )


@canary_app.command("check")
def check_command(
    pinned: Annotated[
        Path | None,
        typer.Argument(
            metavar="PINNED.jsonl",
            help="The pinned canary file (or pinned in --config's [canary]).",
            show_default=False,
        ),
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(help="The judge to check (default: the pinned judge). " + judge_help()),
    ] = None,
    evaluator: Annotated[str | None, typer.Option(hidden=True, help="Deprecated: --judge.")] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="faithjudge.toml: its [canary] table sets PINNED and the "
            "tolerance (options given here win).",
        ),
    ] = None,
    score_tolerance: Annotated[
        int | None, typer.Option(min=0, max=4, help="Points a score may differ by (default 0).")
    ] = None,
    min_agreement: Annotated[
        float | None,
        typer.Option(min=0, max=100, help="% of grades that must agree (default 90)."),
    ] = None,
    prompt_set: Annotated[str | None, typer.Option(help="Prompt set name or folder.")] = None,
    knowledge_base: Annotated[str | None, typer.Option(help="KB name or JSON file.")] = None,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Judge calls in flight.")] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="Where the record of the last check is kept.")
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the check as JSON on stdout.")
    ] = False,
) -> None:
    """Grade the pinned items again (real calls, never from the response cache) and compare
    with the pinned grades: per item and metric the same outcome and a score within
    --score-tolerance points; at least --min-agreement % of the grades must agree. Judge
    changes (judge, model, configuration, system_fingerprint) are reported.

    The check is kept in the data dir (canary_checks.json, or [canary] record), where the
    gate, the reports and the service read when the canary last passed.

    Exit 0 the grades agree; 1 drift (each differing item, metric and grade named); 3 the
    judge cannot be reached or left grades unanswered, or bad input.
    """
    judge = renamed_option(judge, evaluator, "--judge", "--evaluator")
    from faithjudge.errors import FaithJudgeError, UserInputError
    from faithjudge.event_loop import run_async
    from faithjudge.runners.canary import check_canary, check_json, read_pinned, save_check
    from faithjudge.stats.canary import Tolerance

    try:
        table = _table(config) if config is not None else None
        if pinned is None:
            if table is None:
                raise UserInputError("PINNED.jsonl is required (or pinned in --config's [canary])")
            pinned = table.pinned
        base = table.tolerance if table is not None else Tolerance()
        tolerance = Tolerance(
            score_tolerance=base.score_tolerance if score_tolerance is None else score_tolerance,
            min_agreement=base.min_agreement if min_agreement is None else min_agreement,
        )
        canary = read_pinned(pinned)
        settings = settings_from(judge=judge, prompt_set=prompt_set,
                                 knowledge_base=knowledge_base, concurrency=concurrency,
                                 data_dir=data_dir)  # fmt: skip
        if "judge" not in settings.model_fields_set:  # neither given nor in the environment
            settings = settings.model_copy(update={"judge": canary.judge.judge})
        check = run_async(check_canary, settings, canary, tolerance)
        if check.verdict != "unreached":
            check = save_check(_records_file(settings, table), check)
    except FaithJudgeError as exc:
        raise fail(exc) from None
    if json_out:
        typer.echo(json.dumps(check_json(check), indent=2))
    _print(check)
    if check.verdict == "unreached":
        exit_with(ExitCode.UNEVALUABLE, f"the judge {check.judge.judge} left "
                  f"{len(check.comparison.unanswered)} canary grade(s) unanswered: nothing to "
                  "compare; check again once it answers")  # fmt: skip
    if check.verdict == "drift":
        exit_with(ExitCode.CHECK_FAILED, f"the judge drifted: {check.comparison.summary()}")
    err.print("the judge gives the pinned grades", highlight=False)


def _print(check: CanaryCheck) -> None:
    from rich.markup import escape

    comparison = check.comparison
    err.print(f"canary {escape(check.pinned_file)}: pinned {check.recorded_at} with "
              f"{escape(check.pinned_judge.judge)}; checked {check.checked_at} with "
              f"{escape(check.judge.judge)}", highlight=False)  # fmt: skip
    for change in check.pinned_judge.changes(check.judge):
        err.print(f"[yellow]judge changed:[/yellow] {escape(change)}", highlight=False)
    for pair in comparison.differing:
        err.print(f"[red]drifted:[/red] {escape(pair.describe())}", highlight=False)
    for pair in comparison.unanswered:
        err.print(f"[yellow]unanswered:[/yellow] {escape(pair.describe())}", highlight=False)
    err.print(escape(comparison.summary()), highlight=False)
    if check.last_passed_at and check.verdict != "pass":
        err.print(f"last passed {check.last_passed_at}", highlight=False)


def _table(config: Path) -> CanaryTable:
    """The ``[canary]`` table of ``config``.

    Raises:
        ConfigError: the file cannot be read, or has no valid ``[canary]`` table.
    """
    from faithjudge.errors import ConfigError
    from faithjudge.reports.canary import parse_canary_table
    from faithjudge.toml_file import read_toml

    data = read_toml(config)
    if "canary" not in data:
        raise ConfigError(f'{config}: has no [canary] table (pinned = "canary.jsonl")')
    try:
        return parse_canary_table(data["canary"], config.parent)
    except ConfigError as exc:
        raise ConfigError(f"{config}: {exc}") from None


def _records_file(settings: Settings, table: CanaryTable | None) -> Path:
    from faithjudge.reports.canary import records_path

    if table is not None and table.record is not None:
        return table.record
    return records_path(settings.data_dir)


def canary_records(table: CanaryTable | None) -> CanaryRecords:
    """The canary checks on record for the gate and the reports: ``table``'s record file, else
    the data dir's (FAITHJUDGE_DATA_DIR).

    Raises:
        ConfigError: the record file cannot be read.
    """
    from faithjudge.reports.canary import read_records, records_path

    if table is not None and table.record is not None:
        return read_records(table.record)
    return read_records(records_path(settings_from().data_dir))


def register(app: typer.Typer) -> None:
    """Add ``canary record`` and ``canary check`` to the ``faithjudge`` app."""
    app.add_typer(canary_app, name="canary")
