"""The provider Batch API route: request lines out, answers back into the response cache.

A request line is ``{"custom_id": KEY, "method": "POST", "url": "/v1/chat/completions",
"body": BODY}`` where ``KEY`` is the response-cache key of the request and ``BODY`` exactly what
the live ``openai`` backend would send, so an answer that comes back through a batch is stored
where the live route would have stored it and is verified the same way when it is read.

Lines are staged into part files of at most ``max_lines`` requests and ``max_bytes`` bytes (the
provider's per-file limits), each uploaded with the Files API and submitted as one batch on
``/v1/chat/completions`` with a 24 h window. Everything is recorded in a ``BatchLedger`` (SQLite
in the data dir) *before* the next step runs, so a process killed at any point resumes where it
was: a staged part is uploaded, an uploaded one is submitted (after looking for a batch already
created from it, by the ``metadata`` tag every batch carries), a submitted one is polled. No
request is ever submitted twice; a request whose line came back expired or with a retryable
status (408, 429, 5xx), or whose whole batch ended ``failed`` or ``expired``, is staged again in
a follow-up part, up to the retry budget, after which it is recorded as failed with the status
and message the provider gave.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Protocol

import anyio
import orjson

from faithjudge.errors import EvaluatorError, FaithJudgeError
from faithjudge.private_files import open_private, private_dir, private_file
from faithjudge.transport.base import JudgeResponse
from faithjudge.transport.cache import ResponseCache
from faithjudge.transport.chat import completion_from_data, json_default

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "BATCH_ENDPOINT",
    "COMPLETION_WINDOW",
    "MAX_FILE_BYTES",
    "MAX_FILE_LINES",
    "BatchLedger",
    "BatchProgress",
    "BatchRunner",
    "Ledger",
    "Outcome",
    "PartSink",
    "PartWriter",
    "PollPolicy",
    "RequestOutcome",
    "outcome_of_line",
    "request_line",
    "stage_retries",
]

BATCH_ENDPOINT: Final = "/v1/chat/completions"
COMPLETION_WINDOW: Final = "24h"
MAX_FILE_LINES = 50_000
MAX_FILE_BYTES = 200 * 1024 * 1024
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
_RETRYABLE_CODES = frozenset({"batch_expired", "rate_limit_exceeded", "server_error", "timeout"})

SleepFn = Callable[[float], Awaitable[Any]]
StopFn = Callable[[], Awaitable[bool]]


def request_line(key: str, body: Mapping[str, Any]) -> bytes:
    """One Batch API input line (newline-terminated) for the request cached under ``key``."""
    line = {"custom_id": key, "method": "POST", "url": BATCH_ENDPOINT, "body": body}
    return orjson.dumps(line, default=json_default, option=orjson.OPT_APPEND_NEWLINE)


# --------------------------------------------------------------------------- outcomes


@dataclass(frozen=True, slots=True)
class RequestOutcome:
    """What one output or error line says about its request."""

    key: str
    response: JudgeResponse | None = None
    status: int | None = None
    error: str | None = None
    retryable: bool = False


def _retryable_status(status: int | None) -> bool:
    return status is not None and (status in (408, 429) or status >= 500)


def outcome_of_line(raw: bytes) -> RequestOutcome:
    """Read one output/error file line (OpenAI's format, which vLLM's batch runner also writes)."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("custom_id"), str):
        raise ValueError("no custom_id")
    key = data["custom_id"]
    response = data.get("response") or None
    error = data.get("error") or None
    if isinstance(response, dict) and "choices" in response and "body" not in response:
        response = {"status_code": 200, "body": response}  # a bare completion, no envelope
    if isinstance(response, dict):
        status = response.get("status_code")
        status = status if isinstance(status, int) and not isinstance(status, bool) else None
        body = response.get("body")
        if status == 200 and isinstance(body, dict):
            try:
                answer = completion_from_data(body)
            except EvaluatorError as exc:
                return RequestOutcome(key, status=200, error=str(exc))
            if not answer.text.strip():
                # cached, an answer without content ("choices": []) would fail for good; as a
                # failed request it is asked again
                return RequestOutcome(
                    key, status=200, error="the answer carries no message content", retryable=True
                )
            return RequestOutcome(key, response=answer)
        message = _error_message(body) or f"HTTP {status}"
        return RequestOutcome(
            key, status=status, error=message, retryable=_retryable_status(status)
        )
    if isinstance(error, dict):
        code = str(error.get("code") or "")
        message = str(error.get("message") or code or "the request failed")
        return RequestOutcome(
            key, error=f"{code}: {message}" if code else message, retryable=code in _RETRYABLE_CODES
        )
    raise ValueError("neither a response nor an error")


def _error_message(body: Any) -> str | None:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return None


