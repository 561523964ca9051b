"""The SDK's job vocabulary: the older ``Batch*`` names and methods still work (and the methods
warn), and a server from before ``/v1/jobs`` existed is still reached at ``/v1/batches``."""

from __future__ import annotations

import warnings
from typing import Any

import faithjudge_client
import httpx
import pytest
from faithjudge_client import AsyncFaithJudgeClient, FaithJudgeClient, NotFound, RetryPolicy
from faithjudge_client.bodies import (
    BatchAccepted,
    BatchPage,
    BatchRetry,
    BatchState,
    BatchStatus,
    BatchTokens,
    JobAccepted,
    JobPage,
    JobRetry,
    JobState,
    JobStatus,
    JobTokens,
)

from tests.unit.test_sdk import ACCEPTED, problem, status_body

BASE = "http://faithjudge.test"
NO_RETRY = RetryPolicy(max_retries=0)


class Server:
    """A mock server serving its jobs under ``roots`` only; it records every request."""

    def __init__(self, *roots: str) -> None:
        self.roots = roots
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        root = next((r for r in self.roots if path.startswith(r)), None)
        if root is None:
            return problem(404, detail="Not Found")
        rest = path.removeprefix(root)
        if rest == "/b_missing":
            return problem(404, detail="no job 'b_missing' for this tenant")
        if request.method == "POST" and rest == "":
            return httpx.Response(202, json=ACCEPTED)
        if request.method == "POST" and rest.endswith("/retry"):
            # what an older server sends: the status under ``batch`` only
            return httpx.Response(200, json={"requeued": 0, "batch": status_body("completed")})
        if request.method == "DELETE":
            return httpx.Response(200, json=status_body("cancelled"))
        if rest == "":
            return httpx.Response(200, json={"items": [status_body()], "next_cursor": None})
        return httpx.Response(200, json=status_body())

    def paths(self) -> list[str]:
        return [f"{r.method} {r.url.path}" for r in self.requests]

    def client(self) -> FaithJudgeClient:
        return FaithJudgeClient(BASE, transport=httpx.MockTransport(self), retry=NO_RETRY)


def test_the_batch_names_are_the_job_classes() -> None:
    pairs = [
        (BatchAccepted, JobAccepted),
        (BatchPage, JobPage),
        (BatchRetry, JobRetry),
        (BatchStatus, JobStatus),
        (BatchTokens, JobTokens),
        (BatchState, JobState),
    ]
    for old, new in pairs:
        assert old is new
    assert faithjudge_client.BatchStatus is faithjudge_client.JobStatus is JobStatus
    assert faithjudge_client.JobRetry is JobRetry


def test_a_retry_body_carries_the_status_under_both_names() -> None:
    status = JobStatus.model_validate(status_body("queued"))
    written = JobRetry(requeued=2, job=status, batch=status).model_dump(mode="json")
    assert written["job"] == written["batch"] == status.model_dump(mode="json")
    older_server = JobRetry.model_validate({"requeued": 2, "batch": status_body("queued")})
    assert older_server.job == older_server.batch == status
    newer_server = JobRetry.model_validate({"requeued": 2, "job": status_body("queued")})
    assert newer_server.batch == status


def test_the_client_talks_to_the_job_paths() -> None:
    server = Server("/v1/jobs")
    with server.client() as fj:
        assert fj.submit_job(b"{}\n").id == "b_1"
        assert fj.job("b_1").status == "running"
        assert fj.cancel_job("b_1").status == "cancelled"
        assert [s.id for s in fj.iter_jobs()] == ["b_1"]
        assert fj.jobs(limit=3).items[0].status == "running"
        assert fj.retry_failed("b_1").job.status == "completed"
    assert server.paths() == [
        "POST /v1/jobs",
        "GET /v1/jobs/b_1",
        "DELETE /v1/jobs/b_1",
        "GET /v1/jobs",
        "GET /v1/jobs",
        "POST /v1/jobs/b_1/retry",
    ]


def test_an_older_server_is_reached_at_its_batch_paths_and_the_client_keeps_to_them() -> None:
    server = Server("/v1/batches")
    with server.client() as fj:
        assert fj.job("b_1").status == "running"
        assert fj.cancel_job("b_1").status == "cancelled"
        assert fj.retry_failed("b_1").job.status == "completed"
    assert server.paths() == [
        "GET /v1/jobs/b_1",  # 404: no such route there
        "GET /v1/batches/b_1",
        "DELETE /v1/batches/b_1",
        "POST /v1/batches/b_1/retry",
    ]


def test_an_unknown_job_on_a_newer_server_is_not_asked_twice_once_the_paths_are_known() -> None:
    server = Server("/v1/jobs")
    with server.client() as fj:
        fj.job("b_1")
        with pytest.raises(NotFound, match="no job 'b_missing'"):
            fj.job("b_missing")
    assert server.paths() == ["GET /v1/jobs/b_1", "GET /v1/jobs/b_missing"]


def test_an_unknown_job_before_the_paths_are_known_raises_not_found() -> None:
    server = Server("/v1/jobs", "/v1/batches")  # a newer server serves both
    with server.client() as fj, pytest.raises(NotFound, match="no job 'b_missing'"):
        fj.job("b_missing")
    # an older server would have answered at its own path: it was asked there once
    assert server.paths() == ["GET /v1/jobs/b_missing", "GET /v1/batches/b_missing"]


@pytest.mark.parametrize(
    ("call", "old", "new"),
    [
        (lambda fj: fj.submit(b"{}\n"), "submit", "submit_job"),
        (lambda fj: fj.get_batch("b_1"), "get_batch", "job"),
        (lambda fj: fj.cancel("b_1"), "cancel", "cancel_job"),
        (lambda fj: fj.list_batches(limit=2), "list_batches", "jobs"),
        (lambda fj: list(fj.iter_batches()), "iter_batches", "iter_jobs"),
    ],
)
def test_the_older_method_names_work_and_warn(call: Any, old: str, new: str) -> None:
    server = Server("/v1/jobs")
    with server.client() as fj, pytest.warns(DeprecationWarning, match=rf"{old}\(\).*{new}\(\)"):
        call(fj)
    assert server.requests and all(r.url.path.startswith("/v1/jobs") for r in server.requests)


def test_the_new_method_names_do_not_warn() -> None:
    server = Server("/v1/jobs")
    with server.client() as fj, warnings.catch_warnings():
        warnings.simplefilter("error")
        fj.submit_job(b"{}\n")
        fj.job("b_1")
        list(fj.iter_jobs())


@pytest.mark.anyio
async def test_the_async_client_has_the_same_names_and_fallback() -> None:
    server = Server("/v1/batches")
    transport = httpx.MockTransport(server)
    async with AsyncFaithJudgeClient(BASE, transport=transport, retry=NO_RETRY) as fj:
        with pytest.warns(DeprecationWarning, match=r"get_batch\(\)"):
            assert (await fj.get_batch("b_1")).status == "running"
        assert (await fj.submit_job(b"{}\n")).id == "b_1"
        with pytest.warns(DeprecationWarning, match=r"iter_batches\(\)"):
            listed = [s.id async for s in fj.iter_batches()]
        assert listed == ["b_1"]
    assert server.paths() == [
        "GET /v1/jobs/b_1",
        "GET /v1/batches/b_1",
        "POST /v1/batches",
        "GET /v1/batches",
    ]
