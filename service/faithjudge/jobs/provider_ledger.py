"""The store-neutral half of a job's Batch API ledger: staging request rows into parts.

A job's ledger (``ProviderLedger`` of ``faithjudge.jobs.interface``) lives in the job store, so a
replica that takes over a job's provider phase finds the same parts and batches. A request row
names the job line it comes from; its Batch API line is rebuilt from that line (``Render``)
when its part is uploaded, so no store keeps the ~10 KB line of every request. ``JobPartWriter``
fills parts within the per-file limits for any store: the store provides the four steps of
``PartStaging`` (a new part, its request rows, sealing it, dropping unsent parts).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from faithjudge.provider_batch.ledger import PartLimits

__all__ = ["ROWS_PER_WRITE", "JobPartWriter", "PartStaging", "Render"]

Render = Callable[[Sequence[tuple[str, int, str]]], list[tuple[str, bytes]]]
"""(key, upload line number, request line JSON) of requests -> (key, Batch API line) of those
that the line still makes (in any order)."""

ROWS_PER_WRITE = 1_000
"""Request rows a writer hands the store at once (and a SQL statement takes at most)."""


class PartStaging(Protocol):
    """What a job's ledger does for ``JobPartWriter``; each step is durable when it returns."""

    async def new_part(self) -> int:
        """An empty, unsealed part of the job: its id."""
        ...

    async def write_requests(self, part: int, rows: Sequence[tuple[str, int | None]]) -> None:
        """Stage requests ``(key, job line seq)`` in ``part``; a key the job holds already (a
        retry, staged with no seq) moves to ``part`` and keeps its seq."""
        ...

    async def seal_part(self, part: int, lines: int, size: int) -> None:
        """Mark ``part`` complete: ``lines`` requests of ``size`` bytes in all."""
        ...

    async def drop_parts(self, parts: Collection[int]) -> None:
        """Delete unsent ``parts``: their new requests go, a retry waits for the next part."""
        ...


class JobPartWriter:
    """Stages request lines into sealed parts of a job's ledger within the file limits."""

    def __init__(self, ledger: PartStaging, limits: PartLimits) -> None:
        self._ledger = ledger
        self._limits = limits
        self._part: int | None = None
        self._buffer: list[tuple[str, int | None]] = []
        self._seen: set[str] = set()
        self._count = 0
        self._size = 0
        self.parts: list[int] = []

    def holds(self, key: str) -> bool:
        return key in self._seen

    async def add(self, key: str, line: bytes, origin: int | None = None) -> None:
        """Stage ``key`` (its Batch API ``line`` counts toward the part's limits); ``origin``,
        the job line it comes from, is given for a new request and kept for one staged again."""
        self._limits.check(line)
        if self._limits.full(self._count, self._size, line):
            await self.close_part()
        if self._part is None:
            self._part = await self._ledger.new_part()
        self._buffer.append((key, origin))
        self._seen.add(key)
        self._count += 1
        self._size += len(line)
        if len(self._buffer) >= ROWS_PER_WRITE:
            await self._write()

    async def _write(self) -> None:
        if self._buffer and self._part is not None:
            await self._ledger.write_requests(self._part, self._buffer)
            self._buffer = []

    async def close_part(self) -> None:
        if self._part is None:
            return
        await self._write()
        await self._ledger.seal_part(self._part, self._count, self._size)
        self.parts.append(self._part)
        self._part, self._seen, self._count, self._size = None, set(), 0, 0

    async def abort(self) -> None:
        if self._part is not None:
            await self._ledger.drop_parts([self._part])
            self._part, self._buffer = None, []
