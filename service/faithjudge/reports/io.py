"""Reading result lines (and, optionally, the request lines that hold the CoTs).

The only module of the report package that touches files besides ``export``. Every problem
names ``file:line`` so that a CI log points straight at the bad line.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
from faithjudge_client.lines import ItemResult
from pydantic import ValidationError

from faithjudge.errors import FaithJudgeError
from faithjudge.jsonl import describe_validation_error, numbered_lines

__all__ = [
    "MAX_REPORTED_ERRORS",
    "ReportInputError",
    "iter_results",
    "read_cots",
    "read_results",
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


def iter_results(path: Path) -> Iterator[ItemResult]:
    """Yield the ItemResult lines of ``path``; raise once at the end if any line is bad.

    Raises:
        ReportInputError: the file is unreadable or holds lines that are not ItemResults
            (the first ``MAX_REPORTED_ERRORS`` are named as ``file:line: why``).
    """
    problems: list[str] = []
    bad = 0
    for number, raw in _lines(path):
        try:
            yield ItemResult.model_validate_json(raw)
        except ValidationError as exc:
            bad += 1
            if len(problems) < MAX_REPORTED_ERRORS:
                errors = exc.errors(include_url=False)
                why = (
                    "not valid JSON"
                    if errors and errors[0]["type"] == "json_invalid"
                    else describe_validation_error(exc)
                )
                problems.append(f"{path}:{number}: {why}")
    if bad:
        more = bad - len(problems)
        if more > 0:
            problems.append(f"... and {more} more bad lines")
        raise ReportInputError(f"{path}: {bad} line(s) are not valid result lines", problems)


def read_results(path: Path) -> list[ItemResult]:
    """All result lines of ``path`` (see ``iter_results``)."""
    return list(iter_results(path))


def read_cots(path: Path) -> dict[str, str]:
    """CoT texts of a ScoreRequest file, keyed by ``item_id`` and by ``#LINE`` (1-based).

    Result lines carry quote spans but not the CoT itself; the HTML report uses this mapping to
    show each CoT with its verified quotes highlighted. Lines without a CoT are skipped.

    Raises:
        ReportInputError: the file is unreadable or a line is not a JSON object.
    """
    cots: dict[str, str] = {}
    problems: list[str] = []
    for number, raw in _lines(path):
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            problems.append(f"{path}:{number}: not valid JSON ({exc})")
            continue
        if not isinstance(data, dict):
            problems.append(f"{path}:{number}: expected a JSON object")
            continue
        cot = data.get("cot")
        if not isinstance(cot, str):
            continue
        cots[f"#{number}"] = cot
        if isinstance(data.get("item_id"), str):
            cots[data["item_id"]] = cot
    if problems:
        raise ReportInputError(f"{path}: unreadable request lines", problems[:MAX_REPORTED_ERRORS])
    return cots


def _umask() -> int:
    current = os.umask(0)  # the only way to read it; set straight back
    os.umask(current)
    return current


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a reader never sees half a report).

    The report gets the mode of any file the user creates (0666 less the umask), as the result
    lines do; a temporary file would otherwise leave it 0600.

    Raises:
        ReportInputError: the file cannot be written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                os.fchmod(handle.fileno(), 0o666 & ~_umask())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ReportInputError(f"cannot write {path}: {exc.strerror or exc}") from None
