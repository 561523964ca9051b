"""The batch endpoints: upload, list, status, events, results, report, cancel."""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import AsyncIterator
from typing import Annotated, Literal

import anyio
import orjson
from faithjudge_client.bodies import (
    NDJSON,
    TERMINAL_STATES,
    BatchAccepted,
    BatchPage,
    BatchRetry,
    BatchStatus,
)
from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from faithjudge.api.deps import (
    AppState,
    BatchId,
    JudgeName,
    State,
    Store,
    Tenant,
    rejections_of,
    tenant_batch,
)
from faithjudge.api.examples import (
    BATCH_BODY,
    EXAMPLE_RESULT,
    problems,
)
from faithjudge.api.keys import LIMIT_NAMES
from faithjudge.api.problems import HttpProblem
from faithjudge.api.uploads import ReadDeadline, batch_body
from faithjudge.jobs.ingest import IngestLimits, TooManyActiveBatches, submit_batch
from faithjudge.jobs.interface import ActiveBatchLimit
from faithjudge.jobs.results import render_report, result_lines
from faithjudge.jobs.status import batch_status

router = APIRouter()


@router.post(
    "/v1/batches",
    status_code=202,
    response_model=BatchAccepted,
    summary="Submit a batch (JSONL)",
    tags=["batches"],
    openapi_extra=BATCH_BODY,
    responses={
        200: {"model": BatchAccepted, "description": "Replay of an earlier identical upload."},
        **problems(401, 408, 409, 413, 415, 422, 429),
    },
)
async def create_batch(
    request: Request,
    state: State,
    store: Store,
    tenant: Tenant,
    name: Annotated[str | None, Query(max_length=200, description="A label.")] = None,
    judge: JudgeName = None,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key", max_length=200, description="Same key + same body: same batch."
        ),
    ] = None,
) -> Response:
    """Validate every line, store the accepted ones, then queue the batch (202).

    Rejected lines are listed with their line number and reason and get no result.
    """
    chosen = state.job_judges.get(state.judge_named(judge))
    limits = _limits(state, tenant)
    body = batch_body(
        request,
        limits.max_body_bytes,
        deadline=ReadDeadline(
            state.settings.upload_read_timeout_s, state.settings.upload_min_bytes_per_s
        ),
    )
    submission = await submit_batch(
        store,
        body,
        tenant=tenant,
        name=name,
        idempotency_key=idempotency_key,
        limits=limits,
        judge=chosen,
    )
    if state.worker is not None and not submission.replayed:
        state.worker.notify()
    return JSONResponse(
        submission.accepted.model_dump(mode="json"),
        status_code=200 if submission.replayed else 202,
    )


def _limits(state: AppState, tenant: str) -> IngestLimits:
    settings = state.settings
    values = {name: getattr(settings, name) for name in LIMIT_NAMES}
    values.update(state.keys.limits_for(tenant))
    return IngestLimits(
        max_body_bytes=values["max_body_bytes"],
        max_lines=values["max_batch_lines"],
        max_line_bytes=settings.max_score_body_bytes,
        max_active_batches=values["max_active_batches"],
    )


