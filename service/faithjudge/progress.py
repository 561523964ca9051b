"""The progress bar every command-line tool shows: on a terminal only, gone when done."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

__all__ = ["progress_bar"]


def progress_bar(label: str, *, console: Console, show: bool = True) -> Progress:
    """A bar labelled ``label``; disabled when ``show`` is off or stderr is not a terminal."""
    return Progress(
        TextColumn(f"[bold]{label}[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not show or not sys.stderr.isatty(),
        transient=True,
    )
