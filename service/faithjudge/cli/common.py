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

from faithjudge.exit_codes import ExitCode

__all__ = ["ExitCode", "check_outputs", "err", "exit_with", "fail", "settings_from"]


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
