"""Request lines read the one way every route reads them: the CLI runners, batch ingest and
``POST /v1/score``.

``read_request`` reads a line or a body into a ``ScoreRequest``, or into an ``Unreadable`` that
says why not in the words every route gives; whatever the bytes hold, it never raises.
``parse_line`` turns one JSONL line into a ``ScoreRequest`` or into the ``input`` error result
that replaces it in the output (naming the line and the field, keeping what could be read of the
line). It sits below the pipeline and the runners so that whatever reads lines (the job ingest,
the worker, the Batch API phase) does not load the scorer to do it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from faithjudge_client.lines import Failure, ItemResult, ScoreRequest, non_finite_path
from pydantic import ValidationError

from faithjudge.jsonl import BOM, describe_json_error, describe_validation_error, field_problems

__all__ = ["Unreadable", "input_error_result", "parse_line", "read_request", "readable_text"]


def readable_text(value: Any) -> str | None:
    """A field of an unreadable line as its error result keeps it: a string of 1 to 2,000
    characters, else None."""
    return value if isinstance(value, str) and 0 < len(value) <= 2_000 else None


def input_error_result(
    line: int | None, detail: str, *, readable: Mapping[str, Any] | None = None
) -> ItemResult:
    """The result line for input that could not be read as a ScoreRequest.

    ``readable`` is the line's JSON object, when it was one: what can be read of it (item_id,
    model, question) stays in the result, so reports attribute the error to its model.
    """

    fields = readable or {}
    return ItemResult(
        line=line,
        item_id=readable_text(fields.get("item_id")),
        model=readable_text(fields.get("model")),
        question=readable_text(fields.get("question")),
        error=Failure(stage="input", detail=detail),
    )


@dataclass(frozen=True, slots=True)
class Unreadable:
    """Why some bytes (a JSONL line, a ``POST /v1/score`` body) are no ``ScoreRequest``."""

    detail: str
    """The one message every route gives (without a line number)."""
    problems: tuple[tuple[str | None, str], ...]
    """``(field, reason)`` of each problem; field None for the whole text."""
    readable: Mapping[str, Any] | None = None
    """The JSON object, when the text was one (its item_id, model, question are kept)."""


def read_request(raw: bytes) -> ScoreRequest | Unreadable:
    """Read one request (a line or a body) the way every route reads it, never raising.

    NaN, Infinity and numbers beyond a double's range (``1e999``, an integer of thousands of
    digits) are not JSON numbers: the problem names where they are. Text that is no JSON at
    all (not UTF-8, nested too deeply, cut short ...) is described by ``describe_json_error``.
    A UTF-8 byte order mark at the start (Windows editors write one at the start of a file;
    concatenated files carry theirs inward) is ignored, as RFC 8259 allows.
    """
    raw = raw.removeprefix(BOM)  # stored batch lines and bodies come here unread
    try:
        return ScoreRequest.model_validate_json(raw)
    except ValidationError as exc:
        error = exc
    # the slow path runs only for bad input: say precisely what is wrong with it
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return _unparsable(raw, exc)
    if not isinstance(data, dict):
        return Unreadable("expected a JSON object", ((None, "expected a JSON object"),))
    errors = error.errors(include_url=False)
    refused = [e for e in errors if e.get("type") == "json_invalid"]
    if refused:  # pydantic's reader refused what orjson read (nesting it will not follow)
        detail = describe_json_error(raw, str(refused[0].get("msg", "")))
        return Unreadable(detail, ((None, detail),), data)
    problems = tuple(field_problems(errors))
    return Unreadable(describe_validation_error(error), problems, data)


def parse_line(raw: bytes, line: int) -> ScoreRequest | ItemResult:
    """Parse one JSONL line into a request, or into the error result that replaces it.

    The error names the line and the field, and keeps what could be read of the line (item_id,
    model, question); whatever the line holds, it is an error line, never a crash that stops
    the file (:func:`read_request`).
    """
    parsed = read_request(raw)
    if isinstance(parsed, ScoreRequest):
        return parsed
    return input_error_result(line, f"line {line}: {parsed.detail}", readable=parsed.readable)


def _unparsable(raw: bytes, exc: orjson.JSONDecodeError) -> Unreadable:
    """What is wrong with text orjson refuses; a lenient read finds the numbers it refused."""
    constants: list[str] = []

    def constant(name: str) -> float:
        constants.append(name)
        return float(name)

    try:
        lenient = json.loads(raw, parse_constant=constant, parse_int=_lenient_int)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        lenient = None
    where = non_finite_path(lenient, "") if isinstance(lenient, dict) else None
    if where is None:
        detail = describe_json_error(raw, str(exc))
        return Unreadable(detail, ((None, detail),))
    field = where.lstrip(".")
    reason = "NaN or infinity is not a JSON number"
    if not constants:  # only numerals out of range, read as infinity
        reason += " (the number is beyond the range of a double)"
    return Unreadable(f"{field}: {reason}", ((field, reason),), lenient)


def _lenient_int(text: str) -> int | float:
    """An integer as a double sees it: one beyond a double's range is infinity (and is never
    converted to an int, which Python refuses past 4,300 digits)."""
    as_float = float(text)
    return int(text) if math.isfinite(as_float) else as_float