@router.get(
    "/v1/batches",
    response_model=BatchPage,
    summary="List the tenant's batches",
    tags=["batches"],
    responses=problems(401, 422),
)
async def list_batches(
    state: State,
    store: Store,
    tenant: Tenant,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[
        str | None, Query(max_length=200, description="next_cursor of the previous page.")
    ] = None,
) -> BatchPage:
    """Newest first; pass ``next_cursor`` back as ``cursor`` for the next page."""
    before = _decode_cursor(cursor) if cursor else None
    rows = await store.list_batches(tenant, limit=limit + 1, before=before)
    items = [await batch_status(store, row, state.settings) for row in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        last = rows[limit - 1]
        next_cursor = base64.urlsafe_b64encode(f"{last.created_at!r}|{last.id}".encode()).decode()
    return BatchPage(items=items, next_cursor=next_cursor)


def _decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        created, _, batch_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return float(created), batch_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise HttpProblem(422, "invalid cursor: pass next_cursor from the previous page") from None


@router.get(
    "/v1/batches/{batch_id}",
    response_model=BatchStatus,
    summary="Status of a batch",
    tags=["batches"],
    responses=problems(401, 404),
)
async def get_batch(state: State, store: Store, tenant: Tenant, batch_id: BatchId) -> BatchStatus:
    """Counts per status and failure stage, progress and ETA."""
    row = await tenant_batch(store, tenant, batch_id)
    return state.outage_detail(await batch_status(store, row, state.settings), row.judge_key)


@router.delete(
    "/v1/batches/{batch_id}",
    response_model=BatchStatus,
    summary="Cancel a batch",
    tags=["batches"],
    responses=problems(401, 404),
)
async def cancel_batch(
    state: State, store: Store, tenant: Tenant, batch_id: BatchId
) -> BatchStatus:
    """Stop scoring the batch; lines already scored keep their results."""
    await tenant_batch(store, tenant, batch_id)
    row = await store.cancel(tenant, batch_id)
    assert row is not None
    return await batch_status(store, row, state.settings)


@router.post(
    "/v1/batches/{batch_id}/retry",
    status_code=202,
    response_model=BatchRetry,
    summary="Retry a batch's transport failures",
    tags=["batches"],
    responses={
        200: {"model": BatchRetry, "description": "No line had a transport failure."},
        **problems(401, 404, 409, 429),
    },
)
async def retry_batch(state: State, store: Store, tenant: Tenant, batch_id: BatchId) -> Response:
    """Score again the lines of a completed batch whose grades failed at the ``transport``
    stage (the judge was down or kept refusing), once the judge is back; every other line keeps
    its result. 202 with the count when lines were queued, 200 when there was none; 409 while
    the batch is still scored, or once it was cancelled or failed; 429 when the tenant has no
    free batch slot for it (the batch is queued again, so it takes one)."""
    row = await tenant_batch(store, tenant, batch_id)
    slots = _limits(state, tenant).max_active_batches
    try:
        requeued = await store.retry_transport_failures(tenant, batch_id, max_active=slots)
    except ActiveBatchLimit:
        raise TooManyActiveBatches(
            f"this tenant already has {slots} unfinished batches; wait for one to finish or "
            "cancel one, then retry this batch",
            field="batches",
        ) from None
    if requeued is None:
        raise HttpProblem(
            409,
            f"batch {batch_id!r} is {row.status}: only a completed batch's transport failures "
            "are retried"
            + (", once it has completed" if row.status not in TERMINAL_STATES else ""),
        )
    if requeued and state.worker is not None:
        state.worker.notify()
    after = await tenant_batch(store, tenant, batch_id)
    body = BatchRetry(requeued=requeued, batch=await batch_status(store, after, state.settings))
    return JSONResponse(body.model_dump(mode="json"), status_code=202 if requeued else 200)


@router.get(
    "/v1/batches/{batch_id}/events",
    summary="Progress events (SSE)",
    tags=["batches"],
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "`event: progress` with a BatchStatus, then `event: end`.",
            "content": {
                "text/event-stream": {
                    "schema": {"type": "string"},
                    "example": 'event: progress\ndata: {"id": "b_0193...", "status": "running", '
                    '"done": 400, "total": 1000, "...": "..."}\n\n'
                    'event: end\ndata: {"id": "b_0193...", "status": "completed"}\n\n',
                }
            },
        },
        **problems(401, 404),
    },
)
async def batch_events(
    request: Request, state: State, store: Store, tenant: Tenant, batch_id: BatchId
) -> StreamingResponse:
    """Server-sent events: progress at most once a second and on change, then ``end``."""
    await tenant_batch(store, tenant, batch_id)

    async def events() -> AsyncIterator[bytes]:
        last = b""
        last_sent = time.monotonic()
        while True:
            row = await store.get_batch(tenant, batch_id)
            if row is None:
                return
            status = await batch_status(store, row, state.settings)
            data = orjson.dumps(status.model_dump(mode="json"))
            if data != last:
                yield b"event: progress\ndata: " + data + b"\n\n"
                last, last_sent = data, time.monotonic()
            elif time.monotonic() - last_sent > 15:
                yield b": keep-alive\n\n"
                last_sent = time.monotonic()
            if status.status in TERMINAL_STATES:
                yield b"event: end\ndata: " + data + b"\n\n"
                return
            if await request.is_disconnected():
                return
            await anyio.sleep(1.0)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.get(
    "/v1/batches/{batch_id}/results",
    summary="Results (NDJSON, in line order)",
    tags=["batches"],
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "ItemResult lines; while running, the contiguous prefix done so far.",
            "content": {
                NDJSON: {
                    "schema": {"type": "string"},
                    "example": orjson.dumps(EXAMPLE_RESULT | {"line": 1}).decode() + "\n",
                }
            },
        },
        **problems(401, 404, 422),
    },
)
async def batch_results(
    store: Store,
    tenant: Tenant,
    batch_id: BatchId,
    offset: Annotated[
        int, Query(ge=0, le=10_000_000, description="First result index to return (0-based).")
    ] = 0,
) -> StreamingResponse:
    """Stream the results; resume with ``offset`` = the number of lines already received."""
    row = await tenant_batch(store, tenant, batch_id)
    contiguous = row.status not in TERMINAL_STATES
    lines = result_lines(
        store,
        batch_id,
        start=offset,
        contiguous=contiguous,
        total=row.total,
        rejections=rejections_of(store, row),
    )
    return StreamingResponse(lines, media_type=NDJSON)


@router.get(
    "/v1/batches/{batch_id}/report",
    summary="Report of the lines done",
    tags=["batches"],
    responses={
        200: {
            "description": "JSON, Markdown or a self-contained HTML page.",
            "content": {
                "application/json": {
                    "schema": {"type": "object"},
                    "example": {"summary": {"lines": 6, "models": ["demo-vlm"]}, "...": "..."},
                },
                "text/markdown": {
                    "schema": {"type": "string"},
                    "example": "# FaithJudge report\n\n6 result lines, 1 model(s) ...",
                },
                "text/html": {"schema": {"type": "string"}},
            },
        },
        **problems(401, 404, 422),
    },
)
async def batch_report(
    store: Store,
    tenant: Tenant,
    batch_id: BatchId,
    format: Annotated[Literal["json", "md", "html"], Query()] = "json",
    bootstrap: Annotated[int, Query(ge=10, le=10_000, description="Bootstrap resamples.")] = 1000,
    seed: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> Response:
    """Aggregates, coverage diagnostics and gates (faithjudge.reports) over the results so far."""
    row = await tenant_batch(store, tenant, batch_id)
    rejections = rejections_of(store, row)
    text = await render_report(
        store, batch_id, fmt=format, bootstrap=bootstrap, seed=seed, rejections=rejections
    )
    media = {"json": "application/json", "md": "text/markdown; charset=utf-8"}
    return Response(text, media_type=media.get(format, "text/html; charset=utf-8"))
