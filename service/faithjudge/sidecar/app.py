"""The sidecar as a service: one loaded VLM behind two endpoints.

* ``POST /v1/generate`` — one item (JSON ``{"item": ..., "image_base64"?: ..., "modifications"?:
  [...]}``). The image is the upload when given, else the item's ``image`` under the images root.
* ``POST /v1/generate/batches`` — ITEMS as NDJSON (``application/x-ndjson``); query
  ``modifications`` (comma-separated) overrides the server's default list.

Both answer ``{"lines": [ScoreRequest ...], "issues": [...], "manifest": {...}}``: the lines are
ready for the FaithJudge service's ``POST /v1/jobs``. Bad items, images and modifications are
issues in the answer, never a 500; an unusable body is a 4xx problem naming the field.
One generation runs at a time (the backend's own batching does the parallel work).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from faithjudge.errors import FaithJudgeError, UserInputError
from faithjudge.jsonl import describe_validation_error
from faithjudge.sidecar.generate import (
    Generator,
    Issue,
    Outcome,
    parse_modifications,
)
from faithjudge.sidecar.items import ItemLineError, SidecarItem, parse_item_line

__all__ = ["GenerateOne", "create_app"]

MAX_BODY_BYTES = 64_000_000
MAX_BATCH_ITEMS = 1_000
_NDJSON = ("application/x-ndjson", "application/jsonl", "application/json-lines", "text/plain")


class GenerateOne(BaseModel):
    model_config = ConfigDict(extra="forbid")

    item: SidecarItem
    image_base64: str | None = Field(default=None, max_length=MAX_BODY_BYTES)
    modifications: list[str] | None = None


def _problem(status: int, title: str, detail: str, field: str | None = None) -> JSONResponse:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
    }
    if field is not None:
        body["errors"] = [{"field": field, "reason": detail}]
    return JSONResponse(body, status_code=status, media_type="application/problem+json")


def _answer(outcome: Outcome, generator: Generator) -> dict[str, Any]:
    return {
        "lines": [r.model_dump(mode="json", exclude_none=True) for r in outcome.lines],
        "issues": [i.to_json() for i in outcome.issues],
        "manifest": generator.manifest(),
    }


def create_app(generator: Generator, *, close_backend: bool = True) -> FastAPI:
    """The app serving ``generator``; its backend is closed on shutdown when asked."""
    lock = anyio.Lock()

    @asynccontextmanager
    async def lifespan(_: FastAPI):  # type: ignore[no-untyped-def]
        yield
        if close_backend:
            await generator.backend.aclose()

    app = FastAPI(title="FaithJudge VLM sidecar", lifespan=lifespan)

    def with_modifications(values: list[str] | str | None) -> Generator:
        if values is None:
            return generator
        runs = tuple(parse_modifications(values))
        options = dataclasses.replace(generator.options, modifications=runs)
        # Shares the backend (and its loaded model) with the server's generator.
        return Generator(
            generator.backend, options, images_root=generator.images_root, pool=generator.pool
        )

    @app.exception_handler(UserInputError)
    async def _user_error(_: Request, exc: UserInputError) -> JSONResponse:
        return _problem(422, "invalid input", str(exc), exc.field)

    @app.exception_handler(FaithJudgeError)
    async def _faithjudge_error(_: Request, exc: FaithJudgeError) -> JSONResponse:
        return _problem(503, "generation unavailable", str(exc))

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "backend": generator.backend.id}

    @app.post("/v1/generate")
    async def generate_one(request: Request) -> Any:
        raw = await _read_body(request)
        if isinstance(raw, JSONResponse):
            return raw
        try:
            body = GenerateOne.model_validate_json(raw)
        except ValidationError as exc:
            return _problem(422, "invalid body", describe_validation_error(exc))
        image = None
        if body.image_base64 is not None:
            image = await anyio.to_thread.run_sync(_decode_image, body.image_base64, generator)
            if isinstance(image, Issue):
                outcome = Outcome(issues=[Issue(image.kind, image.reason, None, body.item.item_id)])
                return _answer(outcome, generator)
        gen = with_modifications(body.modifications)
        async with lock:
            outcome = await gen.generate([(None, body.item, image)])
        return _answer(outcome, gen)

    @app.post("/v1/generate/batches")
    async def generate_batch(
        request: Request,
        modifications: str | None = Query(default=None, description="e.g. TB-RAD,VH-BB,SHAM"),
    ) -> Any:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type not in _NDJSON:
            return _problem(415, "unsupported media type", "send ITEMS as application/x-ndjson")
        raw = await _read_body(request)
        if isinstance(raw, JSONResponse):
            return raw
        gen = with_modifications(modifications)
        entries: list[tuple[int | None, SidecarItem, None]] = []
        issues: list[Issue] = []
        for number, line in enumerate(raw.splitlines(), start=1):
            if not line.strip():
                continue
            parsed = parse_item_line(line, number)
            if isinstance(parsed, ItemLineError):
                issues.append(Issue("input_error", parsed.reason, parsed.line, parsed.item_id))
            else:
                entries.append((number, parsed, None))
            if len(entries) > MAX_BATCH_ITEMS:
                return _problem(413, "too many items", f"at most {MAX_BATCH_ITEMS} items a batch")
        async with lock:
            outcome = await gen.generate(entries) if entries else Outcome()
        outcome.issues[:0] = issues
        return _answer(outcome, gen)

    return app


async def _read_body(request: Request) -> bytes | JSONResponse:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return _problem(413, "body too large", f"the body exceeds {MAX_BODY_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return _problem(413, "body too large", f"the body exceeds {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _decode_image(data: str, generator: Generator) -> Any:
    """The uploaded image, decoded with the loader's limits and preprocessed, or an Issue."""
    from faithjudge.sidecar import images

    try:
        payload = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        return Issue("image_error", f"image_base64: not valid base64 ({exc})")
    # The loader's limits and checks work on files; an upload gets the same treatment.
    with tempfile.TemporaryDirectory(prefix="sidecar-upload-") as tmp:
        path = Path(tmp) / "image_base64"
        path.write_bytes(payload)
        try:
            img = images.load_image(
                path,
                max_bytes=generator.options.max_image_bytes,
                max_pixels=generator.options.max_image_pixels,
                max_decoded_bytes=generator.options.max_image_decoded_bytes,
                max_side=generator.options.max_image_side,
            )
        except images.ImageError as exc:
            return Issue("image_error", str(exc))
        return images.preprocess(img)
