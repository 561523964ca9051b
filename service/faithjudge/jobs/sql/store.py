"""The job store: batches and their lines in SQLite (embedded default) or PostgreSQL.

SQLite runs in WAL mode with one writer connection that opens every write transaction with
``BEGIN IMMEDIATE`` (no lock-upgrade deadlocks) and a separate pool of readers. PostgreSQL lets
several replicas share the work: lines are claimed with ``FOR UPDATE SKIP LOCKED`` and held by a
lease that the claiming process renews; a replica that dies leaves lines that another takes over
once their lease has run out.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import (
    Connection,
    and_,
    bindparam,
    case,
    delete,
    event,
    exists,
    false,
    func,
    insert,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from faithjudge.jobs.interface import (
    ACTIVE_STATES,
    DONE,
    LEASED,
    OCCUPYING_STATES,
    PENDING,
    PHASE_UNDERWAY_PREFIX,
    RECENT_S,
    WAITING_PREFIX,
    ActiveJobLimit,
    ClaimedLine,
    DoneLine,
    IdempotencyConflict,
    JobJudge,
    JobRow,
    JobStore,
    KeptAnswer,
    LineCounts,
    ProviderLedger,
    StoreUnavailable,
    new_job_id,
)
from faithjudge.jobs.provider_ledger import Render
from faithjudge.jobs.sql.errors import shielded as _shielded
from faithjudge.jobs.sql.ledger import JobLedger, answer_from_json, same_tenant
from faithjudge.jobs.sql.schema import (
    STAGE_COLUMNS,
    STATUS_COLUMNS,
    TOKEN_COLUMNS,
    batch_lines,
    batch_rejections,
    batches,
    judge_answers,
    provider_parts,
    provider_requests,
)
from faithjudge.private_files import private_file
from faithjudge.transport.base import JudgeResponse, Usage

__all__ = ["SqlJobStore", "driver_url"]

# The schemes this store serves (registered in faithjudge.jobs.interface.JOB_STORES) and the
# async driver each one runs on.
_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
}

# an upload that has not written for this long died with its process
_STALE_INGEST_S = 600.0
# lines whose kept answers one statement reads
_SEQS_PER_QUERY = 500


def driver_url(url: str) -> str:
    """``url`` with the async driver FaithJudge ships: ``postgresql://`` becomes
    ``postgresql+asyncpg://``, ``sqlite://`` becomes ``sqlite+aiosqlite://``.

    Raises:
        ValueError: a scheme this store does not serve.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in _DRIVERS:
        raise ValueError(f"database URL must start with one of {sorted(_DRIVERS)}://")
    return f"{_DRIVERS[scheme]}://{rest}"


def _of_judges(keys: Iterable[str | None]) -> Any:
    """Jobs recorded with one of the judge ``keys`` (None: those stored without one)."""
    keys = list(keys)
    named = [key for key in keys if key is not None]
    ways = [batches.c.judge_key.in_(named)] if named else []
    if None in keys:
        ways.append(batches.c.judge_key.is_(None))
    return or_(*ways) if ways else false()


def _row(mapping: Any) -> JobRow:
    return JobRow(**{name: mapping[name] for name in JobRow.__slots__})


