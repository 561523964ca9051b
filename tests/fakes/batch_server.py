"""An OpenAI-compatible fake Files + Batches API served over real HTTP on loopback.

Endpoints: ``POST /v1/files`` (multipart, ``purpose=batch``), ``GET /v1/files/{id}/content``,
``POST /v1/batches``, ``GET /v1/batches`` (newest first, ``limit``/``after``),
``GET /v1/batches/{id}`` and ``POST /v1/batches/{id}/cancel``. A batch moves
validating → in_progress → finalizing → completed, one state every ``step_s`` seconds (0: one
state per retrieve). Its lines are answered when it reaches finalizing, with the fake judge's
replies and the same ``[[fake:FAULT]]`` / ``[[fake:FAULT*N]]`` directives, counted per
(user message, metric) across batches:

==================  ===========================================================================
rate_limit          error-file line with status 429
server_error        error-file line with status 500
unavailable         error-file line with status 503
hang, drop          error-file line ``batch_expired`` (the request did not run within the window)
not_json ...        200 with the same bad content as the live fake (``not_json``, ``truncated``,
bad_quote           ``schema_violation``, ``bad_quote``)
==================  ===========================================================================

``expire_batches`` / ``fail_batches`` make the next N batches end ``expired`` (no line answered,
every one in the error file as expired) or ``failed`` (validation error, no files). With
``stagger_s`` the n-th batch created (from 0) takes ``step_s + n * stagger_s`` per state, so
batches end one after another. The counters keep the cancel calls and the tokens billed. Any call to
``/chat/completions`` is counted in ``chat_calls`` and refused: the batch route must never make
one. Files live in a temporary folder, never in memory whole.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from tests.fakes.judge_server import (
    _BAD_QUOTE,
    _DIRECTIVE,
    _first_sentence,
    _listen,
    _metric_of,
    _server,
    _text_of,
    normal_reply,
    serving,
)

__all__ = ["FakeBatchApp", "FakeBatchConfig", "FakeBatches", "answer_line", "run_fake_batches"]

_STATES = ("validating", "in_progress", "finalizing", "completed")


@dataclass
class FakeBatchConfig:
    step_s: float = 0.0
    quote_mode: Literal["none", "first_sentence"] = "none"
    expire_batches: int = 0
    fail_batches: int = 0
    stagger_s: float = 0.0
    max_file_lines: int = 50_000
    max_file_bytes: int = 200 * 1024 * 1024
    cached_share: float = 0.0
    """The part of each answer's prompt tokens reported as read from the provider's prompt
    cache (``usage.prompt_tokens_details.cached_tokens``, as OpenAI's batches report it)."""


@dataclass
class FakeBatchCounters:
    files: int = 0
    batches: int = 0
    listings: int = 0  # GET /v1/batches pages served
    lines: int = 0
    chat_calls: int = 0
    by_custom_id: Counter[str] = field(default_factory=Counter)
    by_fault: Counter[str] = field(default_factory=Counter)
    file_lines: list[int] = field(default_factory=list)
    file_bytes: list[int] = field(default_factory=list)
    processing_s: float = 0.0
    cancels: int = 0  # POST /v1/batches/{id}/cancel calls
    prompt_tokens: int = 0  # usage of every line answered, as the provider bills it
    completion_tokens: int = 0
    cached_tokens: int = 0  # of the prompt tokens, those reported cached (``cached_share``)


def answer_line(
    line: dict[str, Any], attempts: Counter[tuple[str, str]], quote_mode: str, ids: Iterator[int]
) -> tuple[dict[str, Any], bool, str | None]:
    """(the output or error line, whether it goes to the error file, the fault applied)."""
    custom_id = line["custom_id"]
    body = line["body"]
    messages = body["messages"]
    system = "\n".join(_text_of(m.get("content")) for m in messages if m["role"] == "system")
    user = "\n".join(_text_of(m.get("content")) for m in messages if m["role"] == "user")
    metric = _metric_of(body.get("response_format") or {}, system, user) or "confidence_tone"
    key = (hashlib.sha1(user.encode()).hexdigest(), metric)
    attempts[key] += 1
    fault = None
    directive = _DIRECTIVE.search(user)
    if directive is not None and (directive.group(2) is None or attempts[key] <= int(directive[2])):
        fault = directive.group(1)
    request_id = f"req_fake_{next(ids)}"
    if fault in ("rate_limit", "server_error", "unavailable"):
        status = {"rate_limit": 429, "server_error": 500, "unavailable": 503}[fault]
        error = {"error": {"message": f"fake {fault}", "type": "server_error"}}
        response = {"status_code": status, "request_id": request_id, "body": error}
        return (
            {
                "id": f"batch_req_{request_id}",
                "custom_id": custom_id,
                "response": response,
                "error": None,
            },
            True,
            fault,
        )
    if fault in ("hang", "drop"):
        error = {
            "code": "batch_expired",
            "message": "This request could not be executed before the completion window expired.",
        }
        return (
            {
                "id": f"batch_req_{request_id}",
                "custom_id": custom_id,
                "response": None,
                "error": error,
            },
            True,
            fault,
        )
    quote = _first_sentence(user) if quote_mode == "first_sentence" else None
    reply = normal_reply(metric, quote)
    finish = "stop"
    if fault == "schema_violation":
        reply["score"] = 7
    elif fault == "bad_quote":
        reply.update(score=3, quotes=[_BAD_QUOTE], quote_spans=[[0, len(_BAD_QUOTE)]])
    content = orjson.dumps(reply).decode()
    if fault == "not_json":
        content = "I think the score is 4."
    elif fault == "truncated":
        content, finish = content[: len(content) // 2], "length"
    prompt_tokens = (len(system) + len(user)) // 4
    completion_tokens = max(1, len(content) // 4)
    completion = {
        "id": f"chatcmpl-{request_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-judge"),
        "system_fingerprint": "fp_fake_judge",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    response = {"status_code": 200, "request_id": request_id, "body": completion}
    return (
        {
            "id": f"batch_req_{request_id}",
            "custom_id": custom_id,
            "response": response,
            "error": None,
        },
        False,
        fault,
    )


class FakeBatchApp:
    """The Starlette app plus its state; the state machine advances on each retrieve."""

    def __init__(self, config: FakeBatchConfig | None = None, root: Path | None = None) -> None:
        self.config = config or FakeBatchConfig()
        self.counters = FakeBatchCounters()
        self._tmp = None if root is not None else tempfile.TemporaryDirectory(prefix="fakebatch-")
        self.root = root or Path(self._tmp.name)  # type: ignore[union-attr]
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._attempts: Counter[tuple[str, str]] = Counter()
        self._ids = iter(range(1, 1 << 62))
        self._lock = threading.Lock()
        self.asgi = Starlette(
            routes=[
                Route("/v1/files", self.upload, methods=["POST"]),
                Route("/v1/files/{file_id}/content", self.content, methods=["GET"]),
                Route("/v1/batches", self.create, methods=["POST"]),
                Route("/v1/batches", self.listing, methods=["GET"]),
                Route("/v1/batches/{batch_id}", self.retrieve, methods=["GET"]),
                Route("/v1/batches/{batch_id}/cancel", self.cancel, methods=["POST"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/fake/stats", self.stats, methods=["GET"]),
            ]
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.asgi(scope, receive, send)

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()

    # ----------------------------------------------------------------- files

    def _new_file(self, path: Path, purpose: str, name: str) -> dict[str, Any]:
        file_id = f"file-{next(self._ids)}"
        final = self.root / file_id
        path.rename(final)
        record = {
            "id": file_id,
            "object": "file",
            "bytes": final.stat().st_size,
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
            "path": str(final),
        }
        self.files[file_id] = record
        return record

    async def upload(self, request: Request) -> Response:
        async with request.form(max_part_size=1 << 31) as form:
            purpose = form.get("purpose")
            upload = form.get("file")
            if purpose != "batch" or upload is None or isinstance(upload, str):
                return _error(400, "send purpose=batch and a file")
            staging = self.root / f"upload-{next(self._ids)}"
            lines = size = 0
            with staging.open("wb") as sink:
                while chunk := await upload.read(1 << 20):
                    sink.write(chunk)
                    size += len(chunk)
                    lines += chunk.count(b"\n")
            name = upload.filename or "upload.jsonl"
        if lines > self.config.max_file_lines or size > self.config.max_file_bytes:
            staging.unlink()
            return _error(400, f"file over the limits: {lines} lines, {size} bytes")
        self.counters.files += 1
        self.counters.file_lines.append(lines)
        self.counters.file_bytes.append(size)
        record = self._new_file(staging, "batch", name)
        return JSONResponse({k: v for k, v in record.items() if k != "path"})

    async def content(self, request: Request) -> Response:
        record = self.files.get(request.path_params["file_id"])
        if record is None:
            return _error(404, "no such file")
        return FileResponse(record["path"], media_type="application/jsonl")

    # ----------------------------------------------------------------- batches

    async def create(self, request: Request) -> Response:
        body = await request.json()
        if body.get("endpoint") != "/v1/chat/completions":
            return _error(400, "endpoint must be /v1/chat/completions")
        if body.get("completion_window") != "24h":
            return _error(400, "completion_window must be 24h")
        source = self.files.get(body.get("input_file_id", ""))
        if source is None:
            return _error(404, "no such input file")
        self.counters.batches += 1
        batch_id = f"batch_{next(self._ids)}"
        now = time.time()
        batch = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "errors": None,
            "input_file_id": source["id"],
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": int(now),
            "metadata": body.get("metadata"),
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "_since": now,
            "_fate": "completed",
            "_index": self.counters.batches - 1,
        }
        if self.config.fail_batches > 0:
            self.config.fail_batches -= 1
            batch["_fate"] = "failed"
        elif self.config.expire_batches > 0:
            self.config.expire_batches -= 1
            batch["_fate"] = "expired"
        self.batches[batch_id] = batch
        return JSONResponse(_public(batch))

    async def listing(self, request: Request) -> Response:
        self.counters.listings += 1
        limit = int(request.query_params.get("limit", "20"))
        after = request.query_params.get("after")
        ordered = sorted(self.batches.values(), key=lambda b: b["_since"], reverse=True)
        if after is not None:
            ids = [b["id"] for b in ordered]
            ordered = ordered[ids.index(after) + 1 :] if after in ids else []
        page = ordered[:limit]
        return JSONResponse(
            {
                "object": "list",
                "data": [_public(b) for b in page],
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(ordered) > limit,
            }
        )

    async def retrieve(self, request: Request) -> Response:
        batch = self.batches.get(request.path_params["batch_id"])
        if batch is None:
            return _error(404, "no such batch")
        self._advance(batch)
        return JSONResponse(_public(batch))

    async def cancel(self, request: Request) -> Response:
        batch = self.batches.get(request.path_params["batch_id"])
        if batch is None:
            return _error(404, "no such batch")
        self.counters.cancels += 1
        if batch["status"] in ("validating", "in_progress"):
            batch["status"] = "cancelling"
            batch["_since"] = time.time()
        return JSONResponse(_public(batch))

    async def stats(self, request: Request) -> Response:
        c = self.counters
        return JSONResponse(
            {
                "files": c.files,
                "batches": c.batches,
                "lines": c.lines,
                "chat_calls": c.chat_calls,
                "file_lines": c.file_lines,
                "file_bytes": c.file_bytes,
                "processing_s": c.processing_s,
                "max_submissions_per_request": max(c.by_custom_id.values(), default=0),
                "distinct_requests": len(c.by_custom_id),
            }
        )

    async def chat(self, request: Request) -> Response:
        self.counters.chat_calls += 1
        return _error(400, "this fake serves batches only")

    def _advance(self, batch: dict[str, Any]) -> None:
        now = time.time()
        if now - batch["_since"] < self.config.step_s + batch["_index"] * self.config.stagger_s:
            return
        status = batch["status"]
        if status == "cancelling":
            batch["status"] = "cancelled"
        elif status == "validating" and batch["_fate"] == "failed":
            batch["status"] = "failed"
            batch["errors"] = {
                "object": "list",
                "data": [
                    {"code": "invalid_request", "message": "fake validation failure", "line": 1}
                ],
            }
        elif status == "in_progress" and batch["_fate"] == "expired":
            self._process(batch, expire=True)
            batch["status"] = "expired"
        elif status == "in_progress":
            self._process(batch, expire=False)
            batch["status"] = "finalizing"
        elif status in ("validating", "finalizing"):
            batch["status"] = _STATES[_STATES.index(status) + 1]
        batch["_since"] = now

    def _process(self, batch: dict[str, Any], *, expire: bool) -> None:
        started = time.process_time()
        source = Path(self.files[batch["input_file_id"]]["path"])
        out_path = self.root / f"out-{next(self._ids)}"
        err_path = self.root / f"err-{next(self._ids)}"
        total = completed = failed = 0
        with source.open("rb") as lines, out_path.open("wb") as out, err_path.open("wb") as err:
            for raw in lines:
                if not raw.strip():
                    continue
                line = orjson.loads(raw)
                total += 1
                self.counters.lines += 1
                self.counters.by_custom_id[line["custom_id"]] += 1
                if expire:
                    answer = {
                        "id": f"batch_req_x{total}",
                        "custom_id": line["custom_id"],
                        "response": None,
                        "error": {
                            "code": "batch_expired",
                            "message": "the completion window expired",
                        },
                    }
                    is_error, fault = True, None
                else:
                    answer, is_error, fault = answer_line(
                        line, self._attempts, self.config.quote_mode, self._ids
                    )
                if fault is not None:
                    self.counters.by_fault[fault] += 1
                if not is_error:
                    usage = answer["response"]["body"]["usage"]
                    self.counters.prompt_tokens += usage["prompt_tokens"]
                    self.counters.completion_tokens += usage["completion_tokens"]
                    if self.config.cached_share:
                        cached = int(usage["prompt_tokens"] * self.config.cached_share)
                        usage["prompt_tokens_details"] = {"cached_tokens": cached}
                        self.counters.cached_tokens += cached
                (err if is_error else out).write(orjson.dumps(answer) + b"\n")
                failed += is_error
                completed += not is_error
        for path, field_name in ((out_path, "output_file_id"), (err_path, "error_file_id")):
            if path.stat().st_size:
                batch[field_name] = self._new_file(path, "batch_output", path.name)["id"]
            else:
                path.unlink()
        batch["request_counts"] = {"total": total, "completed": completed, "failed": failed}
        self.counters.processing_s += time.process_time() - started


def _public(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if not k.startswith("_")}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(
        {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
        status_code=status,
    )


@dataclass
class FakeBatches:
    app: FakeBatchApp
    host: str
    port: int

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def counters(self) -> FakeBatchCounters:
        return self.app.counters

    @property
    def config(self) -> FakeBatchConfig:
        return self.app.config


@contextmanager
def run_fake_batches(config: FakeBatchConfig | None = None) -> Iterator[FakeBatches]:
    """Serve the fake Files + Batches API from a background thread for the block."""
    app = FakeBatchApp(config)
    try:
        with serving(app, host="127.0.0.1", port=0, name="fake batch server") as bound:
            yield FakeBatches(app=app, host="127.0.0.1", port=bound)
    finally:
        app.close()


def main(argv: list[str] | None = None) -> None:
    """Run the fake as a process (for benchmarks): prints its base URL, serves until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--step-s", type=float, default=0.0)
    args = parser.parse_args(argv)
    app = FakeBatchApp(FakeBatchConfig(step_s=args.step_s))
    sock = _listen(args.host, args.port)
    print(f"http://{args.host}:{sock.getsockname()[1]}/v1", flush=True)
    try:
        _server(app).run(sockets=[sock])
    finally:
        app.close()


if __name__ == "__main__":
    main()
