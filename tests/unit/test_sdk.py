"""The synchronous SDK against scripted ``httpx.MockTransport`` servers (no sockets, no sleep)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from faithjudge.errors import ConfigError, FaithJudgeError, UserInputError
from faithjudge_client import (
    ApiError,
    AuthError,
    Conflict,
    FaithJudgeClient,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    RateLimited,
    RetryPolicy,
    ScoreRequest,
    ServerError,
    TransportError,
    UnsupportedMediaType,
    ValidationFailed,
    WaitTimeout,
)

BASE = "http://faithjudge.test"
PROBLEM = "application/problem+json"
RETRY = RetryPolicy(max_retries=3, base=0.5, multiplier=2.0, max_delay=30.0, jitter=False)

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """Records what the client sent; ``sleeps`` collects backoff and polling waits."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[httpx.Request] = []
        self.bodies: list[bytes] = []
        self.sleeps: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(request.read())
        self.requests.append(request)
        return self.handler(request)

    def client(self, **kwargs: Any) -> FaithJudgeClient:
        kwargs.setdefault("retry", RETRY)
        return FaithJudgeClient(
            kwargs.pop("base_url", BASE),
            transport=httpx.MockTransport(self),
            sleep=self.sleeps.append,
            **kwargs,
        )


def problem(status: int, detail: str = "something is wrong", **extra: Any) -> httpx.Response:
    body = {"type": "about:blank", "title": "Error", "status": status, "detail": detail, **extra}
    return httpx.Response(status, json=body, headers={"content-type": PROBLEM})


def status_body(state: str = "running", done: int = 1, total: int = 4) -> dict[str, Any]:
    return {
        "id": "b_1",
        "name": None,
        "status": state,
        "created_at": "2026-01-01T12:00:00Z",
        "updated_at": "2026-01-01T12:00:01Z",
        "total": total,
        "done": done,
        "pending": total - done,
        "counts": {"valid": 3 * done},
        "failure_stages": {},
        "progress": done / total,
        "eta_seconds": None,
        "rejected": 0,
    }


ACCEPTED = {
    "id": "b_1",
    "status": "queued",
    "accepted": 2,
    "rejected": [{"line": 3, "field": "ground_truth", "reason": "Field required"}],
    "created_at": "2026-01-01T12:00:00Z",
}
RESULT = {"line": 1, "item_id": "a", "answer": "yes", "correct": True}
REQUEST = {"question": "Is there an effusion?", "ground_truth": "yes", "cot": "I see one. yes"}


# ---------------------------------------------------------------- configuration


def test_base_url_and_key_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAITHJUDGE_URL", "http://env.test:9000/")
    monkeypatch.setenv("FAITHJUDGE_API_KEY", "env-key")
    seen = Recorder(lambda r: httpx.Response(200, json={"status": "ok", "version": "1"}))
    client = FaithJudgeClient(transport=httpx.MockTransport(seen))
    client.health()
    assert str(seen.requests[0].url) == "http://env.test:9000/healthz"
    assert seen.requests[0].headers["authorization"] == "Bearer env-key"
    assert seen.requests[0].headers["user-agent"].startswith("faithjudge-sdk/")


