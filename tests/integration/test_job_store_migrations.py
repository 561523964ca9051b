"""The SQL job store's Alembic migrations, upgraded from an earlier revision with data in it.

On SQLite and PostgreSQL: rows written under the earlier schema are still read after the upgrade,
and what the new revision adds starts from its defaults.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from faithjudge.jobs.interface import DoneLine
from faithjudge.jobs.sql.store import SqlJobStore, driver_url
from faithjudge.transport.base import Usage
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests import fixtures_service

pytestmark = pytest.mark.anyio

Database = tuple[str, str | None]


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/jobs.sqlite3", None
        return
    with fixtures_service.postgres_schema() as backend:
        yield str(backend.overrides["database_url"]), backend.overrides["database_schema"]


@pytest.fixture
async def unmigrated(database: Database) -> AsyncIterator[SqlJobStore]:
    url, schema = database
    store = await SqlJobStore.open(url, schema=schema, migrate=False)
    try:
        yield store
    finally:
        await store.close()


async def _execute(database: Database, *statements: tuple[str, dict[str, Any]]) -> None:
    """Write rows as a process of the earlier revision would, with SQL of that schema."""
    url, schema = database
    connect_args = {"server_settings": {"search_path": schema}} if schema else {}
    engine = create_async_engine(driver_url(url), connect_args=connect_args)
    try:
        async with engine.begin() as conn:
            for statement, params in statements:
                await conn.execute(text(statement), params)
    finally:
        await engine.dispose()


async def test_an_upgrade_from_0005_counts_the_tokens_of_lines_done_before_it_as_0(
    database: Database, unmigrated: SqlJobStore
) -> None:
    await unmigrated.migrate("0005")
    await _execute(
        database,
        (
            "INSERT INTO fj_batches (id, tenant, status, created_at, updated_at, total) "
            "VALUES ('b_old', 't1', 'running', 1.0, 1.0, 2)",
            {},
        ),
        (
            "INSERT INTO fj_batch_lines (batch_id, seq, line, request, state, result, done_at, "
            "n_valid) VALUES ('b_old', 0, 1, '{}', 2, '{}', 2.0, 3), "
            "('b_old', 1, 2, '{}', 0, NULL, NULL, 0)",
            {},
        ),
        (
            "INSERT INTO fj_provider_parts (batch_id, done, prompt_tokens, completion_tokens) "
            "VALUES ('b_old', 1, 1200, 30)",
            {},
        ),
        (
            "INSERT INTO fj_judge_answers (key, batch_id, seq, text, prompt_tokens, "
            "completion_tokens, created_at) VALUES ('k-old', 'b_old', 0, 'an answer', 600, 15, "
            ":now)",
            {"now": 2.0},
        ),
    )

    await unmigrated.migrate()

    before = await unmigrated.line_counts("b_old")
    assert (before.done, before.statuses["valid"], before.tokens) == (1, 3, Usage())
    (kept,) = await unmigrated.answers_of_lines("b_old", [0])
    assert kept[0] == "k-old" and kept[1].usage == Usage(600, 15, 0)
    totals = await unmigrated.provider_ledger("b_old", lambda sources: []).totals()
    assert (totals.prompt_tokens, totals.completion_tokens, totals.cached_tokens) == (1200, 30, 0)

    # the upgraded store writes and sums the tokens of the lines done from now on
    (line,) = await unmigrated.claim("w1", job_ids=["b_old"], limit=5, lease_s=60)
    assert line.seq == 1
    done = DoneLine("b_old", 1, b"{}", 0, {"valid": 3}, {}, Usage(2048, 60, 1024))
    await unmigrated.complete("w1", [done])
    after = await unmigrated.line_counts("b_old")
    assert (after.done, after.statuses["valid"], after.tokens) == (2, 6, Usage(2048, 60, 1024))
    row = await unmigrated.get_job("t1", "b_old")
    assert row is not None and row.status == "completed"
