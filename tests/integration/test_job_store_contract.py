"""The job-store contract: what any ``JobStore`` must do, run against every implementation.

Each test speaks only the interface of ``faithjudge.jobs.interface`` (rows, states, errors) and
opens stores through ``open_job_store``. The suite runs once for every URL scheme a registered
store claims (``JOB_STORES``): the SQL store on SQLite and on PostgreSQL, under each scheme it
accepts, and the memory store. A store registered for a scheme with no test database in
``_DATABASES`` fails the suite until one is added there (the job-store recipe of
docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from faithjudge.errors import ConfigError
from faithjudge.jobs.interface import (
    DONE,
    JOB_STORES,
    LINE_STAGES,
    LINE_STATUSES,
    PENDING,
    ActiveJobLimit,
    DoneLine,
    IdempotencyConflict,
    JobStore,
    LineCounts,
    StoreUnavailable,
    open_job_store,
    register_job_store,
    store_schemes,
)
from faithjudge.jobs.worker import done_line
from faithjudge_client.lines import Failure, ItemResult

from tests import fixtures_service

pytestmark = pytest.mark.anyio

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.jsonl"

Database = tuple[str, str | None]
"""A test database: its URL and the PostgreSQL schema to use (None: the default)."""


@contextmanager
def _sqlite(scheme: str, tmp_path: Path) -> Iterator[Database]:
    yield f"{scheme}:///{tmp_path}/j.db", None


@contextmanager
def _postgres(scheme: str, tmp_path: Path) -> Iterator[Database]:
    with fixtures_service.postgres_schema() as backend:
        rest = str(backend.overrides["database_url"]).partition("://")[2]
        yield f"{scheme}://{rest}", backend.overrides["database_schema"]


@contextmanager
def _memory(scheme: str, tmp_path: Path) -> Iterator[Database]:
    yield f"{scheme}://{tmp_path.name}", None  # a store of this test's own


# Where the suite finds a database for each scheme a store may claim.
_DATABASES: dict[str, Callable[[str, Path], Any]] = {
    "sqlite": _sqlite,
    "sqlite+aiosqlite": _sqlite,
    "postgresql": _postgres,
    "postgres": _postgres,
    "postgresql+asyncpg": _postgres,
    "memory": _memory,
}


@pytest.fixture(params=store_schemes())
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    scheme = request.param
    if scheme not in _DATABASES:
        pytest.fail(
            f"the {scheme!r} scheme of {JOB_STORES.ref(scheme) or JOB_STORES.get(scheme)!r} has "
            "no test database: add one to _DATABASES in this module"
        )
    with _DATABASES[scheme](scheme, tmp_path) as found:
        yield found


@pytest.fixture
async def store(database: Database) -> AsyncIterator[JobStore]:
    url, schema = database
    opened = await open_job_store(url, schema=schema)
    try:
        yield opened
    finally:
        await opened.close()


def test_every_registered_scheme_has_a_test_database() -> None:
    assert set(store_schemes()) <= set(_DATABASES), "add the new scheme to _DATABASES"
    assert {"sqlite", "postgresql", "memory"} <= set(store_schemes())


async def test_an_unclaimed_scheme_is_refused_naming_the_claimed_ones() -> None:
    with pytest.raises(ConfigError, match=r"unsupported database 'mysql'.*sqlite.*postgresql"):
        await open_job_store("mysql://root@127.0.0.1/test")
    with pytest.raises(ConfigError, match="not a database URL"):
        await open_job_store("jobs.sqlite3")


async def test_a_store_registered_for_a_scheme_is_opened_by_it() -> None:
    """The registry is the only place a store is found: a new scheme reaches its class."""
    opened: list[tuple[str, str | None, bool]] = []

    class Recording:
        @staticmethod
        async def open(url: str, *, schema: str | None = None, migrate: bool = True) -> Any:
            opened.append((url, schema, migrate))
            return "a store"

    register_job_store(["fjtest"], Recording)
    try:
        assert await open_job_store("fjtest://x/y", schema="s", migrate=False) == "a store"
        with pytest.raises(ValueError, match="'fjtest' is already registered"):
            register_job_store(["fjtest"], "faithjudge.jobs.sql.store:SqlJobStore")
    finally:
        JOB_STORES.unregister("fjtest")
    assert opened == [("fjtest://x/y", "s", False)]


def test_the_stores_are_registered_by_reference_and_imported_when_opened() -> None:
    code = (
        "import sys\n"
        "from faithjudge.jobs.interface import JOB_STORES, store_schemes\n"
        "assert 'faithjudge.jobs.sql.store' not in sys.modules, 'imported before use'\n"
        "assert 'faithjudge.jobs.memory_store' not in sys.modules, 'imported before use'\n"
        "print(sorted({JOB_STORES.ref(s) for s in store_schemes()}))\n"
    )
    probe = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == (
        "['faithjudge.jobs.memory_store:MemoryJobStore', 'faithjudge.jobs.sql.store:SqlJobStore']"
    )


async def _batch(store: JobStore, tenant: str = "t1", lines: int = 3, key: str | None = None):
    row = await store.begin_job(tenant=tenant, name="n", idempotency_key=key)
    await store.add_lines(row.id, [(seq, seq + 1, f'{{"seq": {seq}}}') for seq in range(lines)])
    return await store.finish_ingest(row.id, total=lines, rejections=[], body_sha256="0" * 64)


def _result(line: int) -> ItemResult:
    return ItemResult(line=line, item_id=f"i{line}")


async def test_a_batch_is_invisible_until_ingested_and_private_to_its_tenant(
    store: JobStore,
) -> None:
    row = await store.begin_job(tenant="t1", name="n", idempotency_key=None)
    assert row.status == "ingesting"
    assert await store.list_jobs("t1", limit=10, before=None) == []
    assert await store.count_occupying("t1") == 1  # an upload holds a slot already
    await store.add_lines(row.id, [(0, 1, "{}"), (1, 3, "{}")])
    done = await store.finish_ingest(row.id, total=2, rejections=[], body_sha256="a" * 64)
    assert done.status == "queued" and done.total == 2
    assert [b.id for b in await store.list_jobs("t1", limit=10, before=None)] == [row.id]
    assert await store.get_job("t2", row.id) is None  # another tenant sees nothing
    assert await store.line_number(row.id, 1) == 3
    assert await store.queue_depth() == 2


async def test_an_idempotency_key_holds_one_batch_per_tenant(store: JobStore) -> None:
    first = await _batch(store, key="k1")
    with pytest.raises(IdempotencyConflict):
        await store.begin_job(tenant="t1", name=None, idempotency_key="k1")
    found = await store.find_by_idempotency_key("t1", "k1")
    assert found is not None and found.id == first.id
    other = await store.begin_job(tenant="t2", name=None, idempotency_key="k1")
    assert other.id != first.id


async def test_lines_are_leased_once_completed_by_their_owner_and_read_in_order(
    store: JobStore,
) -> None:
    row = await _batch(store, lines=3)
    assert row.id in await store.active_job_ids()
    mine = await store.claim("w1", job_ids=[row.id], limit=2, lease_s=60)
    assert [c.seq for c in mine] == [0, 1] and mine[0].request == '{"seq": 0}'
    theirs = await store.claim("w2", job_ids=[row.id], limit=5, lease_s=60)
    assert [c.seq for c in theirs] == [2]  # a leased line is not handed out twice
    await store.complete("w2", [done_line(row.id, 0, _result(1))])  # not w2's line: ignored
    page = await store.results_page(row.id, start=0, limit=10)
    assert [state for _, state, _ in page] != [DONE, DONE, DONE]
    await store.complete("w1", [done_line(row.id, c.seq, _result(c.line)) for c in mine])
    await store.complete("w2", [done_line(row.id, 2, _result(3))])
    page = await store.results_page(row.id, start=0, limit=10, with_line=True)
    assert [(seq, state, line) for seq, state, _, line in page] == [(0, DONE, 1), (1, DONE, 2),
                                                                    (2, DONE, 3)]  # fmt: skip
    assert ItemResult.model_validate_json(page[1][2]).item_id == "i2"
    final = await store.get_job("t1", row.id)
    assert final is not None and final.status == "completed"
    counts = await store.line_counts(row.id)
    assert isinstance(counts, LineCounts) and counts.done == 3
    assert await store.queue_depth() == 0


async def test_leases_run_out_and_are_given_back(store: JobStore) -> None:
    row = await _batch(store, lines=2)
    held = await store.claim("w1", job_ids=[row.id], limit=2, lease_s=0.2)
    assert len(held) == 2
    await anyio.sleep(0.4)
    taken = await store.claim("w2", job_ids=[row.id], limit=2, lease_s=60)
    assert [c.seq for c in taken] == [0, 1]  # a dead worker's lines are taken over
    await store.release("w2")
    page = await store.results_page(row.id, start=0, limit=10)
    assert [state for _, state, _ in page] == [PENDING, PENDING]
    again = await store.claim("w3", job_ids=[row.id], limit=2, lease_s=60)
    await store.renew("w3", lease_s=60)
    assert len(again) == 2


async def test_a_cancelled_batch_leaves_the_queue(store: JobStore) -> None:
    row = await _batch(store)
    cancelled = await store.cancel("t1", row.id)
    assert cancelled is not None and cancelled.status == "cancelled"
    assert row.id not in await store.active_job_ids()
    assert await store.cancel("t2", row.id) is None  # not another tenant's to cancel
    assert await store.count_occupying("t1") == 0


async def test_a_cancel_is_final_for_results_in_flight(store: JobStore) -> None:
    row = await _batch(store, lines=3)
    held = await store.claim("w1", job_ids=[row.id], limit=2, lease_s=60)
    await store.complete("w1", [done_line(row.id, held[0].seq, _result(held[0].line))])
    await store.cancel("t1", row.id)
    # the worker finishes the line it held after the cancel: that result is not written
    await store.complete("w1", [done_line(row.id, held[1].seq, _result(held[1].line))])
    assert (await store.line_counts(row.id)).done == 1
    final = await store.get_job("t1", row.id)
    assert final is not None and final.status == "cancelled"


async def test_a_completed_batchs_transport_failures_are_queued_again(store: JobStore) -> None:
    row = await _batch(store, lines=3)
    held = await store.claim("w1", job_ids=[row.id], limit=3, lease_s=60)
    down = Failure(stage="transport", detail="connection refused")
    results = [
        _result(held[0].line),
        ItemResult(line=held[1].line, item_id="i2", error=down),
        _result(held[2].line),
    ]
    assert await store.retry_transport_failures("t1", row.id) is None  # still running
    await store.complete(
        "w1", [done_line(row.id, c.seq, r) for c, r in zip(held, results, strict=True)]
    )
    assert await store.retry_transport_failures("t2", row.id) is None  # another tenant's
    assert await store.retry_transport_failures("t1", row.id) == 1
    again = await store.get_job("t1", row.id)
    assert again is not None and again.status == "queued"
    assert (await store.line_counts(row.id)).done == 2  # the other lines keep their results
    retried = await store.claim("w2", job_ids=[row.id], limit=3, lease_s=60)
    assert [c.seq for c in retried] == [held[1].seq]
    await store.complete("w2", [done_line(row.id, retried[0].seq, _result(retried[0].line))])
    final = await store.get_job("t1", row.id)
    assert final is not None and final.status == "completed"
    assert await store.retry_transport_failures("t1", row.id) == 0  # nothing left to retry
    cancelled = await _batch(store, lines=1)
    await store.cancel("t1", cancelled.id)
    assert await store.retry_transport_failures("t1", cancelled.id) is None


async def test_line_counts_sum_the_outcomes_of_the_lines_done(store: JobStore) -> None:
    row = await _batch(store, lines=3)
    held = await store.claim("w1", job_ids=[row.id], limit=3, lease_s=60)
    assert await store.line_counts(row.id) == LineCounts(
        done=0,
        statuses=dict.fromkeys(LINE_STATUSES, 0),
        stages=dict.fromkeys(LINE_STAGES, 0),
        errors=0,
        recent_done=0,
        first_done_at=None,
    )
    before = time.time()
    await store.complete(
        "w1",
        [
            DoneLine(row.id, held[0].seq, b"{}", 1, {}, {"transport": 1}),
            DoneLine(row.id, held[1].seq, b"{}", 0, {"valid": 2, "invalid": 1}, {"schema": 1}),
        ],
    )
    counts = await store.line_counts(row.id)
    assert (counts.done, counts.errors, counts.recent_done) == (2, 1, 2)
    assert counts.statuses == {**dict.fromkeys(LINE_STATUSES, 0), "valid": 2, "invalid": 1}
    assert counts.stages == {**dict.fromkeys(LINE_STAGES, 0), "transport": 1, "schema": 1}
    assert counts.first_done_at is not None and before - 1 <= counts.first_done_at <= time.time()
    await store.complete("w1", [DoneLine(row.id, held[2].seq, b"{}", 0, {"valid": 2}, {})])
    assert await store.retry_transport_failures("t1", row.id) == 1  # its outcomes are taken back
    again = await store.line_counts(row.id)
    assert (again.done, again.errors, again.recent_done) == (2, 0, 2)
    assert (again.statuses["valid"], again.stages["transport"], again.stages["schema"]) == (4, 0, 1)


async def test_line_counts_sum_the_tokens_of_the_lines_done(store: JobStore) -> None:
    from faithjudge.transport.base import Usage

    row = await _batch(store, lines=3)
    held = await store.claim("w1", job_ids=[row.id], limit=3, lease_s=60)
    assert (await store.line_counts(row.id)).tokens == Usage()
    down = {"transport": 1}
    await store.complete(
        "w1",
        [
            DoneLine(
                row.id, held[0].seq, b"{}", 0, {"valid": 1}, {}, Usage(1_500_000_000, 40, 1024)
            ),
            DoneLine(row.id, held[1].seq, b"{}", 1, {}, down, Usage(700, 0, 0)),
            DoneLine(row.id, held[2].seq, b"{}", 0, {"valid": 1}, {}, Usage(2_000_000_000, 9, 5)),
        ],
    )
    # a job's sums go past what one 32-bit column holds
    assert (await store.line_counts(row.id)).tokens == Usage(3_500_000_700, 49, 1029)
    assert await store.retry_transport_failures("t1", row.id) == 1  # its tokens are taken back
    assert (await store.line_counts(row.id)).tokens == Usage(3_500_000_000, 49, 1029)
    (again,) = await store.claim("w2", job_ids=[row.id], limit=3, lease_s=60)
    await store.complete("w2", [DoneLine(row.id, again.seq, b"{}", 0, {}, {}, Usage(800, 30, 512))])
    assert (await store.line_counts(row.id)).tokens == Usage(3_500_000_800, 79, 1541)


async def test_a_retry_takes_a_batch_slot_like_an_upload(store: JobStore) -> None:
    row = await _batch(store, lines=1)
    held = await store.claim("w1", job_ids=[row.id], limit=1, lease_s=60)
    down = ItemResult(line=held[0].line, error=Failure(stage="transport", detail="refused"))
    await store.complete("w1", [done_line(row.id, held[0].seq, down)])
    await _batch(store, lines=1)  # the tenant's one slot is taken again
    with pytest.raises(ActiveJobLimit):
        await store.retry_transport_failures("t1", row.id, max_active=1)
    after = await store.get_job("t1", row.id)
    assert after is not None and after.status == "completed"  # nothing was queued
    assert (await store.line_counts(row.id)).done == 1
    assert await store.retry_transport_failures("t1", row.id, max_active=2) == 1


async def test_rejected_lines_are_kept_and_read_page_by_page(store: JobStore) -> None:
    row = await store.begin_job(tenant="t1", name=None, idempotency_key=None)
    rejected = [(n, f'{{"line": {n}, "reason": "r{n}"}}') for n in (2, 3, 7, 8, 9, 15)]
    await store.add_rejections(row.id, rejected[:4])  # kept as the upload streams
    await store.add_rejections(row.id, rejected[4:])
    assert await store.count_rejections(row.id) == 6
    assert await store.count_rejections(row.id, before=8) == 3  # lines 2, 3 and 7
    pages, after = [], 0
    while page := await store.rejections_page(row.id, after=after, limit=4):
        pages.append(page)
        after = page[-1][0]
    assert [len(p) for p in pages] == [4, 2]
    assert [r for p in pages for r in p] == rejected  # in line order, each once
    assert await store.rejections_page(row.id, after=3, limit=2, skip=1) == rejected[3:5]
    other = await store.begin_job(tenant="t1", name=None, idempotency_key=None)
    assert await store.count_rejections(other.id) == 0  # a batch's own only


async def test_an_upload_that_died_is_forgotten_on_recovery(store: JobStore) -> None:
    dead = await store.begin_job(tenant="t1", name=None, idempotency_key=None)
    await store.add_lines(dead.id, [(0, 1, "{}")])
    if not store.embedded:
        pytest.skip("a shared store waits for stale uploads to age; recovery is immediate only "
                    "for a store one process owns")  # fmt: skip
    await store.recover()
    assert await store.get_job("t1", dead.id) is None
    await store.ping()


# ---------------------------------------------------------------------- the provider phase


async def test_the_provider_phase_is_leased_to_one_owner_and_gates_the_workers(
    store: JobStore,
) -> None:
    row = await _batch(store)
    assert await store.active_job_ids(provider_done=True) == []
    assert await store.claim_provider_phase("w1", lease_s=60) == row.id
    assert await store.claim_provider_phase("w2", lease_s=60) is None  # held by w1
    assert await store.renew_provider_phase("w2", row.id, lease_s=60) == "taken"
    assert await store.renew_provider_phase("w1", row.id, lease_s=60, detail="3 of 9") == "held"
    assert (await store.get_job("t1", row.id)).detail == "3 of 9"

    # given back unfinished: claimable again; an expired lease is taken over
    await store.end_provider_phase("w1", row.id, done=False, detail="retrying")
    assert await store.claim_provider_phase("w2", lease_s=0.01) == row.id
    await anyio.sleep(0.05)
    assert await store.claim_provider_phase("w3", lease_s=60) == row.id
    assert await store.renew_provider_phase("w2", row.id, lease_s=60) == "taken"

    await store.end_provider_phase("w3", row.id, done=True, detail="all answered")
    assert await store.active_job_ids(provider_done=True) == [row.id]
    assert await store.claim_provider_phase("w1", lease_s=60) is None
    status = await store.get_job("t1", row.id)
    assert status.status == "running" and status.detail == "all answered"

    other = await _batch(store)
    assert await store.claim_provider_phase("w1", lease_s=60) == other.id
    await store.cancel("t1", other.id)
    assert await store.renew_provider_phase("w1", other.id, lease_s=60) == "ended"


async def test_a_failed_phase_fails_the_batch_with_its_reason(store: JobStore) -> None:
    row = await _batch(store)
    assert await store.claim_provider_phase("w1", lease_s=60) == row.id
    # a process that no longer holds the phase (its lease ran out) cannot fail the job
    await store.fail_job(row.id, "stale", owner="w0")
    still = await store.get_job("t1", row.id)
    assert still is not None and still.status in ("queued", "running")
    await store.fail_job(row.id, "Batch API: connection refused", owner="w1")
    failed = await store.get_job("t1", row.id)
    assert failed.status == "failed" and failed.detail == "Batch API: connection refused"
    assert failed.finished_at is not None
    assert await store.active_job_ids() == []


async def test_unscored_requests_page_through_the_lines_not_done(store: JobStore) -> None:
    row = await _batch(store, lines=5)
    claimed = await store.claim("w", job_ids=[row.id], limit=1, lease_s=60)
    await store.complete("w", [done_line(row.id, claimed[0].seq, _result(1))])
    first = await store.unscored_requests(row.id, after=-1, limit=3)
    assert [seq for seq, _, _ in first] == [1, 2, 3]
    assert first[0] == (1, 2, '{"seq": 1}')
    rest = await store.unscored_requests(row.id, after=first[-1][0], limit=3)
    assert [seq for seq, _, _ in rest] == [4]


async def test_ended_jobs_with_open_provider_batches_are_listed_page_by_page(
    store: JobStore,
) -> None:
    ended: list[str] = []
    for n in range(5):
        row = await _batch(store, lines=1)
        writer = store.provider_ledger(row.id, lambda sources: []).writer(
            max_lines=10, max_bytes=10**6
        )
        await writer.add(f"k{n}", b"x\n", 0)
        await writer.close_part()  # sealed and not done: its batch may still run
        if n != 2:  # one job still active: not listed
            await store.cancel("t1", row.id)
            ended.append(row.id)
    listed: list[str] = []
    after: str | None = None
    while page := await store.ended_provider_phases(2, after=after):
        assert len(page) <= 2
        listed += page
        after = page[-1]
    assert listed == sorted(ended)  # every one, once, whatever the page size


async def test_a_jobs_ledger_keeps_parts_requests_and_answers(store: JobStore) -> None:
    from faithjudge.transport.base import JudgeResponse, Usage

    def render(sources):  # type: ignore[no-untyped-def]
        # the store keeps where each request came from; its line is rebuilt from the job line
        return [
            (key, f'{{"custom_id": "{key}", "line": {line}, "from": {raw}}}\n'.encode())
            for key, line, raw in sources
            if key != "k-gone"  # a request its line no longer makes
        ]

    row = await _batch(store)
    ledger = store.provider_ledger(row.id, render)
    writer = ledger.writer(max_lines=2, max_bytes=10**6)
    for key, seq in (("k1", 0), ("k2", 2), ("k3", 1), ("k-gone", 1)):
        await writer.add(key, b"x" * 40 + b"\n", seq)
    await writer.close_part()
    parts = await ledger.parts(submitted=False, done=False)
    assert [p["lines"] for p in parts] == [2, 2]
    async with ledger.open_part(parts[0]) as (_name, handle):
        assert handle.read().splitlines() == [
            b'{"custom_id": "k1", "line": 1, "from": {"seq": 0}}',
            b'{"custom_id": "k2", "line": 3, "from": {"seq": 2}}',
        ]
    async with ledger.open_part(parts[1]) as (_name, handle):
        assert handle.read().splitlines() == [b'{"custom_id": "k3", "line": 2, "from": {"seq": 1}}']
    assert await ledger.keys() == {"k1", "k2", "k3", "k-gone"}

    # a part whose staging died is forgotten, its requests with it
    loose = ledger.writer(max_lines=10, max_bytes=10**6)
    await loose.add("k9", b"x\n", 0)
    await ledger.drop_unsealed()
    assert "k9" not in await ledger.keys()

    answer = JudgeResponse(text='{"score": 3}', model="m", usage=Usage(5, 2, 3))
    for part in parts:
        await ledger.set_file(part["id"], f"file-{part['id']}")
        await ledger.set_submitted(part["id"], f"batch-{part['id']}", "validating")
    assert len(await ledger.parts(submitted=True, done=False)) == 2
    await ledger.finish_part(
        parts[0]["id"],
        [("k1", "answered", 200, None, answer), ("k2", "retry", 429, "slow down", None)],
        None,
        1,
        Usage(5, 2, 3),
    )
    await ledger.finish_part(parts[1]["id"], [], ("retry", None, "expired"), 6, Usage())
    # k2 used its one try: failed for good; k3 waits for a follow-up part, rebuilt again
    assert await ledger.counts() == {"answered": 1, "failed": 1, "retry": 2}
    totals = await ledger.totals()
    assert (totals.prompt_tokens, totals.completion_tokens, totals.cached_tokens) == (5, 2, 3)
    assert [line async for _, line in ledger.retry_lines()] == [
        b'{"custom_id": "k3", "line": 2, "from": {"seq": 1}}\n'
    ]
    follow_up = ledger.writer(max_lines=10, max_bytes=10**6)
    async for key, line in ledger.retry_lines():
        await follow_up.add(key, line)
    await follow_up.close_part()
    (again,) = await ledger.parts(submitted=False, done=False)
    async with ledger.open_part(again) as (_name, handle):  # the job line is kept on a retry
        assert handle.read() == b'{"custom_id": "k3", "line": 2, "from": {"seq": 1}}\n'
    # only answers settle a request for later jobs: a failure for good is this job's own
    assert await ledger.settled(["k1", "k2", "k3", "k4"]) == {"k1"}
    found = await store.answer_of("k1")
    assert found is not None and found.text == answer.text and found.usage == answer.usage
    assert await store.answer_of("k3") is None
    assert await store.failure_of("k2") == (1, 429, "slow down")
    assert await store.failure_of("k1") is None

    # answers known without a batch are recorded for every replica to read
    await ledger.record_answers([("k7", answer)])
    assert (await store.answer_of("k7")).text == answer.text


async def test_a_job_is_claimed_only_by_a_worker_offering_its_judge(store: JobStore) -> None:
    from faithjudge.jobs.interface import WAITING_PREFIX, JobJudge

    async def job(judge: JobJudge | None, lines: int = 2) -> str:
        row = await store.begin_job(tenant="t1", name=None, idempotency_key=None, judge=judge)
        assert (row.judge, row.judge_key) == ((judge.name, judge.key) if judge else (None, None))
        await store.add_lines(row.id, [(seq, seq + 1, "{}") for seq in range(lines)])
        await store.finish_ingest(row.id, total=lines, rejections=[], body_sha256="0" * 64)
        return row.id

    a, b = JobJudge("lexicon:v1", "a" * 64, "{}"), JobJudge("openai:m", "b" * 64, "{}")
    of_a, of_b, legacy = await job(a), await job(b), await job(None)
    assert await store.active_job_ids(judges={a.key: False}) == [of_a]
    assert await store.active_job_ids(judges={a.key: False, None: False}) == [of_a, legacy]
    assert await store.active_job_ids(judges={b.key: True}) == []  # its phase is not done
    assert await store.active_job_ids(judges={}) == []
    claimed = await store.claim("w1", job_ids=[of_a, legacy], limit=10, lease_s=60)
    assert {(c.job_id, c.judge) for c in claimed} == {(of_a, a.key), (legacy, None)}

    # b's job waits for a worker offering b: its detail says so, never one written by another
    assert [r.id for r in await store.waiting_jobs([a.key])] == [of_b]
    await store.note_waiting(of_b, f"{WAITING_PREFIX}openai:m; this service offers lexicon:v1")
    row = await store.get_job("t1", of_b)
    assert row is not None and row.detail is not None and row.detail.startswith(WAITING_PREFIX)
    assert row.status == "queued"
    assert await store.claim_provider_phase("w2", lease_s=60, judges=["c" * 64]) is None
    assert await store.claim_provider_phase("w2", lease_s=60, judges=[b.key]) == of_b
    assert await store.waiting_jobs([a.key]) == []  # its phase is held now
    await store.end_provider_phase("w2", of_b, done=True, detail="all answered")
    await store.note_waiting(of_b, f"{WAITING_PREFIX}openai:m")
    assert (await store.get_job("t1", of_b)).detail == "all answered"  # type: ignore[union-attr]

    # the first claim by a worker offering the judge clears the waiting detail
    await store.note_waiting(of_a, f"{WAITING_PREFIX}x")  # a's lines are leased: left alone
    assert (await store.get_job("t1", of_a)).detail is None  # type: ignore[union-attr]
    third = await job(b, lines=1)
    await store.note_waiting(third, f"{WAITING_PREFIX}openai:m")
    assert await store.active_job_ids(judges={b.key: False}) == [of_b, third]
    assert [c.judge for c in await store.claim("w3", job_ids=[third], limit=5, lease_s=60)] == [
        b.key
    ]
    assert (await store.get_job("t1", third)).detail is None  # type: ignore[union-attr]


async def test_a_job_waiting_for_its_judge_says_so_over_the_progress_of_a_dead_phase(
    store: JobStore,
) -> None:
    from faithjudge.jobs.interface import PHASE_UNDERWAY_PREFIX, WAITING_PREFIX, JobJudge

    judge = JobJudge("openai-batch:m", "b" * 64, "{}")
    row = await store.begin_job(tenant="t1", name=None, idempotency_key=None, judge=judge)
    await store.add_lines(row.id, [(0, 1, "{}")])
    await store.finish_ingest(row.id, total=1, rejections=[], body_sha256="0" * 64)
    progress = f"{PHASE_UNDERWAY_PREFIX}3 of 9 requests back (0 failed), batches 1 validating"
    waiting = f"{WAITING_PREFIX}openai-batch:m; this service offers lexicon:v1"
    assert await store.claim_provider_phase("w1", lease_s=60, judges=[judge.key]) == row.id
    assert await store.renew_provider_phase("w1", row.id, lease_s=60, detail=progress) == "held"
    await store.note_waiting(row.id, waiting)  # a phase held now: its progress is current
    assert (await store.get_job("t1", row.id)).detail == progress  # type: ignore[union-attr]

    # the process holding the phase died (its lease ran out), and no worker offers the judge
    assert await store.renew_provider_phase("w1", row.id, lease_s=0.01) == "held"
    await anyio.sleep(0.05)
    await store.note_waiting(row.id, waiting)
    assert (await store.get_job("t1", row.id)).detail == waiting  # type: ignore[union-attr]


async def test_kept_judge_answers_are_read_by_line_and_the_first_answer_of_a_key_stays(
    store: JobStore,
) -> None:
    from faithjudge.jobs.interface import KeptAnswer
    from faithjudge.transport.base import JudgeResponse, Usage

    def answer(text: str, **more: Any) -> JudgeResponse:
        return JudgeResponse(text=text, usage=Usage(5, 2, cached_tokens=4), **more)

    job, other = (await _batch(store)).id, (await _batch(store)).id
    assert await store.answers_of_lines(job, [0, 1]) == []
    await store.keep_answers([])
    await store.keep_answers(
        [
            KeptAnswer("k-0a", job, 0, answer("zero a", model="m", fingerprint="fp")),
            KeptAnswer("k-0b", job, 0, answer("zero b", finish_reason="length")),
            KeptAnswer("k-2", job, 2, answer("two", response_format="json_object")),
            KeptAnswer("k-o", other, 0, answer("other job")),
        ]
    )
    # a second replica paid for the same request: the answer kept first stays
    await store.keep_answers([KeptAnswer("k-0a", other, 1, answer("paid twice"))])

    found = dict(await store.answers_of_lines(job, [0, 1]))
    assert set(found) == {"k-0a", "k-0b"}
    first = found["k-0a"]
    assert (first.text, first.model, first.fingerprint) == ("zero a", "m", "fp")
    assert first.usage == Usage(5, 2, cached_tokens=4)
    assert first.cached and first.attempts == 0
    assert found["k-0b"].finish_reason == "length"
    assert [r.response_format for _, r in await store.answers_of_lines(job, [2])] == ["json_object"]
    assert await store.answers_of_lines(other, [1]) == []
    # more lines than one statement takes are read all the same
    many = [KeptAnswer(f"n-{seq}", job, seq, answer(str(seq))) for seq in range(3, 1203)]
    await store.keep_answers(many)
    assert len(await store.answers_of_lines(job, range(1203))) == 1203


# ---------------------------------------------------------------------- the memory store


async def test_a_named_memory_store_is_shared_by_its_handles_until_the_last_closes(
    tmp_path: Path,
) -> None:
    url = f"memory://{tmp_path.name}-shared"
    first, second = await open_job_store(url), await open_job_store(url)
    row = await _batch(first)
    assert (await second.get_job("t1", row.id)) == row  # one store, two handles
    private = await open_job_store("memory://")
    assert await private.list_jobs("t1", limit=10, before=None) == []
    await private.close()

    await first.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        await first.ping()
    assert await second.get_job("t1", row.id) == row  # the other handle keeps it
    await second.close()
    again = await open_job_store(url)
    try:
        assert await again.get_job("t1", row.id) is None  # nothing outlives the last handle
    finally:
        await again.close()


async def test_the_memory_store_refuses_a_database_schema() -> None:
    with pytest.raises(ConfigError, match=r"no schemas.*'jobs'"):
        await open_job_store("memory://x", schema="jobs")


def test_the_service_runs_on_the_memory_store_without_sqlalchemy(tmp_path: Path) -> None:
    """The domain (ingest, worker, results, status, the API over them) speaks only the store's
    interface: a batch is scored end to end on ``memory://`` and no SQL library is loaded."""
    code = f"""
import sys
import anyio, httpx
from pathlib import Path
from faithjudge.api.app import create_app
from faithjudge.settings import Settings

async def main():
    app = create_app(Settings(data_dir=Path({str(tmp_path)!r}), database_url="memory://probe"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://fj") as client:
            lines = Path({str(DEMO)!r}).read_bytes()
            ndjson = {{"content-type": "application/x-ndjson"}}
            sent = await client.post("/v1/jobs", content=lines, headers=ndjson)
            assert sent.status_code == 202, sent.text
            with anyio.fail_after(60):
                while (await client.get(f"/v1/jobs/{{sent.json()['id']}}")).json()[
                    "status"
                ] != "completed":
                    await anyio.sleep(0.05)
            results = await client.get(f"/v1/jobs/{{sent.json()['id']}}/results")
            print(len(results.content.splitlines()), (await client.get("/readyz")).status_code)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in {{"sqlalchemy", "alembic"}})
    print(loaded[:3])

anyio.run(main)
"""
    probe = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    expected = len([x for x in DEMO.read_bytes().splitlines() if x.strip()])
    assert probe.stdout.split("\n")[:2] == [f"{expected} 200", "[]"]
