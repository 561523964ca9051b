"""JSONL lines as every reader takes them.

Lines are numbered from 1 as a text editor numbers them, blank lines are passed over, and a
UTF-8 byte order mark at the start of a line is ignored: RFC 8259 lets a reader ignore one,
Windows tools write one at the start of a file, and ``cat a.jsonl b.jsonl`` carries the second
file's inward. A row is never refused for it. A line that is not what its reader expects is
named by its number and its fields (``describe_validation_error``); a line that is not JSON at
all is described by ``describe_json_error``, in the same words by the CLI, batch upload and
``POST /v1/score``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = [
    "BOM",
    "count_lines",
    "describe_json_error",
    "describe_validation_error",
    "field_problems",
    "numbered_lines",
]

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


# Where a parser appends its own position (``: line 1 column 8 (char 7)``): dropped, the
# position is given once, counted the same way for every parser.
_POSITION = re.compile(r":? line \d+ column \d+ \(char \d+\)$")
# The names pydantic gives the members of a union in an error's location (``context.k.str``):
# a type, not a field.
_UNION_MEMBER = re.compile(r"^(str|int|float|bool|bytes|none|[a-z][a-z-]*\[.*\])$")


def describe_json_error(raw: bytes | str, reason: str | None = None) -> str:
    """Why ``raw`` (a line, or a request body) is not JSON, phrased one way for every reader.

    The position is a character count in the text with its byte order mark and surrounding
    whitespace removed, so a line read with or without its newline, or inside a body, is
    described alike. ``reason`` is the caller's parser's own message, used only when the
    standard parser finds nothing wrong (a number or a nesting depth only the caller refuses).
    """
    if isinstance(raw, bytes):
        raw = raw.removeprefix(BOM)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not valid JSON: not UTF-8 text (byte {exc.start + 1})"
    else:
        text = raw.removeprefix("\ufeff")
    text = text.strip()
    if not text:
        return "not valid JSON: empty"
    try:
        # integers read as doubles: Python refuses to convert one of more than 4,300 digits
        json.loads(text, parse_int=float)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text):
            return (
                f"not valid JSON: it ends after {len(text)} characters, before the JSON value "
                "is complete (cut short?)"
            )
        if exc.msg.startswith("Unterminated string"):
            return (
                f"not valid JSON: it ends after {len(text)} characters, inside the string that "
                f"starts at character {exc.pos + 1} (cut short?)"
            )
        where = (
            f"line {exc.lineno}, column {exc.colno}" if "\n" in text else f"character {exc.pos + 1}"
        )
        return f"not valid JSON: {exc.msg} at {where}"
    except RecursionError:
        return "not valid JSON: nested too deeply"
    except ValueError as exc:  # whatever else the reader refuses: never a crash of the caller
        return f"not valid JSON: {_POSITION.sub('', reason or str(exc))}"
    if reason and "recursion limit" in reason:
        return "not valid JSON: nested too deeply"
    if reason:
        return f"not valid JSON: {_POSITION.sub('', reason.removeprefix('Invalid JSON: '))}"
    return "not valid JSON"


def _field_path(loc: Iterable[Any]) -> str:
    return ".".join(str(part) for part in loc)


def field_problems(errors: Iterable[Mapping[str, Any]]) -> list[tuple[str | None, str]]:
    """``(field, reason)`` for each problem of pydantic ``errors``; field None for the whole
    value. A JSON decode error names no field (its location is a character offset), and the
    members of a union that all refused a value are one problem of that field."""
    merged: dict[str | None, list[str]] = {}
    for error in errors:
        if error.get("type") == "json_invalid":
            merged.setdefault(None, []).append(str(error.get("msg", "invalid JSON")))
            continue
        loc = [part for part in error.get("loc", ()) if part != "body"]
        if len(loc) > 1 and isinstance(loc[-1], str) and _UNION_MEMBER.match(loc[-1]):
            loc = loc[:-1]
        where = _field_path(loc) or None
        message = str(error.get("msg", ""))
        reasons = merged.setdefault(where, [])
        if (
            reasons
            and message.startswith("Input should be ")
            and reasons[-1].startswith("Input should be ")
        ):
            reasons[-1] += " or " + message.removeprefix("Input should be ")
        elif message not in reasons:
            reasons.append(message)
    return [(where, "; ".join(reasons)) for where, reasons in merged.items()]


def describe_validation_error(exc: ValidationError) -> str:
    """A short message naming every offending field (``baseline.cot: ...``)."""
    problems = field_problems(exc.errors(include_url=False))
    parts = [f"{where or '(line)'}: {reason}" for where, reason in problems[:5]]
    more = len(problems) - 5
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)
