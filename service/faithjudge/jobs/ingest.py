"""Job upload: split a streamed JSONL body into lines, validate each, persist the accepted.

Memory stays bounded whatever the body size: lines are validated in chunks (off the event loop)
and written to the store in chunks, rejected lines too; only the current partial line and the
first rejections (those the 202 answer lists) are kept.
A line is read by ``faithjudge.pipeline.request_lines.read_request``, as ``faithjudge score`` and
``POST /v1/score`` read theirs, so a job rejects exactly the lines ``faithjudge score`` would
turn into ``input`` errors, with the same messages, and no line can fail the upload. The
job becomes visible to workers only once every accepted line is stored.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import anyio
import orjson
from faithjudge_client.bodies import JobAccepted, LineRejection
from faithjudge_client.lines import ScoreRequest

from faithjudge.errors import UserInputError
from faithjudge.jobs.interface import (
    ActiveJobLimit,
    IdempotencyConflict,
    JobIntake,
    JobJudge,
    JobRow,
)
from faithjudge.pipeline.request_lines import read_request, readable_text

__all__ = [
    "LISTED_REJECTIONS",
    "BodyTooLarge",
    "IdempotencyMismatch",
    "IngestLimits",
    "JobLimitExceeded",
    "NothingAccepted",
    "Submission",
    "TooManyActiveJobs",
    "accepted_of",
    "submit_job",
]

_CHUNK_LINES = 1000
LISTED_REJECTIONS = 100
"""Rejections the 202 answer lists (the first ones); ``/results`` holds a result for every
line, and the store keeps every rejection without the upload ever holding them all."""


@dataclass(frozen=True, slots=True)
class IngestLimits:
    max_body_bytes: int
    max_lines: int
    max_line_bytes: int
    max_active_jobs: int


class BodyTooLarge(UserInputError):
    """The upload is larger than the tenant may send (HTTP 413)."""


class JobLimitExceeded(UserInputError):
    """More lines than one job may hold (HTTP 413)."""


class TooManyActiveJobs(UserInputError):
    """The tenant already has its maximum of unfinished jobs (HTTP 429)."""


class IdempotencyMismatch(UserInputError):
    """The idempotency key was used before with a different body (HTTP 409)."""


class NothingAccepted(UserInputError):
    """Every line was rejected (HTTP 422 listing them)."""

    def __init__(self, message: str, rejections: list[LineRejection]) -> None:
        super().__init__(message, field="body")
        self.rejections = rejections


@dataclass(slots=True)
class Submission:
    accepted: JobAccepted
    replayed: bool = False
    """True when the idempotency key matched an earlier upload of the same body."""


@dataclass(slots=True)
class _Lines:
    """Splits byte chunks into numbered non-blank lines; an over-long line is cut off early."""

    max_line_bytes: int
    number: int = 0
    buffer: bytearray = field(default_factory=bytearray)
    skipping: bool = False
    too_long: list[int] = field(default_factory=list)

    def feed(self, chunk: bytes) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._keep(chunk[start:])
                return out
            self._keep(chunk[start:end])
            self._end_line(out)
            start = end + 1

    def close(self) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        if self.buffer or self.skipping:
            self._end_line(out)
        return out

    def _keep(self, piece: bytes) -> None:
        if self.skipping or not piece:
            return
        if len(self.buffer) + len(piece) > self.max_line_bytes:
            self.skipping = True
            self.buffer.clear()
            return
        self.buffer += piece

    def _end_line(self, out: list[tuple[int, bytes]]) -> None:
        self.number += 1
        if self.skipping:
            self.too_long.append(self.number)
            self.skipping = False
        elif self.buffer.strip():
            out.append((self.number, bytes(self.buffer)))
        self.buffer.clear()


def _validate(lines: list[tuple[int, bytes]]) -> list[tuple[int, bytes, LineRejection | None]]:
    checked: list[tuple[int, bytes, LineRejection | None]] = []
    for number, raw in lines:
        parsed = read_request(raw)
        if isinstance(parsed, ScoreRequest):
            checked.append((number, raw.strip(), None))
            continue
        readable = parsed.readable or {}
        rejection = LineRejection(
            line=number,
            field=parsed.problems[0][0] if parsed.problems else None,
            reason=parsed.detail,
            item_id=readable_text(readable.get("item_id")),
            model=readable_text(readable.get("model")),
            question=readable_text(readable.get("question")),
        )
        checked.append((number, raw, rejection))
    return checked


def accepted_of(row: JobRow) -> JobAccepted:
    """The 202 answer of a stored job (also what an idempotent replay returns)."""
    return JobAccepted(
        id=row.id,
        status="queued",
        accepted=row.total,
        rejected=[LineRejection.model_validate(r) for r in orjson.loads(row.rejections)],
        rejected_total=row.rejected_count,
        created_at=datetime.fromtimestamp(row.created_at, UTC),
        judge=row.judge,
    )


async def _digest_rest(chunks: AsyncIterator[bytes], limits: IngestLimits) -> str:
    digest = hashlib.sha256()
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise BodyTooLarge(f"the body exceeds {limits.max_body_bytes} bytes", field="body")
        digest.update(chunk)
    return digest.hexdigest()


async def submit_job(
    store: JobIntake,
    chunks: AsyncIterator[bytes],
    *,
    tenant: str,
    name: str | None,
    idempotency_key: str | None,
    limits: IngestLimits,
    judge: JobJudge | None = None,
) -> Submission:
    """Validate and persist an uploaded job, to be scored with ``judge`` only; raise the
    errors above for the API to map."""
    if idempotency_key is not None:
        earlier = await store.find_by_idempotency_key(tenant, idempotency_key)
        if earlier is not None:
            return await _replay(earlier, chunks, limits, judge)
    try:
        # the store counts the tenant's slots and takes one in one step: concurrent uploads
        # cannot both see the last free slot
        row = await store.begin_job(
            tenant=tenant,
            name=name,
            idempotency_key=idempotency_key,
            judge=judge,
            max_active=limits.max_active_jobs,
        )
    except ActiveJobLimit:
        raise TooManyActiveJobs(
            f"this tenant already has {limits.max_active_jobs} unfinished jobs; wait for "
            "one to finish or cancel one",
            field="jobs",
        ) from None
    except IdempotencyConflict:
        earlier = await store.find_by_idempotency_key(tenant, idempotency_key or "")
        if earlier is None:
            raise
        return await _replay(earlier, chunks, limits, judge)
    try:
        return await _ingest(store, row, chunks, limits)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await store.discard_job(row.id)
        raise


async def _replay(
    earlier: JobRow, chunks: AsyncIterator[bytes], limits: IngestLimits, judge: JobJudge | None
) -> Submission:
    if earlier.status == "ingesting":
        raise IdempotencyMismatch(
            "an upload with this Idempotency-Key is still in progress", field="Idempotency-Key"
        )
    if judge is not None and earlier.judge is not None and earlier.judge != judge.name:
        raise IdempotencyMismatch(
            f"this Idempotency-Key was used for judge {earlier.judge}, not {judge.name}",
            field="Idempotency-Key",
        )
    if await _digest_rest(chunks, limits) != earlier.body_sha256:
        raise IdempotencyMismatch(
            "this Idempotency-Key was used for a different body", field="Idempotency-Key"
        )
    return Submission(accepted=accepted_of(earlier), replayed=True)


async def _ingest(
    store: JobIntake, row: JobRow, chunks: AsyncIterator[bytes], limits: IngestLimits
) -> Submission:
    digest = hashlib.sha256()
    splitter = _Lines(max_line_bytes=limits.max_line_bytes)
    size = 0
    seq = 0
    rejected = 0
    listed: list[LineRejection] = []  # the first LISTED_REJECTIONS; the store keeps them all
    pending: list[tuple[int, bytes]] = []

    async def flush() -> None:
        nonlocal seq, pending, rejected
        batch, pending = pending, []
        # the lines cut off as too long end before the next line fed: those of this chunk
        long_lines, splitter.too_long = splitter.too_long, []
        checked = await anyio.to_thread.run_sync(_validate, batch)
        rows = []
        refused = [
            LineRejection(
                line=n, field=None, reason=f"line longer than {limits.max_line_bytes} bytes"
            )
            for n in long_lines
        ]
        for number, raw, rejection in checked:
            if rejection is None:
                rows.append((seq, number, raw.decode()))
                seq += 1
            else:
                refused.append(rejection)
        await store.add_lines(row.id, rows)
        if refused:
            refused.sort(key=lambda r: r.line)
            await store.add_rejections(row.id, [(r.line, r.model_dump_json()) for r in refused])
            rejected += len(refused)
            listed.extend(refused[: max(LISTED_REJECTIONS - len(listed), 0)])

    def note(lines: list[tuple[int, bytes]]) -> None:
        pending.extend(lines)
        counted = seq + rejected + len(pending) + len(splitter.too_long)
        if counted > limits.max_lines:
            raise JobLimitExceeded(f"a job may hold at most {limits.max_lines} lines", field="body")

    async for chunk in chunks:
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise BodyTooLarge(f"the body exceeds {limits.max_body_bytes} bytes", field="body")
        digest.update(chunk)
        note(splitter.feed(chunk))
        if len(pending) >= _CHUNK_LINES:
            await flush()
    note(splitter.close())
    await flush()
    if seq == 0:
        if not rejected:
            raise NothingAccepted("the body holds no lines", [])
        more = f"; the first {len(listed)} are listed" if rejected > len(listed) else ""
        raise NothingAccepted(f"none of the {rejected} lines is valid{more}", listed)
    done = await store.finish_ingest(
        row.id,
        total=seq,
        rejections=[r.model_dump() for r in listed],
        body_sha256=digest.hexdigest(),
        rejected=rejected,
    )
    return Submission(accepted=accepted_of(done))
