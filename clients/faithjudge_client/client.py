"""``FaithJudgeClient``: the synchronous Python client of the FaithJudge REST API.

    with FaithJudgeClient("http://127.0.0.1:8000", api_key="...") as fj:
        result = fj.score({"question": ..., "ground_truth": ..., "cot": ...})
        job = fj.submit_job("requests.jsonl")           # streamed from disk
        status = fj.wait(job.id, progress=print)        # server-sent events, polling as fallback
        for item in fj.iter_results(job.id):            # resumes by offset if the stream breaks
            ...

``base_url`` and ``api_key`` default to ``$FAITHJUDGE_URL`` and ``$FAITHJUDGE_API_KEY``. Errors are
the typed tree of ``faithjudge_client.errors``. ``AsyncFaithJudgeClient``
(``faithjudge_client.aio``) has the
same methods, awaitable.

The jobs are served under ``/v1/jobs``; a server from before that name answers 404 there, and the
client then uses its ``/v1/batches`` (and keeps to it). The methods' older names (``submit``,
``get_batch``, ``cancel``, ``list_batches``, ``iter_batches``) still work and warn.
"""

from __future__ import annotations

import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, overload

import httpx
from httpx_sse import EventSource, SSEError
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from faithjudge_client._common import (
    DEFAULT_RETRY,
    DEFAULT_TIMEOUT,
    EVENTS_READ_TIMEOUT_S,
    JOBS,
    OLD_JOBS,
    Body,
    LineSplitter,
    Source,
    count_complete_lines,
    decode,
    decode_json,
    default_headers,
    deprecated_name,
    job_path,
    json_body,
    ndjson_body,
    readiness_of,
    remaining,
    resolve_api_key,
    resolve_base_url,
    retry_after_of,
    should_retry,
    transport_error,
)
from faithjudge_client.bodies import (
    NDJSON,
    Health,
    JobAccepted,
    JobPage,
    JobRetry,
    JobStatus,
    JudgeInfo,
    KnowledgeBaseInfo,
    ModificationCatalogue,
    Readiness,
    ReportFormat,
    ServiceConfig,
)
from faithjudge_client.errors import (
    ApiError,
    NotFound,
    TransportError,
    WaitTimeout,
    error_from_response,
)
from faithjudge_client.lines import ItemResult, ScoreRequest
from faithjudge_client.retry import RetryPolicy

__all__ = ["FaithJudgeClient", "ProgressCallback"]

ProgressCallback = Callable[[JobStatus], object]


