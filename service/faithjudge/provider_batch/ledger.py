"""The ledger contract of the route: where a run records its parts, batches and requests.

Lines are staged into part files of at most ``max_lines`` requests and ``max_bytes`` bytes (the
provider's per-file limits, ``PartLimits``), each recorded in a ``Ledger`` *before* the next
step runs, so a process killed at any point resumes where it was. ``BatchRunner`` speaks only
this contract; the CLI's ``BatchLedger`` and a job store's ledger implement it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import IO, Any, Protocol

from faithjudge.errors import FaithJudgeError
from faithjudge.transport.base import JudgeResponse, Usage

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_FILE_LINES",
    "Ledger",
    "Outcome",
    "PartLimits",
    "PartSink",
    "stage_retries",
]

MAX_FILE_LINES = 50_000
MAX_FILE_BYTES = 200 * 1024 * 1024

Outcome = tuple[str, str, int | None, str | None, JudgeResponse | None]
"""(key, 'answered' | 'retry' | 'failed', status, error, answer) of one request of a part."""


class PartSink(Protocol):
    """Stages request lines into parts within the per-file limits, recording each part."""

    parts: list[int]

    def holds(self, key: str) -> bool: ...
    async def add(self, key: str, line: bytes, origin: int | None = None) -> None:
        """Stage ``line`` under ``key``; ``origin`` says where the request came from, for a
        ledger that rebuilds lines instead of keeping them (a job's line number)."""
        ...

    async def close_part(self) -> None: ...
    async def abort(self) -> None: ...


class Ledger(Protocol):
    """Where a run records its parts, their batches and how each request ended.

    ``BatchLedger`` (SQLite next to the CLI's cache) and the job store's ledger of one job
    (``faithjudge.jobs``) implement it; ``BatchRunner`` speaks only this. Part rows are dicts with
    ``id, lines, bytes, file_id, batch_id, state, done, completed, failed``. Request states:
    ``staged`` (in a part not yet submitted), ``submitted``, ``retry`` (to be staged again),
    ``answered`` and ``failed`` (final).
    """

    ledger_id: str
    """Tags every batch created from this ledger (``metadata.faithjudge_part``)."""

    async def parts(
        self, *, submitted: bool | None = None, done: bool | None = None
    ) -> list[dict[str, Any]]: ...
    def open_part(self, part: dict[str, Any]) -> AbstractAsyncContextManager[tuple[str, IO[bytes]]]:
        """(file name, binary handle) of the part's lines, for the upload."""
        ...

    async def set_file(self, part: int, file_id: str) -> None: ...
    async def set_submitted(self, part: int, provider_batch_id: str, state: str) -> None: ...
    async def set_state(self, part: int, state: str, completed: int, failed: int) -> None: ...
    async def finish_part(
        self,
        part: int,
        outcomes: list[Outcome],
        leftover: tuple[str, int | None, str] | None,
        max_tries: int,
        tokens: Usage,
    ) -> None:
        """Record how each request of ``part`` ended; ``leftover`` covers those with no line;
        ``tokens`` is what the part's answers used, their prompt-cache part included.

        A retry beyond ``max_tries`` submissions becomes a failure.
        """
        ...

    async def forget_unfinished(self, part: int) -> int:
        """Drop the requests of a cancelled part that got no answer, so a later run sends them."""
        ...

    def retry_lines(self) -> AsyncIterator[tuple[str, bytes]]:
        """(key, request line) of every request marked ``retry``."""
        ...

    def writer(self, *, max_lines: int, max_bytes: int) -> PartSink: ...


class PartLimits:
    """The running size of one part against the per-file limits."""

    def __init__(self, max_lines: int, max_bytes: int) -> None:
        if max_lines < 1 or max_bytes < 1:
            raise ValueError("max_lines and max_bytes must be at least 1")
        self.max_lines = max_lines
        self.max_bytes = max_bytes

    def check(self, line: bytes) -> None:
        if len(line) > self.max_bytes:
            raise FaithJudgeError(f"one request line is {len(line)} bytes, over the file limit")

    def full(self, lines: int, size: int, line: bytes) -> bool:
        return lines > 0 and (lines >= self.max_lines or size + len(line) > self.max_bytes)


async def stage_retries(ledger: Ledger, writer: PartSink) -> int:
    """Copy the lines of every request marked ``retry`` into new parts; returns how many."""
    staged = 0
    async for key, raw in ledger.retry_lines():
        if not writer.holds(key):
            await writer.add(key, raw)
            staged += 1
    await writer.close_part()
    return staged
