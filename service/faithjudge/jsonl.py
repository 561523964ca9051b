"""JSONL lines as every reader takes them.

Lines are numbered from 1 as a text editor numbers them, blank lines are passed over, and a
UTF-8 byte order mark at the start of a line is ignored: RFC 8259 lets a reader ignore one,
Windows tools write one at the start of a file, and ``cat a.jsonl b.jsonl`` carries the second
file's inward. A row is never refused for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

__all__ = ["BOM", "numbered_lines"]

BOM = "\ufeff".encode()


def numbered_lines(lines: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """``(number, line)`` for every non-blank line, without a leading byte order mark."""
    for number, raw in enumerate(lines, start=1):
        line = raw.removeprefix(BOM)
        if line.strip():
            yield number, line
