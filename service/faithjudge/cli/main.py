"""The ``faithjudge`` command.

Exit codes are one table for every command: ``faithjudge.cli.common.ExitCode`` (0 success, 1 a gate
check failed, 2 a coverage gate failed, 3 could not run, 4 nothing was scored, 5 stopped early).

Only typer and the standard library are imported here: each command imports what it needs when
it runs, so ``faithjudge --help`` and ``faithjudge version`` answer at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from faithjudge import __version__
from faithjudge.cli import batch as cli_batch
from faithjudge.cli.common import (
    ExitCode,
    UsageExits3,
    err,
    exit_with,
    fail,
    renamed_option,
    settings_from,
)
from faithjudge.judges import judge_help

if TYPE_CHECKING:
    from faithjudge.provider_batch.file_route import BatchReport
    from faithjudge.runners.file_runner import ScoreFileSummary
    from faithjudge.settings import Settings
    from faithjudge.transport.base import Usage

__all__ = ["app"]

app = typer.Typer(
    name="faithjudge",
    help="Verified faithfulness scores for chain-of-thought explanations of medical VLMs.",
    no_args_is_help=True,
    add_completion=False,
    cls=UsageExits3,
)


@app.command()
def version() -> None:
    """Print the service version."""
    typer.echo(__version__)


@app.command()
def score(
    input_path: Annotated[
        Path | None,
        typer.Argument(
            metavar="IN.jsonl",
            help="ScoreRequest lines (or input in --config).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Result lines (appended; resumable; or output in --config)."
        ),
    ] = None,
    judge: Annotated[str | None, typer.Option(help=judge_help())] = None,
    evaluator: Annotated[str | None, typer.Option(hidden=True, help="Deprecated: --judge.")] = None,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Judge calls in flight.")] = None,
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
    retry_failed: Annotated[
        bool,
        typer.Option(
            "--retry-failed",
            help="Score again, in place, the lines whose result is an input error or a "
            "transport failure (read from IN, fixed); every other result line is kept as it is.",
        ),
    ] = False,
    limit: Annotated[
        int | None, typer.Option(min=1, help="A smoke run: score the first N lines only.")
    ] = None,
    sample: Annotated[
        int | None,
        typer.Option(min=1, help="A smoke run: score N lines drawn by --seed, by modification."),
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="The seed of --sample.")] = 0,
    judge_change: Annotated[
        bool,
        typer.Option(
            "--judge-change",
            help="Score into an output another judge graded (another judge, prompt set, "
            "KB or settings): its lines keep their grades, each line's provenance naming its "
            "judge. Without it such a run exits 3 naming both judges.",
        ),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="A TOML file whose score table sets IN, --output and the options above "
            "(options given here win); the gate's tables may sit beside it.",
        ),
    ] = None,
) -> None:
    """Score every line of IN.jsonl into OUTPUT, skipping lines OUTPUT already holds.

    After fixing lines that came out as input errors, or once a judge that was down is back,
    --retry-failed scores those lines again and keeps every other result.

    An output keeps its judge: a rerun that names no judge (no --judge,
    FAITHJUDGE_JUDGE or judge in --config) scores with the judge of OUTPUT's lines.

    Exit 0 when every line has a result and at least one grade is valid; 3 when the run could
    not start or the judge is unreachable; 4 when not one grade is valid (empty input, no
    readable line, every judge call failed, every reply failed verification); 5 when stopped
    early (what was written is kept).

    A judge server is set by FAITHJUDGE_* variables: FAITHJUDGE_TIMEOUT_S (60: the longest a
    call may stay silent; slow replies are streamed, so it bounds the wait for the next token),
    FAITHJUDGE_MAX_TOKENS (1024: a reply cut there fails as truncated),
    FAITHJUDGE_RESPONSE_FORMAT (auto: json_schema, then json_object with the schema, then plain
    json_object, then none, as the server takes them; or one forced).
    """
    judge = renamed_option(judge, evaluator, "--judge", "--evaluator")
    from faithjudge.errors import ConfigError, FaithJudgeError
    from faithjudge.event_loop import run_async

    if limit is not None and sample is not None:
        raise typer.BadParameter("--limit and --sample cannot be combined: choose one")
    kept_judge = None
    try:
        if config is not None:
            from faithjudge.cli.score_config import load_score_config

            table = load_score_config(config)
            input_path = input_path or table.input
            output = output or table.output
            judge = judge or table.judge
            concurrency = concurrency or table.concurrency
            cache = table.cache if cache is None else cache
            data_dir = data_dir or table.data_dir
            prompt_set = prompt_set or table.prompt_set
            knowledge_base = knowledge_base or table.knowledge_base
        if input_path is None:
            raise typer.BadParameter("IN.jsonl is required (or `input` in --config's [score])")
        if output is None:
            raise typer.BadParameter("--output is required (or `output` in --config's [score])")
        if judge is None and not _judge_in_environment():
            kept_judge = _output_judge(output)
            judge = kept_judge
        settings = settings_from(
            judge=judge,
            concurrency=concurrency,
            cache=cache,
            data_dir=data_dir,
            prompt_set=prompt_set,
            knowledge_base=knowledge_base,
        )
        if not input_path.is_file():
            raise FaithJudgeError(f"input file not found: {input_path}")
        if cancel and not cli_batch.is_batch_route(settings):
            raise FaithJudgeError("--cancel applies to the openai-batch:MODEL judge only")
        if (limit or sample) and cli_batch.is_batch_route(settings):
            raise FaithJudgeError("--limit and --sample apply to live judges, not openai-batch")
        lines = _selected_lines(input_path, limit, sample, seed)
        summary, batch, paid = run_async(
            _run_score, settings, input_path, output, progress, cancel, retry_failed, lines,
            judge_change,
        )  # fmt: skip
    except FaithJudgeError as exc:
        if kept_judge is not None and isinstance(exc, ConfigError):  # it cannot be built here
            err.print(f"(the judge {kept_judge} is the judge of {output}'s lines; pass "
                      "--judge to choose another)", highlight=False, markup=False)  # fmt: skip
        raise fail(exc) from None
    except KeyboardInterrupt:
        if cli_batch.is_batch_route(settings) and input_path is not None:
            cli_batch.leave_or_cancel(settings, input_path)
        exit_with(
            ExitCode.STOPPED,
            f"stopped: the results written so far are in {output}; run again"
            # a plain run skips the failed lines this one was retrying
            + (" with --retry-failed" if retry_failed else "")
            + " to resume",
        )
    if batch is not None:
        cli_batch.print_batch_report(batch, settings)
    if summary is None:  # --cancel: the batches were cancelled, nothing was scored
        return
    _print_summary(summary, output)
    _print_tokens(paid, settings)
    if kept_judge is not None and summary.scored:
        err.print(f"judge: {kept_judge}, the judge of {output}", highlight=False, markup=False)
    _print_judge_change(summary)
    if summary.retried:
        err.print(f"{summary.retried} failed lines scored again; the other results kept")
    elif retry_failed:
        err.print(f"{output} holds no failed line to retry: only lines it lacked were scored")
    if summary.transport_failed:
        again = _retry_command(input_path, output, config)
        err.print(
            f"{summary.transport_failed} line(s) of {output} hold transport failures (grades "
            f"the judge never answered); once it answers, score them again: {again}",
            highlight=False,
            markup=False,
        )
    if summary.left_out:
        chosen = summary.total_lines
        err.print(f"a smoke run: {chosen} of {chosen + summary.left_out} lines selected")
    code, why = score_exit_code(summary)
    if code != ExitCode.OK:
        exit_with(code, why)


def score_exit_code(summary: ScoreFileSummary) -> tuple[ExitCode, str | None]:
    """The exit code of a finished run, and why when it is not 0."""
    if summary.total_lines == 0:
        return ExitCode.NOTHING_SCORED, "the input holds no request line: nothing was scored"
    if summary.scored == 0:  # everything was in the output already: the earlier run decided
        return ExitCode.OK, None
    if summary.valid == 0:
        if summary.input_errors == summary.scored:
            if summary.retried:  # the other lines' results were kept, not read again
                return ExitCode.NOTHING_SCORED, (
                    f"not one of the {summary.retried} failed lines scored again is a readable "
                    "request yet; the other results were kept"
                )
            return ExitCode.NOTHING_SCORED, "no line of the input is a readable request"
        from faithjudge.scoring.outcomes import outcome_name

        stages = {k: v for k, v in summary.totals().items() if k not in ("valid", "missing")}
        listed = ", ".join(f"{outcome_name(stage)} {n}" for stage, n in sorted(stages.items()))
        return ExitCode.NOTHING_SCORED, f"not one grade is valid ({listed})"
    return ExitCode.OK, None


def _judge_in_environment() -> bool:
    """Whether FAITHJUDGE_JUDGE (or its deprecated name FAITHJUDGE_EVALUATOR) names a judge,
    read case-insensitively, as the settings read it."""
    import os

    names = {"FAITHJUDGE_JUDGE", "FAITHJUDGE_EVALUATOR"}
    return any(name.upper() in names for name in os.environ)


def _output_judge(output: Path) -> str | None:
    """The spec of the judge that graded ``output``'s lines, when it holds any: a rerun
    that names no judge keeps it rather than falling back to the default judge."""
    from faithjudge.runners.file_runner import output_judge

    judge = output_judge(output) if output.is_file() else None
    return judge.judge if judge is not None else None


def _retry_command(input_path: Path, output: Path, config: Path | None) -> str:
    """The command that scores again the lines whose grades failed at transport."""
    import shlex

    words = ["faithjudge", "score", str(input_path), "-o", str(output)]
    if config is not None:
        words += ["--config", str(config)]
    return shlex.join([*words, "--retry-failed"])


def _print_judge_change(summary: ScoreFileSummary) -> None:
    """With --judge-change: which judges the output's other lines keep."""
    if not summary.judge_changed_from:
        return
    others = "; ".join(judge.describe() for judge in summary.judge_changed_from)
    err.print(
        f"judge changed: the {summary.scored} line(s) scored now are graded by this run's "
        f"judge; the output's other lines keep the grades of {others} (each line's provenance "
        "names its judge; the report lists every judge with its lines)",
        highlight=False,
        markup=False,
    )


