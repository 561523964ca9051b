"""Limits that hold under load: the active-batch limit against concurrent uploads, slow uploads
timed out with their slot freed, a bounded 202 answer and server memory whatever the number of
rejected lines (at upload, on ``/results`` and ``/report``), rejections read in pages and merged
in line order at every offset, a dead judge seen by ``/readyz``, and cancelled lines counted in
the status."""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
from faithjudge.api.app import create_app
from faithjudge.jobs import ingest, results
from faithjudge.jobs.ingest import LISTED_REJECTIONS
from faithjudge.jobs.judge_health import DOWN_AFTER
from faithjudge.settings import Settings

from tests import fixtures_service
from tests.fakes.judge_server import FakeJudgeConfig, run_fake_judge
from tests.fixtures_service import (
    Backend,
    free_port,
    running_app,
    serve_in_thread,
    serve_process,
    wait_for_status,
)
from tests.integration.test_api_jobs import NDJSON, demo_lines, settings_for

store_backend = fixtures_service.store_backend
ROOT = Path(__file__).resolve().parents[2]


def _invalid(i: int, question: str = "Is there a pleural effusion?") -> bytes:
    """A request line without its ground truth: rejected at upload."""
    return orjson.dumps({"item_id": f"bad-{i:06d}", "question": question, "cot": "yes"})


# ---------------------------------------------------------------- the active-batch limit


@pytest.mark.anyio
async def test_ten_concurrent_uploads_at_a_limit_of_two_accept_exactly_two(
    store_backend: Backend, tmp_path: Path
) -> None:
    settings = settings_for(store_backend, tmp_path, max_active_jobs=2, workers=False)
    body = b"\n".join(demo_lines(3))
    codes: list[int] = []
    async with running_app(settings) as (_, client):

        async def upload() -> None:
            response = await client.post("/v1/jobs", content=body, headers=NDJSON)
            codes.append(response.status_code)
            if response.status_code == 429:
                assert response.headers["content-type"] == "application/problem+json"
                assert "2 unfinished jobs" in response.json()["detail"]

        async with anyio.create_task_group() as group:
            for _ in range(10):
                group.start_soon(upload)
        listed = (await client.get("/v1/jobs")).json()["items"]
    assert sorted(codes) == [202, 202] + [429] * 8
    assert len(listed) == 2


# ---------------------------------------------------------------- slow uploads


