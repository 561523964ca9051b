"""Several workers on one store: leases expire and are taken over; two replicas on one
PostgreSQL database drain a batch together without judging any line twice."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import orjson
import pytest
from faithjudge.jobs.interface import DONE, JobStore, open_job_store
from faithjudge.jobs.worker import done_line
from faithjudge.pipeline.request_lines import input_error_result
from faithjudge.settings import Settings

from tests import fixtures_service
from tests.fakes.judge_server import FakeJudgeConfig, run_fake_judge
from tests.fixtures_service import Backend, running_app, wait_for_status
from tests.integration.test_jobs_crash import _body

pytestmark = pytest.mark.anyio
store_backend = fixtures_service.store_backend
postgres_backend = fixtures_service.postgres_backend


async def _open(backend: Backend, tmp_path: Path) -> JobStore:
    settings = Settings(data_dir=tmp_path / "data", **backend.overrides)
    return await open_job_store(settings.job_store_url, schema=settings.database_schema)


async def test_expired_leases_are_taken_over_and_stale_results_are_dropped(
    store_backend: Backend, tmp_path: Path
) -> None:
    store = await _open(store_backend, tmp_path)
    try:
        row = await store.begin_job(tenant="t", name=None, idempotency_key=None)
        await store.add_lines(row.id, [(i, i + 1, "{}") for i in range(10)])
        await store.finish_ingest(row.id, total=10, rejections=[], body_sha256="x")

        dead = await store.claim("dead", job_ids=[row.id], limit=6, lease_s=0.5)
        assert [c.seq for c in dead] == list(range(6))
        live = await store.claim("live", job_ids=[row.id], limit=10, lease_s=30)
        assert [c.seq for c in live] == list(range(6, 10))  # held lines are not handed out
        await anyio.sleep(0.7)
        taken = await store.claim("live", job_ids=[row.id], limit=10, lease_s=30)
        assert [c.seq for c in taken] == list(range(6))

        def result(owner: str, seq: int) -> object:
            return done_line(row.id, seq, input_error_result(seq + 1, f"by {owner}"))

        # the dead worker wakes up and tries to write: its lease is gone, nothing is written
        await store.complete("dead", [result("dead", c.seq) for c in dead])  # type: ignore[misc]
        assert (await store.line_counts(row.id)).done == 0
        await store.complete("live", [result("live", s) for s in range(10)])  # type: ignore[misc]
        page = await store.results_page(row.id, start=0, limit=100)
        assert [seq for seq, _, _ in page] == list(range(10))
        assert all(state == DONE for _, state, _ in page)
        assert all("by live" in orjson.loads(text or "")["error"]["detail"] for *_, text in page)
        finished = await store.get_job("t", row.id)
        assert finished is not None and finished.status == "completed"
    finally:
        await store.close()


async def test_two_replicas_drain_one_batch_without_scoring_a_line_twice(
    postgres_backend: Backend, tmp_path: Path
) -> None:
    lines = 1500
    body = b"\n".join(_body().splitlines()[:lines]) + b"\n"
    with run_fake_judge(FakeJudgeConfig(latency_s=0.005)) as fake:

        def settings(name: str) -> Settings:
            return Settings(
                data_dir=tmp_path / name,
                judge="openai:fake-judge",
                openai_base_url=fake.base_url,
                openai_api_key="test-key",
                cache=False,
                concurrency=16,
                claim_size=50,
                **postgres_backend.overrides,
            )

        async with (
            running_app(settings("one")) as (_, first),
            running_app(settings("two")) as (_, second),
        ):
            accepted = await first.post(
                "/v1/jobs", content=body, headers={"content-type": "application/x-ndjson"}
            )
            assert accepted.status_code == 202
            job_id = accepted.json()["id"]
            status = await wait_for_status(second, job_id, within=120)
            results = (await second.get(f"/v1/jobs/{job_id}/results")).content
            scraped = [(await c.get("/metrics")).text for c in (first, second)]
        counters = fake.counters

    rows = [orjson.loads(x) for x in results.splitlines()]
    assert [r["line"] for r in rows] == list(range(1, lines + 1))
    assert len({r["item_id"] for r in rows}) == lines
    assert status["done"] == lines
    # each line was judged exactly once, by one replica or the other
    assert counters.total == lines
    assert set(counters.by_key.values()) == {1}
    shares = [
        float(re.search(r'faithjudge_lines_scored_total\{source="job"\} (\S+)', t).group(1))  # type: ignore[union-attr]
        for t in scraped
    ]
    assert sum(shares) == lines and min(shares) > 0, shares