def test_arguments_win_over_the_environment_and_no_key_sends_no_header(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAITHJUDGE_API_KEY", "env-key")
    seen = Recorder(lambda r: httpx.Response(200, json={"status": "ok", "version": "1"}))
    seen.client(api_key="").health()
    assert "authorization" not in seen.requests[0].headers
    seen.client(api_key="arg-key").health()
    assert seen.requests[1].headers["authorization"] == "Bearer arg-key"


def test_a_path_prefix_in_the_base_url_is_kept() -> None:
    seen = Recorder(lambda r: httpx.Response(200, json={"status": "ok", "version": "1"}))
    seen.client(base_url="http://proxy.test/faithjudge/").health()
    assert str(seen.requests[0].url) == "http://proxy.test/faithjudge/healthz"


@pytest.mark.parametrize("url", [None, "", "ftp://x.test", "not a url"])
def test_a_missing_or_bad_server_url_is_a_config_error(url: str | None) -> None:
    with pytest.raises(ConfigError, match=r"FAITHJUDGE_URL|http://host:port|not a URL"):
        FaithJudgeClient(url)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, AuthError),
        (403, AuthError),
        (404, NotFound),
        (409, Conflict),
        (413, PayloadTooLarge),
        (415, UnsupportedMediaType),
        (422, ValidationFailed),
        (400, ApiError),
    ],
)
def test_error_statuses_map_to_typed_errors_without_retry(
    status: int, error: type[ApiError]
) -> None:
    seen = Recorder(lambda r: problem(status, detail=f"detail of {status}"))
    with pytest.raises(error) as caught:
        seen.client().job("b_1")
    assert caught.value.status == status
    assert caught.value.detail == f"detail of {status}"
    assert f"HTTP {status}" in str(caught.value)
    assert isinstance(caught.value, FaithJudgeError)
    # a client error is never retried; a 404 is asked once more at an older server's path
    assert len(seen.requests) == (2 if status == 404 else 1)
    assert seen.sleeps == []


def test_validation_failed_carries_the_problem_errors() -> None:
    errors = [
        {"line": 1, "field": "cot", "reason": "Field required"},
        {"line": 2, "field": None, "reason": "not JSON"},
    ]
    seen = Recorder(lambda r: problem(422, detail="no line accepted", errors=errors))
    with pytest.raises(ValidationFailed) as caught:
        seen.client().submit_job(b'{"x": 1}\nnope\n')
    assert [(e.line, e.field, e.reason) for e in caught.value.errors] == [
        (1, "cot", "Field required"),
        (2, None, "not JSON"),
    ]
    assert "line 1 cot: Field required" in str(caught.value)


def test_a_body_that_is_not_a_problem_still_gives_a_readable_error() -> None:
    html = "<html><body>502 Bad Gateway from the proxy</body></html>"
    seen = Recorder(lambda r: httpx.Response(502, text=html, headers={"content-type": "text/html"}))
    with pytest.raises(ServerError) as caught:
        seen.client(retry=RetryPolicy(max_retries=0)).job("b_1")
    assert caught.value.status == 502
    assert "Bad Gateway from the proxy" in caught.value.detail


# ---------------------------------------------------------------- retries


def scripted(*responses: httpx.Response | Exception) -> Handler:
    queue = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(item, Exception):
            raise item
        return item

    return handler


def test_503_is_retried_with_exponential_backoff_then_succeeds() -> None:
    seen = Recorder(
        scripted(problem(503), problem(503), httpx.Response(200, json=status_body("completed")))
    )
    status = seen.client().job("b_1")
    assert status.status == "completed"
    assert len(seen.requests) == 3
    assert seen.sleeps == [0.5, 1.0]


def test_429_waits_as_long_as_retry_after_says() -> None:
    limited = problem(429, detail="tenant limit")
    limited.headers["retry-after"] = "7"
    seen = Recorder(scripted(limited, httpx.Response(200, json=status_body())))
    seen.client().job("b_1")
    assert seen.sleeps == [7.0]


def test_retries_are_bounded_and_the_last_error_is_raised() -> None:
    limited = problem(429, detail="tenant limit")
    limited.headers["retry-after"] = "2"
    seen = Recorder(scripted(limited))
    with pytest.raises(RateLimited) as caught:
        seen.client().job("b_1")
    assert caught.value.retry_after == 2.0
    assert len(seen.requests) == 1 + RETRY.max_retries


@pytest.mark.parametrize("status", [501, 505])
def test_server_errors_that_will_not_change_are_not_retried(status: int) -> None:
    seen = Recorder(scripted(problem(status)))
    with pytest.raises(ServerError):
        seen.client().job("b_1")
    assert len(seen.requests) == 1


