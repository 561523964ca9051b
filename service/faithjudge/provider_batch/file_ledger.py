"""The CLI's ledger: SQLite in the data dir, the part files beside it.

Answers go to the response cache; the ledger keeps each request's state and the run (the
output file) it was last staged for, so a failure for good belongs to the run that met it.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import orjson

from faithjudge.private_files import open_private, private_dir, private_file
from faithjudge.provider_batch.ledger import MAX_FILE_BYTES, MAX_FILE_LINES, Outcome, PartLimits
from faithjudge.transport.base import JudgeResponse, Usage

__all__ = ["BatchLedger", "PartWriter"]

_LEDGER = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS parts (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    lines INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    file_id TEXT,
    batch_id TEXT,
    state TEXT NOT NULL DEFAULT 'staged',
    done INTEGER NOT NULL DEFAULT 0,
    completed INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS requests (
    key TEXT PRIMARY KEY,
    part INTEGER NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL,
    status INTEGER,
    error TEXT,
    run TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS requests_by_part ON requests (part, state);
"""

_FINISH = (
    "UPDATE requests SET state = CASE WHEN ?2 = 'retry' AND tries >= ?5 "
    "THEN 'failed' ELSE ?2 END, status = ?3, error = ?4 "
    "WHERE key = ?1 AND part = ?6 AND state = 'submitted'"
)
_FINISH_LEFTOVER = (
    "UPDATE requests SET state = CASE WHEN ?1 = 'retry' AND tries >= ?4 "
    "THEN 'failed' ELSE ?1 END, status = ?2, error = ?3 "
    "WHERE part = ?5 AND state = 'submitted'"
)


