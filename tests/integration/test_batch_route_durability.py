"""The batch route loses nothing: store outages, failed provider batches, cancels, restarts.

Each case runs on SQLite and on PostgreSQL (against the fake Files + Batches API):

- an outage of the job store during the provider phase and during scoring is a pause: every
  line is answered, nothing is recorded as a failure, and no request is submitted twice;
- a provider batch that ends ``failed`` is followed up and its requests answered; a request
  that failed for good in one job is asked again by a later job, and answers are reused only
  within a tenant;
- a cancel stored by the API ends the job's provider batches even when the service is killed
  with SIGKILL before it acted, once a new process runs; a job that fails ends them too;
- the phase's summary counts every process that worked on the job: after three restarts its
  batches, tokens and cost equal the ledger's totals and what the provider billed.

Outages: on PostgreSQL the store is reached through ``tests/fakes/tcp_proxy.py``, stopped and
started again; on SQLite an engine hook makes every statement of the store fail with
``sqlite3.OperationalError`` ("disk I/O error") while the outage lasts, which the store reports
as ``StoreUnavailable`` exactly as a lost connection.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from faithjudge.api.keys import create_key
from faithjudge.jobs.interface import LedgerTotals, open_job_store
from faithjudge.jobs.sql.ledger import JobLedger
from faithjudge.settings import Settings
from faithjudge_client.lines import ItemResult
from sqlalchemy import event

from tests import fixtures_service
from tests.fakes.batch_server import FakeBatchConfig, FakeBatches, run_fake_batches
from tests.fakes.tcp_proxy import TcpProxy, tcp_proxy
from tests.fixtures_service import Backend, free_port, running_app, serve_process
from tests.integration.test_batch_route_service import _body
from tests.integration.test_batch_route_service import _settings as route_settings
from tests.integration.test_fault_matrix import _line

pytestmark = pytest.mark.anyio
store_backend = fixtures_service.store_backend
ROOT = Path(__file__).resolve().parents[2]
NDJSON = {"content-type": "application/x-ndjson"}


def _settings(fake: FakeBatches, tmp_path: Path, backend: Backend, **extra: Any) -> Settings:
    return route_settings(fake.base_url, tmp_path, backend, **{"batch_poll_s": 0.05, **extra})


def _lines(prefix: str, n: int) -> list[str]:
    return [_line(f"{prefix}-{i}", f"({prefix} {i})") for i in range(n)]


async def _status(
    client: httpx.AsyncClient, job_id: str, headers: dict[str, str] | None = None
) -> dict[str, Any] | None:
    """The job's status, or None while the store is down (503)."""
    response = await client.get(f"/v1/jobs/{job_id}", headers=headers)
    if response.status_code == 503:
        return None
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