def test_transport_errors_are_retried_then_wrapped() -> None:
    seen = Recorder(scripted(httpx.ConnectError("connection refused")))
    with pytest.raises(TransportError, match="ConnectError: connection refused") as caught:
        seen.client().job("b_1")
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    assert len(seen.requests) == 1 + RETRY.max_retries
    assert seen.sleeps == [0.5, 1.0, 2.0]


def test_retries_can_be_turned_off() -> None:
    seen = Recorder(scripted(problem(503)))
    with pytest.raises(ServerError):
        seen.client(retry=RetryPolicy(max_retries=0)).job("b_1")
    assert len(seen.requests) == 1


# ---------------------------------------------------------------- scoring


def test_score_posts_the_request_and_parses_the_result() -> None:
    seen = Recorder(lambda r: httpx.Response(200, json=RESULT))
    client = seen.client()
    result = client.score(REQUEST)
    assert result.item_id == "a" and result.correct is True
    sent = json.loads(seen.bodies[0])
    assert sent == REQUEST
    assert seen.requests[0].headers["content-type"] == "application/json"
    client.score(ScoreRequest.model_validate(REQUEST))
    assert json.loads(seen.bodies[1])["question"] == REQUEST["question"]


def test_score_is_retried_on_503_with_the_same_body() -> None:
    seen = Recorder(scripted(problem(503), httpx.Response(200, json=RESULT)))
    seen.client().score(REQUEST)
    assert len(seen.bodies) == 2 and seen.bodies[0] == seen.bodies[1]


# ---------------------------------------------------------------- jobs


def write_requests(path: Path, count: int) -> bytes:
    data = b"".join(
        json.dumps({**REQUEST, "item_id": f"i{n}"}).encode() + b"\n" for n in range(count)
    )
    path.write_bytes(data)
    return data


