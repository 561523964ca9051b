"""The ``faithjudge`` command.

Exit codes: 0 success; 1 the command ran but found what it was asked to fail on; 2 usage error
(typer's own); 3 the run could not be evaluated (bad input file, bad configuration, evaluator
unreachable before any work).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from service import __version__, cli_batch
from service.contracts import ItemResult
from service.errors import FaithJudgeError
from service.progress import progress_bar
from service.runtime import open_scorer, run_async
from service.scorefile import RunSummary, count_lines, score_file
from service.settings import Settings

__all__ = ["app"]

app = typer.Typer(
    name="faithjudge",
    help="Verified faithfulness scores for chain-of-thought explanations of medical VLMs.",
    no_args_is_help=True,
    add_completion=False,
)
_err = Console(stderr=True)

EXIT_UNEVALUABLE = 3


@app.command()
def version() -> None:
    """Print the service version."""
    typer.echo(__version__)


@app.command()
def score(
    input_path: Annotated[Path, typer.Argument(metavar="IN.jsonl", help="ScoreRequest lines.")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Result lines (appended; resumable).")
    ],
    evaluator: Annotated[
        str | None,
        typer.Option(
            help="lexicon:v1 (offline, default), openai:MODEL, openai-batch:MODEL (Batch API, "
            "half price), litellm:MODEL, replay:FILE[#judge]."
        ),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Evaluator calls in flight.")
    ] = None,
    cache: Annotated[
        bool | None, typer.Option("--cache/--no-cache", help="Use the response cache.")
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Where the cache lives.")] = None,
    prompt_set: Annotated[str | None, typer.Option(help="Prompt set name or folder.")] = None,
    knowledge_base: Annotated[str | None, typer.Option(help="KB name or JSON file.")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
    cancel: Annotated[
        bool, typer.Option("--cancel", help="openai-batch: cancel the run's open batches.")
    ] = False,
) -> None:
    """Score every line of IN.jsonl into OUTPUT, skipping lines OUTPUT already holds."""
    overrides = {
        "evaluator": evaluator,
        "concurrency": concurrency,
        "cache": cache,
        "data_dir": data_dir,
        "prompt_set": prompt_set,
        "knowledge_base": knowledge_base,
    }
    try:
        settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
        if not input_path.is_file():
            raise FaithJudgeError(f"input file not found: {input_path}")
        if cancel and not cli_batch.is_batch_route(settings):
            raise FaithJudgeError("--cancel applies to the openai-batch:MODEL evaluator only")
        summary, batch = run_async(_run_score, settings, input_path, output, progress, cancel)
    except FaithJudgeError as exc:
        _err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(EXIT_UNEVALUABLE) from None
    except KeyboardInterrupt:
        if cli_batch.is_batch_route(settings):
            cli_batch.leave_or_cancel(settings, input_path)
        raise typer.Exit(130) from None
    if batch is not None:
        cli_batch.print_batch_report(batch, settings)
    if summary is not None:
        _print_summary(summary, output)


async def _run_score(
    settings: Settings, input_path: Path, output: Path, show_progress: bool, cancel: bool
) -> tuple[RunSummary | None, cli_batch.BatchReport | None]:
    total = count_lines(input_path)
    async with open_scorer(settings) as scorer:
        batch = None
        if cli_batch.is_batch_route(settings):
            batch = await cli_batch.run_batch_phase(
                scorer,
                settings,
                input_path,
                console=_err,
                show_progress=show_progress,
                cancel=cancel,
            )
            if cancel:
                return None, batch
        with progress_bar("scoring", console=_err, show=show_progress) as bar:
            task = bar.add_task("score", total=total)
            summary = await score_file(
                scorer,
                input_path,
                output,
                concurrency=settings.concurrency,
                progress=lambda n: bar.advance(task, n),
            )
            return summary, batch


def _print_summary(summary: RunSummary, output: Path) -> None:
    table = Table(title=f"{summary.scored} lines scored -> {output}", show_header=True)
    table.add_column("outcome")
    table.add_column("count", justify="right")
    table.add_row("lines read", str(summary.total_lines))
    table.add_row("already in output (skipped)", str(summary.skipped))
    table.add_row("input errors", str(summary.input_errors))
    for status, count in sorted(summary.statuses.items()):
        table.add_row(f"metric {status}", str(count))
    for stage, count in sorted(summary.stages.items()):
        table.add_row(f"failure: {stage}", str(count))
    _err.print(table)
    if summary.total_lines <= _ITEM_TABLE_MAX_LINES:
        _print_items(output)


_ITEM_TABLE_MAX_LINES = 20
_SHORT = {"clinical_fidelity": "CF", "causal_attribution": "CA", "confidence_tone": "CT"}


def _print_items(output: Path) -> None:
    """A per-item view for small runs, so a demo shows what was scored."""
    table = Table(show_header=True, title="items")
    for column in ("line", "item", "answer", "correct", "flip", "CF", "CA", "CT", "CC"):
        table.add_column(column)
    for raw in output.read_bytes().splitlines():
        result = ItemResult.model_validate_json(raw)
        if result.error is not None:
            table.add_row(str(result.line), result.item_id or "", f"[red]{result.error.detail}")
            continue
        cells = []
        for metric in _SHORT:
            graded = result.metrics.get(metric)
            if graded is None:
                cells.append("")
            elif graded.status == "valid":
                cells.append(str(graded.score))
            else:
                cells.append(f"[yellow]{graded.failure.stage if graded.failure else graded.status}")
        flip = result.flip.value if result.flip is not None else None
        calibration = result.confidence_calibration
        table.add_row(
            str(result.line),
            result.item_id or "",
            result.answer or "-",
            {True: "yes", False: "no", None: "-"}[result.correct],
            {True: "yes", False: "no", None: "-"}[flip],
            *cells,
            f"{calibration:.2f}" if calibration is not None else "-",
        )
    _err.print(table)


from service import cli_validate  # noqa: E402 - registers its commands on the app above

cli_validate.register(app)

from service import cli_report  # noqa: E402 - registers report and gate on the app above

cli_report.register(app)

from service import cli_serve  # noqa: E402 - registers serve and keys on the app above

cli_serve.register(app)

from service import cli_submit  # noqa: E402 - registers submit (the REST client) on the app above

cli_submit.register(app)

from service import cli_audit  # noqa: E402 - registers audit on the app above

cli_audit.register(app)
cli_batch.register(app)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