async def _finished(
    client: httpx.AsyncClient,
    job_id: str,
    *,
    within: float = 90,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    with anyio.fail_after(within):
        while True:
            status = await _status(client, job_id, headers)
            if status is not None and status["status"] in ("completed", "failed", "cancelled"):
                return status
            await anyio.sleep(0.05)


async def _until(check: Callable[[], bool], *, within: float = 60) -> None:
    with anyio.fail_after(within):
        while not check():  # noqa: ASYNC110 - set by the fake's thread or another task
            await anyio.sleep(0.02)


async def _results(
    client: httpx.AsyncClient, job_id: str, headers: dict[str, str] | None = None
) -> list[ItemResult]:
    response = await client.get(f"/v1/jobs/{job_id}/results", headers=headers)
    response.raise_for_status()
    return [ItemResult.model_validate_json(x) for x in response.content.splitlines() if x]


def _all_valid(results: list[ItemResult]) -> bool:
    return all(r.error is None and m.status == "valid" for r in results for m in r.metrics.values())


# --------------------------------------------------------------------------- outages


class Outage:
    """Takes the job store away for a while: the proxy stopped (PostgreSQL), or every
    statement of the store's engines failing as a lost disk does (SQLite)."""

    def __init__(self, backend: Backend, proxy: TcpProxy | None) -> None:
        self.backend = backend
        self._proxy = proxy
        self._down = False
        self.outages = 0

    def attach(self, store: Any) -> None:
        if self._proxy is not None:
            return

        def refuse(*_args: object, **_kwargs: object) -> None:
            if self._down:
                raise sqlite3.OperationalError("disk I/O error (the test's outage)")

        for engine in {store._writer, store._reader}:
            event.listen(engine.sync_engine, "before_cursor_execute", refuse)

    def begin(self, seconds: float) -> None:
        self.outages += 1
        if self._proxy is not None:
            self._proxy.stop()
        else:
            self._down = True
        threading.Timer(seconds, self._end).start()

    def _end(self) -> None:
        if self._proxy is not None:
            self._proxy.start()
        else:
            self._down = False


@pytest.fixture
def outage(store_backend: Backend) -> Iterator[Outage]:
    if store_backend.name == "sqlite":
        yield Outage(store_backend, None)
        return
    url = urlsplit(store_backend.overrides["database_url"])
    with tcp_proxy(url.hostname or "127.0.0.1", url.port or 5432) as proxy:
        proxied = url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}").geturl()
        backend = Backend("postgres", {**store_backend.overrides, "database_url": proxied})
        yield Outage(backend, proxy)


def _traced(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records if r.exc_info and r.name.startswith("faithjudge")]