def test_submit_streams_a_file_with_its_length_and_an_idempotency_key(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    data = write_requests(source, 2000)  # several read chunks
    seen = Recorder(scripted(problem(503), httpx.Response(202, json=ACCEPTED)))
    accepted = seen.client().submit_job(source, name="run 3")
    assert accepted.id == "b_1" and accepted.accepted == 2
    assert accepted.rejected[0].line == 3 and accepted.rejected[0].field == "ground_truth"
    first, second = seen.requests
    assert seen.bodies == [data, data]  # the retry sent the whole file again
    assert first.headers["content-length"] == str(len(data))
    assert first.headers["content-type"] == "application/x-ndjson"
    assert first.url.params["name"] == "run 3"
    key = first.headers["idempotency-key"]
    assert key and second.headers["idempotency-key"] == key
    assert isinstance(first.stream, httpx.SyncByteStream)


def test_submit_reads_the_file_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from faithjudge_client import _common

    source = tmp_path / "in.jsonl"
    data = write_requests(source, 3000)
    chunks: list[int] = []
    real = _common._file_chunks

    def spy(path: Path) -> Iterator[bytes]:
        for chunk in real(path):
            chunks.append(len(chunk))
            yield chunk

    monkeypatch.setattr(_common, "_file_chunks", spy)
    seen = Recorder(lambda r: httpx.Response(202, json=ACCEPTED))
    seen.client().submit_job(source)
    assert sum(chunks) == len(data)
    assert max(chunks) <= _common.CHUNK_BYTES < len(data)


def test_submit_uses_the_given_idempotency_key_and_surfaces_a_conflict(tmp_path: Path) -> None:
    seen = Recorder(lambda r: problem(409, detail="key reused with a different body"))
    with pytest.raises(Conflict, match="different body"):
        seen.client().submit_job(b"{}\n", idempotency_key="k-1")
    assert seen.requests[0].headers["idempotency-key"] == "k-1"


def test_submit_accepts_models_dicts_and_json_lines() -> None:
    seen = Recorder(lambda r: httpx.Response(202, json=ACCEPTED))
    lines = [ScoreRequest.model_validate(REQUEST), REQUEST, json.dumps(REQUEST) + "\n"]
    seen.client().submit_job(lines)
    sent = seen.bodies[0].splitlines()
    assert len(sent) == 3
    assert all(json.loads(line)["cot"] == REQUEST["cot"] for line in sent)


def test_a_one_shot_stream_is_sent_once_and_not_retried() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":  # the client asks where the jobs are before a one-shot
            return httpx.Response(200, json={"items": [], "next_cursor": None})
        return problem(503)

    seen = Recorder(handler)
    one_shot = (json.dumps(REQUEST) for _ in range(3))
    with pytest.raises(ServerError):
        seen.client().submit_job(one_shot)
    assert [(r.method, r.url.path) for r in seen.requests] == [
        ("GET", "/v1/jobs"),
        ("POST", "/v1/jobs"),
    ]


def test_a_seekable_binary_file_is_rewound_for_a_retry() -> None:
    handle = io.BytesIO(b"header to skip\n" + json.dumps(REQUEST).encode() + b"\n")
    handle.readline()
    seen = Recorder(scripted(problem(502), httpx.Response(202, json=ACCEPTED)))
    seen.client().submit_job(handle)
    assert seen.bodies[0] == seen.bodies[1] == json.dumps(REQUEST).encode() + b"\n"


def test_bad_sources_are_refused_before_any_request(tmp_path: Path) -> None:
    seen = Recorder(lambda r: httpx.Response(202, json=ACCEPTED))
    client = seen.client()
    with pytest.raises(UserInputError, match="not found"):
        client.submit_job(tmp_path / "missing.jsonl")
    with pytest.raises(UserInputError, match="binary mode"):
        client.submit_job(io.StringIO("{}\n"))
    with pytest.raises(UserInputError, match="cannot upload"):
        client.submit_job(42)  # type: ignore[arg-type]
    assert seen.requests == []


def test_job_ids_are_quoted_into_the_path() -> None:
    seen = Recorder(lambda r: problem(404))
    with pytest.raises(NotFound):
        seen.client().job("../admin")
    assert seen.requests[0].url.raw_path == b"/v1/jobs/..%2Fadmin"
    with pytest.raises(UserInputError):
        seen.client().job(" ")


def test_cancel_list_and_paging() -> None:
    pages = {
        None: {"items": [status_body(), status_body()], "next_cursor": "c2"},
        "c2": {"items": [status_body("completed")], "next_cursor": None},
    }

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "DELETE":
            return httpx.Response(200, json=status_body("cancelled"))
        return httpx.Response(200, json=pages[request.url.params.get("cursor")])

    seen = Recorder(handler)
    client = seen.client()
    assert client.cancel_job("b_1").status == "cancelled"
    assert seen.requests[0].method == "DELETE"
    assert [b.status for b in client.iter_jobs(page_size=2)] == [
        "running",
        "running",
        "completed",
    ]
    assert seen.requests[1].url.params["limit"] == "2"
    assert seen.requests[2].url.params["cursor"] == "c2"


def test_reports_come_back_as_dict_or_text() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        fmt = request.url.params["format"]
        if fmt == "json":
            return httpx.Response(200, json={"items": 2})
        return httpx.Response(200, text=f"<{fmt} report>")

    client = Recorder(handler).client()
    assert client.report("b_1") == {"items": 2}
    assert client.report("b_1", "md") == "<md report>"
    assert client.report("b_1", "html") == "<html report>"


# ---------------------------------------------------------------- results


def result_lines(start: int, stop: int) -> list[bytes]:
    return [json.dumps({**RESULT, "line": n + 1}).encode() for n in range(start, stop)]


def broken_after(lines: list[bytes], keep: int) -> Iterator[bytes]:
    """A body that sends ``keep`` lines and half of the next one, then loses the connection."""
    yield b"\n".join(lines[:keep]) + b"\n" + lines[keep][:10]
    raise httpx.ReadError("connection reset")


def test_results_resume_from_the_first_line_not_yet_read() -> None:
    lines = result_lines(0, 6)

    def handler(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params["offset"])
        if offset == 0:
            return httpx.Response(200, content=broken_after(lines, 2))
        return httpx.Response(200, content=b"\n".join(lines[offset:]) + b"\n")

    seen = Recorder(handler)
    results = list(seen.client().iter_results("b_1"))
    assert [r.line for r in results] == [1, 2, 3, 4, 5, 6]
    assert [r.url.params["offset"] for r in seen.requests] == ["0", "2"]
    assert seen.sleeps == [0.5]


def test_results_give_up_after_repeated_breaks_without_progress() -> None:
    lines = result_lines(0, 3)
    seen = Recorder(lambda r: httpx.Response(200, content=broken_after(lines, 0)))
    with pytest.raises(TransportError, match="ReadError"):
        list(seen.client().iter_result_lines("b_1"))
    assert len(seen.requests) == 1 + RETRY.max_retries


def test_results_start_at_the_given_offset_and_keep_a_last_line_without_newline() -> None:
    lines = result_lines(0, 3)
    seen = Recorder(lambda r: httpx.Response(200, content=b"\n".join(lines[1:])))
    assert list(seen.client().iter_result_lines("b_1", offset=1)) == lines[1:]
    assert seen.requests[0].url.params["offset"] == "1"


def test_download_overwrites_or_resumes_after_a_torn_line(tmp_path: Path) -> None:
    lines = result_lines(0, 5)

    def handler(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params["offset"])
        return httpx.Response(200, content=b"".join(x + b"\n" for x in lines[offset:]))

    seen = Recorder(handler)
    out = tmp_path / "deep" / "results.jsonl"
    assert seen.client().download_results("b_1", out) == 5
    assert out.read_bytes().splitlines() == lines

    out.write_bytes(lines[0] + b"\n" + lines[1] + b"\n" + lines[2][:7])  # crashed mid-line
    assert seen.client().download_results("b_1", out, resume=True) == 3
    assert out.read_bytes().splitlines() == lines
    assert seen.requests[-1].url.params["offset"] == "2"


# ---------------------------------------------------------------- waiting


def sse(*events: tuple[str, dict[str, Any] | None]) -> bytes:
    out = []
    for name, data in events:
        out.append(f"event: {name}\ndata: {json.dumps(data) if data else ''}\n\n")
    return "".join(out).encode()


SSE = {"content-type": "text/event-stream"}


def test_wait_follows_the_event_stream_and_reports_progress() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            assert request.headers["accept"] == "text/event-stream"
            body = sse(
                ("progress", status_body("queued", 0)),
                ("progress", status_body("running", 2)),
                ("end", None),
            )
            return httpx.Response(200, content=body, headers=SSE)
        return httpx.Response(200, json=status_body("completed", 4))

    seen = Recorder(handler)
    progress: list[tuple[str, int]] = []
    final = seen.client().wait("b_1", progress=lambda s: progress.append((s.status, s.done)))
    assert final.status == "completed" and final.done == 4
    assert progress == [("queued", 0), ("running", 2), ("completed", 4)]


def test_wait_stops_at_a_terminal_progress_event() -> None:
    body = sse(("progress", status_body("running", 3)), ("progress", status_body("failed", 3)))
    seen = Recorder(lambda r: httpx.Response(200, content=body, headers=SSE))
    assert seen.client().wait("b_1").status == "failed"
    assert len(seen.requests) == 1


def test_wait_reconnects_after_a_broken_stream() -> None:
    def broken() -> Iterator[bytes]:
        yield sse(("progress", status_body("running", 1)))
        raise httpx.RemoteProtocolError("peer closed connection")

    streams = [broken, lambda: iter([sse(("progress", status_body("completed", 4)))])]

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            return httpx.Response(200, content=streams.pop(0)(), headers=SSE)
        return httpx.Response(200, json=status_body("running", 2))

    seen = Recorder(handler)
    progress: list[int] = []
    final = seen.client().wait("b_1", progress=lambda s: progress.append(s.done), poll_interval=3)
    assert final.status == "completed"
    assert progress == [1, 2, 4]
    assert seen.sleeps == [3]


def test_wait_polls_when_the_server_has_no_event_stream() -> None:
    states = [status_body("running", 1), status_body("running", 3), status_body("completed", 4)]

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            return httpx.Response(200, json={"not": "a stream"})
        return httpx.Response(200, json=states.pop(0))

    seen = Recorder(handler)
    progress: list[int] = []
    final = seen.client().wait("b_1", progress=lambda s: progress.append(s.done), poll_interval=2)
    assert final.done == 4 and progress == [1, 3, 4]
    assert seen.sleeps == [2, 2]


def test_wait_without_events_polls_and_times_out_with_the_last_status() -> None:
    seen = Recorder(lambda r: httpx.Response(200, json=status_body("running", 1)))
    with pytest.raises(WaitTimeout, match="still running") as caught:
        seen.client().wait("b_1", events=False, timeout=0)
    assert caught.value.last.done == 1
    assert all(not r.url.path.endswith("/events") for r in seen.requests)


def test_wait_on_an_unknown_job_raises_not_found() -> None:
    seen = Recorder(lambda r: problem(404, detail="no batch 'nope'"))
    with pytest.raises(NotFound, match="no batch"):
        seen.client().wait("nope")


def test_an_answer_off_the_contract_is_a_protocol_error() -> None:
    seen = Recorder(lambda r: httpx.Response(200, text="<html>some other service</html>"))
    with pytest.raises(ProtocolError, match="not a valid JobStatus"):
        seen.client().job("b_1")
    with pytest.raises(ProtocolError, match="not JSON"):
        seen.client().report("b_1")


def test_the_public_surface_is_pinned() -> None:
    import faithjudge_client

    assert sorted(faithjudge_client.__all__) == sorted(
        [
            "TERMINAL_STATES",
            "ApiError",
            "AsyncClient",
            "AsyncFaithJudgeClient",
            "AsyncProgressCallback",
            "AuthError",
            "BatchAccepted",
            "BatchPage",
            "BatchStatus",
            "Client",
            "ClientError",
            "Conflict",
            "FaithJudgeClient",
            "FaithJudgeError",
            "ItemResult",
            "JobAccepted",
            "JobPage",
            "JobRetry",
            "JobStatus",
            "JobTokens",
            "LineRejection",
            "NotFound",
            "PayloadTooLarge",
            "Problem",
            "ProgressCallback",
            "ProtocolError",
            "RateLimited",
            "RetryPolicy",
            "ScoreRequest",
            "ServerError",
            "TransportError",
            "UnsupportedMediaType",
            "ValidationFailed",
            "WaitTimeout",
            "__version__",
        ]
    )
    for name in faithjudge_client.__all__:
        assert getattr(faithjudge_client, name) is not None
    # the short names are the same classes, not copies
    assert faithjudge_client.Client is faithjudge_client.FaithJudgeClient
    assert faithjudge_client.AsyncClient is faithjudge_client.AsyncFaithJudgeClient
    # every error the SDK raises is one of FaithJudge's
    for name in ("ClientError", "ApiError", "TransportError", "ProtocolError", "WaitTimeout"):
        assert issubclass(getattr(faithjudge_client, name), FaithJudgeError)


def test_following_results_reads_new_lines_until_the_batch_has_ended() -> None:
    lines = result_lines(0, 5)
    # what the server has done at each status check: 2 lines, then 4, then all 5 and ended
    progress = [(2, "running"), (4, "running"), (5, "completed")]
    state = {"done": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/results"):
            offset = int(request.url.params["offset"])
            body = b"".join(x + b"\n" for x in lines[offset : state["done"]])
            return httpx.Response(200, content=body)
        done, status = progress.pop(0)
        state["done"] = done
        return httpx.Response(200, json=status_body(status, done, 5))

    seen = Recorder(handler)
    got = list(seen.client().iter_result_lines("b_1", follow=True, poll_interval=0.5))
    assert got == lines
    offsets = [r.url.params["offset"] for r in seen.requests if r.url.path.endswith("/results")]
    assert offsets == ["0", "2", "4"]
    assert seen.sleeps == [0.5, 0.5]
