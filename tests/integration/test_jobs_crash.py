"""``kill -9`` of a real ``faithjudge serve`` mid-batch: after a restart the batch completes,
every line has exactly one result, and no line committed before the kill is judged again.

The response cache is off, so only the job store can prevent repeats. The fake judge counts
calls per (user message, metric); the user message of a confidence-tone call is the rendered
prompt of the line's CoT, so the test recomputes each line's key and checks its count.
"""

from __future__ import annotations

import functools
import hashlib
import os
import signal
import sys
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
from faithjudge.assets.prompts import PromptSet, load_prompt_set
from faithjudge.jobs.interface import DONE, open_job_store
from faithjudge.settings import Settings

from tests import fixtures_service
from tests.fakes.judge_server import FakeJudgeConfig, run_fake_judge
from tests.fixtures_service import Backend, free_port, serve_process

store_backend = fixtures_service.store_backend

# Enough lines that the kill lands with every call slot and a claim busy and most of the batch
# still to do, and that the lines committed before it (a fifth at least) far outnumber the
# allowance below, so a restart that judged them again could not pass as repeats of calls in
# flight; the store is read back over two pages (of 5,000). More lines prove nothing more.
LINES = 6_000
CONCURRENCY = 64
CLAIM_SIZE = 200
# lines a worker holds claimed but not committed: what a kill may force to be judged again
IN_FLIGHT_ALLOWANCE = 2 * CONCURRENCY + CLAIM_SIZE
QUESTION = "Is there a pleural effusion on the left? (yes or no)"
ROOT = Path(__file__).resolve().parents[2]


def _cot(i: int) -> str:
    return f"<think><step>Case {i}: the left angle is blunted.</step></think><answer>yes</answer>"


def _body(count: int = LINES, prefix: str = "crash") -> bytes:
    """``count`` one-metric request lines (confidence tone), item ids ``PREFIX-NNNNN``."""
    lines = (
        orjson.dumps(
            {
                "item_id": f"{prefix}-{i:05d}",
                "question": QUESTION,
                "ground_truth": "yes",
                "cot": _cot(i),
                "metrics": ["confidence_tone"],
            }
        )
        for i in range(count)
    )
    return b"\n".join(lines) + b"\n"


@functools.cache
def _prompts() -> PromptSet:
    """The default prompt set, loaded once: loading it costs fifty times a line's rendering."""
    return load_prompt_set()


def _judge_key(i: int) -> tuple[str, str]:
    """The fake judge's counter key of line ``i``'s confidence-tone call."""
    messages = _prompts().render("confidence_tone", cot=_cot(i))
    user = "\n".join(m.content for m in messages if m.role == "user")
    return hashlib.sha1(user.encode()).hexdigest(), "confidence_tone"


STALL_S = 60.0
"""How long the batch may make no progress at all before the test calls it stuck: it waits on
progress, not on a fixed deadline, so a slow or loaded machine only makes it slower."""


class _Stall:
    """True once the ``done`` count it is fed has not moved for ``STALL_S`` seconds."""

    def __init__(self) -> None:
        self._done = -1
        self._since = time.monotonic()

    def __call__(self, done: int) -> bool:
        if done != self._done:
            self._done, self._since = done, time.monotonic()
        return time.monotonic() - self._since > STALL_S


def _service(env: dict[str, str], port: int, log: Path) -> AbstractContextManager[Any]:
    command = [sys.executable, "-m", "faithjudge", "serve", "--port", str(port)]
    return serve_process(command, env, port, log, cwd=ROOT)


async def _committed_item_ids(backend: Backend, data_dir: Path, job_id: str) -> set[str]:
    """Item ids with a result in the store (read while no service runs)."""
    settings = Settings(data_dir=data_dir, **backend.overrides)
    store = await open_job_store(settings.job_store_url, schema=settings.database_schema)
    ids: set[str] = set()
    try:
        start = 0
        while True:
            page = await store.results_page(job_id, start=start, limit=5000)
            for _seq, state, result in page:
                if state == DONE and result is not None:
                    ids.add(orjson.loads(result)["item_id"])
            if len(page) < 5000:
                return ids
            start = page[-1][0] + 1
    finally:
        await store.close()