class FaithJudgeClient:
    """Synchronous client; one connection pool, closed by ``close()`` or the ``with`` block.

    ``retry`` bounds the retries of each request (``max_retries``, exponential backoff with
    jitter, ``Retry-After`` honoured); ``RetryPolicy(max_retries=0)`` turns them off.
    ``transport`` replaces the network (``httpx.MockTransport`` in tests); ``sleep`` replaces
    ``time.sleep`` for backoff and polling.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retry: RetryPolicy = DEFAULT_RETRY,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.base_url = resolve_base_url(base_url)
        self.retry = retry
        self._sleep = sleep
        self._jobs_root: str | None = None  # JOBS or OLD_JOBS, once the server has told
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=default_headers(resolve_api_key(api_key), headers),
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> FaithJudgeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------ scoring

    def score(
        self, request: ScoreRequest | Mapping[str, Any], *, judge: str | None = None
    ) -> ItemResult:
        """Score one CoT now (``POST /v1/score``); a dict is validated by the server. ``judge``
        picks one of the judges the service offers (``config()``); unset, its default."""
        params = {"judge": judge} if judge is not None else None
        response = self._request("POST", "/v1/score", body=json_body(request), params=params)
        return decode(ItemResult, response.content)

    # ------------------------------------------------------------ jobs

    def submit_job(
        self,
        source: Source,
        *,
        name: str | None = None,
        idempotency_key: str | None = None,
        judge: str | None = None,
    ) -> JobAccepted:
        """Upload a job (``POST /v1/jobs``), streaming ``source`` as NDJSON.

        ``source`` is a file path, bytes, a binary file or an iterable of lines. Rejected lines
        come back in ``rejected`` with their numbers; when no line is valid the server answers
        422 and this raises ``ValidationFailed`` listing them. The upload is retried with the
        same ``idempotency_key`` (a fresh one when not given), so a retry never makes a second
        job. ``judge`` picks the judge every line is scored with (one the service offers,
        ``config()``); unset, the service's default. The job keeps it for good.
        """
        body = ndjson_body(source)
        if not body.replayable and self._jobs_root is None:
            # a one-shot stream cannot be sent again to an older server's path: ask first
            self.jobs(limit=1)
        headers = {"idempotency-key": idempotency_key or uuid.uuid4().hex}
        params = {k: v for k, v in (("name", name), ("judge", judge)) if v is not None}
        response = self._jobs_request("POST", "", body=body, headers=headers, params=params)
        return decode(JobAccepted, response.content)

    def job(self, job_id: str) -> JobStatus:
        """Where job ``job_id`` stands (``GET /v1/jobs/{id}``)."""
        response = self._jobs_request("GET", job_path(job_id, ""))
        return decode(JobStatus, response.content)

    def cancel_job(self, job_id: str) -> JobStatus:
        """Cancel a job; lines already scored keep their results."""
        response = self._jobs_request("DELETE", job_path(job_id, ""))
        return decode(JobStatus, response.content)

    def retry_failed(self, job_id: str) -> JobRetry:
        """Score again the lines of a completed job whose grades failed at the transport stage
        (the judge was down), once the judge is back (``POST /v1/jobs/{id}/retry``); the
        other lines keep their results. ``requeued`` is 0 when there was none; a job not yet
        completed, cancelled or failed raises ``Conflict``."""
        response = self._jobs_request("POST", f"{job_path(job_id, '')}/retry")
        return decode(JobRetry, response.content)

    def jobs(self, *, limit: int = 50, cursor: str | None = None) -> JobPage:
        """One page of this API key's jobs, newest first; pass ``next_cursor`` as ``cursor``."""
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        response = self._jobs_request("GET", "", params=params)
        return decode(JobPage, response.content)

    def iter_jobs(self, *, page_size: int = 50) -> Iterator[JobStatus]:
        """Every job of this API key, newest first, following the pages."""
        cursor: str | None = None
        while True:
            page = self.jobs(limit=page_size, cursor=cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    # the names before the service's unit of work was called a job

    def submit(
        self,
        source: Source,
        *,
        name: str | None = None,
        idempotency_key: str | None = None,
        judge: str | None = None,
    ) -> JobAccepted:
        """Deprecated name of ``submit_job``."""
        deprecated_name("submit", "submit_job")
        return self.submit_job(source, name=name, idempotency_key=idempotency_key, judge=judge)

    def get_batch(self, batch_id: str) -> JobStatus:
        """Deprecated name of ``job``."""
        deprecated_name("get_batch", "job")
        return self.job(batch_id)

    def cancel(self, batch_id: str) -> JobStatus:
        """Deprecated name of ``cancel_job``."""
        deprecated_name("cancel", "cancel_job")
        return self.cancel_job(batch_id)

    def list_batches(self, *, limit: int = 50, cursor: str | None = None) -> JobPage:
        """Deprecated name of ``jobs``."""
        deprecated_name("list_batches", "jobs")
        return self.jobs(limit=limit, cursor=cursor)

    def iter_batches(self, *, page_size: int = 50) -> Iterator[JobStatus]:
        """Deprecated name of ``iter_jobs``."""
        deprecated_name("iter_batches", "iter_jobs")
        return self.iter_jobs(page_size=page_size)

    def wait(
        self,
        job_id: str,
        *,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
        poll_interval: float = 1.0,
        events: bool = True,
    ) -> JobStatus:
        """Block until the job is completed, cancelled or failed; return its last status.

        ``progress`` is called with each status seen. With ``events`` the server's event stream
        is followed (re-opened, after a status check, whenever it breaks or stays quiet);
        without it, or when the server offers no stream, the status is polled every
        ``poll_interval`` seconds. Raises ``WaitTimeout`` after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        watch = self._watch_events if events else self._watch_polling
        last: JobStatus | None = None
        for status in watch(job_id, deadline, poll_interval):
            last = status
            if progress is not None:
                progress(status)
            if status.terminal:
                return status
            if deadline is not None and time.monotonic() >= deadline:
                break
        raise WaitTimeout(
            f"job {job_id} still {last.status if last else 'unknown'} after {timeout} s",
            last=last,
        )

    def iter_result_lines(
        self,
        job_id: str,
        *,
        offset: int = 0,
        follow: bool = False,
        poll_interval: float = 1.0,
    ) -> Iterator[bytes]:
        """Result lines (raw JSON, in input order) from result index ``offset`` (0-based).

        While a job runs the server sends the prefix done so far; with ``follow`` the stream
        goes on until the job has ended, asking for the next lines every ``poll_interval``
        seconds. A stream that breaks is re-opened at the first line not yet yielded, up to
        ``retry.max_retries`` times in a row.
        """
        position, failures = offset, 0
        while True:
            # Read the status first: a job that had ended before the stream opened is whole.
            ended = self.job(job_id).terminal if follow else True
            response = self._jobs_request(
                "GET",
                f"{job_path(job_id, root='')}/results",
                params={"offset": position},
                headers={"accept": NDJSON},
                stream=True,
            )
            splitter = LineSplitter()
            try:
                for chunk in response.iter_bytes():
                    for line in splitter.feed(chunk):
                        yield line
                        position += 1
                        failures = 0
                for line in splitter.flush():
                    yield line
                    position += 1
            except httpx.TransportError as exc:
                failures += 1
                if failures > self.retry.max_retries:
                    raise transport_error(response.request, exc) from exc
                self._sleep(self.retry.delay(failures - 1))
                continue
            finally:
                response.close()
            if ended:
                return
            self._sleep(poll_interval)

    def iter_results(
        self, job_id: str, *, offset: int = 0, follow: bool = False, poll_interval: float = 1.0
    ) -> Iterator[ItemResult]:
        """``iter_result_lines`` parsed into ``ItemResult`` models."""
        lines = self.iter_result_lines(
            job_id, offset=offset, follow=follow, poll_interval=poll_interval
        )
        for line in lines:
            yield decode(ItemResult, line)

    def download_results(
        self, job_id: str, path: str | Path, *, resume: bool = False, follow: bool = False
    ) -> int:
        """Write the result lines to ``path``; returns how many lines this call wrote.

        With ``resume`` the complete lines already in ``path`` are kept (a torn last line is
        cut) and only the rest is fetched; without it ``path`` is overwritten. ``follow`` keeps
        writing until the job has ended (see ``iter_result_lines``).
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        offset = count_complete_lines(path) if resume and path.exists() else 0
        written = 0
        with path.open("ab" if resume else "wb") as sink:
            for line in self.iter_result_lines(job_id, offset=offset, follow=follow):
                sink.write(line + b"\n")
                written += 1
        return written

    @overload
    def report(self, job_id: str, format: Literal["json"] = "json") -> dict[str, Any]: ...
    @overload
    def report(self, job_id: str, format: Literal["md", "html"]) -> str: ...
    def report(self, job_id: str, format: ReportFormat = "json") -> dict[str, Any] | str:
        """The report of the lines done so far: a dict for ``json``, text for ``md``/``html``."""
        response = self._jobs_request(
            "GET", f"{job_path(job_id, root='')}/report", params={"format": format}
        )
        return decode_json(response) if format == "json" else response.text

    # ------------------------------------------------------------ service facts

    def judge(self, judge: str | None = None) -> JudgeInfo:
        """One judge's frozen configuration (unset: the default judge's)."""
        params = {"judge": judge} if judge is not None else None
        try:
            response = self._request("GET", "/v1/judge", params=params)
        except NotFound:  # a server from before the path was renamed (an unknown judge is 422)
            response = self._request("GET", "/v1/evaluator", params=params)
        return decode(JudgeInfo, response.content)

    def evaluator(self, judge: str | None = None) -> JudgeInfo:
        """Deprecated name of ``judge``."""
        warnings.warn("evaluator() is deprecated: call judge() instead", DeprecationWarning, 2)
        return self.judge(judge)

    def config(self) -> ServiceConfig:
        """The judges the service offers, the default first (``GET /v1/config``)."""
        return decode(ServiceConfig, self._request("GET", "/v1/config").content)

    def knowledge_base(self) -> KnowledgeBaseInfo:
        content = self._request("GET", "/v1/knowledge-base").content
        return decode(KnowledgeBaseInfo, content)

    def modifications(self) -> ModificationCatalogue:
        content = self._request("GET", "/v1/modifications").content
        return decode(ModificationCatalogue, content)

    def health(self) -> Health:
        return decode(Health, self._request("GET", "/healthz").content)

    def ready(self) -> Readiness:
        """The readiness checks; a not-ready server (503) is an answer here, not an error."""
        try:
            response = self._request("GET", "/readyz", retries=0)
        except ApiError as exc:
            readiness = readiness_of(exc)
            if readiness is None:
                raise
            return readiness
        return decode(Readiness, response.content)

    # ------------------------------------------------------------ plumbing

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        body: Body | None = None,
        stream: bool = False,
        http_timeout: httpx.Timeout | None = None,
        retries: int | None = None,
    ) -> httpx.Response:
        """Send with retries; return a success response or raise the typed error."""

        def attempt() -> httpx.Response:
            request = self._http.build_request(
                method,
                path,
                params=params,
                headers={**(body.headers() if body else {}), **(headers or {})},
                content=body.sync_content() if body is not None else None,
                timeout=http_timeout if http_timeout is not None else self._http.timeout,
            )
            try:
                response = self._http.send(request, stream=stream)
                if response.is_error:
                    try:
                        response.read()
                    finally:
                        response.close()
                    raise error_from_response(response)
            except httpx.HTTPError as exc:
                raise transport_error(request, exc) from exc
            return response

        if retries is None:
            retries = self.retry.max_retries if body is None or body.replayable else 0
        if retries == 0:
            return attempt()
        retrying = Retrying(
            stop=stop_after_attempt(retries + 1),
            wait=self._wait,
            retry=retry_if_exception(should_retry),
            sleep=self._sleep,  # type: ignore[arg-type]  # its result is ignored
            reraise=True,
        )
        return retrying(attempt)

    def _jobs_request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """``_request`` to ``path`` under the server's jobs root (``path`` starts with ``/`` or
        is empty). Until the server has answered there, a 404 at ``/v1/jobs`` is asked again at
        ``/v1/batches``: an older server serves only that, and the client then keeps to it."""
        if self._jobs_root is not None:
            return self._request(method, self._jobs_root + path, **kwargs)
        try:
            response = self._request(method, JOBS + path, **kwargs)
        except NotFound:
            # the same 404 again when the job is unknown; from an older server, its answer
            response = self._request(method, OLD_JOBS + path, **kwargs)
            self._jobs_root = OLD_JOBS
            return response
        self._jobs_root = JOBS
        return response

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        return self.retry.delay(state.attempt_number - 1, retry_after=retry_after_of(exc))

    @contextmanager
    def _open_events(self, job_id: str, read_timeout: float) -> Iterator[EventSource]:
        timeout = self._http.timeout
        response = self._jobs_request(
            "GET",
            f"{job_path(job_id, root='')}/events",
            headers={"accept": "text/event-stream", "cache-control": "no-store"},
            stream=True,
            http_timeout=httpx.Timeout(timeout.connect or 10.0, read=read_timeout),
        )
        try:
            yield EventSource(response)
        finally:
            response.close()

    def _watch_events(
        self, job_id: str, deadline: float | None, poll_interval: float
    ) -> Iterator[JobStatus]:
        while True:
            read_timeout = EVENTS_READ_TIMEOUT_S
            if deadline is not None:
                read_timeout = max(0.1, min(read_timeout, deadline - time.monotonic()))
            try:
                with self._open_events(job_id, read_timeout) as source:
                    for event in source.iter_sse():
                        if event.event == "progress":
                            status = decode(JobStatus, event.data)
                            yield status
                            if status.terminal:
                                return
                        elif event.event == "end":
                            break
            except SSEError:
                # Not an event stream (a proxy in between, an older server): poll instead.
                yield from self._watch_polling(job_id, deadline, poll_interval)
                return
            except (httpx.TransportError, TransportError):
                pass  # the stream broke or stayed quiet: check the status, then listen again
            status = self.job(job_id)
            yield status
            if status.terminal or (deadline is not None and time.monotonic() >= deadline):
                return
            self._sleep(min(poll_interval, remaining(deadline)))

    def _watch_polling(
        self, job_id: str, deadline: float | None, poll_interval: float
    ) -> Iterator[JobStatus]:
        while True:
            status = self.job(job_id)
            yield status
            if status.terminal or (deadline is not None and time.monotonic() >= deadline):
                return
            self._sleep(min(poll_interval, remaining(deadline)))