def _selected_lines(
    input_path: Path, limit: int | None, sample: int | None, seed: int
) -> frozenset[int] | None:
    """The line numbers of a smoke run (--limit, --sample), or None for every line."""
    from faithjudge.runners.selection import first_lines, sample_lines

    if limit is not None:
        return first_lines(input_path, limit)
    if sample is not None:
        return sample_lines(input_path, sample, seed)
    return None


async def _run_score(
    settings: Settings,
    input_path: Path,
    output: Path,
    show_progress: bool,
    cancel: bool,
    retry_failed: bool = False,
    lines: frozenset[int] | None = None,
    judge_change: bool = False,
) -> tuple[ScoreFileSummary | None, BatchReport | None, Usage]:
    from faithjudge.jsonl import count_lines
    from faithjudge.output_lock import hold_output
    from faithjudge.pipeline.runtime import open_scorer
    from faithjudge.progress import progress_bar
    from faithjudge.runners.file_runner import check_output_judge, score_file

    total = count_lines(input_path) if lines is None else len(lines)
    # one writer per output, for both phases of the batch route too
    with hold_output(output):
        async with open_scorer(settings, fail_fast=True) as scorer:
            batch = None
            if cli_batch.is_batch_route(settings):
                if not cancel:  # another judge's output is refused before a batch is paid
                    check_output_judge(output, scorer, judge_change=judge_change)
                # first the Batch API phase fills the cache; then an ordinary run reads it back
                batch = await cli_batch.run_batch_phase(
                    scorer, settings, input_path, console=err, show_progress=show_progress,
                    cancel=cancel, output=output, retry_failed=retry_failed,
                )  # fmt: skip
                if cancel:
                    return None, batch, scorer.paid
            with progress_bar("scoring", console=err, show=show_progress) as bar:
                task = bar.add_task("score", total=total)
                summary = await score_file(
                    scorer,
                    input_path,
                    output,
                    concurrency=settings.concurrency,
                    progress=lambda n: bar.advance(task, n),
                    retry_failed=retry_failed,
                    lines=lines,
                    judge_change=judge_change,
                )
            outage = scorer.caller.outage
            if outage is not None and outage.outages:
                err.print(
                    f"the judge {scorer.judge_id} stopped answering {outage.outages} "
                    f"time(s) during the run; calls waited {outage.down_s:.1f} s in all for it "
                    "and were sent again (no grade was failed for it)",
                    highlight=False,
                    markup=False,
                )
            return summary, batch, scorer.paid


