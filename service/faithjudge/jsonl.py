"""JSONL lines as every reader takes them.

Lines are numbered from 1 as a text editor numbers them, blank lines are passed over, and a
UTF-8 byte order mark at the start of a line is ignored: RFC 8259 lets a reader ignore one,
Windows tools write one at the start of a file, and ``cat a.jsonl b.jsonl`` carries the second
file's inward. A row is never refused for it. A line that is not what its reader expects is
named by its number and its fields (``describe_validation_error``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = ["BOM", "count_lines", "describe_validation_error", "numbered_lines"]

BOM = "\ufeff".encode()


def numbered_lines(lines: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """``(number, line)`` for every non-blank line, without a leading byte order mark."""
    for number, raw in enumerate(lines, start=1):
        line = raw.removeprefix(BOM)
        if line.strip():
            yield number, line


def count_lines(path: Path) -> int:
    """Number of lines ``numbered_lines`` yields for the file, counted in bulk (for the
    progress total)."""
    count = 0
    with path.open("rb") as handle:
        for raw in handle:
            if raw.removeprefix(BOM).strip():
                count += 1
    return count


def describe_validation_error(exc: ValidationError) -> str:
    """A short message naming every offending field (``baseline.cot: ...``)."""
    parts = []
    for error in exc.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "(line)"
        parts.append(f"{where}: {error['msg']}")
    more = len(exc.errors()) - 5
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)
