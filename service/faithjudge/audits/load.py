"""Reading answer-record JSONL into one column table, fast, with per-line errors.

Validating a million lines one ``AnswerRecord.model_validate_json`` at a time costs more than
the audit itself, so lines go through two paths that accept exactly the same lines:

* the fast path decodes each line with msgspec into structs that mirror the record (types,
  lengths, ranges, unknown keys), then looks every distinct condition spelling up in the
  catalogue once. It is deliberately conservative: it only accepts lines that the
  pydantic model accepts, with the same values;
* every line the fast path does not accept goes through ``AnswerRecord`` itself, which either
  accepts it (the record is kept) or names the offending field. Pydantic is the authority, so
  the result equals validating every line with the model (property tests check this).

Errors are collected over the whole file and raised once, naming ``file:line: field: why``, or
handed back to the caller as the audit's input errors while the good lines are audited.
Cross-record checks (duplicates, missing originals, gold letters) are ``consistency``'s job.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import numpy as np
import orjson
import pandas as pd
from pydantic import ValidationError

from faithjudge.audits.records import MAX_OUTPUT_CHARS, MAX_SHORT_CHARS, AnswerRecord, ItemMeta
from faithjudge.errors import UserInputError
from faithjudge.jsonl import describe_json_error, numbered_lines
from faithjudge.scoring.modifications import lookup_modification

__all__ = [
    "COLUMNS",
    "MAX_REPORTED_ERRORS",
    "META_COLUMNS",
    "AuditInputError",
    "LineProblem",
    "load_records",
    "parse_lines",
]

MAX_REPORTED_ERRORS = 20
CHUNK_LINES = 100_000

_META_BOOL = ("laterality_dependent", "text_only_answerable")

META_COLUMNS: tuple[str, ...] = tuple(ItemMeta.model_fields)
_RECORD_FIELDS = tuple(f for f in AnswerRecord.model_fields if f != "metadata")
COLUMNS: tuple[str, ...] = ("line", *_RECORD_FIELDS, *META_COLUMNS)


@dataclass(frozen=True, slots=True)
class LineProblem:
    """One bad line: its 1-based number, the offending field (or None) and why."""

    line: int
    field: str | None
    message: str

    def render(self, source: str) -> str:
        named = self.field and not self.message.startswith(f"{self.field}: ")
        where = f"{self.field}: " if named else ""
        return f"{source}:{self.line}: {where}{self.message}"


class AuditInputError(UserInputError):
    """Answer records that cannot be audited; ``problems`` name each bad line and field."""

    def __init__(self, *, source: str, problems: list[LineProblem]) -> None:
        self.source = source
        self.problems = problems
        self.total = len(problems)
        shown = [p.render(source) for p in problems[:MAX_REPORTED_ERRORS]]
        more = self.total - len(shown)
        if more > 0:
            shown.append(f"... and {more} more")
        first = self.problems[0] if self.problems else None
        super().__init__(
            f"{source}: {self.total} problem(s) in the answer records\n" + "\n".join(shown),
            field=None if first is None else f"line {first.line}: {first.field}",
        )


# ---------------------------------------------------------------- fast path

# A msgspec mirror of AnswerRecord: msgspec decodes a line into a compact struct in C,
# checking the same types, lengths, ranges and unknown keys. It is conservative:
# the catalogue lookup of ``condition`` runs afterwards (once per distinct spelling), and any
# line it does not accept goes to pydantic. A property test checks both paths agree.
_MsgId = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_SHORT_CHARS)]
_MsgShort = Annotated[str, msgspec.Meta(max_length=MAX_SHORT_CHARS)]
_MsgLong = Annotated[str, msgspec.Meta(max_length=MAX_OUTPUT_CHARS)]


class _FastMeta(msgspec.Struct, forbid_unknown_fields=True):
    finding: _MsgShort | None = None
    view: _MsgShort | None = None
    sex: Literal["M", "F"] | None = None
    age_group: _MsgShort | None = None
    risk_tier: Literal["L1", "L2", "L3", "L4", "L5"] | None = None
    source: _MsgShort | None = None
    laterality_dependent: bool | None = None
    text_only_answerable: bool | None = None


class _FastRecord(msgspec.Struct, forbid_unknown_fields=True):
    model: _MsgId
    item_id: _MsgId
    condition: _MsgId
    variant: _MsgShort | None = None
    raw_output: _MsgLong | None = None
    answer: _MsgShort | None = None
    gold: _MsgShort | None = None
    p_yes: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] | None = None
    question: _MsgLong | None = None
    rationale: _MsgLong | None = None
    metadata: _FastMeta = msgspec.field(default_factory=_FastMeta)


_DECODER = msgspec.json.Decoder(_FastRecord)


def _decode_one(raw: bytes) -> _FastRecord | None:
    # one call per line: a JSON-lines decoder would let a value span two lines or two values
    # share one, and then records could shift against their line numbers
    try:
        return _DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _fast(raws: list[bytes]) -> tuple[np.ndarray, pd.DataFrame]:
    """(accepted mask, table of the accepted rows). Never accepts what pydantic rejects."""
    decoded = list(map(_decode_one, raws))
    ok = np.fromiter((r is not None for r in decoded), dtype=bool, count=len(raws))
    records = [r for r in decoded if r is not None] if not ok.all() else decoded
    columns: dict[str, Any] = {
        name: list(map(operator.attrgetter(name), records)) for name in _RECORD_FIELDS
    }
    metas = list(map(operator.attrgetter("metadata"), records))
    for name in META_COLUMNS:
        columns[name] = list(map(operator.attrgetter(name), metas))
    # the condition must be a catalogue code: look each distinct spelling up once
    canonical: dict[str, str | None] = {}
    for code in set(columns["condition"]):
        try:
            canonical[code] = lookup_modification(code).id
        except UserInputError:
            canonical[code] = None
    conditions = [canonical[c] for c in columns["condition"]]
    known = np.fromiter((c is not None for c in conditions), dtype=bool, count=len(conditions))
    columns["condition"] = conditions
    ok[ok] = known
    table = pd.DataFrame(
        {
            name: (
                np.array(columns[name], dtype=float)
                if name == "p_yes"
                else pd.Series(columns[name], dtype=object)
            )
            for name in COLUMNS[1:]
        }
    )
    return ok, table[known].reset_index(drop=True)


# ---------------------------------------------------------------- slow path (the authority)


def _describe(exc: ValidationError, raw: bytes) -> tuple[str | None, str]:
    errors = exc.errors(include_url=False)
    if errors and errors[0]["type"] == "json_invalid":
        return None, describe_json_error(raw)
    parts, first = [], None
    for error in errors[:5]:
        where = ".".join(str(p) for p in error["loc"]) or None
        first = first or where
        msg = error["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {msg}" if where else msg)
    if len(errors) > 5:
        parts.append(f"... and {len(errors) - 5} more")
    if len(parts) == 1:
        return first, errors[0]["msg"].removeprefix("Value error, ")
    return first, "; ".join(parts)


def _slow(raw: bytes, line: int) -> dict[str, Any] | LineProblem:
    try:
        record = AnswerRecord.model_validate_json(raw)
    except ValidationError as exc:
        where, why = _describe(exc, raw)
        return LineProblem(line, where, why)
    row = record.model_dump(exclude={"metadata"})
    row.update(record.metadata.model_dump())
    return row


# ---------------------------------------------------------------- assembling


def _chunk_frame(
    lines: list[tuple[int, bytes]], fast: bool
) -> tuple[pd.DataFrame, list[LineProblem]]:
    numbers = np.fromiter((n for n, _ in lines), dtype=np.int64, count=len(lines))
    if fast:
        ok, table = _fast([raw for _, raw in lines])
        table.insert(0, "line", numbers[ok])
    else:
        ok, table = np.zeros(len(lines), dtype=bool), pd.DataFrame(columns=list(COLUMNS))
    problems: list[LineProblem] = []
    rescued: list[dict[str, Any]] = []
    for index in np.flatnonzero(~ok):
        number, raw = lines[index]
        outcome = _slow(raw, number)
        if isinstance(outcome, LineProblem):
            problems.append(outcome)
        else:
            outcome["line"] = number
            rescued.append(outcome)
    if rescued:
        table = pd.concat([table, pd.DataFrame.from_records(rescued, columns=list(COLUMNS))])
    return table[list(COLUMNS)], problems


def _finish(frames: list[pd.DataFrame]) -> pd.DataFrame:
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    table = table.sort_values("line", kind="stable", ignore_index=True)
    out = pd.DataFrame({"line": table["line"].to_numpy(dtype=np.int64)})
    for name in COLUMNS[1:]:
        col = table[name]
        if name == "p_yes":
            out[name] = pd.to_numeric(col, errors="coerce").astype(float).to_numpy()
        elif name in _META_BOOL:
            out[name] = col.astype("boolean").to_numpy()
        else:
            values = col.astype(object).to_numpy(copy=True)
            values[pd.isna(values)] = None
            # object dtype keeps None as the one missing marker (pandas would infer str + NaN)
            out[name] = pd.Series(values, dtype=object)
    return out


def parse_lines(
    lines: Iterable[tuple[int, bytes]],
    *,
    source: str = "<records>",
    fast: bool = True,
    problems: list[LineProblem] | None = None,
) -> pd.DataFrame:
    """Validate numbered JSONL lines into the record table (one row per line, ``COLUMNS``).

    ``fast=False`` sends every line through the pydantic model (the reference path). With a
    ``problems`` list, bad lines are appended to it and left out of the table instead of raised.

    Raises:
        AuditInputError: without ``problems``, any line that is not a valid answer record (all
            bad lines are collected).
    """
    frames: list[pd.DataFrame] = []
    bad_lines: list[LineProblem] = []
    for chunk in _chunks(lines):
        table, bad = _chunk_frame(chunk, fast)
        frames.append(table)
        bad_lines.extend(bad)
    if bad_lines and problems is None:
        raise AuditInputError(source=source, problems=bad_lines)
    if problems is not None:
        problems.extend(bad_lines)
    return _finish(frames)


def _chunks(lines: Iterable[tuple[int, bytes]]) -> Iterator[list[tuple[int, bytes]]]:
    chunk: list[tuple[int, bytes]] = []
    for number, raw in lines:
        if not raw.strip():
            continue
        chunk.append((number, raw))
        if len(chunk) >= CHUNK_LINES:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _file_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise UserInputError(
            f"cannot read {path}: {exc.strerror or exc}", field=str(path)
        ) from None
    with handle:
        yield from numbered_lines(handle)


def _converted(lines: Iterable[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
    from faithjudge.audits.from_requests import record_from_request

    for number, raw in lines:
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            yield number, raw  # validation names the JSON error
            continue
        yield number, orjson.dumps(record_from_request(data))


def load_records(
    path: Path,
    *,
    fast: bool = True,
    from_requests: bool = False,
    problems: list[LineProblem] | None = None,
) -> pd.DataFrame:
    """Read and validate an answer-record JSONL file (see ``parse_lines``).

    ``from_requests`` reads the sidecar's ScoreRequest lines instead and turns each into an
    answer record first (``faithjudge.audits.from_requests``); line numbers stay those of the
    file. With a ``problems`` list, bad lines are collected there (the audit's input errors) and
    the others audited; a file without one good record is still an error naming them all.

    Raises:
        AuditInputError: bad lines (named ``file:line: field: why``), or no record at all.
        UserInputError: the file cannot be read.
    """
    if not path.is_file():
        raise UserInputError(f"answer-record file not found: {path}", field=str(path))
    lines = _file_lines(path)
    if from_requests:
        lines = _converted(lines)
    bad: list[LineProblem] = []
    table = parse_lines(lines, source=str(path), fast=fast, problems=bad)
    if table.empty:
        raise AuditInputError(
            source=str(path),
            problems=bad or [LineProblem(0, None, "the file holds no answer record")],
        )
    if bad and problems is None:
        raise AuditInputError(source=str(path), problems=bad)
    if problems is not None:
        problems.extend(bad)
    return table