def test_kill_9_mid_batch_resumes_without_repeating_committed_lines(
    store_backend: Backend, tmp_path: Path
) -> None:
    assert LINES // 5 > IN_FLIGHT_ALLOWANCE, "the lines committed at the kill must outnumber it"
    data_dir = tmp_path / "data"
    port = free_port()
    log = tmp_path / "service.log"
    with run_fake_judge(FakeJudgeConfig(latency_s=0.0)) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAITHJUDGE_")}
        env.update(
            {
                "FAITHJUDGE_DATA_DIR": str(data_dir),
                "FAITHJUDGE_JUDGE": "openai:fake-judge",
                "FAITHJUDGE_OPENAI_BASE_URL": fake.base_url,
                "FAITHJUDGE_OPENAI_API_KEY": "test-key",
                "FAITHJUDGE_CACHE": "false",
                "FAITHJUDGE_CONCURRENCY": str(CONCURRENCY),
                "FAITHJUDGE_CLAIM_SIZE": str(CLAIM_SIZE),
                "FAITHJUDGE_LEASE_S": "3",
                "FAITHJUDGE_RETRY_BASE_S": "0",
                **store_backend.env,
            }
        )
        base = f"http://127.0.0.1:{port}"
        with _service(env, port, log) as first:
            accepted = httpx.post(
                f"{base}/v1/batches",
                content=_body(),
                headers={"content-type": "application/x-ndjson"},
                timeout=120,
            )
            assert accepted.status_code == 202, accepted.text
            job_id = accepted.json()["id"]
            assert accepted.json()["accepted"] == LINES
            stalled = _Stall()
            while True:
                done = httpx.get(f"{base}/v1/batches/{job_id}", timeout=10).json()["done"]
                if done >= LINES // 5:
                    break
                assert not stalled(done), f"no progress for {STALL_S} s before the kill"
                time.sleep(0.05)
            os.kill(first.pid, signal.SIGKILL)
            first.wait(10)

        committed = anyio.run(_committed_item_ids, store_backend, data_dir, job_id)
        calls_at_kill = fake.counters.total
        assert LINES // 5 <= len(committed) < LINES, "the kill must land mid-batch"

        with _service(env, port, log):
            stalled = _Stall()
            while True:
                status = httpx.get(f"{base}/v1/batches/{job_id}", timeout=10).json()
                if status["status"] == "completed":
                    break
                assert not stalled(status["done"]), f"no progress after restart: {status}"
                time.sleep(0.1)
            results = httpx.get(f"{base}/v1/batches/{job_id}/results", timeout=60)
        counters = fake.counters
        by_key = dict(counters.by_key)

    rows = [orjson.loads(x) for x in results.content.splitlines()]
    assert [r["line"] for r in rows] == list(range(1, LINES + 1))
    assert [r["item_id"] for r in rows] == [f"crash-{i:05d}" for i in range(LINES)]
    assert all(r["metrics"]["confidence_tone"]["status"] == "valid" for r in rows)
    assert status["done"] == LINES and status["counts"]["valid"] == LINES

    keys = {i: _judge_key(i) for i in range(LINES)}
    assert all(by_key.get(keys[i], 0) >= 1 for i in range(LINES))
    repeated_committed = [item for item in committed if by_key[keys[int(item.split("-")[1])]] != 1]
    assert repeated_committed == []
    repeats = counters.total - LINES
    assert 0 <= repeats <= IN_FLIGHT_ALLOWANCE, (counters.total, calls_at_kill)
    print(
        f"\n[{store_backend.name}] lines={LINES} committed_before_kill={len(committed)} "
        f"calls_at_kill={calls_at_kill} calls_total={counters.total} repeats={repeats}"
    )
