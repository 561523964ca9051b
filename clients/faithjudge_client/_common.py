"""What the sync and the async client share: configuration, bodies, retry rules, line splitting.

Nothing here does I/O on the network; the two clients differ only in how they send and sleep.
"""

from __future__ import annotations

import io
import os
import time
import warnings
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar
from urllib.parse import quote

import anyio
import httpx
import orjson
from pydantic import BaseModel, ValidationError

from faithjudge_client._version import __version__
from faithjudge_client.bodies import NDJSON, Readiness
from faithjudge_client.errors import (
    ApiError,
    ConfigError,
    ProtocolError,
    RateLimited,
    ServerError,
    TransportError,
    UserInputError,
)
from faithjudge_client.retry import RetryPolicy, parse_retry_after

__all__ = [
    "CHUNK_BYTES",
    "DEFAULT_RETRY",
    "DEFAULT_TIMEOUT",
    "EVENTS_READ_TIMEOUT_S",
    "JOBS",
    "OLD_JOBS",
    "Body",
    "LineSplitter",
    "Source",
    "count_complete_lines",
    "decode",
    "decode_json",
    "default_headers",
    "deprecated_name",
    "job_path",
    "json_body",
    "ndjson_body",
    "readiness_of",
    "remaining",
    "resolve_api_key",
    "resolve_base_url",
    "retry_after_of",
    "should_retry",
    "transport_error",
]

M = TypeVar("M", bound=BaseModel)
URL_ENV = "FAITHJUDGE_URL"
KEY_ENV = "FAITHJUDGE_API_KEY"
CHUNK_BYTES = 64 * 1024
# Scoring one item may wait on a judge that retries for minutes; connecting should not.
DEFAULT_TIMEOUT = httpx.Timeout(300.0, connect=10.0)
# A quiet event stream is re-opened after this long, so a lost connection cannot hang a wait.
EVENTS_READ_TIMEOUT_S = 30.0
DEFAULT_RETRY = RetryPolicy(max_retries=3, base=0.5, multiplier=2.0, max_delay=30.0)
# Statuses that say "try again": the request was not (or not fully) processed.
_RETRY_SERVER_STATUSES = frozenset({500, 502, 503, 504})

Line = BaseModel | Mapping[str, Any] | bytes | str
"""One job line: a ``ScoreRequest`` (or any model), a mapping, or JSON text."""
Source = str | os.PathLike[str] | bytes | IO[bytes] | Iterable[Line] | AsyncIterable[Line]
"""What ``submit_job`` uploads: a file path, bytes, a binary file, or lines (sync or async)."""