async def test_store_outages_in_the_phase_and_in_scoring_lose_no_line(
    outage: Outage, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Without the response cache every answer is read from the store, as on a replica that
    did not run the phase: the outage during scoring hits those lookups too."""
    lines = _lines("blip", 12)
    with run_fake_batches(FakeBatchConfig(step_s=0.5)) as fake:
        settings = _settings(fake, tmp_path, outage.backend, cache=False, commit_every=4)
        async with running_app(settings) as (app, client):
            store = app.state.faithjudge.store
            outage.attach(store)
            answer_of = store.answer_of

            async def first_lookup_starts_an_outage(key: str, **kwargs: Any) -> Any:
                if outage.outages == 1:
                    outage.begin(3.0)
                return await answer_of(key, **kwargs)

            store.answer_of = first_lookup_starts_an_outage
            accepted = await client.post("/v1/jobs", content=_body(lines), headers=NDJSON)
            assert accepted.status_code == 202, accepted.text
            job_id = accepted.json()["id"]
            await _until(lambda: fake.counters.batches >= 1)
            outage.begin(3.0)  # the phase is polling its batch
            status = await _finished(client, job_id)
            results = await _results(client, job_id)
        counters = fake.counters

    assert outage.outages == 2, "the second outage never met a scoring lookup"
    assert status["status"] == "completed", status
    assert status["done"] == len(lines) and status["counts"]["error"] == 0, status
    assert len(results) == len(lines) and _all_valid(results)
    assert "0 failed for good" in (status["detail"] or "")
    # every request went out once: no batch was created twice, none was given up
    assert counters.batches == 1 and max(counters.by_custom_id.values()) == 1
    assert counters.chat_calls == 0
    assert _traced(caplog.records) == []


# --------------------------------------------------------------------------- failed batches


async def test_a_failed_provider_batch_is_followed_up_and_answered(
    store_backend: Backend, tmp_path: Path
) -> None:
    lines = _lines("fail", 4)
    with run_fake_batches(FakeBatchConfig(fail_batches=1)) as fake:
        settings = _settings(fake, tmp_path, store_backend)
        async with running_app(settings) as (_, client):
            accepted = (await client.post("/v1/jobs", content=_body(lines), headers=NDJSON)).json()
            status = await _finished(client, accepted["id"])
            results = await _results(client, accepted["id"])
        counters = fake.counters
    assert status["status"] == "completed" and _all_valid(results)
    assert [b["status"] for b in fake.app.batches.values()] == ["failed", "completed"]
    # the failed batch ran nothing: each request was sent once more, in the follow-up, and
    # run once there
    requests = len(counters.by_custom_id)
    assert counters.file_lines == [requests, requests]
    assert set(counters.by_custom_id.values()) == {1}


@pytest.mark.parametrize("cache", [False, True], ids=["store-only", "with-cache"])
async def test_a_failure_for_good_belongs_to_its_job_and_answers_to_their_tenant(
    store_backend: Backend, tmp_path: Path, cache: bool
) -> None:
    """Without the response cache what a job reuses comes from the store alone; with it, the
    cache keeps each tenant's answers to that tenant too."""
    data_dir = tmp_path / "data"
    alpha = {"Authorization": f"Bearer {create_key(data_dir / 'api_keys.json', 'alpha')}"}
    beta = {"Authorization": f"Bearer {create_key(data_dir / 'api_keys.json', 'beta')}"}
    lines = _lines("again", 3)
    body = _body(lines)
    with run_fake_batches(FakeBatchConfig(fail_batches=99)) as fake:
        settings = _settings(fake, tmp_path, store_backend, max_retries=1, cache=cache)
        async with running_app(settings) as (_, client):

            async def job(headers: dict[str, str]) -> tuple[dict[str, Any], list[ItemResult]]:
                posted = await client.post("/v1/jobs", content=body, headers={**NDJSON, **headers})
                assert posted.status_code == 202, posted.text
                job_id = posted.json()["id"]
                status = await _finished(client, job_id, headers=headers)
                return status, await _results(client, job_id, headers)

            def submitted() -> int:  # request lines uploaded, whatever their batch became
                return sum(fake.counters.file_lines)

            # every batch fails: after the first try and one follow-up, the requests fail for
            # good, with the provider's reason
            failed_status, failed = await job(alpha)
            requests = fake.counters.file_lines[0]
            assert fake.counters.file_lines == [requests, requests]
            fake.config.fail_batches = 0  # the provider is well again

            # a later job of the same tenant asks again, and gets its answers
            before = submitted()
            healthy_status, healthy = await job(alpha)
            assert submitted() - before == requests

            # the same tenant again: answered already, nothing is sent
            before = submitted()
            reused_status, reused = await job(alpha)
            assert submitted() == before

            # another tenant is not answered from the first one's jobs: it asks for itself
            other_status, other = await job(beta)
            assert submitted() - before == requests
        assert fake.counters.chat_calls == 0

    assert failed_status["status"] == "completed"
    failures = [m.failure for r in failed for m in r.metrics.values()]
    assert failures and all(f is not None and f.stage == "transport" for f in failures)
    assert all(f is not None and "fake validation failure" in f.detail for f in failures)
    assert f"{requests} failed for good" in (failed_status["detail"] or "")
    # the CLI's way to ask again is not the service's
    assert all(f is not None and "--retry-failed" not in f.detail for f in failures)
    for status, results in ((healthy_status, healthy), (other_status, other)):
        assert status["status"] == "completed" and _all_valid(results)
        assert "0 failed for good" in (status["detail"] or "")
    assert _all_valid(reused)
    # the job served from earlier answers pays nothing and says what it reused: the tokens
    # the job that paid for them was billed
    paid = re.search(r"([\d,]+) prompt \+ ([\d,]+) completion tokens", healthy_status["detail"])
    assert paid is not None and paid[1] != "0"
    detail = reused_status["detail"] or ""
    assert "0 batch(es) created, 0 prompt + 0 completion tokens" in detail
    assert f"{requests} answer(s) reused" in detail
    assert f"{paid[1]} prompt + {paid[2]} completion tokens reused, not paid again" in detail


# --------------------------------------------------------------------------- cancels


def _service_env(
    fake: FakeBatches, data_dir: Path, backend: Backend, poll_s: float
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAITHJUDGE_", "OPENAI_"))}
    env.update(
        FAITHJUDGE_JUDGE="openai-batch:fake-judge",
        FAITHJUDGE_OPENAI_BASE_URL=fake.base_url,
        FAITHJUDGE_OPENAI_API_KEY="test-key",
        FAITHJUDGE_DATA_DIR=str(data_dir),
        FAITHJUDGE_BATCH_POLL_S=str(poll_s),
        PYTHONPATH=str(ROOT),
        **backend.env,
    )
    return env


def test_a_cancel_survives_kill_9_and_the_next_process_cancels_the_batches(
    store_backend: Backend, tmp_path: Path
) -> None:
    """The first process polls every 60 s, so it is killed before it could act on the cancel;
    the next one, polling every 0.2 s, cancels the provider batches. The fake moves a batch on
    only when it is retrieved, so it cannot finish while no process looks at it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "service.log"
    command = [sys.executable, "-m", "faithjudge", "serve", "--port", str(port)]
    with run_fake_batches(FakeBatchConfig(step_s=2.0, max_file_lines=10)) as fake:
        data_dir = tmp_path / "data"
        slow = _service_env(fake, data_dir, store_backend, poll_s=60)
        slow["FAITHJUDGE_BATCH_FILE_MAX_REQUESTS"] = "10"  # several parts, several batches
        with serve_process(command, slow, port, log, cwd=ROOT) as first:
            accepted = httpx.post(
                f"{url}/v1/jobs", content=_body(_lines("cancel", 4)), headers=NDJSON
            )
            assert accepted.status_code == 202, accepted.text
            job_id = accepted.json()["id"]
            anyio.run(_until, lambda: fake.counters.batches >= 2)
            cancelled = httpx.delete(f"{url}/v1/jobs/{job_id}")
            assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
            os.kill(first.pid, signal.SIGKILL)
            first.wait(10)
        assert fake.counters.cancels == 0, "the first process acted on the cancel"
        created = fake.counters.batches

        quick = _service_env(fake, data_dir, store_backend, poll_s=0.2)
        with serve_process(command, quick, port, log, cwd=ROOT):

            def all_cancelled() -> bool:
                return all(b["status"] == "cancelled" for b in fake.app.batches.values())

            anyio.run(_until, all_cancelled)
            status = httpx.get(f"{url}/v1/jobs/{job_id}").json()
        assert fake.counters.batches == created  # nothing was submitted after the cancel
        assert fake.counters.lines == 0  # no request was run, so none was billed
    assert status["status"] == "cancelled" and status["done"] == 0


async def test_a_job_that_fails_cancels_its_provider_batches(
    store_backend: Backend, tmp_path: Path
) -> None:
    with run_fake_batches(FakeBatchConfig(step_s=30.0)) as fake:
        settings = _settings(fake, tmp_path, store_backend)
        async with running_app(settings) as (app, client):
            accepted = (
                await client.post("/v1/jobs", content=_body(_lines("f", 3)), headers=NDJSON)
            ).json()
            await _until(lambda: fake.counters.batches >= 1)
            # as the phase does when it gives up on the provider, or an operator would
            await app.state.faithjudge.store.fail_job(accepted["id"], "given up")
            await _until(lambda: fake.counters.cancels >= 1)
            status = await _status(client, accepted["id"])
    assert [b["status"] for b in fake.app.batches.values()] == ["cancelling"]
    assert status is not None and status["status"] == "failed"


# --------------------------------------------------------------------------- counts


_SUMMARY = re.compile(
    r"(?P<batches>[\d,]+) batch\(es\) created, (?P<prompt>[\d,]+) prompt \+ "
    r"(?P<completion>[\d,]+) completion tokens, \$(?P<cost>[\d,.]+) at batch prices"
)


async def _ledger_totals(backend: Backend, data_dir: Path, job_id: str) -> LedgerTotals:
    settings = Settings(data_dir=data_dir, **backend.overrides)
    store = await open_job_store(settings.job_store_url, schema=settings.database_schema)
    try:
        return await store.provider_ledger(job_id, lambda sources: []).totals()
    finally:
        await store.close()


async def test_the_summary_counts_every_process_that_worked_on_the_job(
    store_backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three restarts, each after a part was collected: four processes share the phase."""
    collected = 0
    finish_part = JobLedger.finish_part

    async def counted(self: JobLedger, *args: Any, **kwargs: Any) -> None:
        nonlocal collected
        await finish_part(self, *args, **kwargs)
        collected += 1

    monkeypatch.setattr(JobLedger, "finish_part", counted)
    prices = {"price_input_per_mtok": 2.5, "price_output_per_mtok": 10.0, "batch_discount": 0.5}
    config = FakeBatchConfig(step_s=0.05, stagger_s=0.4)
    with run_fake_batches(config) as fake:
        settings = _settings(fake, tmp_path, store_backend, batch_file_max_requests=3, **prices)
        job_id = ""
        for restart in range(4):
            async with running_app(settings) as (_, client):
                if not job_id:
                    body = _body(_lines("tok", 4))
                    job_id = (await client.post("/v1/jobs", content=body, headers=NDJSON)).json()[
                        "id"
                    ]
                if restart < 3:
                    seen = collected

                    def moved_on(seen: int = seen) -> bool:
                        # a part collected by this process (or none left to collect)
                        return collected > seen or 0 < fake.counters.batches <= collected

                    await _until(moved_on)
                else:
                    status = await _finished(client, job_id)
        billed = (fake.counters.prompt_tokens, fake.counters.completion_tokens)
        created = fake.counters.batches
    totals = await _ledger_totals(store_backend, tmp_path / "data", job_id)

    assert status["status"] == "completed"
    found = _SUMMARY.search(status["detail"] or "")
    assert found is not None, status["detail"]
    summary = (
        int(found["batches"].replace(",", "")),
        int(found["prompt"].replace(",", "")),
        int(found["completion"].replace(",", "")),
    )
    assert created >= 4 and billed[0] > 0
    assert summary == (totals.batches_created, totals.prompt_tokens, totals.completion_tokens)
    assert summary == (created, *billed)
    cost = (billed[0] * 2.5 + billed[1] * 10.0) / 1e6 * 0.5
    assert found["cost"] == f"{cost:,.4f}"


# --------------------------------------------------------------------------- file modes


async def test_the_services_batch_route_files_are_private_whatever_the_umask(
    store_backend: Backend, tmp_path: Path
) -> None:
    """A batch-route job run by the service under umask 000, in a data directory that already
    existed world-writable: every file it leaves there (the job store and its WAL/SHM files on
    SQLite, the response cache) is 0600 and every folder 0700. The data directory keeps the mode
    it had: it is the user's (it may be their working directory)."""
    data = tmp_path / "data"
    data.mkdir()
    os.chmod(data, 0o777)
    old = os.umask(0)
    try:
        with run_fake_batches() as fake:
            settings = _settings(fake, tmp_path, store_backend)
            async with running_app(settings) as (_, client):
                posted = await client.post(
                    "/v1/jobs", content=_body(_lines("mode", 3)), headers=NDJSON
                )
                assert posted.status_code == 202, posted.text
                status = await _finished(client, posted.json()["id"])
                assert status["status"] == "completed", status
                found = sorted(data.rglob("*"))
                modes = {p.relative_to(data).as_posix(): p.stat().st_mode & 0o777 for p in found}
    finally:
        os.umask(old)
    assert found, "the service wrote nothing under its data directory"
    loose = {n: oct(m) for n, m in modes.items() if m != (0o700 if (data / n).is_dir() else 0o600)}
    assert not loose, loose