def _print_summary(summary: ScoreFileSummary, output: Path) -> None:
    from faithjudge_client.metric_catalogue import label_of
    from rich.table import Table

    from faithjudge.scoring.outcomes import JUDGED, LINE_PROBLEMS, NOT_JUDGED, line_problem_counts

    table = Table(title=f"{summary.scored} lines scored -> {output}", show_header=True)
    table.add_column("lines")
    table.add_column("count", justify="right")
    table.add_row("read", str(summary.total_lines))
    table.add_row("already in output (skipped)", str(summary.skipped))
    # named and counted as the reports, the gate, submit and the batch status do
    for outcome, lines in line_problem_counts(summary.outcomes).items():
        table.add_row(f"{LINE_PROBLEMS[outcome]} (not judged)", str(lines))
    table.add_row("answers outside the options (CF still graded)", str(summary.answers_off_options))
    for asked_in, lines in sorted(summary.response_formats.items()):
        table.add_row(f"judge asked in response format {asked_in}", str(lines))
    err.print(table)
    metrics = Table(title="coverage (this run)", show_header=True)
    for column in ("metric", "valid", "judge failures", "not judged", "cov"):
        metrics.add_column(column, justify="left" if column == "metric" else "right")
    for metric, counts in summary.outcomes.items():
        if sum(counts[o] for o in (*JUDGED, *NOT_JUDGED)) == 0:
            continue
        cov = summary.coverage(metric)["cov"]
        metrics.add_row(
            label_of(metric),
            str(counts["valid"]),
            _listed(counts, JUDGED[1:]),
            _listed(counts, NOT_JUDGED),
            "-" if cov is None else f"{100 * cov:.1f}%",
        )
    err.print(metrics)
    if summary.total_lines <= _ITEM_TABLE_MAX_LINES and output.is_file():  # none written: none
        _print_items(output)