class BatchLedger:
    """The CLI's ledger: SQLite in the data dir, part files beside it (see ``Ledger``).

    Answers go to the response cache, so a request row keeps only its state, and the run it
    was last staged for (``begin_run``): a failure for good belongs to that run alone. The
    run's own reruns keep it; any other run asks again, since a provider that failed then may
    answer now, as a job of the service asks again what another job failed.
    """

    def __init__(self, path: Path) -> None:
        self.path = private_file(path)  # SQLite then creates its WAL/SHM files 0600 too
        self.parts_dir = private_dir(path.parent / "batch-parts")
        self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        # as the response cache: a commit survives the process being killed; only a power
        # loss can take the last ones, and a rerun then finds its batches by their tags
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=5000")
        self._conn.executescript(_LEDGER)
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(requests)")}
        if "run" not in columns:  # a ledger written before failures had a run: theirs is none
            self._conn.execute("ALTER TABLE requests ADD COLUMN run TEXT")
        self.run: str | None = None
        """The run staging and scoring now (``begin_run``); None: no run, so no failure."""
        row = self._conn.execute("SELECT value FROM meta WHERE name = 'ledger_id'").fetchone()
        if row is None:
            self.ledger_id = uuid.uuid4().hex
            self._conn.execute("INSERT INTO meta VALUES ('ledger_id', ?)", (self.ledger_id,))
        else:
            self.ledger_id = row[0]
        self._drop_orphan_part_files()

    def close(self) -> None:
        self._conn.close()

    def _drop_orphan_part_files(self) -> None:
        # A part file is recorded only once it is complete: one without a row was cut short.
        known = {Path(p).name for (p,) in self._conn.execute("SELECT path FROM parts")}
        for path in self.parts_dir.glob("part-*.jsonl"):
            if path.name not in known:
                path.unlink()

    # ----------------------------------------------------------------- queries (sync)

    def begin_run(self, run: str) -> None:
        """Stage and score for ``run`` (the output a run writes): its failures for good are
        the ones ``failure_of`` reports. Requests still in flight become this run's: its
        runner drives every open part, so a failure among them is one this run met."""
        self.run = run
        self._conn.execute(
            "UPDATE requests SET run = ? WHERE state IN ('staged', 'submitted', 'retry')", (run,)
        )

    def state_of(self, key: str) -> str | None:
        """The state of ``key`` as the current run sees it: a failure for good of another
        run is ``failed_elsewhere`` (to be asked again)."""
        row = self._conn.execute("SELECT state, run FROM requests WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        state, run = row
        if state == "failed" and (run is None or run != self.run):
            return "failed_elsewhere"
        return str(state)

    async def answer_of(self, key: str) -> JudgeResponse | None:
        return None  # the response cache holds the answers of this ledger

    async def failure_of(self, key: str) -> tuple[int, int | None, str] | None:
        """(tries, status, message) of a request that failed for good in the current run,
        else None."""
        row = self._conn.execute(
            "SELECT tries, status, error FROM requests "
            "WHERE key = ? AND state = 'failed' AND run = ?",
            (key, self.run),
        ).fetchone()
        return (row[0], row[1], row[2] or "the request failed") if row else None

    def counts(self) -> dict[str, int]:
        """Requests by state over every run (``failed_in_run`` counts one run's failures)."""
        return dict(self._conn.execute("SELECT state, count(*) FROM requests GROUP BY state"))

    def failed_in_run(self) -> int:
        """Requests that failed for good in the current run."""
        (count,) = self._conn.execute(
            "SELECT count(*) FROM requests WHERE state = 'failed' AND run = ?", (self.run,)
        ).fetchone()
        return int(count)

    def next_part_path(self) -> Path:
        (top,) = self._conn.execute("SELECT coalesce(max(id), 0) FROM parts").fetchone()
        return self.parts_dir / f"part-{top + 1:06d}-{uuid.uuid4().hex[:8]}.jsonl"

    def add_part(self, path: Path, keys: list[str], size: int) -> int:
        """Record a complete part file and its requests (new ones, ones to retry, or ones a
        run asks again: those start a new retry budget)."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            cursor = conn.execute(
                "INSERT INTO parts (path, lines, bytes) VALUES (?, ?, ?)",
                (str(path), len(keys), size),
            )
            part = int(cursor.lastrowid or 0)
            conn.executemany(
                "INSERT INTO requests (key, part, state, run) VALUES (?, ?, 'staged', ?) "
                "ON CONFLICT (key) DO UPDATE SET part = excluded.part, state = 'staged', "
                "run = excluded.run, tries = CASE WHEN requests.state IN ('failed', 'answered') "
                "THEN 0 ELSE requests.tries END",
                [(k, part, self.run) for k in keys],
            )
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return part

    # ----------------------------------------------------------------- the Ledger protocol

    async def parts(
        self, *, submitted: bool | None = None, done: bool | None = None
    ) -> list[dict[str, Any]]:
        where = ["1"]
        if submitted is not None:
            where.append("batch_id IS NOT NULL" if submitted else "batch_id IS NULL")
        if done is not None:
            where.append(f"done = {int(done)}")
        cursor = self._conn.execute(f"SELECT * FROM parts WHERE {' AND '.join(where)} ORDER BY id")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor]

    @asynccontextmanager
    async def open_part(self, part: dict[str, Any]) -> AsyncIterator[tuple[str, IO[bytes]]]:
        path = Path(part["path"])
        with path.open("rb") as handle:  # noqa: ASYNC230 - streamed by the upload
            yield path.name, handle

    async def set_file(self, part: int, file_id: str) -> None:
        self._conn.execute("UPDATE parts SET file_id = ? WHERE id = ?", (file_id, part))

    async def set_submitted(self, part: int, provider_batch_id: str, state: str) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "UPDATE parts SET batch_id = ?, state = ? WHERE id = ?",
            (provider_batch_id, state, part),
        )
        conn.execute(
            "UPDATE requests SET state = 'submitted', tries = tries + 1 "
            "WHERE part = ? AND state = 'staged'",
            (part,),
        )
        conn.execute("COMMIT")

    async def set_state(self, part: int, state: str, completed: int, failed: int) -> None:
        self._conn.execute(
            "UPDATE parts SET state = ?, completed = ?, failed = ? WHERE id = ?",
            (state, completed, failed, part),
        )

    async def finish_part(
        self,
        part: int,
        outcomes: list[Outcome],
        leftover: tuple[str, int | None, str] | None,
        max_tries: int,
        tokens: Usage,
    ) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                _FINISH, [(k, s, st, e, max_tries, part) for k, s, st, e, _ in outcomes]
            )
            if leftover is not None:
                state, status, error = leftover
                conn.execute(_FINISH_LEFTOVER, (state, status, error, max_tries, part))
            conn.execute(
                "UPDATE parts SET done = 1, prompt_tokens = ?, completion_tokens = ? WHERE id = ?",
                (tokens.prompt_tokens, tokens.completion_tokens, part),
            )
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    async def forget_unfinished(self, part: int) -> int:
        cursor = self._conn.execute(
            "DELETE FROM requests WHERE part = ? AND state IN ('staged', 'submitted')", (part,)
        )
        self._conn.execute("UPDATE parts SET done = 1 WHERE id = ?", (part,))
        return cursor.rowcount

    async def retry_lines(self) -> AsyncIterator[tuple[str, bytes]]:
        groups: dict[int, set[str]] = {}
        for key, part in self._conn.execute("SELECT key, part FROM requests WHERE state = 'retry'"):
            groups.setdefault(part, set()).add(key)
        for part_id, keys in sorted(groups.items()):
            (path,) = self._conn.execute(
                "SELECT path FROM parts WHERE id = ?", (part_id,)
            ).fetchone()
            with Path(path).open("rb") as handle:  # noqa: ASYNC230 - one line at a time
                for raw in handle:
                    key = orjson.loads(raw)["custom_id"]
                    if key in keys:
                        yield key, raw

    def writer(
        self, *, max_lines: int = MAX_FILE_LINES, max_bytes: int = MAX_FILE_BYTES
    ) -> PartWriter:
        return PartWriter(self, max_lines=max_lines, max_bytes=max_bytes)


class PartWriter:
    """Writes request lines into part files of a ``BatchLedger``, recording each complete part."""

    def __init__(
        self,
        ledger: BatchLedger,
        *,
        max_lines: int = MAX_FILE_LINES,
        max_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        self._limits = PartLimits(max_lines, max_bytes)
        self._ledger = ledger
        self._handle: Any = None
        self._path: Path | None = None
        self._keys: list[str] = []
        self._seen: set[str] = set()
        self._size = 0
        self.parts: list[int] = []

    def holds(self, key: str) -> bool:
        """True when ``key`` is already in the part being written."""
        return key in self._seen

    async def add(self, key: str, line: bytes, origin: int | None = None) -> None:
        self._limits.check(line)
        if self._limits.full(len(self._keys), self._size, line):
            await self.close_part()
        if self._handle is None:
            self._path = self._ledger.next_part_path()
            self._handle = open_private(self._path)  # part files hold every CoT
        self._handle.write(line)
        self._keys.append(key)
        self._seen.add(key)
        self._size += len(line)

    async def close_part(self) -> None:
        if self._handle is None or self._path is None:
            return
        self._handle.flush()
        self._handle.close()
        self.parts.append(self._ledger.add_part(self._path, self._keys, self._size))
        self._handle, self._path, self._keys, self._seen, self._size = None, None, [], set(), 0

    async def abort(self) -> None:
        if self._handle is not None and self._path is not None:
            self._handle.close()
            self._path.unlink(missing_ok=True)
            self._handle = None
