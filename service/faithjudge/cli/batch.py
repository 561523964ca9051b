"""The batch route on the command line: ``score --judge openai-batch:MODEL`` and
``judge-requests export/import`` (bring your own engine).

Exit codes are ``faithjudge.cli.common.ExitCode``'s. The batch machinery is imported when a command
needs it, not when the CLI starts.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from faithjudge.cli.common import ExitCode, err, fail, renamed_option, settings_from
from faithjudge.errors import FaithJudgeError

if TYPE_CHECKING:
    from rich.console import Console

    from faithjudge.pipeline.scorer import Scorer
    from faithjudge.provider_batch.collect import CollectStats
    from faithjudge.provider_batch.file_route import BatchReport
    from faithjudge.settings import Settings

__all__ = ["is_batch_route", "leave_or_cancel", "print_batch_report", "register", "run_batch_phase"]

judge_requests_app = typer.Typer(
    help="Judge requests as Batch API files: export them for your own engine, import answers.",
    no_args_is_help=True,
)


def is_batch_route(settings: Settings) -> bool:
    """Whether the configured judge's backend is a Batch API route (the registry says)."""
    from faithjudge.judges import is_batch_route as backend_is_batch_route

    return backend_is_batch_route(settings.judge)


async def run_batch_phase(
    scorer: Scorer,
    settings: Settings,
    source: Path,
    *,
    console: Console,
    show_progress: bool,
    cancel: bool,
    output: Path | None = None,
    retry_failed: bool = False,
) -> BatchReport:
    """Send what ``source`` still needs through the Batch API, with a bar of provider counts.

    The run is ``output``'s: its own failures for good are kept unless ``retry_failed``; any
    other run's are asked again.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from faithjudge.provider_batch.file_route import run_batches
    from faithjudge.provider_batch.runner import BatchProgress

    bar = Progress(
        TextColumn("[bold]batch[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        console=console,
        disable=not show_progress or not sys.stderr.isatty(),
        transient=True,
    )
    with bar:
        task = bar.add_task("batch", total=None, detail="collecting requests")

        def update(report: BatchProgress) -> None:
            detail = f"{report.failed} failed · {report.describe()}"
            bar.update(
                task, total=report.total, completed=report.completed + report.failed, detail=detail
            )

        return await run_batches(
            scorer,
            settings,
            source,
            progress=update,
            cancel=cancel,
            output=output,
            retry_failed=retry_failed,
        )


def print_batch_report(report: BatchReport, settings: Settings) -> None:
    from rich.table import Table

    table = Table(title="batch route", show_header=True)
    table.add_column("batch API")
    table.add_column("count", justify="right")
    if report.cancelled is not None:
        table.add_row("batches cancelled", str(report.cancelled))
    table.add_row("judge requests", str(report.requests))
    table.add_row("answered from the cache", str(report.cached))
    table.add_row("already in a batch", str(report.in_batches))
    table.add_row("failed for good earlier (kept)", str(report.kept_failures))
    table.add_row("staged now", str(report.staged))
    table.add_row("files uploaded", str(report.files_uploaded))
    table.add_row("batches created", str(report.batches_created))
    table.add_row("answers received", str(report.answered))
    table.add_row("requests failed for good (this run)", str(report.failed))
    table.add_row("staging / exchange", f"{report.staging_s:.1f} s / {report.exchange_s:.1f} s")
    table.add_row("prompt tokens", f"{report.prompt_tokens:,}")
    table.add_row("of which cached by the provider", f"{report.cached_tokens:,}")
    table.add_row("completion tokens", f"{report.completion_tokens:,}")
    if report.live_cost is not None and report.batch_cost is not None:
        table.add_row("live price", f"${report.live_cost:,.4f}")
        table.add_row("batch price", f"${report.batch_cost:,.4f}")
        table.add_row("saving", f"${report.saving or 0:,.4f}")
    else:
        saving = f"{(1 - settings.batch_discount) * 100:.0f}% of the live price"
        table.add_row("saving", f"{saving} (set FAITHJUDGE_PRICE_*_PER_MTOK for dollars)")
    err.print(table)
    if report.kept_failures:
        err.print(
            f"{report.kept_failures} request(s) that failed for good in an earlier run into "
            "this output were not asked again: rerun with --retry-failed to ask them again "
            "(a run into another output asks again too)"
        )


def leave_or_cancel(settings: Settings, input_path: Path) -> None:
    """After Ctrl-C: batches keep running at the provider unless the user asks to cancel them."""
    err.print(
        "\n[yellow]interrupted:[/yellow] submitted batches keep running at the provider; "
        "run the same command again to resume, or add --cancel to cancel them"
    )
    if sys.stdin.isatty() and not typer.confirm("Leave the batches running?", default=True):
        from faithjudge.event_loop import run_async
        from faithjudge.pipeline.runtime import open_scorer
        from faithjudge.provider_batch.file_route import run_batches

        async def cancel() -> BatchReport:
            async with open_scorer(settings) as scorer:
                return await run_batches(scorer, settings, input_path, cancel=True)

        report = run_async(cancel)
        err.print(f"cancelled {report.cancelled} batch(es)")


_UNSENT_KEY = "unused: judge-requests export sends nothing"


def _offline(settings: Settings) -> Settings:
    """``settings`` for a command that sends nothing: the OpenAI client is built (its base URL is
    part of the cache key) but never called, so it needs no API key; a placeholder stands in
    for whatever key the client would have found (the key is not part of the cache key)."""
    from pydantic import SecretStr

    return settings.model_copy(update={"openai_api_key": SecretStr(_UNSENT_KEY)})


@judge_requests_app.command("export")
def export(
    input_path: Annotated[Path, typer.Argument(metavar="IN.jsonl", help="ScoreRequest lines.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Batch API request lines.")],
    judge: Annotated[
        str | None, typer.Option(help="openai:MODEL or openai-batch:MODEL (the model named).")
    ] = None,
    evaluator: Annotated[str | None, typer.Option(hidden=True, help="Deprecated: --judge.")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Where the cache lives.")] = None,
) -> None:
    """Write the judge requests of IN.jsonl not yet in the cache as Batch API lines.

    Nothing is sent: no API key is needed. Unreadable input lines are reported by line.
    """
    judge = renamed_option(judge, evaluator, "--judge", "--evaluator")
    from faithjudge.event_loop import run_async
    from faithjudge.pipeline.runtime import open_scorer
    from faithjudge.provider_batch.request_files import export_requests

    def bad_line(_number: int, reason: str) -> None:
        err.print(f"[yellow]skipped[/yellow] {escape(reason)}", highlight=False)

    try:
        settings = _offline(settings_from(judge=judge, data_dir=data_dir))
        if not input_path.is_file():
            raise FaithJudgeError(f"input file not found: {input_path}")

        async def run() -> CollectStats:
            async with open_scorer(settings) as scorer:
                try:
                    output.parent.mkdir(parents=True, exist_ok=True)
                    sink = output.open("wb")
                except OSError as exc:
                    raise FaithJudgeError(f"cannot write {output}: {exc.strerror or exc}") from None
                with sink:
                    return export_requests(scorer, input_path, sink, on_bad_line=bad_line)

        stats = run_async(run)
    except FaithJudgeError as exc:
        raise fail(exc) from None
    err.print(
        f"{stats.staged} request line(s) -> {output} ({stats.cached} already cached, "
        f"{stats.bad_lines} bad line(s))",
        highlight=False,
    )
    if stats.items == 0:
        if stats.bad_lines:
            why = f"no line of {input_path} is a readable request"
        else:
            why = f"{input_path} holds no request line"
        raise fail(f"{why}: nothing was exported", ExitCode.NOTHING_SCORED)


@judge_requests_app.command("import")
def import_(
    output_file: Annotated[
        Path, typer.Argument(metavar="OUTPUT.jsonl", help="A Batch API output file.")
    ],
    data_dir: Annotated[Path | None, typer.Option(help="Where the cache lives.")] = None,
) -> None:
    """Load the answers of a Batch API output file into the response cache.

    Only answers with message content are cached: a failed or empty answer stays uncached, so a
    later run asks again.
    """
    from faithjudge.private_files import private_dir
    from faithjudge.provider_batch.request_files import import_responses
    from faithjudge.transport.cache import ResponseCache

    try:
        settings = settings_from(data_dir=data_dir)
        if not output_file.is_file():
            raise FaithJudgeError(f"output file not found: {output_file}")
        private_dir(settings.data_dir)
        with ResponseCache(settings.cache_path) as cache, output_file.open("rb") as lines:
            stats = import_responses(lines, cache)
    except FaithJudgeError as exc:
        raise fail(exc) from None
    for problem in stats.problems:
        err.print(f"[yellow]skipped[/yellow] {escape(problem)}", highlight=False)
    for failure in stats.failures:
        err.print(f"[yellow]failed, not cached[/yellow] {escape(failure)}", highlight=False)
    err.print(
        f"{stats.stored} answer(s) cached, {stats.failed} failed request(s), "
        f"{stats.bad_lines} bad line(s)",
        highlight=False,
    )
    if stats.lines == 0:
        raise fail(f"{output_file} holds no line: nothing was imported", ExitCode.NOTHING_SCORED)
    if stats.stored == 0:
        raise fail(f"no answer of {output_file} could be cached", ExitCode.NOTHING_SCORED)


def register(app: typer.Typer) -> None:
    app.add_typer(judge_requests_app, name="judge-requests")
