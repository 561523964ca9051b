"""Paid judge answers survive ``kill -9`` on the live route: the response cache commits an
answer at the end of the event-loop turn that received it, and the service keeps it in the job
store within moments too, so a restarted service, or another replica that takes the lines over,
asks the judge again only what was still unanswered when the process died.

The fake judge counts calls per (user message, metric); results are held back (a large commit
size and interval), so every line answered before the kill is known only to the cache.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.lowlevel
import httpx
import orjson
import pytest
from faithjudge.jobs.answer_cache import StoreAnswerCache
from faithjudge.jobs.interface import JobStore, open_job_store
from faithjudge.transport.base import JudgeResponse, Usage
from faithjudge.transport.cache import ResponseCache

from tests import fixtures_service
from tests.fakes.judge_server import FakeJudge, FakeJudgeConfig, run_fake_judge
from tests.fixtures_service import Backend, free_port, serve_process
from tests.integration.test_jobs_crash import STALL_S, _body, _judge_key, _Stall

store_backend = fixtures_service.store_backend
ROOT = Path(__file__).resolve().parents[2]

LINES = 1500
CONCURRENCY = 16
KILL_AFTER_CALLS = 500
NDJSON = {"content-type": "application/x-ndjson"}


def _answer(text: str) -> JudgeResponse:
    return JudgeResponse(
        text=text,
        model="m",
        usage=Usage(prompt_tokens=1, completion_tokens=1),
        fingerprint=None,
        attempts=1,
        cached=False,
    )


def _stored(path: Path) -> set[str]:
    with sqlite3.connect(path) as other:
        return {row[0] for row in other.execute("SELECT key FROM responses")}


def test_a_put_on_an_event_loop_is_committed_by_the_end_of_its_turn(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite3"

    async def main() -> tuple[set[str], set[str]]:
        with ResponseCache(path, batch_size=256) as cache:
            cache.put("a", _answer("one"))
            cache.put("b", _answer("two"))
            before = _stored(path)  # same turn: still one pending transaction
            await anyio.lowlevel.checkpoint()
            after = _stored(path)
            return before, after

    before, after = anyio.run(main)
    assert before == set() and after == {"a", "b"}


def test_without_an_event_loop_puts_are_committed_in_batches(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite3"
    with ResponseCache(path, batch_size=3) as cache:
        cache.put("a", _answer("one"))
        cache.put("b", _answer("two"))
        assert _stored(path) == set()
        cache.put("c", _answer("three"))
        assert _stored(path) == {"a", "b", "c"}


def test_max_delay_is_bounded(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_delay_s"):
        ResponseCache(tmp_path / "cache.sqlite3", max_delay_s=5.0)


async def _job(store: JobStore, tenant: str = "t") -> str:
    row = await store.begin_job(tenant=tenant, name=None, idempotency_key=None)
    await store.add_lines(row.id, [(seq, seq + 1, "{}") for seq in range(3)])
    await store.finish_ingest(row.id, total=3, rejections=[], body_sha256="0" * 64)
    return row.id


def test_answers_to_a_line_reach_the_store_and_another_process_reads_them_by_line(
    store_backend: Backend, tmp_path: Path
) -> None:
    from faithjudge.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", **store_backend.overrides)
    (tmp_path / "data").mkdir()

    async def main() -> None:
        store = await open_job_store(settings.job_store_url, schema=settings.database_schema)
        try:
            job = await _job(store)
            first = StoreAnswerCache(store, tmp_path / "one.sqlite3")
            async with anyio.create_task_group() as group:
                group.start_soon(first.run)
                await anyio.lowlevel.checkpoint()
                with StoreAnswerCache.scoring(job, 1):
                    first.put("paid", _answer("one"))
                first.put("unscoped", _answer("a live call"))  # no job line: local only
                # the writer runs on its own: watched from outside, it offers no event to wait on
                with anyio.fail_after(30):
                    while first.unsent:  # noqa: ASYNC110
                        await anyio.sleep(0.01)
                group.cancel_scope.cancel()
            assert first.get("paid") is not None and first.get("unscoped") is not None
            first.close()
            assert [k for k, _ in await store.answers_of_lines(job, [0, 1, 2])] == ["paid"]

            # another replica, with its own data directory, before scoring line 1 again
            second = StoreAnswerCache(store, tmp_path / "two.sqlite3")
            assert second.get("paid") is None
            assert await second.prefetch(job, [0, 2]) == 0
            assert await second.prefetch(job, [1]) == 1
            hit = second.get("paid")
            assert hit is not None and hit.text == "one" and hit.cached and hit.attempts == 0
            assert second.get("unscoped") is None
            second.close()
        finally:
            await store.close()

    anyio.run(main)


def test_a_failing_local_file_never_fails_a_call_and_the_store_still_keeps_its_answers(
    tmp_path: Path,
) -> None:
    """Two processes sharing a data directory contend for the cache file's lock: a put, read or
    flush that meets it is a miss, not an exception in the scoring of a line."""
    path = tmp_path / "cache.sqlite3"

    async def main() -> None:
        store = await open_job_store(f"sqlite:///{tmp_path}/jobs.sqlite3")
        try:
            job = await _job(store)
            cache = StoreAnswerCache(store, path, batch_size=1)
            cache._connection().execute("PRAGMA busy_timeout=0")  # fail at once, not in 5 s
            holder = sqlite3.connect(path, isolation_level=None)
            holder.execute("BEGIN EXCLUSIVE")  # the other process's write, never ending
            try:
                with StoreAnswerCache.scoring(job, 0):
                    cache.put("k", _answer("paid"))  # batch_size 1: commits in put, and fails
                cache.flush()
                hit = cache.get("k")
                assert hit is not None and hit.text == "paid"
                await cache.drain()
                assert cache.unsent == 0
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            cache.close()
            assert [k for k, _ in await store.answers_of_lines(job, [0])] == ["k"]
        finally:
            await store.close()

    anyio.run(main)


def _wait_until(progress: Callable[[], int | None], what: str) -> None:
    """Poll ``progress`` until it returns None (done); fail once it stops moving."""
    stalled = _Stall()
    while (value := progress()) is not None:
        assert not stalled(value), f"no progress for {STALL_S} s {what}"
        time.sleep(0.05)


# every line claimed at once and no result written before the kill: only the answers kept
# (in the response cache, in the job store) say what was answered
HELD_BACK = {
    "FAITHJUDGE_CLAIM_SIZE": str(LINES),
    "FAITHJUDGE_COMMIT_EVERY": str(10 * LINES),
    "FAITHJUDGE_COMMIT_INTERVAL_S": "3600",
}


def _service_env(judge_url: str, store: dict[str, str]) -> dict[str, str]:
    """A service's environment: the fake judge at ``judge_url``, ``CONCURRENCY`` calls in flight,
    leases short enough to be taken over soon, the job store of ``store``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAITHJUDGE_")}
    env.update(
        {
            "FAITHJUDGE_JUDGE": "openai:fake-judge",
            "FAITHJUDGE_OPENAI_BASE_URL": judge_url,
            "FAITHJUDGE_OPENAI_API_KEY": "test-key",
            "FAITHJUDGE_CONCURRENCY": str(CONCURRENCY),
            "FAITHJUDGE_RETRY_BASE_S": "0",
            "FAITHJUDGE_LEASE_S": "3",
            **store,
        }
    )
    return env


