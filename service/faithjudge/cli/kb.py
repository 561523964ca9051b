"""``faithjudge kb check|template``: knowledge bases for questions of your own.

``check`` names every problem of a KB file (``file:entry:field: why [rule]``) under the rules of
knowledge_base/README.md: exit 0 when there is none, 1 when there are problems, 3 when the file
cannot be read. ``template`` writes a KB file of one entry whose fields to fill say TODO, which
``check`` flags until they are filled.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from faithjudge.cli.common import ExitCode, err, exit_with, fail
from faithjudge.errors import FaithJudgeError

__all__ = ["register"]

kb_app = typer.Typer(
    help="Check a knowledge base, or start one for your own questions.", no_args_is_help=True
)


@kb_app.command("check")
def kb_check(
    files: Annotated[
        list[str], typer.Argument(metavar="FILE...", help="KB JSON files (or bundled names).")
    ],
) -> None:
    """Name every problem of each KB file: exit 0 none, 1 problems, 3 a file cannot be read."""
    from faithjudge.assets.kb_check import check_knowledge_base

    found = 0
    for name in files:
        try:
            problems = check_knowledge_base(name)
        except FaithJudgeError as exc:
            raise fail(exc) from None
        for problem in problems:
            typer.echo(problem.render(name))
        found += len(problems)
        if problems:
            err.print(f"{name}: {len(problems)} problem(s)", highlight=False)
        else:
            err.print(f"{name}: ok", highlight=False)
    if found:
        exit_with(ExitCode.CHECK_FAILED)


@kb_app.command("template")
def kb_template(
    question: Annotated[
        str, typer.Option(help="The question exactly as the model sees it, option list included.")
    ],
    options: Annotated[
        str | None,
        typer.Option(help="The answer options, comma-separated (default: the question's list)."),
    ] = None,
    question_type: Annotated[
        str | None,
        typer.Option(
            "--type", help="binary, ordinal, comparative or spatial (guessed from the options)."
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here (default: stdout).")
    ] = None,
) -> None:
    """Write a KB file of one entry to fill in; `kb check` flags the fields still to fill."""
    from faithjudge.assets.kb_check import entry_template

    try:
        listed = None if options is None else [o for o in options.split(",") if o.strip()]
        document = entry_template(question, listed, question_type)
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        if output is None:
            typer.echo(text, nl=False)
            return
        if output.exists():
            raise FaithJudgeError(f"{output} exists; choose another path or remove it first")
        output.write_text(text, encoding="utf-8")
    except FaithJudgeError as exc:
        raise fail(exc) from None
    err.print(
        f"wrote {output}: fill in every TODO, then run `faithjudge kb check {output}`",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.add_typer(kb_app, name="kb")
