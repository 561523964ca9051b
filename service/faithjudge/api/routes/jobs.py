"""The job endpoints: upload, list, status, events, results, report, retry, cancel.

Each is served under ``/v1/jobs`` and, marked deprecated in the OpenAPI document, under the
``/v1/batches`` it had before the service's unit of work was called a job: the same handler, so
both paths answer the same. (A provider's Batch API batch is a provider batch; it has no route.)
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio
import orjson
from faithjudge_client.bodies import (
    NDJSON,
    TERMINAL_STATES,
    JobAccepted,
    JobPage,
    JobRetry,
    JobStatus,
)
from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from faithjudge.api.deps import (
    AppState,
    JobId,
    JudgeName,
    State,
    Store,
    Tenant,
    rejections_of,
    tenant_job,
)
from faithjudge.api.examples import (
    EXAMPLE_RESULT,
    JOB_BODY,
    problems,
)
from faithjudge.api.keys import LIMIT_NAMES
from faithjudge.api.problems import HttpProblem
from faithjudge.api.uploads import ReadDeadline, job_body
from faithjudge.jobs.ingest import IngestLimits, TooManyActiveJobs, submit_job
from faithjudge.jobs.interface import ActiveJobLimit
from faithjudge.jobs.results import render_report, result_lines
from faithjudge.jobs.status import job_status

__all__ = ["JOBS", "OLD_JOBS", "router"]

JOBS = "/v1/jobs"
OLD_JOBS = "/v1/batches"

router = APIRouter()
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


def _route(method: str, path: str, **options: Any) -> Callable[[Endpoint], Endpoint]:
    """Serve the decorated handler at ``/v1/jobs{path}`` and, deprecated, at the same path
    under ``/v1/batches`` (a client written before the rename keeps working)."""

    def register(endpoint: Endpoint) -> Endpoint:
        router.add_api_route(JOBS + path, endpoint, methods=[method], tags=["jobs"], **options)
        router.add_api_route(
            OLD_JOBS + path,
            endpoint,
            methods=[method],
            tags=["jobs"],
            deprecated=True,
            name=f"{endpoint.__name__}_old_path",
            **options,
        )
        return endpoint

    return register


@_route(
    "POST",
    "",
    status_code=202,
    response_model=JobAccepted,
    summary="Submit a job (JSONL)",
    openapi_extra=JOB_BODY,
    responses={
        200: {"model": JobAccepted, "description": "Replay of an earlier identical upload."},
        **problems(401, 408, 409, 413, 415, 422, 429),
    },
)
async def create_job(
    request: Request,
    state: State,
    store: Store,
    tenant: Tenant,
    name: Annotated[str | None, Query(max_length=200, description="A label.")] = None,
    judge: JudgeName = None,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key", max_length=200, description="Same key + same body: same job."
        ),
    ] = None,
) -> Response:
    """Validate every line, store the accepted ones, then queue the job (202).

    Rejected lines are listed with their line number and reason and get no result.
    """
    chosen = state.job_judges.get(state.judge_named(judge))
    limits = _limits(state, tenant)
    body = job_body(
        request,
        limits.max_body_bytes,
        deadline=ReadDeadline(
            state.settings.upload_read_timeout_s, state.settings.upload_min_bytes_per_s
        ),
    )
    submission = await submit_job(
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
        max_lines=values["max_job_lines"],
        max_line_bytes=settings.max_score_body_bytes,
        max_active_jobs=values["max_active_jobs"],
    )


@_route(
    "GET",
    "",
    response_model=JobPage,
    summary="List the tenant's jobs",
    responses=problems(401, 422),
)
async def list_jobs(
    state: State,
    store: Store,
    tenant: Tenant,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[
        str | None, Query(max_length=200, description="next_cursor of the previous page.")
    ] = None,
) -> JobPage:
    """Newest first; pass ``next_cursor`` back as ``cursor`` for the next page."""
    before = _decode_cursor(cursor) if cursor else None
    rows = await store.list_jobs(tenant, limit=limit + 1, before=before)
    items = [await job_status(store, row, state.settings) for row in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        last = rows[limit - 1]
        next_cursor = base64.urlsafe_b64encode(f"{last.created_at!r}|{last.id}".encode()).decode()
    return JobPage(items=items, next_cursor=next_cursor)


def _decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        created, _, job_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return float(created), job_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise HttpProblem(422, "invalid cursor: pass next_cursor from the previous page") from None


@_route(
    "GET",
    "/{job_id}",
    response_model=JobStatus,
    summary="Status of a job",
    responses=problems(401, 404),
)
async def get_job(state: State, store: Store, tenant: Tenant, job_id: JobId) -> JobStatus:
    """Counts per status and failure stage, progress and ETA."""
    row = await tenant_job(store, tenant, job_id)
    return state.outage_detail(await job_status(store, row, state.settings), row.judge_key)


@_route(
    "DELETE",
    "/{job_id}",
    response_model=JobStatus,
    summary="Cancel a job",
    responses=problems(401, 404),
)
async def cancel_job(state: State, store: Store, tenant: Tenant, job_id: JobId) -> JobStatus:
    """Stop scoring the job; lines already scored keep their results."""
    await tenant_job(store, tenant, job_id)
    row = await store.cancel(tenant, job_id)
    assert row is not None
    return await job_status(store, row, state.settings)


@_route(
    "POST",
    "/{job_id}/retry",
    status_code=202,
    response_model=JobRetry,
    summary="Retry a job's transport failures",
    responses={
        200: {"model": JobRetry, "description": "No line had a transport failure."},
        **problems(401, 404, 409, 429),
    },
)
async def retry_job(state: State, store: Store, tenant: Tenant, job_id: JobId) -> Response:
    """Score again the lines of a completed job whose grades failed at the ``transport``
    stage (the judge was down or kept refusing), once the judge is back; every other line keeps
    its result. 202 with the count when lines were queued, 200 when there was none; 409 while
    the job is still scored, or once it was cancelled or failed; 429 when the tenant has no
    free job slot for it (the job is queued again, so it takes one)."""
    row = await tenant_job(store, tenant, job_id)
    slots = _limits(state, tenant).max_active_jobs
    try:
        requeued = await store.retry_transport_failures(tenant, job_id, max_active=slots)
    except ActiveJobLimit:
        raise TooManyActiveJobs(
            f"this tenant already has {slots} unfinished jobs; wait for one to finish or "
            "cancel one, then retry this job",
            field="jobs",
        ) from None
    if requeued is None:
        raise HttpProblem(
            409,
            f"job {job_id!r} is {row.status}: only a completed job's transport failures "
            "are retried"
            + (", once it has completed" if row.status not in TERMINAL_STATES else ""),
        )
    if requeued and state.worker is not None:
        state.worker.notify()
    after = await tenant_job(store, tenant, job_id)
    status = await job_status(store, after, state.settings)
    # ``batch`` too: SDKs from before the rename require it
    body = JobRetry(requeued=requeued, job=status, batch=status)
    return JSONResponse(body.model_dump(mode="json"), status_code=202 if requeued else 200)


@_route(
    "GET",
    "/{job_id}/events",
    summary="Progress events (SSE)",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "`event: progress` with a JobStatus, then `event: end`.",
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
async def job_events(
    request: Request, state: State, store: Store, tenant: Tenant, job_id: JobId
) -> StreamingResponse:
    """Server-sent events: progress at most once a second and on change, then ``end``."""
    await tenant_job(store, tenant, job_id)

    async def events() -> AsyncIterator[bytes]:
        last = b""
        last_sent = time.monotonic()
        while True:
            row = await store.get_job(tenant, job_id)
            if row is None:
                return
            status = await job_status(store, row, state.settings)
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


@_route(
    "GET",
    "/{job_id}/results",
    summary="Results (NDJSON, in line order)",
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
async def job_results(
    store: Store,
    tenant: Tenant,
    job_id: JobId,
    offset: Annotated[
        int, Query(ge=0, le=10_000_000, description="First result index to return (0-based).")
    ] = 0,
) -> StreamingResponse:
    """Stream the results; resume with ``offset`` = the number of lines already received."""
    row = await tenant_job(store, tenant, job_id)
    contiguous = row.status not in TERMINAL_STATES
    lines = result_lines(
        store,
        job_id,
        start=offset,
        contiguous=contiguous,
        total=row.total,
        rejections=rejections_of(store, row),
    )
    return StreamingResponse(lines, media_type=NDJSON)


@_route(
    "GET",
    "/{job_id}/report",
    summary="Report of the lines done",
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
async def job_report(
    store: Store,
    tenant: Tenant,
    job_id: JobId,
    format: Annotated[Literal["json", "md", "html"], Query()] = "json",
    bootstrap: Annotated[int, Query(ge=10, le=10_000, description="Bootstrap resamples.")] = 1000,
    seed: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> Response:
    """Aggregates, coverage diagnostics and gates (faithjudge.reports) over the results so far."""
    row = await tenant_job(store, tenant, job_id)
    rejections = rejections_of(store, row)
    text = await render_report(
        store, job_id, fmt=format, bootstrap=bootstrap, seed=seed, rejections=rejections
    )
    media = {"json": "application/json", "md": "text/markdown; charset=utf-8"}
    return Response(text, media_type=media.get(format, "text/html; charset=utf-8"))
