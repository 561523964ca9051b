"""``AsyncFaithJudgeClient``: the asyncio/anyio twin of ``FaithJudgeClient``.

Same methods, same errors, same retries; every call is awaited and the iterators are async::

    async with AsyncFaithJudgeClient() as fj:
        job = await fj.submit_job("requests.jsonl")
        await fj.wait(job.id, progress=lambda s: print(s.done, "/", s.total))
        async for item in fj.iter_results(job.id):
            ...
"""

from __future__ import annotations

import inspect
import time
import uuid
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any, Literal, overload

import anyio
import httpx
from httpx_sse import EventSource, SSEError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

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

__all__ = ["AsyncFaithJudgeClient", "AsyncProgressCallback"]

AsyncProgressCallback = Callable[[JobStatus], object | Awaitable[object]]


class AsyncFaithJudgeClient:
    """Asynchronous client; see ``FaithJudgeClient`` for the arguments and each method.

    ``transport`` may be ``httpx.ASGITransport(app)`` to talk to an app in process; ``sleep``
    replaces ``anyio.sleep`` for backoff and polling. A ``progress`` callback may be a plain
    function or a coroutine function.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retry: RetryPolicy = DEFAULT_RETRY,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[object]] = anyio.sleep,
    ) -> None:
        self.base_url = resolve_base_url(base_url)
        self.retry = retry
        self._sleep = sleep
        self._jobs_root: str | None = None  # JOBS or OLD_JOBS, once the server has told
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=default_headers(resolve_api_key(api_key), headers),
            timeout=timeout,
            transport=transport,
        )

    async def __aenter__(self) -> AsyncFaithJudgeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # ------------------------------------------------------------ scoring

    async def score(
        self, request: ScoreRequest | Mapping[str, Any], *, judge: str | None = None
    ) -> ItemResult:
        params = {"judge": judge} if judge is not None else None
        response = await self._request("POST", "/v1/score", body=json_body(request), params=params)
        return decode(ItemResult, response.content)

    # ------------------------------------------------------------ jobs

    async def submit_job(
        self,
        source: Source,
        *,
        name: str | None = None,
        idempotency_key: str | None = None,
        judge: str | None = None,
    ) -> JobAccepted:
        body = ndjson_body(source)
        if not body.replayable and self._jobs_root is None:
            # a one-shot stream cannot be sent again to an older server's path: ask first
            await self.jobs(limit=1)
        headers = {"idempotency-key": idempotency_key or uuid.uuid4().hex}
        params = {k: v for k, v in (("name", name), ("judge", judge)) if v is not None}
        response = await self._jobs_request("POST", "", body=body, headers=headers, params=params)
        return decode(JobAccepted, response.content)

    async def job(self, job_id: str) -> JobStatus:
        response = await self._jobs_request("GET", job_path(job_id, ""))
        return decode(JobStatus, response.content)

    async def cancel_job(self, job_id: str) -> JobStatus:
        response = await self._jobs_request("DELETE", job_path(job_id, ""))
        return decode(JobStatus, response.content)

    async def retry_failed(self, job_id: str) -> JobRetry:
        """Score again a completed job's transport failures (``POST .../retry``)."""
        response = await self._jobs_request("POST", f"{job_path(job_id, '')}/retry")
        return decode(JobRetry, response.content)

    async def jobs(self, *, limit: int = 50, cursor: str | None = None) -> JobPage:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        response = await self._jobs_request("GET", "", params=params)
        return decode(JobPage, response.content)

    async def iter_jobs(self, *, page_size: int = 50) -> AsyncIterator[JobStatus]:
        cursor: str | None = None
        while True:
            page = await self.jobs(limit=page_size, cursor=cursor)
            for item in page.items:
                yield item
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    # the names before the service's unit of work was called a job

    async def submit(
        self,
        source: Source,
        *,
        name: str | None = None,
        idempotency_key: str | None = None,
        judge: str | None = None,
    ) -> JobAccepted:
        """Deprecated name of ``submit_job``."""
        deprecated_name("submit", "submit_job")
        return await self.submit_job(
            source, name=name, idempotency_key=idempotency_key, judge=judge
        )

    async def get_batch(self, batch_id: str) -> JobStatus:
        """Deprecated name of ``job``."""
        deprecated_name("get_batch", "job")
        return await self.job(batch_id)

    async def cancel(self, batch_id: str) -> JobStatus:
        """Deprecated name of ``cancel_job``."""
        deprecated_name("cancel", "cancel_job")
        return await self.cancel_job(batch_id)

    async def list_batches(self, *, limit: int = 50, cursor: str | None = None) -> JobPage:
        """Deprecated name of ``jobs``."""
        deprecated_name("list_batches", "jobs")
        return await self.jobs(limit=limit, cursor=cursor)

    def iter_batches(self, *, page_size: int = 50) -> AsyncIterator[JobStatus]:
        """Deprecated name of ``iter_jobs``."""
        deprecated_name("iter_batches", "iter_jobs")
        return self.iter_jobs(page_size=page_size)

    async def wait(
        self,
        job_id: str,
        *,
        progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - WaitTimeout carries the last status
        poll_interval: float = 1.0,
        events: bool = True,
    ) -> JobStatus:
        deadline = None if timeout is None else time.monotonic() + timeout
        watch = self._watch_events if events else self._watch_polling
        last: JobStatus | None = None
        async with aclosing(watch(job_id, deadline, poll_interval)) as statuses:
            async for status in statuses:
                last = status
                if progress is not None:
                    outcome = progress(status)
                    if inspect.isawaitable(outcome):
                        await outcome
                if status.terminal:
                    return status
                if deadline is not None and time.monotonic() >= deadline:
                    break
        raise WaitTimeout(
            f"job {job_id} still {last.status if last else 'unknown'} after {timeout} s",
            last=last,
        )

    async def iter_result_lines(
        self,
        job_id: str,
        *,
        offset: int = 0,
        follow: bool = False,
        poll_interval: float = 1.0,
    ) -> AsyncGenerator[bytes, None]:
        position, failures = offset, 0
        while True:
            ended = (await self.job(job_id)).terminal if follow else True
            response = await self._jobs_request(
                "GET",
                f"{job_path(job_id, root='')}/results",
                params={"offset": position},
                headers={"accept": NDJSON},
                stream=True,
            )
            splitter = LineSplitter()
            try:
                async for chunk in response.aiter_bytes():
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
                await self._sleep(self.retry.delay(failures - 1))
                continue
            finally:
                await response.aclose()
            if ended:
                return
            await self._sleep(poll_interval)

    async def iter_results(
        self, job_id: str, *, offset: int = 0, follow: bool = False, poll_interval: float = 1.0
    ) -> AsyncIterator[ItemResult]:
        lines = self.iter_result_lines(
            job_id, offset=offset, follow=follow, poll_interval=poll_interval
        )
        async with aclosing(lines) as stream:
            async for line in stream:
                yield decode(ItemResult, line)

    async def download_results(
        self, job_id: str, path: str | Path, *, resume: bool = False, follow: bool = False
    ) -> int:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        offset = count_complete_lines(path) if resume and path.exists() else 0
        written = 0
        async with (
            await anyio.open_file(path, "ab" if resume else "wb") as sink,
            aclosing(self.iter_result_lines(job_id, offset=offset, follow=follow)) as lines,
        ):
            async for line in lines:
                await sink.write(line + b"\n")
                written += 1
        return written

    @overload
    async def report(self, job_id: str, format: Literal["json"] = "json") -> dict[str, Any]: ...
    @overload
    async def report(self, job_id: str, format: Literal["md", "html"]) -> str: ...
    async def report(self, job_id: str, format: ReportFormat = "json") -> dict[str, Any] | str:
        response = await self._jobs_request(
            "GET", f"{job_path(job_id, root='')}/report", params={"format": format}
        )
        return decode_json(response) if format == "json" else response.text

    # ------------------------------------------------------------ service facts

    async def judge(self, judge: str | None = None) -> JudgeInfo:
        """One judge's frozen configuration (unset: the default judge's)."""
        params = {"judge": judge} if judge is not None else None
        try:
            response = await self._request("GET", "/v1/judge", params=params)
        except NotFound:  # a server from before the path was renamed (an unknown judge is 422)
            response = await self._request("GET", "/v1/evaluator", params=params)
        return decode(JudgeInfo, response.content)

    async def evaluator(self, judge: str | None = None) -> JudgeInfo:
        """Deprecated name of ``judge``."""
        warnings.warn("evaluator() is deprecated: call judge() instead", DeprecationWarning, 2)
        return await self.judge(judge)

    async def config(self) -> ServiceConfig:
        response = await self._request("GET", "/v1/config")
        return decode(ServiceConfig, response.content)

    async def knowledge_base(self) -> KnowledgeBaseInfo:
        response = await self._request("GET", "/v1/knowledge-base")
        return decode(KnowledgeBaseInfo, response.content)

    async def modifications(self) -> ModificationCatalogue:
        response = await self._request("GET", "/v1/modifications")
        return decode(ModificationCatalogue, response.content)

    async def health(self) -> Health:
        response = await self._request("GET", "/healthz")
        return decode(Health, response.content)

    async def ready(self) -> Readiness:
        try:
            response = await self._request("GET", "/readyz", retries=0)
        except ApiError as exc:
            readiness = readiness_of(exc)
            if readiness is None:
                raise
            return readiness
        return decode(Readiness, response.content)

    # ------------------------------------------------------------ plumbing

    async def _request(
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
        async def attempt() -> httpx.Response:
            request = self._http.build_request(
                method,
                path,
                params=params,
                headers={**(body.headers() if body else {}), **(headers or {})},
                content=body.async_content() if body is not None else None,
                timeout=http_timeout if http_timeout is not None else self._http.timeout,
            )
            try:
                response = await self._http.send(request, stream=stream)
                if response.is_error:
                    try:
                        await response.aread()
                    finally:
                        await response.aclose()
                    raise error_from_response(response)
            except httpx.HTTPError as exc:
                raise transport_error(request, exc) from exc
            return response

        if retries is None:
            retries = self.retry.max_retries if body is None or body.replayable else 0
        if retries == 0:
            return await attempt()
        retrying = AsyncRetrying(
            stop=stop_after_attempt(retries + 1),
            wait=self._wait,
            retry=retry_if_exception(should_retry),
            sleep=self._sleep,  # type: ignore[arg-type]  # any awaitable result will do
            reraise=True,
        )
        return await retrying(attempt)

    async def _jobs_request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """``_request`` under the server's jobs root; see ``FaithJudgeClient._jobs_request``."""
        if self._jobs_root is not None:
            return await self._request(method, self._jobs_root + path, **kwargs)
        try:
            response = await self._request(method, JOBS + path, **kwargs)
        except NotFound:
            # the same 404 again when the job is unknown; from an older server, its answer
            response = await self._request(method, OLD_JOBS + path, **kwargs)
            self._jobs_root = OLD_JOBS
            return response
        self._jobs_root = JOBS
        return response

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        return self.retry.delay(state.attempt_number - 1, retry_after=retry_after_of(exc))

    @asynccontextmanager
    async def _open_events(self, job_id: str, read_timeout: float) -> AsyncIterator[EventSource]:
        timeout = self._http.timeout
        response = await self._jobs_request(
            "GET",
            f"{job_path(job_id, root='')}/events",
            headers={"accept": "text/event-stream", "cache-control": "no-store"},
            stream=True,
            http_timeout=httpx.Timeout(timeout.connect or 10.0, read=read_timeout),
        )
        try:
            yield EventSource(response)
        finally:
            await response.aclose()

    async def _watch_events(
        self, job_id: str, deadline: float | None, poll_interval: float
    ) -> AsyncGenerator[JobStatus, None]:
        while True:
            read_timeout = EVENTS_READ_TIMEOUT_S
            if deadline is not None:
                read_timeout = max(0.1, min(read_timeout, deadline - time.monotonic()))
            try:
                async with (
                    self._open_events(job_id, read_timeout) as source,
                    aclosing(source.aiter_sse()) as events,
                ):
                    async for event in events:
                        if event.event == "progress":
                            status = decode(JobStatus, event.data)
                            yield status
                            if status.terminal:
                                return
                        elif event.event == "end":
                            break
            except SSEError:
                async with aclosing(
                    self._watch_polling(job_id, deadline, poll_interval)
                ) as polling:
                    async for status in polling:
                        yield status
                return
            except (httpx.TransportError, TransportError):
                pass
            status = await self.job(job_id)
            yield status
            if status.terminal or (deadline is not None and time.monotonic() >= deadline):
                return
            await self._sleep(min(poll_interval, remaining(deadline)))

    async def _watch_polling(
        self, job_id: str, deadline: float | None, poll_interval: float
    ) -> AsyncGenerator[JobStatus, None]:
        while True:
            status = await self.job(job_id)
            yield status
            if status.terminal or (deadline is not None and time.monotonic() >= deadline):
                return
            await self._sleep(min(poll_interval, remaining(deadline)))