def _submit(base: str, prefix: str) -> str:
    """Upload ``LINES`` lines to the service at ``base``; the job's id."""
    accepted = httpx.post(
        f"{base}/v1/jobs", content=_body(LINES, prefix), headers=NDJSON, timeout=120
    )
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["accepted"] == LINES
    return str(accepted.json()["id"])


def _kill_mid_job(process: subprocess.Popen[bytes], fake: FakeJudge) -> int:
    """``kill -9`` of ``process`` once the judge was asked ``KILL_AFTER_CALLS`` times; the calls
    made by then."""
    counters = fake.counters
    _wait_until(
        lambda: None if counters.total >= KILL_AFTER_CALLS else counters.total, "before the kill"
    )
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)
    calls_at_kill = counters.total
    assert calls_at_kill < LINES, "the kill must land mid-job"
    return calls_at_kill


def _results_once_completed(base: str, job_id: str, what: str) -> bytes:
    def completed() -> int | None:
        status = httpx.get(f"{base}/v1/jobs/{job_id}", timeout=10).json()
        return None if status["status"] == "completed" else int(status["done"])

    _wait_until(completed, what)
    return httpx.get(f"{base}/v1/jobs/{job_id}/results", timeout=60).content


def _assert_each_line_judged_repeating_only_calls_in_flight(
    results: bytes, fake: FakeJudge, calls_at_kill: int, backend: str
) -> None:
    """Every line has its valid result and its judge call, and the calls asked again are at
    most those in flight at the kill."""
    rows = [orjson.loads(x) for x in results.splitlines()]
    assert [r["line"] for r in rows] == list(range(1, LINES + 1))
    assert all(r["metrics"]["confidence_tone"]["status"] == "valid" for r in rows)
    counters = fake.counters
    by_key = dict(counters.by_key)
    assert all(by_key.get(_judge_key(i), 0) >= 1 for i in range(LINES))
    assert counters.max_in_flight <= CONCURRENCY
    repeats = counters.total - LINES
    assert 0 <= repeats <= CONCURRENCY, (counters.total, calls_at_kill)
    print(
        f"\n[{backend}] lines={LINES} calls_at_kill={calls_at_kill} "
        f"calls_total={counters.total} repeats={repeats}"
    )