def resolve_base_url(base_url: str | None) -> str:
    """``base_url`` or ``$FAITHJUDGE_URL``, checked to be an http(s) URL."""
    value = (base_url or os.environ.get(URL_ENV) or "").strip()
    if not value:
        raise ConfigError(f"no server URL: pass base_url (--server) or set {URL_ENV}")
    try:
        url = httpx.URL(value)
    except httpx.InvalidURL as exc:
        raise ConfigError(f"server URL {value!r} is not a URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(f"server URL {value!r} must look like http://host:port")
    return value.rstrip("/")


def resolve_api_key(api_key: str | None) -> str | None:
    """``api_key`` or ``$FAITHJUDGE_API_KEY``; None (no header) when neither is set."""
    value = api_key if api_key is not None else os.environ.get(KEY_ENV)
    if value is None:
        return None
    return value.strip() or None


def default_headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"user-agent": f"faithjudge-sdk/{__version__}", "accept": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    headers.update(extra or {})
    return headers


# ---------------------------------------------------------------- retries


def should_retry(exc: BaseException) -> bool:
    """Retry what says "not processed, try again": no answer at all, 429, 500/502/503/504.

    Every request the SDK sends may be repeated: GETs and DELETE are idempotent, scoring is a
    pure function of its body, and a job upload carries an ``Idempotency-Key``. Bodies that
    cannot be sent twice (a one-shot stream) are never retried (see ``Body.replayable``).
    """
    if isinstance(exc, TransportError | RateLimited):
        return True
    return isinstance(exc, ServerError) and exc.status in _RETRY_SERVER_STATUSES


def retry_after_of(exc: BaseException | None) -> float | None:
    if isinstance(exc, ApiError):
        return parse_retry_after(exc.headers)
    return None


def readiness_of(exc: ApiError) -> Readiness | None:
    """The readiness report a not-ready server sends with its 503, if the body is one."""
    if exc.status != 503 or not exc.content:
        return None
    try:
        return Readiness.model_validate_json(exc.content)
    except ValidationError:
        return None


def decode(model: type[M], data: bytes | str) -> M:
    """``data`` parsed as ``model``; an answer off the contract is a ``ProtocolError``."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise ProtocolError(
            f"the server's answer is not a valid {model.__name__} ({exc.error_count()} "
            f"error(s); first at {where}: {first['msg']}); is the URL a FaithJudge server of a "
            "compatible version?"
        ) from exc


def decode_json(response: httpx.Response) -> Any:
    try:
        return orjson.loads(response.content)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"the server's answer is not JSON: {exc}") from exc


def transport_error(request: httpx.Request | None, exc: httpx.HTTPError) -> TransportError:
    where = f"{request.method} {request.url}" if request is not None else "request"
    kind = type(exc).__name__
    detail = str(exc) or "no detail"
    return TransportError(f"{where}: {kind}: {detail}")


# ---------------------------------------------------------------- request bodies


@dataclass(frozen=True, slots=True)
class Body:
    """A request body that each attempt opens afresh (so a retry sends it whole again).

    ``replayable`` is False for one-shot streams: those get a single attempt. ``length`` is sent
    as ``Content-Length`` when known, so the server can refuse an oversized upload at once.
    """

    content_type: str
    length: int | None
    replayable: bool
    _data: bytes | None = None
    _path: Path | None = None
    _handle: IO[bytes] | None = None
    _start: int = 0
    _lines: Iterable[Line] | AsyncIterable[Line] | None = None

    def headers(self) -> dict[str, str]:
        headers = {"content-type": self.content_type}
        if self.length is not None:
            headers["content-length"] = str(self.length)
        return headers

    def sync_content(self) -> bytes | Iterator[bytes]:
        if self._data is not None:
            return self._data
        if self._path is not None:
            return _file_chunks(self._path)
        if self._handle is not None:
            return _handle_chunks(self._handle, self._start)
        if isinstance(self._lines, AsyncIterable):
            raise UserInputError("an async iterable of lines needs the AsyncFaithJudgeClient")
        assert self._lines is not None
        return _line_chunks(self._lines)

    def async_content(self) -> bytes | AsyncIterator[bytes]:
        if self._data is not None:
            return self._data
        if self._path is not None:
            return _afile_chunks(self._path)
        if self._handle is not None:
            return _ahandle_chunks(self._handle, self._start)
        assert self._lines is not None
        return _aline_chunks(self._lines)


def json_body(payload: BaseModel | Mapping[str, Any]) -> Body:
    if isinstance(payload, BaseModel):
        data = payload.model_dump_json().encode()
    else:
        data = orjson.dumps(payload)
    return Body("application/json", len(data), True, _data=data)


def ndjson_body(source: Source) -> Body:
    """A job upload body: a file path, bytes, a binary file, or an iterable of lines.

    Lines may be ``ScoreRequest`` models, mappings, or JSON text (bytes or str), one per item.
    A path or a seekable file is streamed from disk in chunks, never read whole.
    """
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        return Body(NDJSON, len(data), True, _data=data)
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise UserInputError(f"job file not found: {path}", field="file")
        return Body(NDJSON, path.stat().st_size, True, _path=path)
    if isinstance(source, io.TextIOBase):
        raise UserInputError("open the job file in binary mode ('rb')", field="file")
    if hasattr(source, "read"):
        handle: IO[bytes] = source  # type: ignore[assignment]
        if handle.seekable():
            start = handle.tell()
            size = handle.seek(0, io.SEEK_END) - start
            handle.seek(start)
            return Body(NDJSON, size, True, _handle=handle, _start=start)
        return Body(NDJSON, None, False, _handle=handle, _start=-1)
    if isinstance(source, Iterable | AsyncIterable) and not isinstance(source, bytes):
        replayable = isinstance(source, Sequence)
        return Body(NDJSON, None, replayable, _lines=source)
    raise UserInputError(
        f"cannot upload a {type(source).__name__}: pass a path, bytes, a binary file or lines",
        field="file",
    )


def _file_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            yield chunk


async def _afile_chunks(path: Path) -> AsyncIterator[bytes]:
    async with await anyio.open_file(path, "rb") as handle:
        while chunk := await handle.read(CHUNK_BYTES):
            yield chunk


def _handle_chunks(handle: IO[bytes], start: int) -> Iterator[bytes]:
    if start >= 0:
        handle.seek(start)
    while chunk := handle.read(CHUNK_BYTES):
        yield chunk


async def _ahandle_chunks(handle: IO[bytes], start: int) -> AsyncIterator[bytes]:
    if start >= 0:
        await anyio.to_thread.run_sync(handle.seek, start)
    while chunk := await anyio.to_thread.run_sync(handle.read, CHUNK_BYTES):
        yield chunk


def encode_line(item: Line) -> bytes:
    if isinstance(item, BaseModel):
        return item.model_dump_json().encode() + b"\n"
    if isinstance(item, bytes):
        return item.rstrip(b"\r\n") + b"\n"
    if isinstance(item, str):
        return item.rstrip("\r\n").encode() + b"\n"
    if isinstance(item, Mapping):
        return orjson.dumps(item) + b"\n"
    raise UserInputError(
        f"cannot encode a {type(item).__name__} as a job line: pass a ScoreRequest, a dict "
        "or JSON text",
        field="file",
    )


def _line_chunks(lines: Iterable[Line]) -> Iterator[bytes]:
    pending: list[bytes] = []
    size = 0
    for item in lines:
        encoded = encode_line(item)
        pending.append(encoded)
        size += len(encoded)
        if size >= CHUNK_BYTES:
            yield b"".join(pending)
            pending, size = [], 0
    if pending:
        yield b"".join(pending)


async def _aline_chunks(lines: Iterable[Line] | AsyncIterable[Line]) -> AsyncIterator[bytes]:
    if not isinstance(lines, AsyncIterable):
        for chunk in _line_chunks(lines):
            yield chunk
        return
    pending: list[bytes] = []
    size = 0
    async for item in lines:
        encoded = encode_line(item)
        pending.append(encoded)
        size += len(encoded)
        if size >= CHUNK_BYTES:
            yield b"".join(pending)
            pending, size = [], 0
    if pending:
        yield b"".join(pending)


# ---------------------------------------------------------------- result lines


class LineSplitter:
    """Cuts a byte stream into its non-blank lines (without the newline)."""

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        *lines, self._tail = (self._tail + chunk).split(b"\n")
        return [line.rstrip(b"\r") for line in lines if line.strip()]

    def flush(self) -> list[bytes]:
        tail, self._tail = self._tail.rstrip(b"\r"), b""
        return [tail] if tail.strip() else []


def count_complete_lines(path: Path) -> int:
    """Non-blank lines of a result file kept for a resume; a torn last line is cut off."""
    count = good_end = 0
    with path.open("rb+") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break
            good_end += len(raw)
            if raw.strip():
                count += 1
        handle.truncate(good_end)
    return count


# ---------------------------------------------------------------- paths and clocks


# Where the jobs are; servers from before the service's unit of work was called a job serve
# them under OLD_JOBS only (a 404 on JOBS), newer ones under both.
JOBS = "/v1/jobs"
OLD_JOBS = "/v1/batches"


def job_path(job_id: str, root: str = JOBS) -> str:
    """The path of job ``job_id`` under ``root`` (``JOBS`` or ``OLD_JOBS``)."""
    if not job_id or not job_id.strip():
        raise UserInputError("the job id is empty", field="job_id")
    return f"{root}/{quote(job_id, safe='')}"


def deprecated_name(old: str, new: str) -> None:
    """Warn the caller of a client method's older name (``old``) to call ``new`` instead."""
    warnings.warn(
        f"{old}() is deprecated: call {new}() instead (the service calls a batch a job)",
        DeprecationWarning,
        stacklevel=3,
    )


def remaining(deadline: float | None) -> float:
    return float("inf") if deadline is None else max(0.0, deadline - time.monotonic())
