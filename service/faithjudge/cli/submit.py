"""``faithjudge submit``: send a JSONL file to a FaithJudge server as a job, through the SDK.

Registered on the main app by ``register(app)``. Exit codes are ``score``'s
(``faithjudge.cli.common.ExitCode``): 0 the job completed with at least one judged grade (rejected
lines are listed, as ``score`` lists input errors); 3 it could not run (missing file, server
unreachable, wrong key) or the job ended failed; 4 nothing was scored (an empty file, no line
accepted, not one grade judged); 5 stopped early (Ctrl-C or ``--timeout`` while waiting: the
job goes on on the server; or the job was cancelled). With ``--no-wait`` the command ends
once the job is accepted. The job id alone goes to stdout (``ID=$(faithjudge submit f
--no-wait)``); everything else goes to stderr.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from faithjudge.cli.common import ExitCode, err, exit_with, fail
from faithjudge.errors import FaithJudgeError

if TYPE_CHECKING:
    from faithjudge_client import FaithJudgeClient, JobStatus, LineRejection
    from faithjudge_client.bodies import ProblemItem

__all__ = ["register", "submit_command"]

# Enough to see the pattern of what went wrong; the rest is counted.
MAX_REJECTIONS_SHOWN = 50


def submit_command(
    input_path: Annotated[
        Path, typer.Argument(metavar="FILE.jsonl", help="ScoreRequest lines to score.")
    ],
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            envvar="FAITHJUDGE_URL",
            help="FaithJudge server, e.g. http://127.0.0.1:8000.",
            show_envvar=True,
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="FAITHJUDGE_API_KEY",
            help="API key (sent as a Bearer token).",
            show_envvar=True,
        ),
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait for the job to finish.")
    ] = True,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the result lines here (needs --wait)."),
    ] = None,
    report_html: Annotated[
        Path | None,
        typer.Option("--report-html", help="Write the job's HTML report here (needs --wait)."),
    ] = None,
    name: Annotated[str | None, typer.Option(help="A name for the job.")] = None,
    judge: Annotated[
        str | None,
        typer.Option(
            help="The judge to score with, one the server offers (GET /v1/config); "
            "default: the server's first."
        ),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(min=0, help="Give up waiting after this many seconds.")
    ] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
) -> None:
    """Submit FILE.jsonl to a server as a job, follow it, and fetch results and report."""
    if not wait and (output is not None or report_html is not None):
        raise typer.BadParameter("--output and --report-html need --wait", param_hint="--no-wait")
    from faithjudge_client import FaithJudgeClient, ValidationFailed, WaitTimeout

    try:
        if not input_path.is_file():
            raise FaithJudgeError(f"input file not found: {input_path}")
        if not _has_a_line(input_path):
            raise fail(f"{input_path} holds no request line: nothing was scored", _NOTHING)
        with FaithJudgeClient(server, api_key) as client:
            final = _submit(
                client, input_path, name, judge, wait, output, report_html, timeout, progress
            )
    except ValidationFailed as exc:
        if exc.errors and all(item.field == "judge" for item in exc.errors):
            raise fail(exc.detail) from None  # a judge the server does not offer: usage
        _print_rejections(exc.errors, accepted=0)
        raise fail(exc.detail, _NOTHING) from None
    except WaitTimeout as exc:
        raise fail(f"{exc} (the job goes on on the server)", ExitCode.STOPPED) from None
    except FaithJudgeError as exc:
        raise fail(exc) from None
    if final is not None:
        code, why = job_exit_code(final)
        if code != ExitCode.OK:
            exit_with(code, why)


_NOTHING = ExitCode.NOTHING_SCORED


def _has_a_line(path: Path) -> bool:
    with path.open("rb") as handle:
        return any(raw.strip() for raw in handle)


def job_exit_code(status: JobStatus) -> tuple[ExitCode, str | None]:
    """The exit code of a job that ended, by the same rule as ``score``'s."""
    from faithjudge.scoring.outcomes import outcome_name, unjudged_reason

    if status.status == "cancelled":
        return ExitCode.STOPPED, f"job {status.id} was cancelled"
    if status.status != "completed":
        said = f": {status.detail}" if status.detail else ""
        return ExitCode.UNEVALUABLE, f"job {status.id} ended {status.status}{said}"
    unjudged = unjudged_reason(status.counts, status.failure_stages)
    if unjudged is not None:
        return _NOTHING, f"job {status.id}: {unjudged}"
    if not status.counts.get("valid"):  # judged, but every reply failed or abstained
        stages = sorted(status.failure_stages.items())
        listed = ", ".join(f"{outcome_name(stage)} {n}" for stage, n in stages if n)
        return _NOTHING, f"job {status.id}: not one grade is valid ({listed})"
    return ExitCode.OK, None