class SqlJobStore:
    """The job store on SQLite or PostgreSQL (SQLAlchemy Core); ``open_job_store`` builds it."""

    def __init__(self, writer: AsyncEngine, reader: AsyncEngine, *, embedded: bool) -> None:
        self._writer = writer
        self._reader = reader
        self.embedded = embedded
        """True for SQLite: one process owns the store, so leases found at start-up are stale."""
        self._file: tuple[str, int, int] | None = None
        """SQLite: the database file opened (path, device, inode)."""

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(
        cls, url: str, *, schema: str | None = None, migrate: bool = True
    ) -> SqlJobStore:
        """Connect, and bring the schema up to date (Alembic) unless ``migrate`` is False.

        ``schema`` (PostgreSQL) puts every table in that schema, which must exist. A plain
        ``sqlite://`` or ``postgresql://`` URL gets the driver FaithJudge ships (``driver_url``).
        """
        url = driver_url(url)
        if url.startswith("sqlite"):
            path = url.split(":///", 1)[1] if ":///" in url else ""
            if path and path != ":memory:":
                private_file(path)  # every tenant's CoTs: 0600, and its WAL/SHM files with it
            writer = create_async_engine(url, pool_size=1, max_overflow=0, pool_timeout=120)
            reader = create_async_engine(url, pool_size=4, max_overflow=4)
            _sqlite_setup(writer, immediate=True)
            _sqlite_setup(reader, immediate=False)
            store = cls(writer, reader, embedded=True)
            if path and path != ":memory:":
                opened = os.stat(path)
                store._file = (path, opened.st_dev, opened.st_ino)
        else:  # postgresql+asyncpg
            connect_args: dict[str, Any] = {}
            if schema:
                connect_args["server_settings"] = {"search_path": schema}
            writer = create_async_engine(
                url, pool_size=10, max_overflow=10, pool_pre_ping=True, connect_args=connect_args
            )
            store = cls(writer, writer, embedded=False)
        if migrate:
            try:
                await store.migrate()
            except BaseException:
                await store.close()
                raise
        return store

    async def migrate(self, revision: str = "head") -> None:
        """Upgrade the schema to Alembic ``revision``, the newest by default (serialized across
        replicas; an older one lets the upgrade from it be tested)."""
        async with self._writer.begin() as conn:
            if conn.dialect.name == "postgresql":
                # several replicas may start at once: one migrates, the others wait
                await conn.execute(text("SELECT pg_advisory_xact_lock(74656921)"))
            await conn.run_sync(_upgrade, revision)

    async def close(self) -> None:
        await self._writer.dispose()
        if self._reader is not self._writer:
            await self._reader.dispose()

    @_shielded
    async def ping(self) -> None:
        self._check_file()
        async with self._reader.connect() as conn:
            await conn.execute(select(1))

    def _check_file(self) -> None:
        """SQLite: refuse to go on once the file opened is no longer the one at its path.

        Connections keep writing to a removed file's inode, and a restart opens whatever is at
        the path: everything accepted in between would be lost without a word.
        """
        if self._file is None:
            return
        path, device, inode = self._file
        try:
            now = os.stat(path)
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != (device, inode):
            raise StoreUnavailable(
                f"the job store's file {path} was removed or replaced while the service ran; "
                "restart the service to open the file at that path"
            )

    # ------------------------------------------------------------------ ingest

    @_shielded
    async def begin_job(
        self,
        *,
        tenant: str,
        name: str | None,
        idempotency_key: str | None,
        judge: JobJudge | None = None,
        max_active: int | None = None,
    ) -> JobRow:
        """Create a batch in state ``ingesting`` (invisible to workers until ``finish_ingest``),
        recording the judge it is to be scored with.

        With ``max_active`` the tenant's occupied slots are counted and the row inserted in one
        transaction that holds the tenant's lock (PostgreSQL: a transaction-scoped advisory
        lock; SQLite: the one writer's ``BEGIN IMMEDIATE``), so concurrent uploads cannot both
        see a free slot; ``ActiveJobLimit`` when none is left.
        """
        self._check_file()
        now = time.time()
        job_id = new_job_id()
        values: dict[str, Any] = {
            "id": job_id,
            "tenant": tenant,
            "name": name,
            "status": "ingesting",
            "created_at": now,
            "updated_at": now,
            "idempotency_key": idempotency_key,
        }
        if judge is not None:
            values.update(judge=judge.name, judge_key=judge.key, judge_config=judge.config)
        try:
            async with self._writer.begin() as conn:
                if max_active is not None:
                    await _check_slots(conn, tenant, max_active)
                await conn.execute(insert(batches).values(values))
        except IntegrityError as exc:
            raise IdempotencyConflict(idempotency_key) from exc
        row = await self.get_job(tenant, job_id)
        assert row is not None
        return row

    @_shielded
    async def add_lines(self, job_id: str, rows: Sequence[tuple[int, int, str]]) -> None:
        """Persist accepted lines ``(seq, line, raw_json)`` in one transaction."""
        if not rows:
            return
        params = [{"batch_id": job_id, "seq": s, "line": n, "request": raw} for s, n, raw in rows]
        async with self._writer.begin() as conn:
            await conn.execute(insert(batch_lines), params)
            await conn.execute(
                update(batches).where(batches.c.id == job_id).values(updated_at=time.time())
            )

    @_shielded
    async def add_rejections(self, job_id: str, rows: Sequence[tuple[int, str]]) -> None:
        """Persist rejected lines ``(line, LineRejection JSON)`` in one transaction."""
        if not rows:
            return
        params = [{"batch_id": job_id, "line": n, "rejection": r} for n, r in rows]
        async with self._writer.begin() as conn:
            await conn.execute(insert(batch_rejections), params)
            await conn.execute(
                update(batches).where(batches.c.id == job_id).values(updated_at=time.time())
            )

    @_shielded
    async def rejections_page(
        self, job_id: str, *, after: int, limit: int, skip: int = 0
    ) -> list[tuple[int, str]]:
        """``(line, LineRejection JSON)`` of rejected lines numbered above ``after``, in line
        order: at most ``limit``, the first ``skip`` passed over. Keyed on the primary key, so a
        page costs the same at any depth."""
        kept = batch_rejections.c
        query = (
            select(kept.line, kept.rejection)
            .where(kept.batch_id == job_id, kept.line > after)
            .order_by(kept.line)
            .offset(skip)
            .limit(limit)
        )
        async with self._reader.connect() as conn:
            return [(int(line), text) for line, text in await conn.execute(query)]

    @_shielded
    async def count_rejections(self, job_id: str, *, before: int | None = None) -> int:
        """How many rejected lines the batch keeps (numbered below ``before``, when given)."""
        kept = batch_rejections.c
        query = select(func.count()).select_from(batch_rejections).where(kept.batch_id == job_id)
        if before is not None:
            query = query.where(kept.line < before)
        async with self._reader.connect() as conn:
            return int(await conn.scalar(query) or 0)

    @_shielded
    async def finish_ingest(
        self,
        job_id: str,
        *,
        total: int,
        rejections: list[dict[str, Any]],
        body_sha256: str,
        rejected: int | None = None,
    ) -> JobRow:
        """Hand an uploaded batch to the workers (``queued``). ``rejections`` are kept in the
        row (the first ones only, when ``rejected`` counts more)."""
        self._check_file()  # the 202 promises the lines are kept
        now = time.time()
        async with self._writer.begin() as conn:
            await conn.execute(
                update(batches)
                .where(batches.c.id == job_id)
                .values(
                    status="queued",
                    total=total,
                    rejected_count=len(rejections) if rejected is None else rejected,
                    rejections=orjson.dumps(rejections).decode(),
                    body_sha256=body_sha256,
                    created_at=now,
                    updated_at=now,
                )
            )
            found = (
                (await conn.execute(select(batches).where(batches.c.id == job_id))).mappings().one()
            )
        return _row(found)

    @_shielded
    async def discard_job(self, job_id: str) -> None:
        """Remove a batch whose upload failed (it was never acknowledged)."""
        async with self._writer.begin() as conn:
            await conn.execute(delete(batch_lines).where(batch_lines.c.batch_id == job_id))
            await conn.execute(delete(batches).where(batches.c.id == job_id))

    @_shielded
    async def find_by_idempotency_key(self, tenant: str, key: str) -> JobRow | None:
        async with self._reader.connect() as conn:
            found = (
                (
                    await conn.execute(
                        select(batches).where(
                            batches.c.tenant == tenant, batches.c.idempotency_key == key
                        )
                    )
                )
                .mappings()
                .first()
            )
        return _row(found) if found is not None else None

    @_shielded
    async def count_occupying(self, tenant: str) -> int:
        """Batches of ``tenant`` uploading, queued or running."""
        async with self._reader.connect() as conn:
            return int(
                await conn.scalar(
                    select(func.count())
                    .select_from(batches)
                    .where(batches.c.tenant == tenant, batches.c.status.in_(OCCUPYING_STATES))
                )
                or 0
            )

    # ------------------------------------------------------------------ reading

    @_shielded
    async def get_job(self, tenant: str, job_id: str) -> JobRow | None:
        """The batch if it exists, belongs to ``tenant`` and finished uploading."""
        async with self._reader.connect() as conn:
            found = (
                (
                    await conn.execute(
                        select(batches).where(batches.c.id == job_id, batches.c.tenant == tenant)
                    )
                )
                .mappings()
                .first()
            )
        return _row(found) if found is not None else None

    @_shielded
    async def line_counts(self, job_id: str) -> LineCounts:
        lines = batch_lines.c
        now = time.time()
        columns = [
            func.sum(case((lines.state == DONE, 1), else_=0)),
            func.sum(lines.is_error),
            func.sum(case((lines.done_at >= now - RECENT_S, 1), else_=0)),
            func.min(lines.done_at),
            *(func.sum(lines[c]) for c in TOKEN_COLUMNS),
            *(func.sum(lines[c]) for c in STATUS_COLUMNS.values()),
            *(func.sum(lines[c]) for c in STAGE_COLUMNS.values()),
        ]
        async with self._reader.connect() as conn:
            row = (await conn.execute(select(*columns).where(lines.batch_id == job_id))).one()
        done, errors, recent, first = row[0], row[1], row[2], row[3]
        values = [int(v or 0) for v in row[4:]]
        tokens, values = values[: len(TOKEN_COLUMNS)], values[len(TOKEN_COLUMNS) :]
        statuses = dict(zip(STATUS_COLUMNS, values[: len(STATUS_COLUMNS)], strict=True))
        stages = dict(zip(STAGE_COLUMNS, values[len(STATUS_COLUMNS) :], strict=True))
        return LineCounts(
            done=int(done or 0),
            statuses=statuses,
            stages=stages,
            errors=int(errors or 0),
            recent_done=int(recent or 0),
            first_done_at=first,
            tokens=Usage(*tokens),
        )

    @_shielded
    async def list_jobs(
        self, tenant: str, *, limit: int, before: tuple[float, str] | None
    ) -> list[JobRow]:
        """The tenant's batches, newest first, strictly after the ``before`` keyset position."""
        query = select(batches).where(batches.c.tenant == tenant, batches.c.status != "ingesting")
        if before is not None:
            created, bid = before
            query = query.where(
                or_(
                    batches.c.created_at < created,
                    and_(batches.c.created_at == created, batches.c.id < bid),
                )
            )
        query = query.order_by(batches.c.created_at.desc(), batches.c.id.desc()).limit(limit)
        async with self._reader.connect() as conn:
            return [_row(r) for r in (await conn.execute(query)).mappings()]

    @_shielded
    async def results_page(
        self, job_id: str, *, start: int, limit: int, with_line: bool = False
    ) -> list[Any]:
        """``(seq, state, result)`` of lines ``seq >= start`` in order, at most ``limit``; with
        ``with_line``, ``(seq, state, result, line)``."""
        lines = batch_lines.c
        columns = [lines.seq, lines.state, lines.result] + ([lines.line] if with_line else [])
        query = (
            select(*columns)
            .where(lines.batch_id == job_id, lines.seq >= start)
            .order_by(lines.seq)
            .limit(limit)
        )
        async with self._reader.connect() as conn:
            return [tuple(r) for r in await conn.execute(query)]

    @_shielded
    async def line_number(self, job_id: str, seq: int) -> int:
        """The upload line number of accepted line ``seq``."""
        query = select(batch_lines.c.line).where(
            batch_lines.c.batch_id == job_id, batch_lines.c.seq == seq
        )
        async with self._reader.connect() as conn:
            line = await conn.scalar(query)
        if line is None:
            raise LookupError(f"job {job_id} has no line {seq}")
        return int(line)

    @_shielded
    async def queue_depth(self) -> int:
        """Lines waiting or in progress in queued and running batches."""
        query = (
            select(func.count())
            .select_from(batch_lines.join(batches, batches.c.id == batch_lines.c.batch_id))
            .where(batches.c.status.in_(ACTIVE_STATES), batch_lines.c.state != DONE)
        )
        async with self._reader.connect() as conn:
            return int(await conn.scalar(query) or 0)

    # ------------------------------------------------------------------ control

    @_shielded
    async def cancel(self, tenant: str, job_id: str) -> JobRow | None:
        now = time.time()
        async with self._writer.begin() as conn:
            cancelled = await conn.execute(
                update(batches)
                .where(
                    batches.c.id == job_id,
                    batches.c.tenant == tenant,
                    batches.c.status.in_(ACTIVE_STATES),
                )
                .values(status="cancelled", updated_at=now, finished_at=now)
            )
            if cancelled.rowcount:
                # leases end with the batch, so results in flight are not written: a cancel is
                # final, and the counts stop where it found them
                await conn.execute(
                    update(batch_lines)
                    .where(batch_lines.c.batch_id == job_id, batch_lines.c.state == LEASED)
                    .values(state=PENDING, owner=None, lease_until=None)
                )
        return await self.get_job(tenant, job_id)

    @_shielded
    async def retry_transport_failures(
        self, tenant: str, job_id: str, *, max_active: int | None = None
    ) -> int | None:
        """Queue a completed batch's ``transport`` failures again (``JobStore``'s contract)."""
        self._check_file()
        now = time.time()
        lines = batch_lines.c
        cleared: dict[str, Any] = {
            "state": PENDING, "owner": None, "lease_until": None, "result": None,
            "done_at": None, "is_error": 0,
            **dict.fromkeys((*STATUS_COLUMNS.values(), *STAGE_COLUMNS.values()), 0),
            **dict.fromkeys(TOKEN_COLUMNS, 0),
        }  # fmt: skip
        async with self._writer.begin() as conn:
            found = (
                await conn.execute(
                    select(batches.c.status, batches.c.provider_done_at)
                    .where(batches.c.id == job_id, batches.c.tenant == tenant)
                    .with_for_update()
                )
            ).first()
            if found is None or found[0] != "completed":
                return None
            requeued = (
                await conn.execute(
                    update(batch_lines)
                    .where(
                        lines.batch_id == job_id,
                        lines.state == DONE,
                        lines[STAGE_COLUMNS["transport"]] > 0,
                    )
                    .values(cleared)
                )
            ).rowcount
            if not requeued:
                return 0
            if max_active is not None:
                # the batch takes a slot again, under the same lock as an upload (rolled back)
                await _check_slots(conn, tenant, max_active)
            values: dict[str, Any] = {
                "status": "queued", "finished_at": None, "updated_at": now, "detail": None,
            }  # fmt: skip
            if found[1] is not None:
                # the batch route: its provider phase runs again for the requests that failed
                # for good, which it would otherwise read back as failed
                values["provider_done_at"] = None
                await conn.execute(
                    delete(provider_requests).where(
                        provider_requests.c.batch_id == job_id,
                        provider_requests.c.state == "failed",
                    )
                )
            await conn.execute(update(batches).where(batches.c.id == job_id).values(values))
        return int(requeued)

    # ------------------------------------------------------------------ workers

    @_shielded
    async def recover(self) -> None:
        """Start-up repair: forget uploads that died; on SQLite, free every lease at once.

        A SQLite store belongs to one process, so leases found when it starts belong to a
        process that is gone; on PostgreSQL other replicas may be alive, so leases expire.
        """
        stale_before = time.time() - (0 if self.embedded else _STALE_INGEST_S)
        async with self._writer.begin() as conn:
            dead = select(batches.c.id).where(
                batches.c.status == "ingesting", batches.c.updated_at <= stale_before
            )
            await conn.execute(delete(batch_lines).where(batch_lines.c.batch_id.in_(dead)))
            await conn.execute(
                delete(batches).where(
                    batches.c.status == "ingesting", batches.c.updated_at <= stale_before
                )
            )
            if self.embedded:
                await conn.execute(
                    update(batch_lines)
                    .where(batch_lines.c.state == LEASED)
                    .values(state=PENDING, owner=None, lease_until=None)
                )
                await conn.execute(
                    update(batches)
                    .where(batches.c.provider_owner.is_not(None))
                    .values(provider_owner=None, provider_lease_until=None)
                )

    @_shielded
    async def active_job_ids(
        self,
        limit: int = 32,
        *,
        provider_done: bool = False,
        judges: Mapping[str | None, bool] | None = None,
    ) -> list[str]:
        query = select(batches.c.id).where(batches.c.status.in_(ACTIVE_STATES))
        if judges is not None:
            ways = [
                and_(_of_judges((key,)), batches.c.provider_done_at.is_not(None))
                if after_phase
                else _of_judges((key,))
                for key, after_phase in judges.items()
            ]
            query = query.where(or_(*ways) if ways else false())
        elif provider_done:
            query = query.where(batches.c.provider_done_at.is_not(None))
        query = query.order_by(batches.c.created_at, batches.c.id).limit(limit)
        async with self._reader.connect() as conn:
            return [r[0] for r in await conn.execute(query)]

    @_shielded
    async def claim(
        self, owner: str, *, job_ids: Iterable[str], limit: int, lease_s: float
    ) -> list[ClaimedLine]:
        """Lease up to ``limit`` lines that are pending or whose lease ran out, oldest first."""
        self._check_file()
        claimed: list[ClaimedLine] = []
        lines = batch_lines.c
        for job_id in job_ids:
            want = limit - len(claimed)
            if want <= 0:
                break
            now = time.time()
            todo = (
                select(lines.seq)
                .where(
                    lines.batch_id == job_id,
                    or_(
                        lines.state == PENDING,
                        and_(lines.state == LEASED, lines.lease_until < now),
                    ),
                )
                .order_by(lines.seq)
                .limit(want)
                .with_for_update(skip_locked=True)
            )
            async with self._writer.begin() as conn:
                # only batches still active: a cancel between listing and claiming wins
                found = (
                    await conn.execute(
                        select(
                            batches.c.status,
                            batches.c.judge_key,
                            batches.c.detail,
                            batches.c.tenant,
                        ).where(batches.c.id == job_id)
                    )
                ).first()
                if found is None or found[0] not in ACTIVE_STATES:
                    continue
                active, judge_key, detail, tenant = found
                # two statements, not UPDATE ... IN (subquery): PostgreSQL may run a LIMITed
                # SKIP LOCKED subquery more than once and so lease more lines than asked for
                seqs = list((await conn.execute(todo)).scalars())
                rows: Sequence[Any] = []
                if seqs:
                    rows = (
                        await conn.execute(
                            update(batch_lines)
                            .where(lines.batch_id == job_id, lines.seq.in_(seqs))
                            .values(state=LEASED, owner=owner, lease_until=now + lease_s)
                            .returning(lines.seq, lines.line, lines.request)
                        )
                    ).all()
                if rows and detail is not None and detail.startswith(WAITING_PREFIX):
                    # a worker offering the job's judge has it now
                    await conn.execute(
                        update(batches)
                        .where(batches.c.id == job_id, batches.c.detail == detail)
                        .values(detail=None, updated_at=now)
                    )
                if rows and active == "queued":
                    await conn.execute(
                        update(batches)
                        .where(batches.c.id == job_id, batches.c.status == "queued")
                        .values(
                            status="running",
                            started_at=func.coalesce(batches.c.started_at, now),
                            updated_at=now,
                        )
                    )
            claimed.extend(ClaimedLine(job_id, r[0], r[1], r[2], judge_key, tenant) for r in rows)
        claimed.sort(key=lambda c: (c.job_id, c.seq))
        return claimed

    @_shielded
    async def renew(self, owner: str, *, lease_s: float) -> None:
        async with self._writer.begin() as conn:
            await conn.execute(
                update(batch_lines)
                .where(batch_lines.c.owner == owner, batch_lines.c.state == LEASED)
                .values(lease_until=time.time() + lease_s)
            )

    @_shielded
    async def release(self, owner: str) -> None:
        """Give back every line and provider phase ``owner`` holds (a clean shutdown)."""
        async with self._writer.begin() as conn:
            await conn.execute(
                update(batch_lines)
                .where(batch_lines.c.owner == owner, batch_lines.c.state == LEASED)
                .values(state=PENDING, owner=None, lease_until=None)
            )
            await conn.execute(
                update(batches)
                .where(batches.c.provider_owner == owner)
                .values(provider_owner=None, provider_lease_until=None)
            )

    @_shielded
    async def complete(self, owner: str, done: Sequence[DoneLine]) -> None:
        """Write results in one transaction; a line whose lease was taken over is not written.

        Then mark each touched batch ``completed`` once none of its lines is left.
        """
        if not done:
            return
        self._check_file()
        now = time.time()
        lines = batch_lines.c
        values: dict[str, Any] = {
            "state": DONE,
            "result": bindparam("p_result"),
            "done_at": now,
            "lease_until": None,
            "is_error": bindparam("p_is_error"),
        }
        for column in (*STATUS_COLUMNS.values(), *STAGE_COLUMNS.values(), *TOKEN_COLUMNS):
            values[column] = bindparam(f"p_{column}")
        statement = (
            update(batch_lines)
            .where(
                lines.batch_id == bindparam("p_batch"),
                lines.seq == bindparam("p_seq"),
                lines.owner == owner,
                lines.state == LEASED,
            )
            .values(values)
        )
        params = []
        for item in done:
            row = {
                "p_batch": item.job_id,
                "p_seq": item.seq,
                "p_result": item.result.decode(),
                "p_is_error": item.is_error,
            }
            for status, column in STATUS_COLUMNS.items():
                row[f"p_{column}"] = item.statuses.get(status, 0)
            for stage, column in STAGE_COLUMNS.items():
                row[f"p_{column}"] = item.stages.get(stage, 0)
            for column in TOKEN_COLUMNS:
                row[f"p_{column}"] = getattr(item.tokens, column)
            params.append(row)
        touched = sorted({item.job_id for item in done})
        async with self._writer.begin() as conn:
            await conn.execute(statement, params)
            for job_id in touched:
                left = exists().where(lines.batch_id == job_id, lines.state != DONE)
                await conn.execute(
                    update(batches)
                    .where(batches.c.id == job_id, batches.c.status.in_(ACTIVE_STATES))
                    .values(
                        status=case((left, batches.c.status), else_="completed"),
                        finished_at=case((left, None), else_=now),
                        updated_at=now,
                    )
                )

    @_shielded
    async def waiting_jobs(self, judges: Collection[str], *, limit: int = 32) -> list[JobRow]:
        """Active jobs recorded with a judge not in ``judges`` on which nobody works now (no
        live lease on a line, no provider phase held), oldest first."""
        now = time.time()
        lines = batch_lines.c
        working = exists().where(
            lines.batch_id == batches.c.id, lines.state == LEASED, lines.lease_until >= now
        )
        query = (
            select(batches)
            .where(
                batches.c.status.in_(ACTIVE_STATES),
                batches.c.judge_key.is_not(None),
                batches.c.judge_key.not_in(list(judges)) if judges else true(),
                ~working,
                or_(batches.c.provider_owner.is_(None), batches.c.provider_lease_until < now),
            )
            .order_by(batches.c.created_at, batches.c.id)
            .limit(limit)
        )
        async with self._reader.connect() as conn:
            return [_row(r) for r in (await conn.execute(query)).mappings()]

    @_shielded
    async def note_waiting(self, job_id: str, detail: str) -> None:
        """Say in the job's status why it waits; a detail another part wrote (the provider
        phase's summary, or the progress of a phase some process holds) is kept, and a job
        some worker holds now is left alone."""
        now = time.time()
        lines = batch_lines.c
        working = exists().where(
            lines.batch_id == job_id, lines.state == LEASED, lines.lease_until >= now
        )
        # the progress of a phase nobody holds any more is old news: the wait replaces it
        stale_phase = and_(
            batches.c.detail.startswith(PHASE_UNDERWAY_PREFIX),
            or_(batches.c.provider_owner.is_(None), batches.c.provider_lease_until < now),
        )
        async with self._writer.begin() as conn:
            await conn.execute(
                update(batches)
                .where(
                    batches.c.id == job_id,
                    batches.c.status.in_(ACTIVE_STATES),
                    or_(
                        batches.c.detail.is_(None),
                        batches.c.detail.startswith(WAITING_PREFIX),
                        stale_phase,
                    ),
                    or_(batches.c.detail.is_(None), batches.c.detail != detail),
                    ~working,
                )
                .values(detail=detail, updated_at=now)
            )

    # ------------------------------------------------------------------ the provider phase

    def provider_ledger(self, job_id: str, render: Render) -> JobLedger:
        """The Batch API ledger of job ``job_id`` (``faithjudge.provider_batch.ledger.Ledger``);
        ``render`` rebuilds request lines from the job's lines."""
        return JobLedger(self._writer, self._reader, job_id, render)

    @_shielded
    async def claim_provider_phase(
        self, owner: str, *, lease_s: float, judges: Collection[str | None] | None = None
    ) -> str | None:
        """Lease the provider phase of the oldest active job that still needs one (of
        ``judges``, by key, when given; None stands for jobs stored without a judge)."""
        now = time.time()
        free = or_(batches.c.provider_owner.is_(None), batches.c.provider_lease_until < now)
        mine = _of_judges(judges) if judges is not None else true()
        todo = (
            select(batches.c.id)
            .where(
                batches.c.status.in_(ACTIVE_STATES),
                batches.c.provider_done_at.is_(None),
                free,
                mine,
            )
            .order_by(batches.c.created_at, batches.c.id)
            .limit(1)
            .with_for_update(skip_locked=True)
        )
        async with self._writer.begin() as conn:
            job_id = await conn.scalar(todo)
            if job_id is None:
                return None
            await conn.execute(
                update(batches)
                .where(batches.c.id == job_id)
                .values(
                    provider_owner=owner,
                    provider_lease_until=now + lease_s,
                    status="running",
                    started_at=func.coalesce(batches.c.started_at, now),
                    updated_at=now,
                )
            )
        return str(job_id)

    @_shielded
    async def renew_provider_phase(
        self, owner: str, job_id: str, *, lease_s: float, detail: str | None = None
    ) -> str:
        """Extend the lease: ``held``; ``ended`` when the job is no longer active (cancelled);
        ``taken`` when another process holds the phase now."""
        values: dict[str, Any] = {"provider_lease_until": time.time() + lease_s}
        if detail is not None:
            values["detail"] = detail
        async with self._writer.begin() as conn:
            result = await conn.execute(
                update(batches)
                .where(
                    batches.c.id == job_id,
                    batches.c.provider_owner == owner,
                    batches.c.status.in_(ACTIVE_STATES),
                )
                .values(values)
            )
            if result.rowcount:
                return "held"
            status = await conn.scalar(select(batches.c.status).where(batches.c.id == job_id))
        return "taken" if status in ACTIVE_STATES else "ended"

    @_shielded
    async def end_provider_phase(
        self, owner: str, job_id: str, *, done: bool, detail: str | None = None
    ) -> None:
        """Give the phase back: ``done`` lets the workers score the lines, else it is retried.

        ``detail`` (shown in the job's status) says how it went.
        """
        now = time.time()
        values: dict[str, Any] = {
            "provider_owner": None,
            "provider_lease_until": None,
            "detail": detail,
            "updated_at": now,
        }
        if done:
            values["provider_done_at"] = now
        async with self._writer.begin() as conn:
            await conn.execute(
                update(batches)
                .where(batches.c.id == job_id, batches.c.provider_owner == owner)
                .values(values)
            )

    @_shielded
    async def fail_job(self, job_id: str, detail: str, *, owner: str | None = None) -> None:
        """End an active job as ``failed`` with the reason, keeping what was scored; with
        ``owner``, only while that process still holds the job's provider phase."""
        now = time.time()
        held = batches.c.provider_owner == owner if owner is not None else true()
        async with self._writer.begin() as conn:
            await conn.execute(
                update(batches)
                .where(batches.c.id == job_id, batches.c.status.in_(ACTIVE_STATES), held)
                .values(
                    status="failed",
                    detail=detail,
                    finished_at=now,
                    updated_at=now,
                    provider_owner=None,
                    provider_lease_until=None,
                )
            )

    @_shielded
    async def unscored_requests(
        self, job_id: str, *, after: int, limit: int
    ) -> list[tuple[int, int, str]]:
        """``(seq, line, request)`` of lines not yet scored with ``seq > after``, in order."""
        lines = batch_lines.c
        query = (
            select(lines.seq, lines.line, lines.request)
            .where(lines.batch_id == job_id, lines.seq > after, lines.state != DONE)
            .order_by(lines.seq)
            .limit(limit)
        )
        async with self._reader.connect() as conn:
            return [(int(s), int(n), str(r)) for s, n, r in await conn.execute(query)]

    @_shielded
    async def answer_of(self, key: str, *, job_id: str | None = None) -> JudgeResponse | None:
        """The provider phase's answer to the judge request ``key``: from any job of
        ``job_id``'s tenant (answers are not shared across tenants), or of any job."""
        requests = provider_requests.c
        query = (
            select(requests.answer)
            .where(requests.key == key, requests.state == "answered")
            .limit(1)
        )
        if job_id is not None:
            query = query.where(requests.batch_id.in_(same_tenant(job_id)))
        async with self._reader.connect() as conn:
            text_ = await conn.scalar(query)
        return answer_from_json(text_) if text_ is not None else None

    @_shielded
    async def failure_of(
        self, key: str, *, job_id: str | None = None
    ) -> tuple[int, int | None, str] | None:
        """(tries, status, message) of the request ``key`` that failed for good: in job
        ``job_id`` only (a failure belongs to the job that met it), or in any job."""
        requests = provider_requests.c
        query = (
            select(requests.tries, requests.status, requests.error)
            .where(requests.key == key, requests.state == "failed")
            .order_by(requests.tries.desc())
            .limit(1)
        )
        if job_id is not None:
            query = query.where(requests.batch_id == job_id)
        async with self._reader.connect() as conn:
            row = (await conn.execute(query)).first()
        if row is None:
            return None
        return int(row[0]), row[1], row[2] or "the request failed"

    @_shielded
    async def ended_provider_phases(
        self,
        limit: int = 32,
        *,
        after: str | None = None,
        judges: Collection[str | None] | None = None,
    ) -> list[str]:
        """Jobs no longer active (cancelled, failed) whose provider batches may still run (of
        ``judges`` only, by key, when given), a page in id order after id ``after``."""
        parts = provider_parts.c
        query = (
            select(batches.c.id)
            .where(
                batches.c.status.not_in((*ACTIVE_STATES, "ingesting")),
                batches.c.id > after if after is not None else true(),
                _of_judges(judges) if judges is not None else true(),
                exists().where(parts.batch_id == batches.c.id, parts.sealed == 1, parts.done == 0),
            )
            .order_by(batches.c.id)
            .limit(limit)
        )
        async with self._reader.connect() as conn:
            return [str(r[0]) for r in await conn.execute(query)]

    # ------------------------------------------------------------------ judge answers

    @_shielded
    async def keep_answers(self, answers: Sequence[KeptAnswer]) -> None:
        """Keep judge answers in one transaction; a key kept already keeps its first answer
        (two replicas that both paid for one request agree on the one kept)."""
        if not answers:
            return
        now = time.time()
        # one order for every writer: two transactions inserting the same keys then wait on
        # each other instead of deadlocking
        rows = [
            {
                "key": kept.key,
                "batch_id": kept.job_id,
                "seq": kept.seq,
                "text": kept.response.text,
                "model": kept.response.model,
                "fingerprint": kept.response.fingerprint,
                "prompt_tokens": kept.response.usage.prompt_tokens,
                "completion_tokens": kept.response.usage.completion_tokens,
                "cached_tokens": kept.response.usage.cached_tokens,
                "finish_reason": kept.response.finish_reason,
                "response_format": kept.response.response_format,
                "created_at": now,
            }
            for kept in sorted(answers, key=lambda kept: kept.key)
        ]
        async with self._writer.begin() as conn:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            await conn.execute(
                dialect.insert(judge_answers).on_conflict_do_nothing(index_elements=["key"]),
                rows,
            )

    @_shielded
    async def answers_of_lines(
        self, job_id: str, seqs: Collection[int]
    ) -> list[tuple[str, JudgeResponse]]:
        """(key, answer) of the answers kept while lines ``seqs`` of ``job_id`` were scored."""
        if not seqs:
            return []
        kept = judge_answers.c
        columns = (
            kept.key,
            kept.text,
            kept.model,
            kept.fingerprint,
            kept.prompt_tokens,
            kept.completion_tokens,
            kept.cached_tokens,
            kept.finish_reason,
            kept.response_format,
        )
        wanted = sorted(set(seqs))
        rows: list[Any] = []
        async with self._reader.connect() as conn:
            # a claim may hold thousands of lines: bound the parameters of one statement
            for start in range(0, len(wanted), _SEQS_PER_QUERY):
                chunk = wanted[start : start + _SEQS_PER_QUERY]
                query = select(*columns).where(kept.batch_id == job_id, kept.seq.in_(chunk))
                rows.extend((await conn.execute(query)).all())
        return [
            (
                str(key),
                JudgeResponse(
                    text=text_,
                    model=model,
                    usage=Usage(int(prompt), int(completion), int(cached)),
                    fingerprint=fingerprint,
                    attempts=0,
                    cached=True,
                    finish_reason=finish,
                    response_format=response_format,
                ),
            )
            for (
                key,
                text_,
                model,
                fingerprint,
                prompt,
                completion,
                cached,
                finish,
                response_format,
            ) in rows
        ]