# --------------------------------------------------------------------------- ledger contract

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
    async def set_submitted(self, part: int, batch_id: str, state: str) -> None: ...
    async def set_state(self, part: int, state: str, completed: int, failed: int) -> None: ...
    async def finish_part(
        self,
        part: int,
        outcomes: list[Outcome],
        leftover: tuple[str, int | None, str] | None,
        max_tries: int,
        tokens: tuple[int, int],
    ) -> None:
        """Record how each request of ``part`` ended; ``leftover`` covers those with no line.

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


# --------------------------------------------------------------------------- the file ledger

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

    async def set_submitted(self, part: int, batch_id: str, state: str) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "UPDATE parts SET batch_id = ?, state = ? WHERE id = ?", (batch_id, state, part)
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
        tokens: tuple[int, int],
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
                (*tokens, part),
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


async def stage_retries(ledger: Ledger, writer: PartSink) -> int:
    """Copy the lines of every request marked ``retry`` into new parts; returns how many."""
    staged = 0
    async for key, raw in ledger.retry_lines():
        if not writer.holds(key):
            await writer.add(key, raw)
            staged += 1
    await writer.close_part()
    return staged


# --------------------------------------------------------------------------- running


@dataclass(slots=True)
class BatchProgress:
    """What the provider reports across the batches of a run (for the progress bar)."""

    total: int = 0
    completed: int = 0
    failed: int = 0
    states: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        return ", ".join(f"{n} {s}" for s, n in sorted(self.states.items())) or "starting"


ProgressFn = Callable[[BatchProgress], None]


@dataclass(frozen=True, slots=True)
class PollPolicy:
    """Poll every ``initial`` seconds, growing by ``multiplier`` while nothing changes."""

    initial: float = 5.0
    multiplier: float = 1.5
    maximum: float = 60.0

    def delay(self, quiet_polls: int) -> float:
        return min(self.maximum, self.initial * self.multiplier**quiet_polls)


class BatchRunner:
    """Uploads, submits, polls and maps back every part the ledger holds, until none is open."""

    def __init__(
        self,
        client: AsyncOpenAI,
        ledger: Ledger,
        cache: ResponseCache | None,
        *,
        max_retries: int = 5,
        poll: PollPolicy | None = None,
        max_lines: int = MAX_FILE_LINES,
        max_bytes: int = MAX_FILE_BYTES,
        sleep: SleepFn | None = None,
    ) -> None:
        self._client = client
        self._ledger = ledger
        self._cache = cache
        self._max_tries = max_retries + 1
        self._poll = poll or PollPolicy()
        self._max_lines = max_lines
        self._max_bytes = max_bytes
        self._sleep: SleepFn = sleep or anyio.sleep
        self.batches_created = 0
        self.files_uploaded = 0
        self.answered = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_tokens = 0
        """The part of ``prompt_tokens`` the provider served from its prompt cache (this
        process's collections only: the ledger keeps prompt and completion tokens alone)."""

    def writer(self) -> PartSink:
        return self._ledger.writer(max_lines=self._max_lines, max_bytes=self._max_bytes)

    async def run(self, progress: ProgressFn | None = None, *, stop: StopFn | None = None) -> bool:
        """Drive every open part to an end, staging follow-ups for retryable failures.

        ``stop`` is asked after every poll round; when it says so the run returns False and
        leaves the batches as they are (``cancel`` ends them). True once nothing is open.
        """
        quiet = 0
        while True:
            await self._submit_staged()
            open_parts = await self._ledger.parts(done=False)
            if not open_parts:
                if await stage_retries(self._ledger, self.writer()):
                    continue
                return True
            changed = False
            for part in open_parts:
                batch = await self._client.batches.retrieve(part["batch_id"])
                counts = batch.request_counts
                completed = counts.completed if counts else 0
                failed = counts.failed if counts else 0
                if (batch.status, completed, failed) != (
                    part["state"],
                    part["completed"],
                    part["failed"],
                ):
                    changed = True
                    await self._ledger.set_state(part["id"], batch.status, completed, failed)
                if batch.status in TERMINAL:
                    await self._collect(part, batch)
                    changed = True
            if progress is not None:
                progress(await self.progress())
            if stop is not None and await stop():
                return False
            if await self._ledger.parts(done=False):
                quiet = 0 if changed else quiet + 1
                await self._sleep(self._poll.delay(quiet))

    async def progress(self) -> BatchProgress:
        report = BatchProgress()
        for part in await self._ledger.parts(submitted=True):
            report.total += part["lines"]
            report.completed += part["completed"]
            report.failed += part["failed"]
            report.states[part["state"]] = report.states.get(part["state"], 0) + 1
        return report

    async def cancel(self) -> int:
        """Cancel every open batch and keep what they answered; returns how many were open.

        A batch created just before an earlier process died, and never recorded, is found by
        its tag and cancelled too: left alone it would run, and be billed, unseen.
        """
        staged = await self._ledger.parts(submitted=False, done=False)
        for part_id, orphan in (await self._unrecorded_batches(staged)).items():
            await self._ledger.set_submitted(part_id, orphan.id, orphan.status)
        open_parts = await self._ledger.parts(submitted=True, done=False)
        for part in open_parts:
            batch = await self._client.batches.retrieve(part["batch_id"])
            if batch.status not in TERMINAL:
                await self._client.batches.cancel(part["batch_id"])
        quiet = 0
        while pending := await self._ledger.parts(submitted=True, done=False):
            for part in pending:
                batch = await self._client.batches.retrieve(part["batch_id"])
                await self._ledger.set_state(part["id"], batch.status, 0, 0)
                if batch.status in TERMINAL:
                    await self._collect(part, batch, cancelling=True)
            if await self._ledger.parts(submitted=True, done=False):
                quiet += 1
                await self._sleep(self._poll.delay(quiet))
        # Staged parts never sent, and requests waiting for a retry, are simply forgotten.
        for part in await self._ledger.parts(submitted=False, done=False):
            await self._ledger.forget_unfinished(part["id"])
        return len(open_parts)

    # ----------------------------------------------------------------- submission

    async def _submit_staged(self) -> None:
        staged = await self._ledger.parts(submitted=False, done=False)
        adopted = await self._unrecorded_batches(staged)
        for part in staged:
            batch = adopted.get(part["id"])
            if batch is None:
                if part["file_id"] is None:
                    async with self._ledger.open_part(part) as (name, handle):
                        uploaded = await self._client.files.create(
                            file=(name, handle), purpose="batch"
                        )
                    self.files_uploaded += 1
                    await self._ledger.set_file(part["id"], uploaded.id)
                    part["file_id"] = uploaded.id
                batch = await self._client.batches.create(
                    input_file_id=part["file_id"],
                    endpoint=BATCH_ENDPOINT,
                    completion_window=COMPLETION_WINDOW,
                    metadata={"faithjudge_part": self._tag(part)},
                )
                self.batches_created += 1
            await self._ledger.set_submitted(part["id"], batch.id, batch.status)

    def _tag(self, part: dict[str, Any]) -> str:
        return f"{self._ledger.ledger_id}:{part['id']}"

    async def _unrecorded_batches(self, staged: list[dict[str, Any]]) -> dict[Any, Any]:
        """Batches created from these staged parts before a process died and never recorded,
        by part id, from one listing of the provider's batches. Only a part whose file an
        earlier process uploaded can have one."""
        wanted = {self._tag(part): part["id"] for part in staged if part["file_id"] is not None}
        found: dict[Any, Any] = {}
        if not wanted:
            return found
        # Newest first; a batch older than the 24 h window plus a margin cannot be ours.
        async for batch in self._client.batches.list(limit=100):
            part_id = wanted.pop((batch.metadata or {}).get("faithjudge_part", ""), None)
            if part_id is not None:
                found[part_id] = batch
            if not wanted or time.time() - batch.created_at > 2 * 24 * 3600:
                break
        return found

    # ----------------------------------------------------------------- collection

    async def _collect(self, part: dict[str, Any], batch: Any, *, cancelling: bool = False) -> None:
        outcomes: list[Outcome] = []
        prompt_tokens = completion_tokens = 0
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            async for raw in self._lines(file_id):
                try:
                    outcome = outcome_of_line(raw)
                except ValueError:
                    continue  # a line we cannot read leaves its request to the leftover rule
                if outcome.response is not None:
                    if self._cache is not None:
                        self._cache.put(outcome.key, outcome.response)
                    prompt_tokens += outcome.response.usage.prompt_tokens
                    completion_tokens += outcome.response.usage.completion_tokens
                    self.cached_tokens += outcome.response.usage.cached_tokens
                    outcomes.append((outcome.key, "answered", 200, None, outcome.response))
                else:
                    state = "retry" if outcome.retryable else "failed"
                    outcomes.append((outcome.key, state, outcome.status, outcome.error, None))
        # Answers first, then the ledger: a crash in between only repeats this collection.
        if self._cache is not None:
            self._cache.flush()
        self.answered += sum(1 for o in outcomes if o[1] == "answered")
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        tokens = (prompt_tokens, completion_tokens)
        if cancelling or batch.status == "cancelled":
            await self._ledger.finish_part(part["id"], outcomes, None, self._max_tries, tokens)
            await self._ledger.forget_unfinished(part["id"])
            return
        if batch.status == "failed":
            # the provider fails whole batches for passing causes too (its enqueued-token
            # limit): the requests go into follow-ups, and keep its reason once out of tries
            errors = getattr(batch, "errors", None)
            data = getattr(errors, "data", None) or []
            why = "; ".join(str(getattr(e, "message", e)) for e in data[:3]) or "batch failed"
            leftover: tuple[str, int | None, str] = ("retry", None, f"batch failed: {why}")
        else:
            leftover = ("retry", None, f"no answer in {batch.status} batch {batch.id}")
        await self._ledger.finish_part(part["id"], outcomes, leftover, self._max_tries, tokens)

    async def _lines(self, file_id: str) -> Any:
        async with self._client.files.with_streaming_response.content(file_id) as response:
            async for raw in response.iter_lines():
                if raw.strip():
                    yield raw.encode() if isinstance(raw, str) else raw