def _print_tokens(paid: Usage, settings: Settings) -> None:
    """The judge tokens this run paid for (answers from the response cache cost nothing now),
    the provider's prompt-cache share of them, and their price where prices are set."""
    from rich.table import Table

    if paid.prompt_tokens == 0 and paid.completion_tokens == 0:
        return  # an offline judge, or every answer from the cache
    table = Table(title="judge tokens (this run)", show_header=True)
    table.add_column("tokens")
    table.add_column("count", justify="right")
    share = paid.cached_tokens / paid.prompt_tokens if paid.prompt_tokens else 0.0
    table.add_row("prompt", f"{paid.prompt_tokens:,}")
    table.add_row("of which cached by the provider", f"{paid.cached_tokens:,} ({share:.1%})")
    table.add_row("completion", f"{paid.completion_tokens:,}")
    cost = settings.token_cost(paid.prompt_tokens, paid.completion_tokens, paid.cached_tokens)
    if cost is None:
        table.add_row("price", "set FAITHJUDGE_PRICE_*_PER_MTOK for dollars")
    else:
        table.add_row("price", f"${cost:,.4f}")
        full = settings.token_cost(paid.prompt_tokens, paid.completion_tokens)
        if full is not None and full != cost:
            table.add_row("price with no cached-input rate", f"${full:,.4f}")
    err.print(table)


def _listed(counts: dict[str, int], outcomes: tuple[str, ...]) -> str:
    from faithjudge.scoring.outcomes import outcome_name

    parts = [f"{outcome_name(o)} {counts[o]}" for o in outcomes if counts[o]]
    return ", ".join(parts) or "0"


_ITEM_TABLE_MAX_LINES = 20


def _print_items(output: Path) -> None:
    """A per-item view for small runs, so a demo shows what was scored."""
    from faithjudge_client.lines import ItemResult
    from faithjudge_client.metric_catalogue import CC_LABEL, labels, metric_names
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_header=True, title="items")
    for column in ("line", "item", "answer", "correct", "flip", *labels(), CC_LABEL):
        table.add_column(column)
    for raw in output.read_bytes().splitlines():
        if not raw.strip():
            continue  # a blank line is passed over, as on resume
        result = ItemResult.model_validate_json(raw)
        if result.error is not None:
            table.add_row(
                str(result.line),
                escape(result.item_id or ""),
                f"[red]{escape(result.error.detail)}",
            )
            continue
        cells = []
        for metric in metric_names():
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
    err.print(table)


from faithjudge.cli import validate as cli_validate  # noqa: E402 - registers its commands on the app above

cli_validate.register(app)

from faithjudge.cli import report as cli_report  # noqa: E402 - registers report and gate on the app above

cli_report.register(app)

from faithjudge.cli import serve as cli_serve  # noqa: E402 - registers serve and keys on the app above

cli_serve.register(app)

from faithjudge.cli import submit as cli_submit  # noqa: E402 - registers submit (the REST client) on the app above

cli_submit.register(app)

from faithjudge.cli import audit as cli_audit  # noqa: E402 - registers audit on the app above

cli_audit.register(app)
cli_batch.register(app)  # judge-requests export / import

from faithjudge.cli import check_judge as cli_check_judge  # noqa: E402 - registers check-judge on the app above

cli_check_judge.register(app)

from faithjudge.cli import kb as cli_kb  # noqa: E402 - registers kb check and kb template on the app above

cli_kb.register(app)

from faithjudge.cli import canary as cli_canary  # noqa: E402 - registers canary record and check on the app above

cli_canary.register(app)

from faithjudge.cli import view as cli_view  # noqa: E402 - registers view (the run browser) on the app above

cli_view.register(app)


def main() -> None:
    """The console entry point. An OS error no command turned into its own message (a path that
    cannot be read or written: a folder, /proc, a full disk) is one line and exit 3, not a
    traceback; so is an installed plugin that cannot be loaded where a command reads it (the
    message names its package and entry point)."""
    import sys

    from faithjudge_client.registry import PluginError

    try:
        app()
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        sys.exit(fail(f"{where}{exc.strerror or exc}", ExitCode.UNEVALUABLE).exit_code)
    except PluginError as exc:
        sys.exit(fail(exc, ExitCode.UNEVALUABLE).exit_code)


if __name__ == "__main__":  # pragma: no cover
    main()
