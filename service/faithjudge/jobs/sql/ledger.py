"""The Batch API ledger of one job in the SQL store (``ProviderLedger``).

Parts and request rows live in ``fj_provider_parts`` and ``fj_provider_requests``: a request row
names the job line it comes from, and a part file is rebuilt from those lines (``render``) when
it is uploaded, and a retry's line when it is staged again. A request row keeps the answer it
got, not only the cache of the process that collected it, so any replica scoring the lines finds
every answer. A lost or refused connection comes out of every call as ``StoreUnavailable``,
which the provider phase waits out.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from typing import IO, Any

import orjson
from sqlalchemy import (
    Integer,
    Select,
    String,
    Text,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from faithjudge.jobs.interface import LedgerTotals
from faithjudge.jobs.provider_ledger import ROWS_PER_WRITE, JobPartWriter, Render
from faithjudge.jobs.sql.errors import converted_iter, shielded
from faithjudge.jobs.sql.schema import batch_lines, batches, provider_parts, provider_requests
from faithjudge.provider_batch.ledger import MAX_FILE_BYTES, MAX_FILE_LINES, Outcome, PartLimits
from faithjudge.transport.base import JudgeResponse, Usage

__all__ = ["JobLedger", "answer_from_json", "answer_to_json", "same_tenant"]

_PART_COLUMNS = (
    "id",
    "lines",
    "bytes",
    "file_id",
    "batch_id",
    "state",
    "done",
    "completed",
    "failed",
)


def answer_to_json(response: JudgeResponse) -> str:
    return orjson.dumps(
        {
            "text": response.text,
            "model": response.model,
            "fingerprint": response.fingerprint,
            "prompt_tokens": response.usage.prompt_tokens,
            "completion_tokens": response.usage.completion_tokens,
            "cached_tokens": response.usage.cached_tokens,
        }
    ).decode()


def answer_from_json(text: str) -> JudgeResponse:
    data = orjson.loads(text)
    return JudgeResponse(
        text=data["text"],
        model=data.get("model"),
        usage=Usage(
            prompt_tokens=int(data.get("prompt_tokens") or 0),
            completion_tokens=int(data.get("completion_tokens") or 0),
            # absent from answers recorded before it was kept: none claimed
            cached_tokens=int(data.get("cached_tokens") or 0),
        ),
        fingerprint=data.get("fingerprint"),
        attempts=0,
        cached=True,
    )


def _upsert(dialect: str, rows: list[dict[str, Any]]) -> Any:
    """Insert request rows; a row already there (a retry) moves to the new part."""
    module = postgresql if dialect == "postgresql" else sqlite
    statement = module.insert(provider_requests).values(rows)
    return statement.on_conflict_do_update(
        index_elements=["batch_id", "key"],
        set_={"part": statement.excluded.part, "state": statement.excluded.state},
    )


def same_tenant(job_id: str) -> Select[tuple[str]]:
    """The ids of the jobs of ``job_id``'s tenant (its own included)."""
    tenant = select(batches.c.tenant).where(batches.c.id == job_id).scalar_subquery()
    return select(batches.c.id).where(batches.c.tenant == tenant)


