"""``FaithJudgeClient``: the synchronous Python client of the FaithJudge REST API.

    with FaithJudgeClient("http://127.0.0.1:8000", api_key="...") as fj:
        result = fj.score({"question": ..., "ground_truth": ..., "cot": ...})
        batch = fj.submit("requests.jsonl")             # streamed from disk
        status = fj.wait(batch.id, progress=print)      # server-sent events, polling as fallback
        for item in fj.iter_results(batch.id):          # resumes by offset if the stream breaks
            ...

``base_url`` and ``api_key`` default to ``$FAITHJUDGE_URL`` and ``$FAITHJUDGE_API_KEY``. Errors are
the typed tree of ``faithjudge_client.errors``. ``AsyncFaithJudgeClient``
(``faithjudge_client.aio``) has the
same methods, awaitable.
"""

from __future__ import annotations

import time
import uuid
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
    Body,
    LineSplitter,
    Source,
    batch_path,
    count_complete_lines,
    decode,
    decode_json,
    default_headers,
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
    BatchAccepted,
    BatchPage,
    BatchRetry,
    BatchStatus,
    EvaluatorInfo,
    Health,
    KnowledgeBaseInfo,
    ModificationCatalogue,
    Readiness,
    ReportFormat,
    ServiceConfig,
)
from faithjudge_client.errors import ApiError, TransportError, WaitTimeout, error_from_response
from faithjudge_client.lines import ItemResult, ScoreRequest
from faithjudge_client.retry import RetryPolicy

__all__ = ["FaithJudgeClient", "ProgressCallback"]

