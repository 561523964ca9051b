"""A judge that restarts or goes away, as a user's would: a real server process, stopped with
kill -9 and started again on the same port, in the middle of a `faithjudge score` run and of a
service job.

A restart is waited out (every grade valid, exit 0); a judge gone for longer than
``FAITHJUDGE_JUDGE_OUTAGE_S`` stops the run with exit 3, its unanswered lines unwritten, and a
plain rerun once the judge is back scores them, asking again at most what was in flight.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import orjson
import pytest
from faithjudge.settings import Settings

from tests import fixtures_service
from tests.fixtures_service import Backend, free_port, running_app, wait_for_status

store_backend = fixtures_service.store_backend
ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
CONCURRENCY = 16


def _lines(count: int, first: int = 0) -> bytes:
    """``count`` distinct request lines (each CoT its own, so no answer is shared) whose
    questions the knowledge base holds, so that every grade can be valid."""
    demo = [orjson.loads(line) for line in DEMO.read_bytes().splitlines() if line.strip()]
    demo = [d for d in demo if "diaphragm" not in d["question"]]
    out = []
    for i in range(first, first + count):
        line = dict(demo[i % len(demo)])
        line["item_id"] = f"outage-{i}"
        line["cot"] = f"{line['cot']}\nReviewed as case {i}."
        out.append(orjson.dumps(line))
    return b"\n".join(out) + b"\n"


class _Judge:
    """The fake judge as its own process on a fixed port, logging every request it gets."""

    def __init__(self, tmp: Path, latency_ms: int) -> None:
        self.port = free_port()
        self.log = tmp / "judge_requests.log"
        self.latency_ms = latency_ms
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        command = [sys.executable, "-m", "tests.fakes.judge_server", "--port", str(self.port)]
        command += ["--latency-ms", str(self.latency_ms), "--request-log", str(self.log)]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE)
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip()  # it prints its URL once listening

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.process = None

    def requests(self) -> Counter[str]:
        if not self.log.exists():
            return Counter()
        return Counter(self.log.read_text().splitlines())


@contextmanager
def _judge(tmp: Path, latency_ms: int = 60) -> Iterator[_Judge]:
    judge = _Judge(tmp, latency_ms)
    judge.start()
    try:
        yield judge
    finally:
        if judge.process is not None:
            judge.kill()


def _score(judge: _Judge, tmp: Path, requests: Path, out: Path, **env: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "faithjudge", "score", str(requests), "-o", str(out)]
    command += ["--judge", "openai:fake", "--concurrency", str(CONCURRENCY), "--no-progress"]
    environment = {
        **os.environ,
        "OPENAI_BASE_URL": judge.base_url,
        "OPENAI_API_KEY": "sk-test",
        "FAITHJUDGE_DATA_DIR": str(tmp / "data"),
        **env,
    }
    return subprocess.Popen(
        command, cwd=tmp, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def _wait_for_lines(path: Path, count: int, process: subprocess.Popen, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not (path.exists() and path.read_bytes().count(b"\n") >= count):
        assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
        assert time.monotonic() < deadline, "the run wrote nothing"
        time.sleep(0.02)


def _stages(out: Path) -> Counter[str]:
    stages: Counter[str] = Counter()
    for raw in out.read_bytes().splitlines():
        for grade in orjson.loads(raw)["metrics"].values():
            failure = grade.get("failure")
            stages["valid" if failure is None else failure["stage"]] += 1
    return stages


def test_a_two_second_judge_restart_mid_run_costs_no_grade(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_lines(300))
    out = tmp_path / "results.jsonl"
    with _judge(tmp_path) as judge:
        run = _score(judge, tmp_path, requests, out)
        _wait_for_lines(out, 20, run)
        judge.kill()
        time.sleep(2)
        judge.start()
        output = run.communicate(timeout=300)[0].decode()
    assert run.returncode == 0, output
    assert out.read_bytes().count(b"\n") == 300
    assert _stages(out) == Counter({"valid": 900}), output
    said = " ".join(output.split())
    assert "the judge openai:fake stopped answering" in said and "no grade was failed" in said


def test_a_judge_gone_past_the_bound_stops_the_run_and_a_rerun_finishes_it(
    tmp_path: Path,
) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_lines(300))
    out = tmp_path / "results.jsonl"
    with _judge(tmp_path) as judge:
        run = _score(judge, tmp_path, requests, out, FAITHJUDGE_JUDGE_OUTAGE_S="3")
        _wait_for_lines(out, 20, run)
        judge.kill()
        output = run.communicate(timeout=120)[0].decode()
        assert run.returncode == 3, output
        said = " ".join(output.split())
        assert "openai:fake" in said and "connection refused" in said
        assert "FAITHJUDGE_JUDGE_OUTAGE_S=3" in said and "run the same command again" in said
        written = out.read_bytes().count(b"\n")
        assert 20 <= written < 300
        assert "transport" not in _stages(out)  # nothing was written as a failed grade
        before = judge.requests()

        judge.start()
        rerun = _score(judge, tmp_path, requests, out)
        output = rerun.communicate(timeout=300)[0].decode()
    assert rerun.returncode == 0, output
    assert out.read_bytes().count(b"\n") == 300
    assert _stages(out) == Counter({"valid": 900}), output
    # answers the first run received are in the cache: only the calls it had in flight when
    # the judge went away are asked again
    asked_again = sum(1 for key, n in judge.requests().items() if key in before and n > before[key])
    assert asked_again <= CONCURRENCY


async def _restart_during(judge: _Judge, client: httpx.AsyncClient, job_id: str) -> str:
    with anyio.fail_after(60):
        while (await client.get(f"/v1/jobs/{job_id}")).json()["done"] < 20:  # noqa: ASYNC110
            await anyio.sleep(0.02)
    judge.kill()
    with anyio.fail_after(30):  # the job says what it waits for, and so does /readyz
        while True:
            status = (await client.get(f"/v1/jobs/{job_id}")).json()
            ready = await client.get("/readyz")
            if "waiting for the judge" in (status.get("detail") or "") and ready.status_code == 503:
                break
            await anyio.sleep(0.05)
    assert "openai:fake" in ready.json()["checks"]["judge"]
    # a synchronous score is told at once rather than held
    single = await client.post("/v1/score", json=orjson.loads(_lines(1, first=10_000)))
    assert single.status_code == 503 and "Retry-After" in single.headers
    assert "waiting for the judge openai:fake" in single.json()["detail"]
    await anyio.sleep(2)
    judge.start()
    return str(status["detail"])


@pytest.mark.anyio
async def test_a_service_job_waits_for_a_restarting_judge_and_resumes(
    store_backend: Backend, tmp_path: Path
) -> None:
    with _judge(tmp_path) as judge:
        settings = Settings(
            data_dir=tmp_path / "data",
            judge="openai:fake",
            openai_base_url=judge.base_url,
            openai_api_key="sk-test",
            concurrency=CONCURRENCY,
            **store_backend.overrides,
        )
        async with running_app(settings) as (_, client):
            accepted = await client.post(
                "/v1/jobs",
                content=_lines(300),
                headers={"content-type": "application/x-ndjson"},
            )
            assert accepted.status_code == 202, accepted.text
            job_id = accepted.json()["id"]
            detail = await _restart_during(judge, client, job_id)
            status = await wait_for_status(client, job_id, within=120)
            results = (await client.get(f"/v1/jobs/{job_id}/results")).content
            assert (await client.get("/readyz")).status_code == 200
    assert "connection" in detail
    assert status["status"] == "completed"
    stages: Counter[str] = Counter()
    for raw in results.splitlines():
        for grade in orjson.loads(raw)["metrics"].values():
            stages["valid" if grade.get("failure") is None else grade["failure"]["stage"]] += 1
    assert stages == Counter({"valid": 900})


@pytest.fixture(autouse=True)
def _no_judge_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "FAITHJUDGE_JUDGE_OUTAGE_S"):
        monkeypatch.delenv(name, raising=False)
