"""``faithjudge check-judge``: the first step with a new judge server (the checks themselves live
in ``faithjudge.runners.judge_check``).

Exit codes (``faithjudge.exit_codes.ExitCode``): 0 every metric got a reply in its schema; 1 the
judge answered, but a reply was not JSON, did not match the schema or was cut at the token
limit or by the context window, or the longest prompt of the requests file does not fit the
server's context window; 3 the check could not run (configuration, an unreadable file, the
server unreachable or refusing, calls that failed for good).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from faithjudge.cli.common import ExitCode, err, exit_with, fail, renamed_option, settings_from
from faithjudge.judges import judge_help

if TYPE_CHECKING:
    from faithjudge.runners.judge_check import JudgeCheck

__all__ = ["check_judge_command", "register"]


def check_judge_command(
    requests_file: Annotated[
        Path | None,
        typer.Argument(
            help="A requests file (JSONL) to be scored: each metric is checked on its line "
            "with the longest prompt, instead of the shipped sample.",
            show_default=False,
        ),
    ] = None,
    judge: Annotated[str | None, typer.Option(help=judge_help())] = None,
    evaluator: Annotated[str | None, typer.Option(hidden=True, help="Deprecated: --judge.")] = None,
    prompt_set: Annotated[str | None, typer.Option(help="Prompt set name or folder.")] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the findings as JSON on stdout.")
    ] = False,
) -> None:
    """Check that the judge can grade: list the server's models, grade one CoT per metric
    (the sample, or the longest prompt of REQUESTS_FILE; real calls, no cache), report the
    response format, latency and tokens, and suggest FAITHJUDGE_TIMEOUT_S,
    FAITHJUDGE_CONCURRENCY and FAITHJUDGE_MAX_TOKENS.

    Exit 0 when every metric got a reply in its schema; 1 when a reply was not JSON, did not
    match the schema or was cut off, or the longest prompt does not fit the server's context
    window; 3 when the check could not run or the judge is unreachable.
    """
    judge = renamed_option(judge, evaluator, "--judge", "--evaluator")
    from faithjudge.errors import FaithJudgeError
    from faithjudge.event_loop import run_async
    from faithjudge.runners.judge_check import check_judge

    try:
        settings = settings_from(judge=judge, prompt_set=prompt_set)
        check = run_async(check_judge, settings, requests_file)
    except FaithJudgeError as exc:
        raise fail(exc) from None
    if json_out:
        typer.echo(json.dumps(check_json(check), indent=2))
    else:
        _print(check)
    if check.exit_code != ExitCode.OK:
        exit_with(check.exit_code, check.reason)
    err.print(f"the judge can grade{_format_note(check)}", highlight=False)


def check_json(check: JudgeCheck) -> dict[str, Any]:
    """The findings as plain JSON data."""
    return {
        "judge": check.judge,
        "base_url": check.base_url,
        "models": asdict(check.listing),
        "response_format": check.response_format,
        "metrics": [{**asdict(p), "system_reached": p.system_reached} for p in check.probes],
        "parallel": check.parallel,
        "n_ctx": check.n_ctx,
        "requests_file": check.requests_file,
        "warnings": list(check.warnings),
        "suggestions": [asdict(s) for s in check.suggestions],
        "exit_code": int(check.exit_code),
        "reason": check.reason,
    }


def _format_note(check: JudgeCheck) -> str:
    if check.in_process:
        return " (in the process: no server to tune)"
    return f" (response format {check.response_format or 'not recorded'})"


def _print(check: JudgeCheck) -> None:
    from faithjudge_client.metric_catalogue import label_of
    from rich.markup import escape
    from rich.table import Table

    where = f" at {check.base_url}" if check.base_url else ""
    err.print(f"judge: {escape(check.judge)}{escape(where)}", highlight=False)
    err.print(f"models: {escape(check.listing.note)}", highlight=False)
    if check.n_ctx is not None:
        err.print(f"context window: {check.n_ctx:,} tokens", highlight=False)
    if check.probes:
        source = check.requests_file
        title = ("one sample CoT per metric (no cache)" if source is None
                 else f"the longest prompt per metric of {source} (no cache)")  # fmt: skip
        table = Table(title=escape(title), show_header=True)
        for column in ("metric", "reply", "format", "latency", "tries", "tokens in",
                       "tokens out", "rubric"):  # fmt: skip
            table.add_column(column, justify="left" if column in ("metric", "reply") else "right")
        for p in check.probes:
            reply = "graded" if p.outcome == "valid" else f"[yellow]{escape(p.outcome)}"
            reached = {True: "yes", False: "[red]no", None: "-"}[p.system_reached]
            table.add_row(label_of(p.metric), reply, escape(p.response_format or "-"),
                          f"{p.latency_s:.2f} s", str(p.attempts), _count(p.prompt_tokens),
                          _count(p.completion_tokens) + _cut(p), reached)  # fmt: skip
        err.print(table)
        for p in check.probes:
            if p.detail and p.outcome != "valid":
                err.print(f"  {escape(p.metric)}: {escape(p.detail)}", highlight=False)
    if check.parallel is not None:
        err.print(f"requests answered at once: {check.parallel:.1f}", highlight=False)
    for warning in check.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)
    if check.suggestions:
        err.print("suggested settings:")
        for s in check.suggestions:
            now = "keep" if not s.changes else f"now {s.current}"
            err.print(f"  {s.setting}={s.value}  ({now}: {escape(s.why)})", highlight=False)


def _count(tokens: int | None) -> str:
    """A token count, or ``unknown`` where the server gave none (never a 0 it did not say)."""
    return "unknown" if tokens is None else str(tokens)


def _cut(probe: Any) -> str:
    if probe.context_cut:
        return " (cut: context)"
    return " (cut)" if probe.truncated else ""


def register(app: typer.Typer) -> None:
    """Add ``check-judge`` to the ``faithjudge`` app."""
    app.command("check-judge")(check_judge_command)