def _post_head(port: int, length: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/x-ndjson\r\n"
        b"Content-Length: " + str(length).encode() + b"\r\n\r\n"
    )
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    """Status and JSON body of the HTTP answer on ``sock`` (read until the server closes)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), orjson.loads(body)


def _trickle(sock: socket.socket, every_s: float, stop: float) -> None:
    """Send one byte every ``every_s`` seconds until the server answers or ``stop``."""
    sock.settimeout(every_s)
    while time.monotonic() < stop:
        try:
            if sock.recv(1, socket.MSG_PEEK):
                return
        except TimeoutError:
            pass
        try:
            sock.sendall(b" ")
        except OSError:  # the server answered and closed its side
            return


@pytest.mark.parametrize("kind", ["idle", "trickle"])
def test_a_slow_upload_gets_408_and_frees_its_slot(
    store_backend: Backend, tmp_path: Path, kind: str
) -> None:
    settings = settings_for(
        store_backend,
        tmp_path,
        max_active_jobs=1,
        workers=False,
        upload_read_timeout_s=2.0,
        upload_min_bytes_per_s=100_000,
    )
    line = demo_lines(1)[0] + b"\n"
    with serve_in_thread(create_app(settings)) as base:
        port = int(base.rsplit(":", 1)[1])
        sock = _post_head(port, len(line) + 10_000)
        with sock:
            sock.sendall(line)  # a first line: the upload holds its tenant's one slot
            deadline = time.monotonic() + 30
            # a body of rejected lines takes no slot (422 while one is free, 429 while not)
            while True:
                probe = httpx.post(f"{base}/v1/jobs", content=_invalid(0), headers=NDJSON)
                if probe.status_code == 429:
                    break
                assert probe.status_code == 422, probe.text
                assert time.monotonic() < deadline, "the slow upload never took its slot"
                time.sleep(0.02)
            if kind == "trickle":  # never idle for the timeout, but far under the minimum rate
                _trickle(sock, 0.1, deadline)
            sock.settimeout(30)
            status, problem = _answer(sock)
        assert status == 408
        assert problem["status"] == 408
        expected = "bytes/s" if kind == "trickle" else "sent nothing for 2 s"
        assert expected in problem["detail"]
        retried = httpx.post(f"{base}/v1/jobs", content=line, headers=NDJSON)
        assert retried.status_code == 202, retried.text
        listed = httpx.get(f"{base}/v1/jobs").json()["items"]
        assert [b["id"] for b in listed] == [retried.json()["id"]]


# ---------------------------------------------------------------- rejections


@pytest.mark.anyio
async def test_the_202_lists_the_first_rejections_and_results_hold_every_line(
    store_backend: Backend, tmp_path: Path
) -> None:
    good = demo_lines(2)
    bad = [_invalid(i) for i in range(250)]
    body = b"\n".join([good[0], *bad, good[1]]) + b"\n"
    settings = settings_for(store_backend, tmp_path)
    async with running_app(settings) as (_, client):
        response = await client.post("/v1/jobs", content=body, headers=NDJSON)
        assert response.status_code == 202, response.text
        accepted = response.json()
        assert accepted["accepted"] == 2 and accepted["rejected_total"] == 250
        assert [r["line"] for r in accepted["rejected"]] == list(range(2, 2 + LISTED_REJECTIONS))
        assert accepted["rejected"][0]["field"] == "ground_truth"
        status = await wait_for_status(client, accepted["id"])
        assert status["rejected"] == 250
        results = await client.get(f"/v1/jobs/{accepted['id']}/results")
        rows = [orjson.loads(x) for x in results.content.splitlines()]
        assert [r["line"] for r in rows] == list(range(1, 253))
        assert [r["item_id"] for r in rows[1:-1]] == [f"bad-{i:06d}" for i in range(250)]
        assert all(r["error"]["stage"] == "input" for r in rows[1:-1])
        assert rows[0]["error"] is None and rows[-1]["error"] is None

        nothing = await client.post("/v1/jobs", content=b"\n".join(bad), headers=NDJSON)
        assert nothing.status_code == 422
        problem = nothing.json()
        assert "none of the 250 lines is valid" in problem["detail"]
        assert len(problem["errors"]) == LISTED_REJECTIONS


# Rejected lines before each accepted line, then after the last: runs shorter than a page,
# exactly a page, several pages, and accepted lines back to back across result pages.
_GAPS = [3, 0, 1, 0, 0, 2, 13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 1, 27, 0, 4]
_TAIL = 12


def _interleaved() -> tuple[bytes, list[int]]:
    """The body, and the line numbers of its accepted lines."""
    good = iter(demo_lines(len(_GAPS)))
    lines: list[bytes] = []
    accepted: list[int] = []
    for gap in [*_GAPS, _TAIL]:
        start = len(lines)
        lines.extend([_invalid(start + i) for i in range(gap)])
        if len(accepted) < len(_GAPS):
            lines.append(next(good))
            accepted.append(len(lines))
    return b"\n".join(lines) + b"\n", accepted


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of a few lines, so a batch of ninety lines crosses many page boundaries."""
    monkeypatch.setattr(results, "_PAGE", 7)
    monkeypatch.setattr(results, "_REJECTIONS_PAGE", 5)


@pytest.mark.anyio
@pytest.mark.parametrize("kept", ["store", "row"])
async def test_results_merge_paged_rejections_in_line_order_at_every_offset(
    store_backend: Backend,
    tmp_path: Path,
    small_pages: None,
    monkeypatch: pytest.MonkeyPatch,
    kept: str,
) -> None:
    """Rejections read from the store a page at a time (or from the batch row, where it lists
    them all) merge with the accepted lines' results, and every offset resumes at its line."""
    if kept == "store":
        monkeypatch.setattr(ingest, "LISTED_REJECTIONS", 2)
    body, accepted_lines = _interleaved()
    total = len(body.splitlines())
    rejected = total - len(accepted_lines)
    settings = settings_for(store_backend, tmp_path)
    async with running_app(settings) as (_, client):
        response = await client.post("/v1/jobs", content=body, headers=NDJSON)
        assert response.status_code == 202, response.text
        batch = response.json()
        assert (batch["accepted"], batch["rejected_total"]) == (len(_GAPS), rejected)
        assert len(batch["rejected"]) == (2 if kept == "store" else rejected)
        await wait_for_status(client, batch["id"])
        url = f"/v1/jobs/{batch['id']}/results"
        full = (await client.get(url)).content.splitlines()
        rows = [orjson.loads(x) for x in full]
        assert [r["line"] for r in rows] == list(range(1, total + 1))
        assert [r["line"] for r in rows if r["error"] is None] == accepted_lines
        errors = [r for r in rows if r["error"] is not None]
        assert len(errors) == rejected
        assert all(r["error"]["stage"] == "input" for r in errors)
        assert [r["item_id"] for r in errors] == [f"bad-{r['line'] - 1:06d}" for r in errors]
        for offset in range(total + 2):
            tail = await client.get(url, params={"offset": offset})
            assert tail.status_code == 200
            assert tail.content.splitlines() == full[offset:], offset
        report_url = f"/v1/jobs/{batch['id']}/report"
        params: dict[str, str | int] = {"format": "json", "bootstrap": 10}
        listed = (await client.get(report_url, params=params)).json()
        assert (listed["summary"]["lines"], listed["summary"]["input_errors"]) == (total, rejected)
        inputs = [p for p in listed["problem_lines"] if p["problem"] == "input errors"]
        assert [p["line"] for p in inputs] == [r["line"] for r in errors]
        # past the first rejections the report only counts them: the same summary and coverage
        monkeypatch.setattr(results, "LISTED_PROBLEMS", 4)
        counted = (await client.get(report_url, params=params)).json()
        markdown = (await client.get(report_url, params={"format": "md"})).text
    assert counted["summary"].pop("unlisted_problem_lines") == rejected - 4
    assert counted["summary"] == listed["summary"]
    for key in ("coverage", "coverage_bounds", "gates"):
        assert counted[key] == listed[key], key
    first = {p["line"] for p in inputs[:4]}
    assert counted["problem_lines"] == [
        p for p in listed["problem_lines"] if p["problem"] != "input errors" or p["line"] in first
    ]
    assert f"{rejected - 4} more input errors, counted but listed nowhere" in markdown