# ---------------------------------------------------------------------- engine plumbing


# key space of the per-tenant upload locks (two-int advisory locks, apart from the migration's)
_SLOT_LOCK = 74656922


async def _check_slots(conn: AsyncConnection, tenant: str, max_active: int) -> None:
    """Raise ``ActiveJobLimit`` when ``tenant`` occupies ``max_active`` slots; called inside
    the inserting transaction, which keeps the tenant locked until it commits."""
    if conn.dialect.name == "postgresql":
        await conn.execute(
            text("SELECT pg_advisory_xact_lock(:space, hashtext(:tenant))"),
            {"space": _SLOT_LOCK, "tenant": tenant},
        )
    occupied = await conn.scalar(
        select(func.count())
        .select_from(batches)
        .where(batches.c.tenant == tenant, batches.c.status.in_(OCCUPYING_STATES))
    )
    if int(occupied or 0) >= max_active:
        raise ActiveJobLimit(tenant)


def _sqlite_setup(engine: AsyncEngine, *, immediate: bool) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # take transaction control from the driver so that BEGIN is ours to choose
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=60000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _upgrade(connection: Connection, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


if TYPE_CHECKING:

    def _plays_every_role(store: SqlJobStore, ledger: JobLedger) -> tuple[JobStore, ProviderLedger]:
        """Never called: the type checker proves here that the store is a whole ``JobStore``."""
        return store, ledger