ProgressCallback = Callable[[BatchStatus], object]


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

    # ------------------------------------------------------------ batches

    def submit(
        self,
        source: Source,
        *,
        name: str | None = None,
        idempotency_key: str | None = None,
        judge: str | None = None,
    ) -> BatchAccepted:
        """Upload a batch (``POST /v1/batches``), streaming ``source`` as NDJSON.

        ``source`` is a file path, bytes, a binary file or an iterable of lines. Rejected lines
        come back in ``rejected`` with their numbers; when no line is valid the server answers
        422 and this raises ``ValidationFailed`` listing them. The upload is retried with the
        same ``idempotency_key`` (a fresh one when not given), so a retry never makes a second
        batch. ``judge`` picks the judge every line is scored with (one the service offers,
        ``config()``); unset, the service's default. The batch keeps it for good.
        """
        body = ndjson_body(source)
        headers = {"idempotency-key": idempotency_key or uuid.uuid4().hex}
        params = {k: v for k, v in (("name", name), ("judge", judge)) if v is not None}
        response = self._request("POST", "/v1/batches", body=body, headers=headers, params=params)
        return decode(BatchAccepted, response.content)

    def get_batch(self, batch_id: str) -> BatchStatus:
        response = self._request("GET", batch_path(batch_id))
        return decode(BatchStatus, response.content)

    def cancel(self, batch_id: str) -> BatchStatus:
        """Cancel a batch; lines already scored keep their results."""
        response = self._request("DELETE", batch_path(batch_id))
        return decode(BatchStatus, response.content)

    def retry_failed(self, batch_id: str) -> BatchRetry:
        """Score again the lines of a completed batch whose grades failed at the transport stage
        (the judge was down), once the judge is back (``POST /v1/batches/{id}/retry``); the
        other lines keep their results. ``requeued`` is 0 when there was none; a batch not yet
        completed, cancelled or failed raises ``Conflict``."""
        response = self._request("POST", f"{batch_path(batch_id)}/retry")
        return decode(BatchRetry, response.content)

    def list_batches(self, *, limit: int = 50, cursor: str | None = None) -> BatchPage:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        response = self._request("GET", "/v1/batches", params=params)
        return decode(BatchPage, response.content)

    def iter_batches(self, *, page_size: int = 50) -> Iterator[BatchStatus]:
        """Every batch of this API key, newest first, following the pages."""
        cursor: str | None = None
        while True:
            page = self.list_batches(limit=page_size, cursor=cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def wait(
        self,
        batch_id: str,
        *,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
        poll_interval: float = 1.0,
        events: bool = True,
    ) -> BatchStatus:
        """Block until the batch is completed, cancelled or failed; return its last status.

        ``progress`` is called with each status seen. With ``events`` the server's event stream
        is followed (re-opened, after a status check, whenever it breaks or stays quiet);
        without it, or when the server offers no stream, the status is polled every
        ``poll_interval`` seconds. Raises ``WaitTimeout`` after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        watch = self._watch_events if events else self._watch_polling
        last: BatchStatus | None = None
        for status in watch(batch_id, deadline, poll_interval):
            last = status
            if progress is not None:
                progress(status)
            if status.terminal:
                return status
            if deadline is not None and time.monotonic() >= deadline:
                break
        raise WaitTimeout(
            f"batch {batch_id} still {last.status if last else 'unknown'} after {timeout} s",
            last=last,
        )

    def iter_result_lines(
        self,
        batch_id: str,
        *,
        offset: int = 0,
        follow: bool = False,
        poll_interval: float = 1.0,
    ) -> Iterator[bytes]:
        """Result lines (raw JSON, in input order) from result index ``offset`` (0-based).

        While a batch runs the server sends the prefix done so far; with ``follow`` the stream
        goes on until the batch has ended, asking for the next lines every ``poll_interval``
        seconds. A stream that breaks is re-opened at the first line not yet yielded, up to
        ``retry.max_retries`` times in a row.
        """
        position, failures = offset, 0
        while True:
            # Read the status first: a batch that had ended before the stream opened is whole.
            ended = self.get_batch(batch_id).terminal if follow else True
            response = self._request(
                "GET",
                f"{batch_path(batch_id)}/results",
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
        self, batch_id: str, *, offset: int = 0, follow: bool = False, poll_interval: float = 1.0
    ) -> Iterator[ItemResult]:
        """``iter_result_lines`` parsed into ``ItemResult`` models."""
        lines = self.iter_result_lines(
            batch_id, offset=offset, follow=follow, poll_interval=poll_interval
        )
        for line in lines:
            yield decode(ItemResult, line)

    def download_results(
        self, batch_id: str, path: str | Path, *, resume: bool = False, follow: bool = False
    ) -> int:
        """Write the result lines to ``path``; returns how many lines this call wrote.

        With ``resume`` the complete lines already in ``path`` are kept (a torn last line is
        cut) and only the rest is fetched; without it ``path`` is overwritten. ``follow`` keeps
        writing until the batch has ended (see ``iter_result_lines``).
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        offset = count_complete_lines(path) if resume and path.exists() else 0
        written = 0
        with path.open("ab" if resume else "wb") as sink:
            for line in self.iter_result_lines(batch_id, offset=offset, follow=follow):
                sink.write(line + b"\n")
                written += 1
        return written

    @overload
    def report(self, batch_id: str, format: Literal["json"] = "json") -> dict[str, Any]: ...
    @overload
    def report(self, batch_id: str, format: Literal["md", "html"]) -> str: ...
    def report(self, batch_id: str, format: ReportFormat = "json") -> dict[str, Any] | str:
        """The report of the lines done so far: a dict for ``json``, text for ``md``/``html``."""
        response = self._request("GET", f"{batch_path(batch_id)}/report", params={"format": format})
        return decode_json(response) if format == "json" else response.text

    # ------------------------------------------------------------ service facts

    def evaluator(self, judge: str | None = None) -> EvaluatorInfo:
        """One judge's frozen configuration (unset: the default judge's)."""
        params = {"judge": judge} if judge is not None else None
        return decode(EvaluatorInfo, self._request("GET", "/v1/evaluator", params=params).content)

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

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        return self.retry.delay(state.attempt_number - 1, retry_after=retry_after_of(exc))

    @contextmanager
    def _open_events(self, batch_id: str, read_timeout: float) -> Iterator[EventSource]:
        timeout = self._http.timeout
        response = self._request(
            "GET",
            f"{batch_path(batch_id)}/events",
            headers={"accept": "text/event-stream", "cache-control": "no-store"},
            stream=True,
            http_timeout=httpx.Timeout(timeout.connect or 10.0, read=read_timeout),
        )
        try:
            yield EventSource(response)
        finally:
            response.close()

    def _watch_events(
        self, batch_id: str, deadline: float | None, poll_interval: float
    ) -> Iterator[BatchStatus]:
        while True:
            read_timeout = EVENTS_READ_TIMEOUT_S
            if deadline is not None:
                read_timeout = max(0.1, min(read_timeout, deadline - time.monotonic()))
            try:
                with self._open_events(batch_id, read_timeout) as source:
                    for event in source.iter_sse():
                        if event.event == "progress":
                            status = decode(BatchStatus, event.data)
                            yield status
                            if status.terminal:
                                return
                        elif event.event == "end":
                            break
            except SSEError:
                # Not an event stream (a proxy in between, an older server): poll instead.
                yield from self._watch_polling(batch_id, deadline, poll_interval)
                return
            except (httpx.TransportError, TransportError):
                pass  # the stream broke or stayed quiet: check the status, then listen again
            status = self.get_batch(batch_id)
            yield status
            if status.terminal or (deadline is not None and time.monotonic() >= deadline):
                return
            self._sleep(min(poll_interval, remaining(deadline)))

    def _watch_polling(
        self, batch_id: str, deadline: float | None, poll_interval: float
    ) -> Iterator[BatchStatus]:
        while True:
            status = self.get_batch(batch_id)
            yield status
            if status.terminal or (deadline is not None and time.monotonic() >= deadline):
                return
            self._sleep(min(poll_interval, remaining(deadline)))