@pytest.mark.anyio
async def test_results_of_a_queued_batch_stop_at_its_first_accepted_line(
    store_backend: Backend, tmp_path: Path, small_pages: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing scored yet: the stream holds the rejections before the first accepted line."""
    monkeypatch.setattr(ingest, "LISTED_REJECTIONS", 2)
    body, accepted_lines = _interleaved()
    settings = settings_for(store_backend, tmp_path, workers=False)
    async with running_app(settings) as (_, client):
        response = await client.post("/v1/jobs", content=body, headers=NDJSON)
        assert response.status_code == 202, response.text
        url = f"/v1/jobs/{response.json()['id']}/results"
        before_first = accepted_lines[0] - 1
        for offset in range(before_first + 2):
            tail = (await client.get(url, params={"offset": offset})).content.splitlines()
            lines = [orjson.loads(x)["line"] for x in tail]
            assert lines == list(range(offset + 1, before_first + 1)), offset


BIG_BODY_BYTES = 150 * 1024 * 1024
RSS_LIMIT_BYTES = 300 * 1024 * 1024


def _peak_rss(pid: int) -> int:
    """The process's peak resident set (VmHWM), in bytes."""
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmHWM:"):
            return int(row.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


def _big_body(count: int, question: str) -> Iterator[bytes]:
    """``count`` rejected lines, then one accepted line."""
    for start in range(0, count, 1000):
        yield b"".join(_invalid(i, question) + b"\n" for i in range(start, start + 1000))
    yield demo_lines(1)[0] + b"\n"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
def test_a_150_mb_upload_of_rejected_lines_keeps_server_memory_bounded(tmp_path: Path) -> None:
    question = "Is there a pleural effusion on the left? " * 24  # about 1 KB a line
    per_line = len(_invalid(0, question)) + 1
    count = (BIG_BODY_BYTES // per_line) // 1000 * 1000
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAITHJUDGE_")}
    env.update(
        {
            "FAITHJUDGE_DATA_DIR": str(tmp_path / "data"),
            "FAITHJUDGE_WORKERS": "false",
            "FAITHJUDGE_MAX_BODY_BYTES": str(2 * BIG_BODY_BYTES),
        }
    )
    command = [sys.executable, "-m", "faithjudge", "serve", "--port", str(port)]
    with serve_process(command, env, port, tmp_path / "service.log", cwd=ROOT) as service:
        before = _peak_rss(service.pid)
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/jobs",
            content=_big_body(count, question),
            headers=NDJSON,
            timeout=600,
        )
        peak = _peak_rss(service.pid)
        batch_url = f"http://127.0.0.1:{port}/v1/jobs/{response.json()['id']}"
        lines = 0
        with httpx.stream("GET", f"{batch_url}/results", timeout=600) as streamed:
            for line in streamed.iter_lines():
                lines += 1
                # the accepted line at the end, queued, ends the stream
                assert orjson.loads(line)["line"] == lines
        resumed = httpx.get(f"{batch_url}/results", params={"offset": count - 1}, timeout=600)
        results_peak = _peak_rss(service.pid)
        cancelled = httpx.delete(batch_url, timeout=60)
        assert cancelled.status_code == 200, cancelled.text
        lines_after = sum(1 for _ in httpx.get(f"{batch_url}/results", timeout=600).iter_lines())
        report = httpx.get(f"{batch_url}/report", params={"bootstrap": 10}, timeout=600)
        report_peak = _peak_rss(service.pid)
    assert response.status_code == 202, response.text[:2000]
    assert len(response.content) < 200_000
    accepted = response.json()
    assert accepted["accepted"] == 1 and accepted["rejected_total"] == count
    assert len(accepted["rejected"]) == LISTED_REJECTIONS
    assert count * per_line >= 140 * 1024 * 1024
    assert peak < RSS_LIMIT_BYTES, f"peak RSS {peak >> 20} MiB (at start {before >> 20} MiB)"
    print(f"\n{count} rejected lines: peak RSS {peak >> 20} MiB (at start {before >> 20} MiB)")
    assert lines == count
    assert [orjson.loads(x)["line"] for x in resumed.content.splitlines()] == [count]
    assert results_peak < RSS_LIMIT_BYTES, f"peak RSS reading /results {results_peak >> 20} MiB"
    assert lines_after == count
    assert report.status_code == 200, report.text[:2000]
    summary = report.json()["summary"]
    assert (summary["lines"], summary["input_errors"]) == (count, count)
    assert report_peak < RSS_LIMIT_BYTES, f"peak RSS building /report {report_peak >> 20} MiB"
    print(f"peak RSS after /results {results_peak >> 20} MiB, /report {report_peak >> 20} MiB")


# ---------------------------------------------------------------- status and readiness


@pytest.mark.anyio
async def test_a_cancelled_batch_counts_its_unscored_lines(
    store_backend: Backend, tmp_path: Path
) -> None:
    settings = settings_for(store_backend, tmp_path, workers=False)
    async with running_app(settings) as (_, client):
        accepted = await client.post("/v1/jobs", content=b"\n".join(demo_lines(5)), headers=NDJSON)
        job_id = accepted.json()["id"]
        queued = (await client.get(f"/v1/jobs/{job_id}")).json()
        assert queued["cancelled"] == 0
        cancelled = (await client.delete(f"/v1/jobs/{job_id}")).json()
        assert cancelled["status"] == "cancelled"
        assert (cancelled["cancelled"], cancelled["done"], cancelled["pending"]) == (5, 0, 0)
        again = (await client.get(f"/v1/jobs/{job_id}")).json()
        assert again["cancelled"] == 5


@pytest.mark.anyio
async def test_readyz_names_a_judge_whose_recent_lines_all_failed_at_transport(
    store_backend: Backend, tmp_path: Path
) -> None:
    # the server is there (it answers its probe) but fails every grading call: a broken judge,
    # not one that is down, so the lines fail at the transport stage rather than wait
    with run_fake_judge(FakeJudgeConfig(fault="server_error")) as broken:
        settings = settings_for(
            store_backend,
            tmp_path,
            judge="openai:fake-judge",
            openai_base_url=broken.base_url,
            openai_api_key="test-key",
            max_retries=0,
            cache=False,
        )
        async with running_app(settings) as (_, client):
            ready = await client.get("/readyz")
            assert ready.status_code == 200, ready.text
            accepted = await client.post(
                "/v1/jobs", content=b"\n".join(demo_lines(4)), headers=NDJSON
            )
            status = await wait_for_status(client, accepted.json()["id"])
            assert status["failure_stages"].get("transport", 0) > 0
            ready = await client.get("/readyz")
    assert ready.status_code == 503
    body = ready.json()
    assert body["status"] == "not_ready" and body["checks"]["store"] == "ok"
    judge = body["checks"]["judge"]
    assert "openai:fake-judge" in judge and "last error" in judge


@pytest.mark.anyio
async def test_readyz_names_a_dead_judge_from_the_live_route_alone(tmp_path: Path) -> None:
    """An API-only replica (no workers) learns of a dead judge from ``POST /v1/score`` (503 with
    Retry-After, naming it: the caller is told rather than held), and a judge that answers again
    clears it."""
    port = free_port()
    settings = Settings(
        data_dir=tmp_path / "data",
        judge="openai:fake-judge",
        openai_base_url=f"http://127.0.0.1:{port}/v1",  # nothing listens there yet
        openai_api_key="test-key",
        max_retries=0,
        cache=False,
        workers=False,
    )
    line = orjson.loads(demo_lines(1)[0])
    async with running_app(settings) as (_, client):
        for _ in range(DOWN_AFTER):
            scored = await client.post("/v1/score", json=line)
            assert scored.status_code == 503, scored.text
            assert scored.headers["Retry-After"] == "5"
            assert "connection refused" in scored.json()["detail"]
        down = await client.get("/readyz")
        with run_fake_judge(port=port):
            scored = await client.post("/v1/score", json=line)
            assert scored.status_code == 200, scored.text
            up = await client.get("/readyz")
    assert down.status_code == 503, down.text
    assert "openai:fake-judge" in down.json()["checks"]["judge"]
    assert up.status_code == 200, up.text
