"""The service on the batch route: jobs judged through the fake Files + Batches API.

A job's provider phase sends its judge requests as Batch API files before any line is scored;
the ledger and the answers live in the job store (SQLite and PostgreSQL), so the fault matrix
ends as on the CLI's batch route, a server killed with SIGKILL mid-phase resumes without
submitting any request twice, and a job cancelled through the API cancels its batches.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import anyio
import httpx
import pytest
from faithjudge.settings import Settings
from faithjudge_client.lines import ItemResult

from tests import fixtures_service
from tests.fakes.batch_server import FakeBatchConfig, run_fake_batches
from tests.fixtures_service import Backend, running_app, wait_for_status
from tests.integration.test_batch_route import check_fault_matrix
from tests.integration.test_fault_matrix import PERMANENT, TRANSIENT, _line

pytestmark = pytest.mark.anyio
store_backend = fixtures_service.store_backend
ROOT = Path(__file__).resolve().parents[2]
NDJSON = {"content-type": "application/x-ndjson"}


def _settings(base_url: str, tmp_path: Path, backend: Backend, **extra: object) -> Settings:
    values: dict[str, object] = {
        "judge": "openai-batch:fake-judge",
        "openai_base_url": base_url,
        "openai_api_key": "test-key",
        "timeout_s": 10,
        "retry_base_s": 0.0,
        "max_retries": 5,
        "batch_poll_s": 0.01,
        "data_dir": tmp_path / "data",
        **backend.overrides,
        **extra,
    }
    return Settings(**values)


def _body(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def _parsed(content: bytes) -> dict[str, ItemResult]:
    rows = [ItemResult.model_validate_json(x) for x in content.splitlines()]
    return {r.item_id: r for r in rows if r.item_id}


async def test_fault_matrix_through_the_services_batch_route(
    store_backend: Backend, tmp_path: Path
) -> None:
    lines = [_line("clean-1", "(one)"), _line("clean-2", "(two)")]
    lines += [_line(f"perm-{fault}", f"[[fake:{fault}]]") for fault in PERMANENT]
    lines += [_line(f"tran-{f}", f"[[fake:{f}*{n}]]") for f, n in TRANSIENT.items()]
    with run_fake_batches() as fake:
        settings = _settings(fake.base_url, tmp_path, store_backend)
        async with running_app(settings) as (_, client):
            accepted = (await client.post("/v1/jobs", content=_body(lines), headers=NDJSON)).json()
            status = await wait_for_status(client, accepted["id"], within=120)
            results = _parsed((await client.get(f"/v1/jobs/{accepted['id']}/results")).content)

            # each retryable failure: sent once and resubmitted five times in follow-up batches
            first = Counter(fake.counters.by_custom_id)
            assert first.most_common(1)[0][1] == 6
            # the same lines again: what was answered is not sent again, while a failure for
            # good belongs to the job that met it, so the next job asks for it again
            again = (await client.post("/v1/jobs", content=_body(lines), headers=NDJSON)).json()
            await wait_for_status(client, again["id"], within=60)
            repeat = _parsed((await client.get(f"/v1/jobs/{again['id']}/results")).content)
            resent = fake.counters.by_custom_id - first
            failed_for_good = {key for key, n in first.items() if n == 6}
            assert failed_for_good and set(resent) == failed_for_good
        assert fake.counters.chat_calls == 0

    assert status["done"] == len(lines) and "Batch API" in (status["detail"] or "")
    assert "failed for good" in status["detail"]
    check_fault_matrix(results)
    same = lambda r: {k: (m.status, m.score) for k, m in r.metrics.items()}  # noqa: E731
    assert {k: same(v) for k, v in repeat.items()} == {k: same(v) for k, v in results.items()}


async def test_workers_read_the_answers_from_the_store_not_a_cache(tmp_path: Path) -> None:
    """With the response cache off, every answer a worker verifies comes from the job store,
    as it does for a replica that did not run the provider phase."""
    lines = [_line(f"s-{i}", f"({i})") for i in range(3)]
    with run_fake_batches() as fake:
        settings = _settings(fake.base_url, tmp_path, Backend("sqlite", {}), cache=False)
        async with running_app(settings) as (_, client):
            accepted = (await client.post("/v1/jobs", content=_body(lines), headers=NDJSON)).json()
            await wait_for_status(client, accepted["id"], within=60)
            results = _parsed((await client.get(f"/v1/jobs/{accepted['id']}/results")).content)
        assert fake.counters.chat_calls == 0 and fake.counters.batches == 1
    assert not (tmp_path / "data" / "cache.sqlite3").exists()
    assert all(m.status == "valid" for r in results.values() for m in r.metrics.values())


async def test_a_jobs_tokens_are_counted_once_and_priced_at_batch_prices(
    store_backend: Backend, tmp_path: Path
) -> None:
    """The status adds up the lines' tokens, which the answers of the job's provider batches
    carry, prompt-cache part included, through the store (no response cache); the phase's
    summary counts the same answers from the ledger. Both price them alike."""
    lines = [_line(f"t-{i}", f"({i})") for i in range(4)]
    prices = {"price_input_per_mtok": 2, "price_output_per_mtok": 8,
              "price_cached_input_per_mtok": 0.5}  # fmt: skip
    with run_fake_batches(FakeBatchConfig(cached_share=0.5)) as fake:
        settings = _settings(fake.base_url, tmp_path, store_backend, cache=False, **prices)
        async with running_app(settings) as (_, client):
            accepted = (await client.post("/v1/jobs", content=_body(lines), headers=NDJSON)).json()
            status = await wait_for_status(client, accepted["id"], within=60)
            results = _parsed((await client.get(f"/v1/jobs/{accepted['id']}/results")).content)
        paid = fake.counters
    tokens = [r.provenance.tokens for r in results.values() if r.provenance is not None]
    assert len(tokens) == len(lines)
    prompt, completion = sum(t.prompt for t in tokens), sum(t.completion for t in tokens)
    cached = sum(t.cached for t in tokens)
    assert status["tokens"] == {"prompt": prompt, "completion": completion, "cached": cached}
    # every request was answered once and each answer read by one line: counted once
    assert 0 < cached == paid.cached_tokens < prompt == paid.prompt_tokens
    assert completion == paid.completion_tokens
    cost = settings.token_cost(prompt, completion, cached, batch=True)
    assert cost is not None and status["cost_usd"] == pytest.approx(cost, abs=1e-6)
    live = ((prompt - cached) * 2 + cached * 0.5 + completion * 8) / 1e6
    assert cost == pytest.approx(live * settings.batch_discount)
    detail = status["detail"] or ""
    assert f"{prompt:,} prompt + {completion:,} completion tokens, ${cost:,.4f}" in detail
    assert f"{cached:,} of the prompt tokens cached by the provider" in detail


async def test_score_endpoint_points_to_batches_on_the_batch_route(tmp_path: Path) -> None:
    with run_fake_batches() as fake:
        settings = _settings(fake.base_url, tmp_path, Backend("sqlite", {}))
        async with running_app(settings) as (_, client):
            response = await client.post(
                "/v1/score",
                content=_line("one", "(x)"),
                headers={"content-type": "application/json"},
            )
        assert fake.counters.chat_calls == 0 and fake.counters.batches == 0
    assert response.status_code == 409
    assert "POST /v1/jobs" in response.json()["detail"]


async def test_cancelling_a_job_cancels_its_provider_batches(tmp_path: Path) -> None:
    lines = [_line(f"c-{i}", f"({i})") for i in range(4)]
    # every provider state lasts seconds, so the job is cancelled while its batch runs
    with run_fake_batches(FakeBatchConfig(step_s=3.0)) as fake:
        settings = _settings(fake.base_url, tmp_path, Backend("sqlite", {}))
        async with running_app(settings) as (_, client):
            body = _body(lines)
            accepted = (await client.post("/v1/jobs", content=body, headers=NDJSON)).json()
            with anyio.fail_after(30):  # the provider phase has submitted its batch
                while not fake.counters.batches:  # noqa: ASYNC110 - set by the fake's thread
                    await anyio.sleep(0.05)
            with anyio.fail_after(30):  # and says so in the job's status
                while True:
                    shown = await client.get(f"/v1/jobs/{accepted['id']}")
                    if "batches 1 " in (shown.json()["detail"] or ""):
                        break
                    await anyio.sleep(0.05)
            cancelled = await client.delete(f"/v1/jobs/{accepted['id']}")
            assert cancelled.status_code == 200, cancelled.text
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                states = [b["status"] for b in fake.app.batches.values()]
                if states and all(s == "cancelled" for s in states):
                    break
                await anyio.sleep(0.05)
            assert states == ["cancelled"]
            status = (await client.get(f"/v1/jobs/{accepted['id']}")).json()
    assert status["status"] == "cancelled" and status["done"] == 0
    # the detail follows the job: the batches are no longer validating or in progress
    assert status["detail"].startswith("cancelled") and "batches 1 " not in status["detail"]
    assert fake.counters.chat_calls == 0


async def test_a_dead_provider_fails_the_job_naming_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faithjudge.jobs import provider_phase

    monkeypatch.setattr(provider_phase, "_retry_delay", lambda tries: 0.01)
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    settings = _settings(dead, tmp_path, Backend("sqlite", {}))
    async with running_app(settings) as (_, client):
        accepted = (
            await client.post("/v1/jobs", content=_body([_line("d", "(d)")]), headers=NDJSON)
        ).json()
        status = await wait_for_status(client, accepted["id"], ("failed",), within=60)
        # as a dead live judge: not ready, naming the judge's provider and why
        ready = await client.get("/readyz")
    assert status["done"] == 0
    assert "Batch API" in status["detail"] and "gave up after 3 tries" in status["detail"]
    assert "connect" in status["detail"].lower()
    assert ready.status_code == 503, ready.text
    judge = ready.json()["checks"]["judge"]
    assert "Batch API provider of the judge" in judge and "connect" in judge.lower()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(base_url: str, tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAITHJUDGE_", "OPENAI_"))}
    env.update(
        FAITHJUDGE_JUDGE="openai-batch:fake-judge",
        FAITHJUDGE_OPENAI_BASE_URL=base_url,
        FAITHJUDGE_OPENAI_API_KEY="test-key",
        FAITHJUDGE_DATA_DIR=str(tmp_path / "data"),
        FAITHJUDGE_BATCH_POLL_S="0.05",
        PYTHONPATH=str(ROOT),
    )
    command = [sys.executable, "-m", "faithjudge.cli.main", "serve", "--port", str(port)]
    return subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("the service did not start")


def test_kill_9_mid_phase_then_restart_never_submits_twice(tmp_path: Path) -> None:
    lines = [_line(f"k-{i}", f"({i})") for i in range(6)]
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with run_fake_batches(FakeBatchConfig(step_s=1.0)) as fake:
        first = _serve(fake.base_url, tmp_path, port)
        try:
            _wait_ready(url)
            accepted = httpx.post(
                f"{url}/v1/jobs", content=_body(lines), headers=NDJSON, timeout=10
            ).json()
            deadline = time.monotonic() + 60
            while fake.counters.batches == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert fake.counters.batches == 1, "the first server never submitted its batch"
            time.sleep(0.3)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()

        second = _serve(fake.base_url, tmp_path, port)
        try:
            _wait_ready(url)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                status = httpx.get(f"{url}/v1/jobs/{accepted['id']}", timeout=10).json()
                if status["status"] == "completed":
                    break
                time.sleep(0.1)
            assert status["status"] == "completed", status
            results = httpx.get(f"{url}/v1/jobs/{accepted['id']}/results", timeout=10)
        finally:
            second.terminate()
            second.wait(timeout=30)
        assert fake.counters.batches == 1 and fake.counters.files == 1
        assert max(fake.counters.by_custom_id.values()) == 1
        assert len(fake.counters.by_custom_id) == 18
        assert fake.counters.chat_calls == 0
    parsed = _parsed(results.content)
    assert len(parsed) == 6
    assert all(m.status == "valid" for r in parsed.values() for m in r.metrics.values())