def _submit(
    client: FaithJudgeClient,
    input_path: Path,
    name: str | None,
    judge: str | None,
    wait: bool,
    output: Path | None,
    report_html: Path | None,
    timeout: float | None,
    show_progress: bool,
) -> JobStatus | None:
    from faithjudge.progress import progress_bar

    accepted = client.submit_job(input_path, name=name, judge=judge)
    judged_by = f" (judge {escape(accepted.judge)})" if accepted.judge else ""
    err.print(
        f"job [bold]{accepted.id}[/bold]: {accepted.accepted} lines accepted, "
        f"{accepted.rejected_total} rejected{judged_by}"
    )
    _print_rejections(accepted.rejected, accepted=accepted.accepted, total=accepted.rejected_total)
    typer.echo(accepted.id)
    if not wait:
        return None
    with progress_bar("scoring", console=err, show=show_progress) as bar:
        task = bar.add_task("job", total=accepted.accepted)
        try:
            final = client.wait(
                accepted.id,
                timeout=timeout,
                progress=lambda s: bar.update(task, completed=s.done, total=s.total),
            )
        except KeyboardInterrupt:
            exit_with(
                ExitCode.STOPPED,
                f"stopped waiting: job {accepted.id} goes on on the server "
                f"(DELETE /v1/jobs/{accepted.id} cancels it)",
            )
    _print_status(final)
    if output is not None:
        written = client.download_results(accepted.id, output)
        err.print(f"{written} result lines -> {output}")
    if report_html is not None:
        report_html.parent.mkdir(parents=True, exist_ok=True)
        report_html.write_text(client.report(accepted.id, "html"), encoding="utf-8")
        err.print(f"HTML report -> {report_html}")
    return final


def _print_rejections(
    rejected: Sequence[LineRejection | ProblemItem], *, accepted: int, total: int | None = None
) -> None:
    """``total``: the lines rejected in all, when the server lists only the first of them."""
    if not rejected:
        return
    from rich.table import Table

    total = max(total or 0, len(rejected))
    table = Table(title=f"{total} rejected lines ({accepted} accepted)", show_header=True)
    table.add_column("line", justify="right")
    table.add_column("field")
    table.add_column("reason")
    for item in rejected[:MAX_REJECTIONS_SHOWN]:
        line = "" if item.line is None else str(item.line)
        table.add_row(line, escape(item.field or ""), escape(item.reason))
    err.print(table)
    shown = min(len(rejected), MAX_REJECTIONS_SHOWN)
    if total > shown:
        err.print(f"... and {total - shown} more rejected lines")


def _print_status(status: JobStatus) -> None:
    from rich.table import Table

    from faithjudge.scoring.outcomes import LINE_PROBLEMS, NOT_JUDGED, outcome_name

    table = Table(title=f"job {status.status}", show_header=True)
    table.add_column("outcome")
    table.add_column("count", justify="right")
    table.add_row("lines accepted", str(status.total))
    table.add_row("lines scored", str(status.done))
    # a line rejected at upload is what ``score`` and the reports call an input error
    table.add_row(
        f"{LINE_PROBLEMS['input']} (rejected at upload, not judged)", str(status.rejected)
    )
    for key, count in sorted(status.counts.items()):
        # ``error`` counts lines that could not be scored at all; the rest count metric grades,
        # and of the not-judged ones only the KB misses (a transport failure stays ``invalid``)
        label = "lines with an error" if key == "error" else f"metric {key.replace('_', ' ')}"
        if key == "not_judged":
            label += f" ({LINE_PROBLEMS['kb']})"
        table.add_row(label, str(count))
    for stage, count in sorted(status.failure_stages.items()):
        # not-judged outcomes go by the names ``score`` and the reports give them
        if stage in NOT_JUDGED:
            table.add_row(f"{outcome_name(stage)} (not judged)", str(count))
        else:
            table.add_row(f"judge failure: {stage}", str(count))
    tokens = status.tokens  # None from a server that predates it
    if tokens is not None and (tokens.prompt or tokens.completion):
        share = tokens.cached / tokens.prompt if tokens.prompt else 0.0
        table.add_row("judge prompt tokens", f"{tokens.prompt:,}")
        table.add_row("of which cached by the provider", f"{tokens.cached:,} ({share:.1%})")
        table.add_row("judge completion tokens", f"{tokens.completion:,}")
    if status.cost_usd is not None:
        table.add_row("price", f"${status.cost_usd:,.4f}")
    if status.detail:
        table.caption = escape(status.detail)  # e.g. the Batch API phase's totals
    err.print(table)


def register(app: typer.Typer) -> None:
    app.command("submit")(submit_command)
