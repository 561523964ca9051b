"""Request bodies as bounded streams: NDJSON as it arrives, or the ``file`` part of a multipart
upload parsed on the fly (nothing is spooled), with a size limit and a read deadline enforced
while reading.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
from faithjudge_client.bodies import NDJSON
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from faithjudge.api.problems import HttpProblem

__all__ = ["BodyLimitMiddleware", "ReadDeadline", "job_body"]

_NDJSON_TYPES = frozenset({NDJSON, "application/jsonl", "application/jsonlines", "text/plain"})


def _too_large(limit: int) -> HttpProblem:
    return HttpProblem(413, f"the request body exceeds {limit} bytes")


@dataclass(frozen=True, slots=True)
class ReadDeadline:
    """How slowly an upload may arrive: ``idle_s`` at most without a byte, and, once the body
    has taken longer than that, ``min_bytes_per_s`` on average (0: no rate check)."""

    idle_s: float
    min_bytes_per_s: int = 0


def _too_slow(detail: str) -> HttpProblem:
    # the body is left unread: the connection cannot carry another request
    return HttpProblem(408, detail, headers={"Connection": "close"})


async def _limited(
    request: Request, limit: int, deadline: ReadDeadline | None = None
) -> AsyncIterator[bytes]:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    size = 0
    started = time.monotonic()
    idle_s = deadline.idle_s if deadline is not None else None
    chunks = request.stream().__aiter__()
    while True:
        try:
            with anyio.fail_after(idle_s):
                chunk = await chunks.__anext__()
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise _too_slow(
                f"the upload sent nothing for {idle_s:g} s (upload_read_timeout_s)"
            ) from None
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        if deadline is not None and deadline.min_bytes_per_s:
            elapsed = time.monotonic() - started
            if elapsed > deadline.idle_s and size < deadline.min_bytes_per_s * elapsed:
                raise _too_slow(
                    f"the upload averaged {size / elapsed:.0f} bytes/s, under the "
                    f"{deadline.min_bytes_per_s} bytes/s required (upload_min_bytes_per_s)"
                )
        if chunk:
            yield chunk


async def _multipart_file(body: AsyncIterator[bytes], boundary: bytes) -> AsyncIterator[bytes]:
    out: list[bytes] = []
    state: dict[str, Any] = {
        "field": b"", "value": b"", "headers": {}, "is_file": False, "seen": False
    }  # fmt: skip

    def on_part_begin() -> None:
        state["headers"] = {}
        state["is_file"] = False

    def on_header_field(data: bytes, start: int, end: int) -> None:
        state["field"] += data[start:end]

    def on_header_value(data: bytes, start: int, end: int) -> None:
        state["value"] += data[start:end]

    def on_header_end() -> None:
        state["headers"][state["field"].lower()] = state["value"]
        state["field"], state["value"] = b"", b""

    def on_headers_finished() -> None:
        disposition = state["headers"].get(b"content-disposition", b"")
        _, options = parse_options_header(disposition)
        if options.get(b"name") == b"file":
            if state["seen"]:
                # a second file would be dropped unread: refuse the upload, not the lines
                raise HttpProblem(
                    422,
                    "the multipart body has more than one 'file' field: "
                    "upload one file per job (or concatenate them)",
                )
            state["is_file"] = True
            state["seen"] = True

    def on_part_data(data: bytes, start: int, end: int) -> None:
        if state["is_file"]:
            out.append(data[start:end])

    def on_part_end() -> None:
        state["is_file"] = False

    parser = MultipartParser(
        boundary,
        callbacks={
            "on_part_begin": on_part_begin,
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_headers_finished": on_headers_finished,
            "on_part_data": on_part_data,
            "on_part_end": on_part_end,
        },
    )
    try:
        async for chunk in body:
            parser.write(chunk)
            if out:
                data = b"".join(out)
                out.clear()
                yield data
        parser.finalize()
    except MultipartParseError as exc:
        raise HttpProblem(422, f"malformed multipart body: {exc}") from None
    if out:
        yield b"".join(out)
    if not state["seen"]:
        raise HttpProblem(422, "the multipart body has no 'file' field")


def job_body(
    request: Request, limit: int, *, deadline: ReadDeadline | None = None
) -> AsyncIterator[bytes]:
    """The JSONL bytes of a job upload, whatever its content type; 415 for others, 408 for
    a body slower than ``deadline``."""
    content_type = request.headers.get("content-type", "")
    media, options = parse_options_header(content_type)
    media_type = media.decode("latin-1").lower()
    if media_type in _NDJSON_TYPES:
        return _limited(request, limit, deadline)
    if media_type == "multipart/form-data":
        boundary = options.get(b"boundary")
        if not boundary:
            raise HttpProblem(422, "multipart/form-data without a boundary")
        return _multipart_file(_limited(request, limit, deadline), boundary)
    raise HttpProblem(
        415,
        f"unsupported content type {media_type or '(none)'!r}: send {NDJSON} or "
        "multipart/form-data with a 'file' field",
    )


class BodyLimitMiddleware:
    """Caps every request body except job uploads (which apply their tenant's own limit)."""

    def __init__(self, app: ASGIApp, limit: int, exempt: tuple[tuple[str, str], ...]) -> None:
        self.app = app
        self.limit = limit
        self.exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"], scope["path"].rstrip("/")) in self.exempt:
            await self.app(scope, receive, send)
            return
        limit = self.limit
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                scope["faithjudge.too_large"] = True
        size = 0

        async def limited() -> Message:
            nonlocal size
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > limit or scope.get("faithjudge.too_large"):
                    raise HTTPException(413, f"the request body exceeds {limit} bytes")
            return message

        await self.app(scope, limited, send)
