"""Request lines read the one way every route reads them: the CLI runners and batch ingest.

``parse_line`` turns one JSONL line into a ``ScoreRequest``, or into the ``input`` error result
that replaces it in the output (naming the line and the field, keeping what could be read of the
line). It sits below the pipeline and the runners so that whatever reads lines (the job ingest,
the worker, the Batch API phase) does not load the scorer to do it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson
from faithjudge_client.lines import Failure, ItemResult, ScoreRequest, non_finite_path
from pydantic import ValidationError

from faithjudge.jsonl import BOM, describe_json_error, describe_validation_error

__all__ = ["input_error_result", "parse_line", "readable_text"]


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


def parse_line(raw: bytes, line: int) -> ScoreRequest | ItemResult:
    """Parse one JSONL line into a request, or into the error result that replaces it.

    The error names the line and the field, and keeps what could be read of the line (item_id,
    model, question). NaN, Infinity and numbers too large for a double are not JSON numbers: such
    a line is an error line naming where, never a crash that stops the file. A UTF-8 byte order
    mark at the start of a line (Windows editors write one at the start of a file; concatenated
    files carry theirs inward) is ignored, as RFC 8259 allows.
    """
    raw = raw.removeprefix(BOM)  # stored batch lines come here unread by numbered_lines
    try:
        return ScoreRequest.model_validate_json(raw)
    except ValidationError as exc:
        error = exc
    # the slow path runs only for bad lines: say precisely what is wrong with them
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return _unparsable(raw, line, exc)
    if not isinstance(data, dict):
        return input_error_result(line, f"line {line}: expected a JSON object")
    detail = f"line {line}: {describe_validation_error(error)}"
    return input_error_result(line, detail, readable=data)


def _unparsable(raw: bytes, line: int, exc: orjson.JSONDecodeError) -> ItemResult:
    """The error result of a line orjson refuses; a lenient read finds non-finite numbers."""
    try:
        lenient = json.loads(raw)
    except (ValueError, RecursionError):
        return input_error_result(line, f"line {line}: {describe_json_error(raw, str(exc))}")
    where = non_finite_path(lenient, "") if isinstance(lenient, dict) else None
    if where is None:
        return input_error_result(line, f"line {line}: {describe_json_error(raw, str(exc))}")
    detail = f"line {line}: {where.lstrip('.')}: NaN or infinity is not a JSON number"
    return input_error_result(line, detail, readable=lenient)
