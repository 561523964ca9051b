"""Content-addressed cache of raw judge responses (SQLite, standard library only).

The key is the sha256 of the request *exactly as sent* (``CallTarget.cache_key_material``:
backend, base URL, model, messages, decoding parameters, response format), serialized as
canonical JSON. Only what changes the output is in the key; timeouts and retry counts are not.

The cache stores the raw text, never a grade: whoever reads a cached response parses,
schema-checks and evidence-checks it again, exactly as a fresh one. A cached response that failed
verification therefore fails it again, with the same failure, without calling the judge.

Writes are buffered and committed in batches (every ``batch_size`` puts, on ``flush()`` and on
``close()``); reads see buffered writes. A put made on a running event loop is also committed at
the end of that loop turn, or ``max_delay_s`` later at most: an answer is paid for, so a process
killed mid-run loses only the requests still unanswered, while the puts of one turn still share
one transaction. The object is meant for one event-loop thread: it does no locking of its own,
and its calls are short synchronous SQLite statements.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from faithjudge.private_files import private_file
from faithjudge.transport.base import JudgeResponse, Usage

__all__ = ["ResponseCache", "cache_key"]

log = logging.getLogger("faithjudge.cache")

_SCHEMA_VERSION = 3
_CREATE = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    model TEXT,
    fingerprint TEXT,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    finish_reason TEXT,
    response_format TEXT,
    cached_tokens INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID
"""
# Version 2 keeps why a reply ended and the format it was asked in: a cached reply cut at the
# token limit is reported as such again. Version 3 keeps the prompt tokens the provider served
# from its prompt cache, so an answer read back is priced as it was billed. An older file gains
# the columns (NULL, or no cached tokens, for its rows).
_ADDED_COLUMNS = (
    ("finish_reason", "TEXT"),
    ("response_format", "TEXT"),
    ("cached_tokens", "INTEGER NOT NULL DEFAULT 0"),
)
_SELECT = (
    "SELECT text, model, fingerprint, prompt_tokens, completion_tokens, finish_reason, "
    "response_format, cached_tokens FROM responses WHERE key = ?"
)
_UPSERT = (
    "INSERT OR REPLACE INTO responses "
    "(key, text, model, fingerprint, prompt_tokens, completion_tokens, finish_reason, "
    "response_format, cached_tokens, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

_Row = tuple[str, str, str | None, str | None, int, int, str | None, str | None, int, float]


def _plain(value: Any) -> Any:
    """orjson ``default`` hook: read-only mappings and other sequences become JSON containers."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    raise TypeError(f"cannot put {type(value).__name__} in a cache key")


def cache_key(material: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON (sorted keys) of ``material``."""
    blob = orjson.dumps(material, default=_plain, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()


class ResponseCache:
    """SQLite store of raw responses keyed by ``cache_key``; ``":memory:"`` for a private one."""

    def __init__(
        self, path: str | Path, *, batch_size: int = 256, max_delay_s: float = 0.0
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if not 0.0 <= max_delay_s <= 1.0:
            raise ValueError("max_delay_s must be between 0 and 1 second")
        self._max_delay_s = max_delay_s
        self._timer: asyncio.Handle | None = None
        self._path = str(path)
        if self._path != ":memory:":
            private_file(self._path)  # SQLite then creates its WAL/SHM files 0600 too
        self._batch_size = batch_size
        self._pending: dict[str, _Row] = {}
        # Autocommit mode: transactions are opened explicitly in flush(), so reads never wait on
        # an implicit transaction that the sqlite3 module would otherwise leave open.
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            self._path, isolation_level=None, check_same_thread=False
        )
        conn = self._conn
        if self._path != ":memory:":
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=5000")
        conn.execute(_CREATE)
        present = {row[1] for row in conn.execute("PRAGMA table_info(responses)")}
        for name, kind in _ADDED_COLUMNS:
            if name not in present:
                conn.execute(f"ALTER TABLE responses ADD COLUMN {name} {kind}")
        conn.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")

    @property
    def path(self) -> str:
        return self._path

    @property
    def closed(self) -> bool:
        return self._conn is None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("the response cache is closed")
        return self._conn

    def get(self, key: str) -> JudgeResponse | None:
        """The stored response for ``key`` (``cached=True``, ``attempts=0``), or None."""
        pending = self._pending.get(key)
        if pending is not None:
            row: tuple[Any, ...] | None = pending[1:9]
        else:
            row = self._connection().execute(_SELECT, (key,)).fetchone()
        if row is None:
            return None
        text, model, fingerprint, prompt, completion, finish, response_format, cached = row
        return JudgeResponse(
            text=text,
            model=model,
            usage=Usage(
                prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached or 0
            ),
            fingerprint=fingerprint,
            attempts=0,
            cached=True,
            finish_reason=finish,
            response_format=response_format,
        )

    def put(self, key: str, response: JudgeResponse) -> None:
        """Store ``response`` under ``key``; committed with the next batch, flush or close, and
        on an event loop at the end of its turn (``max_delay_s`` later at most)."""
        self._connection()
        self._pending[key] = (
            key,
            response.text,
            response.model,
            response.fingerprint,
            response.usage.prompt_tokens,
            response.usage.completion_tokens,
            response.finish_reason,
            response.response_format,
            response.usage.cached_tokens,
            time.time(),
        )
        if len(self._pending) >= self._batch_size:
            self.flush()
        elif self._timer is None:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: batches, flush() and close() commit
            return
        if self._max_delay_s > 0:
            self._timer = loop.call_later(self._max_delay_s, self._timed_flush)
        else:
            self._timer = loop.call_soon(self._timed_flush)

    def _timed_flush(self) -> None:
        self._timer = None
        if self._conn is None:
            return
        try:
            self.flush()
        except sqlite3.Error as exc:
            # kept buffered: the next put, flush or close commits them
            log.warning("could not commit %d cached answers: %s", len(self._pending), exc)

    def flush(self) -> None:
        """Commit every buffered put in one transaction."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        conn = self._connection()
        rows = list(self._pending.values())
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(_UPSERT, rows)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        self._pending.clear()

    def __len__(self) -> int:
        """Number of stored responses (commits buffered puts first)."""
        self.flush()
        (count,) = self._connection().execute("SELECT count(*) FROM responses").fetchone()
        return int(count)

    def close(self) -> None:
        """Commit what is buffered and close; calling it again does nothing."""
        if self._conn is None:
            return
        try:
            self.flush()
        finally:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
