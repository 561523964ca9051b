"""The ``faithjudge`` command.

Exit codes: 0 success; 1 the command ran but found what it was asked to fail on; 2 usage error
(typer's own); 3 the run could not be evaluated (bad input file, bad configuration, evaluator
unreachable before any work).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from service import __version__
from service.errors import FaithJudgeError
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
        typer.Option(help="openai:MODEL, litellm:MODEL or replay:FILE[#judge]."),
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
        summary = run_async(_run_score, settings, input_path, output, progress)
    except FaithJudgeError as exc:
        _err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(EXIT_UNEVALUABLE) from None
    _print_summary(summary, output)


async def _run_score(
    settings: Settings, input_path: Path, output: Path, show_progress: bool
) -> RunSummary:
    total = count_lines(input_path)
    async with open_scorer(settings) as scorer:
        with Progress(
            TextColumn("[bold]scoring[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=_err,
            disable=not show_progress or not sys.stderr.isatty(),
            transient=True,
        ) as bar:
            task = bar.add_task("score", total=total)
            return await score_file(
                scorer,
                input_path,
                output,
                concurrency=settings.concurrency,
                progress=lambda n: bar.advance(task, n),
            )


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


from service import cli_validate  # noqa: E402 - registers its commands on the app above

cli_validate.register(app)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
