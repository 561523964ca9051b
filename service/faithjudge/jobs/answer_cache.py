"""Judge answers kept in the job store, where every replica reads them.

The service's response cache (``StoreAnswerCache``) is a ``ResponseCache`` with a second tier:
every answer a worker receives while scoring a job line goes to the job store too
(``fj_judge_answers``), under the same key (the tenant's scope in it) and with the line that
paid for it. ``run`` writes them as they arrive: each write takes every answer put while the one
before it ran, so a busy worker makes a few writes a second, not one per answer, and an answer is
in the store within moments of its arrival. A process that claims lines reads the answers kept
for them (``prefetch``) before scoring them, so after ``kill -9`` of one replica the others
repeat only the calls it still had in flight, however far its results lagged.

The local tier (the data directory's SQLite file, or ``:memory:``) still answers the tenant's
repeated requests across jobs in this process, as the plain cache does; it is only an
accelerator here: a failure of that file (two processes sharing a data directory and its lock)
is logged and read as a miss, never raised into the scoring of a line, where it would be
recorded as the line's failure although the judge answered.

Lookups stay synchronous (``JudgeCaller`` calls ``get`` and ``put`` in line): the store is read
ahead, by line, not per request.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sqlite3
import time
from collections.abc import Collection, Iterator
from dataclasses import replace
from pathlib import Path

import anyio

from faithjudge.jobs.interface import AnswerStore, KeptAnswer, StoreUnavailable
from faithjudge.transport.base import JudgeResponse
from faithjudge.transport.cache import ResponseCache

__all__ = ["AnswerStore", "StoreAnswerCache"]

log = logging.getLogger("faithjudge.cache")

_line: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar(
    "scoring_line", default=None
)
_WARN_EVERY_S = 60.0
"""At most one warning per this many seconds while the local file keeps failing."""
_RETRY_S = 1.0
"""Pause before the writer tries the store again after a failed write."""


class StoreAnswerCache(ResponseCache):
    """A ``ResponseCache`` whose answers to job lines are kept in the job store as well."""

    def __init__(
        self,
        store: AnswerStore,
        path: str | Path = ":memory:",
        *,
        batch_size: int = 256,
        max_delay_s: float = 0.0,
    ) -> None:
        super().__init__(path, batch_size=batch_size, max_delay_s=max_delay_s)
        self._store = store
        self._outbox: dict[str, KeptAnswer] = {}
        self._wake: anyio.Event | None = None
        self._writing: anyio.Lock | None = None
        self._drained: anyio.Event | None = None
        self._warned_at = -_WARN_EVERY_S

    @staticmethod
    @contextlib.contextmanager
    def scoring(job_id: str, seq: int) -> Iterator[None]:
        """Answers received in the block (and the tasks it starts) are kept for that line."""
        token = _line.set((job_id, seq))
        try:
            yield
        finally:
            _line.reset(token)

    async def kept(self, key: str) -> None:
        """Return once the answer put under ``key`` is in the store (at once for an answer kept
        only locally): the caller holds its call's place until then."""
        while key in self._outbox:
            if self._drained is None:
                self._drained = anyio.Event()
            await self._drained.wait()

    @property
    def unsent(self) -> int:
        """Answers received and not yet in the store."""
        return len(self._outbox)

    # ------------------------------------------------------------------ the transport's side

    def get(self, key: str) -> JudgeResponse | None:
        try:
            hit = super().get(key)
        except sqlite3.Error as exc:
            self._local_failed("read", exc)
            hit = None
        if hit is None and (kept := self._outbox.get(key)) is not None:
            hit = replace(kept.response, attempts=0, cached=True)
        return hit

    def put(self, key: str, response: JudgeResponse) -> None:
        line = _line.get()
        if line is not None:
            self._outbox[key] = KeptAnswer(key, line[0], line[1], response)
            if self._wake is not None:
                self._wake.set()
        try:
            super().put(key, response)
        except sqlite3.Error as exc:
            self._local_failed("write", exc)

    def flush(self) -> None:
        try:
            super().flush()
        except sqlite3.Error as exc:
            self._local_failed("write", exc)

    def _local_failed(self, what: str, exc: sqlite3.Error) -> None:
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning(
                "the response cache's file %s failed to %s (%s); answers are kept in the job "
                "store meanwhile",
                self.path,
                what,
                exc,
            )

    # ------------------------------------------------------------------ the store's side

    async def drain(self) -> None:
        """Keep in the store every answer put so far (one write; ``StoreUnavailable`` when the
        store cannot be reached, and the answers stay queued)."""
        if self._writing is None:
            self._writing = anyio.Lock()
        async with self._writing:
            # another drain may have written some while this one waited: the rest are ours
            batch = list(self._outbox.values())
            if not batch:
                return
            await self._store.keep_answers(batch)
            for kept in batch:
                if self._outbox.get(kept.key) is kept:
                    del self._outbox[kept.key]
            drained, self._drained = self._drained, None
            if drained is not None:
                drained.set()

    async def run(self) -> None:
        """Write answers to the store as they arrive, until cancelled; a store that fails is
        tried again (the answers wait in memory, and the results that use them wait too)."""
        while True:
            self._wake = anyio.Event()
            if not self._outbox:
                await self._wake.wait()
            try:
                await self.drain()
            except StoreUnavailable as exc:
                log.warning("keeping judge answers: %s; retrying", exc)
                await anyio.sleep(_RETRY_S)
            except Exception:
                log.exception("keeping judge answers failed; retrying")
                await anyio.sleep(_RETRY_S)

    async def prefetch(self, job_id: str, seqs: Collection[int]) -> int:
        """Read the answers kept for lines ``seqs`` of ``job_id`` (by any process) into the
        local tier, before they are scored; how many were found."""
        found = await self._store.answers_of_lines(job_id, seqs)
        for key, response in found:
            try:
                # already in the store: the local tier only
                ResponseCache.put(self, key, response)
            except sqlite3.Error as exc:
                self._local_failed("write", exc)
                break
        return len(found)
