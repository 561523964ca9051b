"""What every ``faithjudge`` command shares: the exit codes, the stderr console, errors, settings.

Exit codes (the same for ``score``, ``submit``, ``report``, ``gate``, ``validate-judge``,
``audit``, ``serve`` and ``keys``; documented in the README):

====  ==================  ==================================================================
code  name                meaning
====  ==================  ==================================================================
0     OK                  every line got a result and at least one grade was judged
1     CHECK_FAILED        ``gate``: a quality or regression check failed
2     COVERAGE_FAILED     ``gate``: a coverage check failed (typer's own usage errors are
                          mapped to 3 on ``gate``, so 2 always means coverage there)
3     UNEVALUABLE         the command could not run: bad option or configuration, missing or
                          unreadable file, server or evaluator unreachable / refusing us
4     NOTHING_SCORED      it ran, but not one grade was judged: empty input, no readable
                          line, every evaluator call failed, every batch line rejected
5     STOPPED             the run stopped early (Ctrl-C, a wait that timed out, a batch that
                          was cancelled); what was written so far is kept and resumable
====  ==================  ==================================================================
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["ExitCode", "err", "exit_with", "fail", "settings_from"]


class ExitCode(IntEnum):
    OK = 0
    CHECK_FAILED = 1
    COVERAGE_FAILED = 2
    UNEVALUABLE = 3
    NOTHING_SCORED = 4
    STOPPED = 5


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
    from service.settings import Settings

    given = {key: value for key, value in overrides.items() if value is not None}
    return Settings.from_overrides(given)
