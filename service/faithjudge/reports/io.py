"""Reading result lines (and, optionally, the request lines that hold the CoTs).

The only module of the report package that touches files besides ``export``. Every problem
names ``file:line`` so that a CI log points straight at the bad line, and no bad line stops a
report: it is counted as an input error under its line number, as ``score`` counts one.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
from faithjudge_client.lines import Failure, ItemResult
from pydantic import ValidationError

from faithjudge.errors import FaithJudgeError
from faithjudge.jsonl import describe_json_error, describe_validation_error, numbered_lines

__all__ = [
    "MAX_REPORTED_ERRORS",
    "ReportInputError",
    "iter_results",
    "read_results",
    "summarize_problems",
    "write_text",
]

# enough to see a pattern in a broken file without flooding the CI log
MAX_REPORTED_ERRORS = 20


class ReportInputError(FaithJudgeError):
    """A result or request file cannot be read; ``problems`` lists ``file:line: why``."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = problems or []
        detail = "\n".join(self.problems)
        super().__init__(f"{message}\n{detail}" if detail else message)


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ReportInputError(f"cannot read {path}: {exc.strerror or exc}") from None
    with handle:
        yield from numbered_lines(handle)


def _why(exc: ValidationError, raw: bytes) -> str:
    errors = exc.errors(include_url=False)
    if errors and errors[0]["type"] == "json_invalid":
        return describe_json_error(raw)
    return describe_validation_error(exc)


def _unreadable(path: Path, number: int, raw: bytes, why: str) -> ItemResult:
    """The input-error line that stands for a result line that cannot be read.

    What can be read of it (item_id, model, question) is kept so that the error is counted under
    its model; a line that is not even JSON belongs to no model.
    """
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = None
    fields = data if isinstance(data, dict) else {}
    return ItemResult(
        line=number,
        item_id=_text(fields.get("item_id")),
        model=_text(fields.get("model")),
        question=_text(fields.get("question")),
        error=Failure(stage="input", detail=f"{path.name}:{number}: {why}"),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= 2_000 else None


def iter_results(path: Path, problems: list[str] | None = None) -> Iterator[ItemResult]:
    """Yield one ItemResult per line of ``path``, in order.

    A line that is not a result line is never a reason to drop the file: it becomes an
    ``input`` error line numbered by its place in the file, counted like any other line that
    never reached the judge. ``problems`` (when given) collects ``file:line: why`` for each.

    Raises:
        ReportInputError: the file cannot be opened.
    """
    for number, raw in _lines(path):
        try:
            yield ItemResult.model_validate_json(raw)
        except ValidationError as exc:
            why = _why(exc, raw)
            if problems is not None:
                problems.append(f"{path}:{number}: {why}")
            yield _unreadable(path, number, raw, why)


def read_results(path: Path, problems: list[str] | None = None) -> list[ItemResult]:
    """All result lines of ``path`` (see ``iter_results``)."""
    return list(iter_results(path, problems))


def summarize_problems(path: Path, kind: str, problems: list[str]) -> str:
    """One warning for the unreadable lines of ``path``: the first ``MAX_REPORTED_ERRORS`` of
    ``problems`` (``file:line: why``) and how many more."""
    shown = problems[:MAX_REPORTED_ERRORS]
    more = len(problems) - len(shown)
    lines = [f"{path}: {len(problems)} unreadable {kind} line(s), counted as input errors:", *shown]
    if more > 0:
        lines.append(f"... and {more} more")
    return "\n".join(lines)


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a reader never sees half a report).

    A new report is 0600, as the result lines it is read from are (it holds their grades and
    CoTs: ``faithjudge.private_files``); a report written over an existing one keeps that
    file's mode.

    Raises:
        ReportInputError: the file cannot be written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                with contextlib.suppress(FileNotFoundError):  # mkstemp made it 0600
                    os.fchmod(handle.fileno(), stat.S_IMODE(os.stat(path).st_mode))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ReportInputError(f"cannot write {path}: {exc.strerror or exc}") from None
