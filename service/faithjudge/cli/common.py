"""What every ``faithjudge`` command shares: the exit codes, the stderr console, errors, settings.

Exit codes: ``faithjudge.exit_codes.ExitCode`` (the table is there and in the README).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from faithjudge.exit_codes import ExitCode

__all__ = [
    "ExitCode",
    "UsageExits3",
    "check_outputs",
    "err",
    "exit_with",
    "fail",
    "renamed_option",
    "settings_from",
]

# click's UsageError, reached through a public name: recent typer releases vendor click, so
# ``click.UsageError`` would be a different class from the one typer raises.
_UsageError: type[Exception] = typer.BadParameter.__base__  # type: ignore[assignment]


class UsageExits3(TyperGroup):
    """The app's group: a usage error (unknown command or option, a missing or bad value) exits
    3 like every other "could not run", never click's 2, which ``gate`` uses for coverage."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        try:
            return super().parse_args(ctx, args)
        except _UsageError as exc:
            # a bare ``faithjudge`` asked for nothing wrong: it shows the help and exits 0
            asked_nothing = type(exc).__name__ == "NoArgsIsHelpError"
            exc.exit_code = 0 if asked_nothing else int(ExitCode.UNEVALUABLE)  # type: ignore[attr-defined]
            raise

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)  # a subcommand parses its own options in here
        except _UsageError as exc:
            exc.exit_code = int(ExitCode.UNEVALUABLE)  # type: ignore[attr-defined]
            raise


# Everything but machine-readable output (batch ids, Markdown reports) goes to stderr. Messages
# are not wrapped: a path or a batch id cut in two cannot be copied.
err = Console(stderr=True, soft_wrap=True)


def fail(message: object, code: ExitCode = ExitCode.UNEVALUABLE) -> typer.Exit:
    """Print ``error: message`` on stderr and return the exit to raise (``raise fail(exc)``).

    The message is escaped: a file name or server reply with brackets must not be read as
    console markup.
    """
    err.print(f"[red]error:[/red] {escape(str(message))}", highlight=False)
    return typer.Exit(int(code))


def exit_with(code: ExitCode, message: object | None = None) -> NoReturn:
    """Leave the command with ``code``, printing ``message`` (as an error unless OK) first."""
    if message is not None:
        if code in (ExitCode.OK, ExitCode.STOPPED):
            err.print(escape(str(message)), highlight=False)
        else:
            raise fail(message, code)
    raise typer.Exit(int(code))


def renamed_option(new: str | None, old: str | None, new_flag: str, old_flag: str) -> str | None:
    """The value of ``new_flag``, or of ``old_flag``, its deprecated name (still accepted for
    scripts written before the rename; one line on stderr says to move). Both at once is a
    usage error naming both: which one was meant cannot be told."""
    if old is None:
        return new
    if new is not None:
        raise fail(f"{new_flag} and {old_flag} both given: {old_flag} is the deprecated name of "
                   f"{new_flag}; pass {new_flag} alone")  # fmt: skip
    err.print(f"warning: {old_flag} is deprecated: use {new_flag}", highlight=False, markup=False)
    return old


def settings_from(**overrides: Any) -> Any:
    """``Settings`` from the environment, with the command-line options that were given.

    Options left at None keep the environment's (or the default) value. Validation errors come
    out as ``ConfigError`` naming the setting, like every other configuration problem.
    """
    from faithjudge.settings import Settings

    given = {key: value for key, value in overrides.items() if value is not None}
    return Settings.from_overrides(given)


def check_outputs(inputs: Iterable[Path], outputs: Iterable[Path | None]) -> None:
    """Refuse an output that is one of the inputs or another output: writing it would destroy
    what the command reads, or what it wrote a moment before.

    Raises:
        UserInputError: naming the path.
    """
    from faithjudge.errors import UserInputError

    seen: list[Path] = [path for path in inputs if path.exists()]
    for output in outputs:
        if output is None:
            continue
        if output.exists():
            for other in seen:
                if other.exists() and output.samefile(other):
                    raise UserInputError(
                        f"{output} is both read and written by this command (as {other}); "
                        "choose another output path",
                        field="output",
                    )
        elif any(output.resolve() == other.resolve() for other in seen):
            raise UserInputError(f"{output} is given as two outputs", field="output")
        seen.append(output)