def test_kill_9_on_the_live_route_repeats_only_unanswered_requests(
    store_backend: Backend, tmp_path: Path
) -> None:
    """A request is asked again only if its answer had not arrived when the process died: at
    most the requests in flight then (the 256-answer batches of before lost up to 255 more)."""
    port = free_port()
    log = tmp_path / "service.log"
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "faithjudge", "serve", "--port", str(port)]
    with run_fake_judge(FakeJudgeConfig(latency_s=0.01)) as fake:
        env = _service_env(
            fake.base_url, {"FAITHJUDGE_DATA_DIR": str(tmp_path / "data"), **store_backend.env}
        )
        with serve_process(command, {**env, **HELD_BACK}, port, log, cwd=ROOT) as first:
            job_id = _submit(base, "paid")
            calls_at_kill = _kill_mid_job(first, fake)
        with serve_process(command, env, port, log, cwd=ROOT):
            results = _results_once_completed(base, job_id, "after the restart")
    _assert_each_line_judged_repeating_only_calls_in_flight(
        results, fake, calls_at_kill, store_backend.name
    )


def test_kill_9_of_a_replica_the_other_takes_over_repeating_only_its_calls_in_flight(
    store_backend: Backend, tmp_path: Path
) -> None:
    """Each replica has its own data directory (its own cache file): only the job store can
    tell the one that takes over what the dead one was answered, and only the requests still in
    flight at the kill are asked again. On PostgreSQL both replicas run at once; on SQLite,
    whose store one process owns, a replacement with a fresh data directory opens the same
    store file."""
    port_one, port_two = free_port(), free_port()
    command = [sys.executable, "-m", "faithjudge", "serve", "--port"]
    log = tmp_path / "service.log"
    shared = (
        dict(store_backend.env)
        if store_backend.name == "postgres"
        else {"FAITHJUDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.sqlite3'}"}
    )
    # A fast judge, as on the live route: a call keeps its place until its answer is in the job
    # store, so however starved of CPU the replica is, the answers it has not yet kept never
    # outnumber its calls in flight.
    with run_fake_judge(FakeJudgeConfig(latency_s=0.01)) as fake:
        env = _service_env(fake.base_url, shared)
        # the first replica claims every line and writes no result before the kill
        first_env = {**env, "FAITHJUDGE_DATA_DIR": str(tmp_path / "one"), **HELD_BACK}
        second_env = {**env, "FAITHJUDGE_DATA_DIR": str(tmp_path / "two")}
        with contextlib.ExitStack() as replicas:

            def start_second() -> None:
                replicas.enter_context(
                    serve_process([*command, str(port_two)], second_env, port_two, log, cwd=ROOT)
                )

            if store_backend.name == "postgres":
                start_second()  # up before the upload and the kill, as in a deployment
            one = replicas.enter_context(
                serve_process([*command, str(port_one)], first_env, port_one, log, cwd=ROOT)
            )
            job_id = _submit(f"http://127.0.0.1:{port_one}", "replica")
            calls_at_kill = _kill_mid_job(one, fake)
            if store_backend.name != "postgres":
                start_second()
            results = _results_once_completed(
                f"http://127.0.0.1:{port_two}", job_id, "after the kill"
            )
    _assert_each_line_judged_repeating_only_calls_in_flight(
        results, fake, calls_at_kill, store_backend.name
    )