class JobLedger:
    """The ledger of job ``job_id`` (``ProviderLedger``; ``PartStaging`` for its writer)."""

    def __init__(
        self, writer: AsyncEngine, reader: AsyncEngine, job_id: str, render: Render
    ) -> None:
        self._writer = writer
        self._reader = reader
        self._render = render
        self.job_id = job_id
        self.ledger_id = job_id

    # ----------------------------------------------------------------- staging

    @shielded
    async def drop_unsealed(self) -> None:
        """Forget the part a process died writing (its requests are staged again)."""
        parts = provider_parts.c
        await self._drop(select(parts.id).where(parts.batch_id == self.job_id, parts.sealed == 0))

    @shielded
    async def drop_parts(self, parts: Collection[int]) -> None:
        await self._drop(list(parts))

    async def _drop(self, part_ids: Any) -> None:
        """Delete unsent parts: new requests go; a retry staged there waits for the next part."""
        requests = provider_requests.c
        mine = [requests.batch_id == self.job_id, requests.part.in_(part_ids)]
        async with self._writer.begin() as conn:
            await conn.execute(delete(provider_requests).where(*mine, requests.tries == 0))
            await conn.execute(update(provider_requests).where(*mine).values(state="retry"))
            await conn.execute(delete(provider_parts).where(provider_parts.c.id.in_(part_ids)))

    @shielded
    async def keys(self) -> set[str]:
        """Every request this job's phase already holds (staged, sent, answered or failed)."""
        query = select(provider_requests.c.key).where(provider_requests.c.batch_id == self.job_id)
        async with self._reader.connect() as conn:
            return set((await conn.execute(query)).scalars())

    @shielded
    async def settled(self, keys: list[str]) -> set[str]:
        """Those of ``keys`` that a job of this job's tenant has an answer to.

        A failure for good is not settled for another job: it belongs to the job that met it
        (a provider that failed then may answer now), and answers stay within a tenant.
        """
        requests = provider_requests.c
        found: set[str] = set()
        tenant_jobs = same_tenant(self.job_id)
        async with self._reader.connect() as conn:
            for start in range(0, len(keys), ROWS_PER_WRITE):
                chunk = keys[start : start + ROWS_PER_WRITE]
                query = select(requests.key).where(
                    requests.key.in_(chunk),
                    requests.state == "answered",
                    requests.batch_id.in_(tenant_jobs),
                )
                found.update((await conn.execute(query)).scalars())
        return found

    @shielded
    async def reused_tokens(self, keys: list[str]) -> tuple[int, int]:
        """(prompt, completion) tokens of the answers a job of this job's tenant has to
        ``keys``, one answer a key: what this job reuses instead of paying again."""
        requests = provider_requests.c
        usage: dict[str, tuple[int, int]] = {}
        tenant_jobs = same_tenant(self.job_id)
        async with self._reader.connect() as conn:
            for start in range(0, len(keys), ROWS_PER_WRITE):
                query = select(requests.key, requests.answer).where(
                    requests.key.in_(keys[start : start + ROWS_PER_WRITE]),
                    requests.state == "answered",
                    requests.answer.is_not(None),
                    requests.batch_id.in_(tenant_jobs),
                )
                for key, text in (await conn.execute(query)).all():
                    answer = answer_from_json(text)
                    usage[key] = (answer.usage.prompt_tokens, answer.usage.completion_tokens)
        return sum(p for p, _ in usage.values()), sum(c for _, c in usage.values())

    @shielded
    async def record_answers(self, answers: list[tuple[str, JudgeResponse]]) -> None:
        """Answers already known (the response cache), so every replica can read them."""
        if not answers:
            return
        rows = [
            {
                "batch_id": self.job_id,
                "key": key,
                "state": "answered",
                "answer": answer_to_json(response),
            }
            for key, response in answers
        ]
        async with self._writer.begin() as conn:
            await conn.execute(insert(provider_requests), rows)

    def writer(
        self, *, max_lines: int = MAX_FILE_LINES, max_bytes: int = MAX_FILE_BYTES
    ) -> JobPartWriter:
        return JobPartWriter(self, PartLimits(max_lines, max_bytes))

    @shielded
    async def new_part(self) -> int:
        async with self._writer.begin() as conn:
            result = await conn.execute(
                insert(provider_parts).values(batch_id=self.job_id).returning(provider_parts.c.id)
            )
            return int(result.scalar_one())

    @shielded
    async def write_requests(self, part: int, rows: Sequence[tuple[str, int | None]]) -> None:
        values = [
            {"batch_id": self.job_id, "key": key, "part": part, "state": "staged", "seq": seq}
            for key, seq in rows
        ]
        async with self._writer.begin() as conn:
            await conn.execute(_upsert(conn.dialect.name, values))

    @shielded
    async def seal_part(self, part: int, lines: int, size: int) -> None:
        async with self._writer.begin() as conn:
            await conn.execute(
                update(provider_parts)
                .where(provider_parts.c.id == part)
                .values(sealed=1, lines=lines, bytes=size)
            )

    # ----------------------------------------------------------------- the Ledger protocol

    @shielded
    async def parts(
        self, *, submitted: bool | None = None, done: bool | None = None
    ) -> list[dict[str, Any]]:
        parts = provider_parts.c
        query = select(
            parts.id,
            parts.lines,
            parts.bytes,
            parts.file_id,
            parts.provider_batch_id,
            parts.state,
            parts.done,
            parts.completed,
            parts.failed,
        ).where(parts.batch_id == self.job_id, parts.sealed == 1)
        if submitted is not None:
            query = query.where(
                parts.provider_batch_id.is_not(None)
                if submitted
                else parts.provider_batch_id.is_(None)
            )
        if done is not None:
            query = query.where(parts.done == int(done))
        async with self._reader.connect() as conn:
            rows = (await conn.execute(query.order_by(parts.id))).all()
        return [dict(zip(_PART_COLUMNS, row, strict=True)) for row in rows]

    def _sources(self, *where: Any) -> Any:
        """(key, line number, request line) of this job's requests matching ``where``."""
        requests, lines = provider_requests.c, batch_lines.c
        return (
            select(requests.key, lines.line, lines.request)
            .select_from(
                provider_requests.join(
                    batch_lines,
                    and_(lines.batch_id == requests.batch_id, lines.seq == requests.seq),
                )
            )
            .where(requests.batch_id == self.job_id, *where)
            .order_by(requests.seq, requests.key)
        )

    async def _chunks(self, *where: Any) -> AsyncIterator[list[tuple[str, int, str]]]:
        async with self._reader.connect() as conn:
            result = await conn.stream(self._sources(*where))
            async for chunk in result.partitions(ROWS_PER_WRITE):
                yield [(str(key), int(line), str(raw)) for key, line, raw in chunk]

    async def _rendered(self, *where: Any) -> AsyncIterator[tuple[str, bytes]]:
        async for chunk in converted_iter(self._chunks(*where)):
            for key, line in self._render(chunk):
                yield key, line

    @asynccontextmanager
    async def open_part(self, part: dict[str, Any]) -> AsyncIterator[tuple[str, IO[bytes]]]:
        # a part may be 200 MB: written to a real file, which the upload streams (a file-like
        # object in memory would be read whole)
        with tempfile.TemporaryFile() as handle:
            async for _key, line in self._rendered(provider_requests.c.part == part["id"]):
                handle.write(line)
            handle.seek(0)
            yield f"{self.job_id}-part-{part['id']:06d}.jsonl", handle

    @shielded
    async def set_file(self, part: int, file_id: str) -> None:
        async with self._writer.begin() as conn:
            await conn.execute(
                update(provider_parts).where(provider_parts.c.id == part).values(file_id=file_id)
            )

    @shielded
    async def set_submitted(self, part: int, provider_batch_id: str, state: str) -> None:
        requests = provider_requests.c
        async with self._writer.begin() as conn:
            await conn.execute(
                update(provider_parts)
                .where(provider_parts.c.id == part)
                .values(provider_batch_id=provider_batch_id, state=state)
            )
            await conn.execute(
                update(provider_requests)
                .where(
                    requests.batch_id == self.job_id,
                    requests.part == part,
                    requests.state == "staged",
                )
                .values(state="submitted", tries=requests.tries + 1)
            )

    @shielded
    async def set_state(self, part: int, state: str, completed: int, failed: int) -> None:
        async with self._writer.begin() as conn:
            await conn.execute(
                update(provider_parts)
                .where(provider_parts.c.id == part)
                .values(state=state, completed=completed, failed=failed)
            )

    @shielded
    async def finish_part(
        self,
        part: int,
        outcomes: list[Outcome],
        leftover: tuple[str, int | None, str] | None,
        max_tries: int,
        tokens: Usage,
    ) -> None:
        requests = provider_requests.c
        state = bindparam("p_state", type_=String)
        # a retry past the budget is final; the CASE keeps it one statement per request
        values = {
            "state": case(
                (and_(state == "retry", requests.tries >= max_tries), "failed"), else_=state
            ),
            "status": bindparam("p_status", type_=Integer),
            "error": bindparam("p_error", type_=Text),
        }
        submitted = [
            requests.batch_id == self.job_id,
            requests.part == part,
            requests.state == "submitted",
        ]
        by_key = (
            update(provider_requests)
            .where(*submitted, requests.key == bindparam("p_key"))
            .values(**values, answer=bindparam("p_answer", type_=Text))
        )
        params = [
            {
                "p_key": key,
                "p_state": outcome,
                "p_status": status,
                "p_error": error,
                "p_answer": answer_to_json(answer) if answer is not None else None,
            }
            for key, outcome, status, error, answer in outcomes
        ]
        async with self._writer.begin() as conn:
            for start in range(0, len(params), ROWS_PER_WRITE):
                await conn.execute(by_key, params[start : start + ROWS_PER_WRITE])
            if leftover is not None:
                left_state, left_status, left_error = leftover
                await conn.execute(
                    update(provider_requests).where(*submitted).values(**values),
                    {"p_state": left_state, "p_status": left_status, "p_error": left_error},
                )
            await conn.execute(
                update(provider_parts)
                .where(provider_parts.c.id == part)
                .values(
                    done=1,
                    prompt_tokens=tokens.prompt_tokens,
                    completion_tokens=tokens.completion_tokens,
                    cached_tokens=tokens.cached_tokens,
                )
            )

    @shielded
    async def forget_unfinished(self, part: int) -> int:
        requests = provider_requests.c
        async with self._writer.begin() as conn:
            result = await conn.execute(
                delete(provider_requests).where(
                    requests.batch_id == self.job_id,
                    requests.part == part,
                    requests.state.in_(("staged", "submitted")),
                )
            )
            await conn.execute(
                update(provider_parts).where(provider_parts.c.id == part).values(done=1)
            )
        return int(result.rowcount or 0)

    async def retry_lines(self) -> AsyncIterator[tuple[str, bytes]]:
        # streamed from one snapshot: the writer moving these rows to a new part meanwhile
        # commits on another connection
        async for key, line in self._rendered(provider_requests.c.state == "retry"):
            yield key, line

    # ----------------------------------------------------------------- summaries

    @shielded
    async def counts(self) -> dict[str, int]:
        requests = provider_requests.c
        query = (
            select(requests.state, func.count())
            .where(requests.batch_id == self.job_id)
            .group_by(requests.state)
        )
        async with self._reader.connect() as conn:
            return {state: int(n) for state, n in (await conn.execute(query)).all()}

    @shielded
    async def totals(self) -> LedgerTotals:
        """Files, batches and tokens recorded in this job's parts, whoever recorded them."""
        parts = provider_parts.c
        query = select(
            func.count(parts.file_id),
            func.count(parts.provider_batch_id),
            func.coalesce(func.sum(parts.prompt_tokens), 0),
            func.coalesce(func.sum(parts.completion_tokens), 0),
            func.coalesce(func.sum(parts.cached_tokens), 0),
        ).where(parts.batch_id == self.job_id)
        async with self._reader.connect() as conn:
            files, created, prompt, completion, cached = (await conn.execute(query)).one()
        return LedgerTotals(int(files), int(created), int(prompt), int(completion), int(cached))
