"""The async SDK against scripted ``httpx.MockTransport`` servers: the sync rules, awaited."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from faithjudge_client import (
    AsyncFaithJudgeClient,
    NotFound,
    RateLimited,
    RetryPolicy,
    ServerError,
    TransportError,
    ValidationFailed,
    WaitTimeout,
)

from tests.unit.test_sdk import (
    ACCEPTED,
    REQUEST,
    RESULT,
    SSE,
    problem,
    result_lines,
    sse,
    status_body,
    write_requests,
)

pytestmark = pytest.mark.anyio

BASE = "http://faithjudge.test"
RETRY = RetryPolicy(max_retries=3, base=0.5, multiplier=2.0, max_delay=30.0, jitter=False)

Handler = Callable[[httpx.Request], httpx.Response | Awaitable[httpx.Response]]


class Recorder:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[httpx.Request] = []
        self.bodies: list[bytes] = []
        self.sleeps: list[float] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(await request.aread())
        self.requests.append(request)
        response = self.handler(request)
        return await response if isinstance(response, Awaitable) else response

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def client(self, **kwargs: Any) -> AsyncFaithJudgeClient:
        kwargs.setdefault("retry", RETRY)
        return AsyncFaithJudgeClient(
            BASE, transport=httpx.MockTransport(self), sleep=self.sleep, **kwargs
        )


def scripted(*responses: httpx.Response | Exception) -> Handler:
    queue = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(item, Exception):
            raise item
        return item

    return handler


async def test_score_and_typed_errors() -> None:
    seen = Recorder(lambda r: httpx.Response(200, json=RESULT))
    async with seen.client() as client:
        result = await client.score(REQUEST)
    assert result.item_id == "a"
    assert json.loads(seen.bodies[0]) == REQUEST

    errors = [{"line": None, "field": "cot", "reason": "Field required"}]
    seen = Recorder(lambda r: problem(422, detail="invalid body", errors=errors))
    async with seen.client() as client:
        with pytest.raises(ValidationFailed) as caught:
            await client.score({"question": "q"})
    assert caught.value.errors[0].field == "cot"
    assert len(seen.requests) == 1


async def test_503_and_429_are_retried_with_backoff_and_retry_after() -> None:
    limited = problem(429)
    limited.headers["retry-after"] = "4"
    seen = Recorder(scripted(problem(503), limited, httpx.Response(200, json=status_body())))
    async with seen.client() as client:
        await client.job("b_1")
    assert seen.sleeps == [0.5, 4.0]

    seen = Recorder(scripted(limited))
    async with seen.client() as client:
        with pytest.raises(RateLimited):
            await client.job("b_1")
    assert len(seen.requests) == 4


async def test_transport_errors_are_wrapped() -> None:
    seen = Recorder(scripted(httpx.ConnectTimeout("timed out")))
    async with seen.client(retry=RetryPolicy(max_retries=1, jitter=False, base=1)) as client:
        with pytest.raises(TransportError, match="ConnectTimeout"):
            await client.health()
    assert len(seen.requests) == 2 and seen.sleeps == [1.0]


async def test_submit_streams_a_file_and_replays_it_for_a_retry(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    data = write_requests(source, 2000)
    seen = Recorder(scripted(problem(503), httpx.Response(202, json=ACCEPTED)))
    async with seen.client() as client:
        accepted = await client.submit_job(source, name="n")
    assert accepted.accepted == 2
    assert seen.bodies == [data, data]
    first, second = seen.requests
    assert isinstance(first.stream, httpx.AsyncByteStream)
    assert first.headers["content-length"] == str(len(data))
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]


async def test_submit_from_an_async_iterable_is_sent_once() -> None:
    async def lines() -> AsyncIterator[dict[str, Any]]:
        for n in range(3):
            yield {**REQUEST, "item_id": f"i{n}"}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":  # the client asks where the jobs are before a one-shot
            return httpx.Response(200, json={"items": [], "next_cursor": None})
        return problem(503)

    seen = Recorder(handler)
    async with seen.client() as client:
        with pytest.raises(ServerError):
            await client.submit_job(lines())
    assert [r.method for r in seen.requests] == ["GET", "POST"]
    assert [json.loads(x)["item_id"] for x in seen.bodies[1].splitlines()] == ["i0", "i1", "i2"]


async def test_results_resume_after_a_broken_stream(tmp_path: Path) -> None:
    lines = result_lines(0, 5)

    async def broken() -> AsyncIterator[bytes]:
        yield b"\n".join(lines[:3]) + b"\n" + lines[3][:5]
        raise httpx.ReadError("reset")

    async def whole(offset: int) -> AsyncIterator[bytes]:
        yield b"".join(x + b"\n" for x in lines[offset:])

    def handler(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params["offset"])
        return httpx.Response(200, content=broken() if offset == 0 else whole(offset))

    seen = Recorder(handler)
    async with seen.client() as client:
        got = [r.line async for r in client.iter_results("b_1")]
        assert got == [1, 2, 3, 4, 5]
        out = tmp_path / "out.jsonl"
        out.write_bytes(lines[0] + b"\n" + lines[1][:3])
        assert await client.download_results("b_1", out, resume=True) == 4
    assert out.read_bytes().splitlines() == lines
    assert [r.url.params["offset"] for r in seen.requests] == ["0", "3", "1"]


async def test_wait_follows_events_with_an_async_progress_callback() -> None:
    async def stream() -> AsyncIterator[bytes]:
        yield sse(("progress", status_body("running", 1)))
        yield sse(("progress", status_body("running", 3)), ("end", None))

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            return httpx.Response(200, content=stream(), headers=SSE)
        return httpx.Response(200, json=status_body("completed", 4))

    seen: list[int] = []

    async def progress(status: Any) -> None:
        seen.append(status.done)

    async with Recorder(handler).client() as client:
        final = await client.wait("b_1", progress=progress)
    assert final.status == "completed"
    assert seen == [1, 3, 4]


async def test_wait_falls_back_to_polling_and_times_out() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            return httpx.Response(200, text="no stream here")
        return httpx.Response(200, json=status_body("running", 2))

    seen = Recorder(handler)
    async with seen.client() as client:
        with pytest.raises(WaitTimeout) as caught:
            await client.wait("b_1", timeout=0)
    assert caught.value.last.done == 2


async def test_wait_on_another_tenants_job_is_not_found() -> None:
    async with Recorder(lambda r: problem(404)).client() as client:
        with pytest.raises(NotFound):
            await client.wait("b_other")


async def test_following_results_until_the_job_has_ended() -> None:
    lines = result_lines(0, 3)
    progress = [(1, "running"), (3, "cancelled")]
    state = {"done": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/results"):
            offset = int(request.url.params["offset"])
            body = b"".join(x + b"\n" for x in lines[offset : state["done"]])
            return httpx.Response(200, content=body)
        done, status = progress.pop(0)
        state["done"] = done
        return httpx.Response(200, json=status_body(status, done, 3))

    seen = Recorder(handler)
    async with seen.client() as client:
        got = [r.line async for r in client.iter_results("b_1", follow=True, poll_interval=2)]
    assert got == [1, 2, 3]
    assert seen.sleeps == [2]
