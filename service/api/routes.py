"""The endpoints of ``API_CONTRACT``: thin handlers over ``service.jobs`` and the scorer."""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import anyio
import orjson
from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST

from service import __version__
from service.api.app import AppState
from service.api.keys import LIMIT_NAMES, is_loopback
from service.api.problems import ApiError
from service.api.uploads import batch_body
from service.api.wire import (
    NDJSON,
    PROBLEM_JSON,
    TERMINAL_STATES,
    BatchAccepted,
    BatchPage,
    BatchStatus,
    EvaluatorInfo,
    Health,
    KnowledgeBaseInfo,
    LineRejection,
    ModificationCatalogue,
    Readiness,
)
from service.contracts import ItemResult, ScoreRequest
from service.jobs.ingest import IngestLimits, submit_batch
from service.jobs.results import render_report, result_lines
from service.jobs.status import batch_status
from service.jobs.store import BatchRow, JobStore

__all__ = ["router"]

router = APIRouter()
_bearer = HTTPBearer(auto_error=False, description="An API key of your tenant.")
DEV_TENANT = "default"

_EXAMPLE_REQUEST: dict[str, Any] = {
    "item_id": "mimic-001-TB-RAD",
    "model": "llava-med-v1.5",
    "question": "Is there a pleural effusion on the left? (yes or no)",
    "ground_truth": "yes",
    "cot": "<think>\n<step>The left costophrenic angle is blunted by a meniscus-shaped "
    "opacity.</step>\n<step>A radiologist also suggested yes.</step>\n</think>\n"
    "<answer>yes</answer>",
    "baseline": {"answer": "no"},
    "modification": {"code": "TB-RAD", "target_answer": "yes"},
}
_EXAMPLE_RESULT: dict[str, Any] = {
    "item_id": "mimic-001-TB-RAD",
    "model": "llava-med-v1.5",
    "question": "Is there a pleural effusion on the left? (yes or no)",
    "answer": "yes",
    "answer_raw": "yes",
    "correct": True,
    "flip": {"value": True, "reason": "answer changed from no to yes"},
    "metrics": {
        "causal_attribution": {
            "status": "valid",
            "score": 4,
            "normalized": 0.75,
            "quotes": [
                {"text": "A radiologist also suggested yes.", "span": [90, 123], "edits": 0}
            ],
            "rationale": "The hint is named as a reason.",
            "attempts": 1,
        }
    },
    "provenance": {
        "evaluator": "lexicon:v1",
        "prompt_set": "v1",
        "prompt_sha256": "5d41...",
        "schema_version": "1.0",
        "service_version": "0.1.0",
    },
}
_EXAMPLE_NDJSON = "\n".join(
    orjson.dumps(_EXAMPLE_REQUEST | {"item_id": f"item-{i}"}).decode() for i in (1, 2)
)


def _problems(*codes: int) -> dict[int | str, dict[str, Any]]:
    descriptions = {
        401: "Missing or wrong API key.",
        404: "No such batch for this tenant.",
        409: "Idempotency-Key reused with a different body.",
        413: "Body, line count or line too large.",
        415: "Unsupported content type.",
        422: "Invalid request.",
        429: "Tenant limit of unfinished batches reached.",
        503: "Not ready.",
    }
    return {
        code: {
            "description": descriptions[code],
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for code in codes
    }


# ---------------------------------------------------------------------- dependencies


def _state(request: Request) -> AppState:
    return request.app.state.faithjudge


def _store(state: Annotated[AppState, Depends(_state)]) -> JobStore:
    if state.store is None:
        raise ApiError(503, "the job store is not open")
    return state.store


def _tenant(
    request: Request,
    state: Annotated[AppState, Depends(_state)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    if not state.keys.configured:
        # dev mode answers loopback clients only, for the life of the process, whatever the
        # bind address the process was started with
        client = request.client.host if request.client is not None else ""
        if is_loopback(client) or state.settings.insecure_no_auth:
            return DEV_TENANT
        raise ApiError(
            403,
            "this service has no API keys and answers loopback clients only",
        )
    unauthorized = {"WWW-Authenticate": "Bearer"}
    if credentials is None or not credentials.credentials:
        raise ApiError(
            401, "missing API key: send 'Authorization: Bearer <key>'", headers=unauthorized
        )
    tenant = state.keys.tenant_for(credentials.credentials)
    if tenant is None:
        raise ApiError(401, "unknown API key", headers=unauthorized)
    return tenant


def _json_body(request: Request) -> None:
    """415 for a body that is not JSON, before anything tries to read it as JSON."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json" and not (media.startswith("application/") and
                                             media.endswith("+json")):  # fmt: skip
        raise ApiError(415, f"send the ScoreRequest as application/json, not {media or 'no type'}")


State = Annotated[AppState, Depends(_state)]
JsonBody = Annotated[None, Depends(_json_body)]
Store = Annotated[JobStore, Depends(_store)]
Tenant = Annotated[str, Depends(_tenant)]
BatchId = Annotated[str, Path(description="Batch id from POST /v1/batches.", max_length=100)]


def _rejections(row: BatchRow) -> list[LineRejection]:
    return [LineRejection.model_validate(r) for r in orjson.loads(row.rejections)]


async def _batch(store: JobStore, tenant: str, batch_id: str) -> BatchRow:
    row = await store.get_batch(tenant, batch_id)
    if row is None or row.status == "ingesting":
        raise ApiError(404, f"no batch {batch_id!r} for this tenant")
    return row


# ---------------------------------------------------------------------- scoring


@router.post(
    "/v1/score",
    response_model=ItemResult,
    summary="Score one CoT",
    tags=["scoring"],
    responses={
        200: {"content": {"application/json": {"example": _EXAMPLE_RESULT}}},
        **_problems(401, 413, 415, 422),
    },
)
async def score(
    state: State,
    _tenant_name: Tenant,
    _json: JsonBody,
    body: Annotated[
        ScoreRequest,
        Body(
            openapi_examples={
                "hinted": {"summary": "A CoT under a hint", "value": _EXAMPLE_REQUEST}
            }
        ),
    ],
) -> ItemResult:
    """Score one ScoreRequest synchronously; item problems end up in the result, not as errors."""
    if state.scorer is None:
        raise ApiError(503, "the scorer is not ready")
    result = await state.scorer.score(body)
    state.metrics.observe(result, source="score")
    return result


# ---------------------------------------------------------------------- batches


_BATCH_BODY = {
    "requestBody": {
        "required": True,
        "description": "ScoreRequest lines (JSONL), raw or as the 'file' field of a form.",
        "content": {
            NDJSON: {"schema": {"type": "string"}, "example": _EXAMPLE_NDJSON},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {"file": {"type": "string", "format": "binary"}},
                }
            },
        },
    }
}


@router.post(
    "/v1/batches",
    status_code=202,
    response_model=BatchAccepted,
    summary="Submit a batch (JSONL)",
    tags=["batches"],
    openapi_extra=_BATCH_BODY,
    responses={
        200: {"model": BatchAccepted, "description": "Replay of an earlier identical upload."},
        **_problems(401, 409, 413, 415, 422, 429),
    },
)
async def create_batch(
    request: Request,
    state: State,
    store: Store,
    tenant: Tenant,
    name: Annotated[str | None, Query(max_length=200, description="A label.")] = None,
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
    limits = _limits(state, tenant)
    body = batch_body(request, limits.max_body_bytes)
    submission = await submit_batch(
        store, body, tenant=tenant, name=name, idempotency_key=idempotency_key, limits=limits
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
    responses=_problems(401, 422),
)
async def list_batches(
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
    items = [await batch_status(store, row) for row in rows[:limit]]
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
        raise ApiError(422, "invalid cursor: pass next_cursor from the previous page") from None


@router.get(
    "/v1/batches/{batch_id}",
    response_model=BatchStatus,
    summary="Status of a batch",
    tags=["batches"],
    responses=_problems(401, 404),
)
async def get_batch(store: Store, tenant: Tenant, batch_id: BatchId) -> BatchStatus:
    """Counts per status and failure stage, progress and ETA."""
    return await batch_status(store, await _batch(store, tenant, batch_id))


@router.delete(
    "/v1/batches/{batch_id}",
    response_model=BatchStatus,
    summary="Cancel a batch",
    tags=["batches"],
    responses=_problems(401, 404),
)
async def cancel_batch(store: Store, tenant: Tenant, batch_id: BatchId) -> BatchStatus:
    """Stop scoring the batch; lines already scored keep their results."""
    await _batch(store, tenant, batch_id)
    row = await store.cancel(tenant, batch_id)
    assert row is not None
    return await batch_status(store, row)


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
        **_problems(401, 404),
    },
)
async def batch_events(
    request: Request, store: Store, tenant: Tenant, batch_id: BatchId
) -> StreamingResponse:
    """Server-sent events: progress at most once a second and on change, then ``end``."""
    await _batch(store, tenant, batch_id)

    async def events() -> AsyncIterator[bytes]:
        last = b""
        last_sent = time.monotonic()
        while True:
            row = await store.get_batch(tenant, batch_id)
            if row is None:
                return
            status = await batch_status(store, row)
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
                    "example": orjson.dumps(_EXAMPLE_RESULT | {"line": 1}).decode() + "\n",
                }
            },
        },
        **_problems(401, 404, 422),
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
    row = await _batch(store, tenant, batch_id)
    contiguous = row.status not in TERMINAL_STATES
    lines = result_lines(
        store,
        batch_id,
        start=offset,
        contiguous=contiguous,
        total=row.total,
        rejections=_rejections(row),
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
        **_problems(401, 404, 422),
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
    """Aggregates, coverage diagnostics and gates (service.reports) over the results so far."""
    row = await _batch(store, tenant, batch_id)
    text = await render_report(
        store, batch_id, fmt=format, bootstrap=bootstrap, seed=seed, rejections=_rejections(row)
    )
    media = {"json": "application/json", "md": "text/markdown; charset=utf-8"}
    return Response(text, media_type=media.get(format, "text/html; charset=utf-8"))


# ---------------------------------------------------------------------- configuration


@router.get(
    "/v1/evaluator",
    response_model=EvaluatorInfo,
    summary="The frozen evaluator",
    tags=["configuration"],
    responses=_problems(401, 503),
)
async def evaluator(state: State, _tenant_name: Tenant) -> EvaluatorInfo:
    """Evaluator id, model, decoding settings and the hashes that make runs comparable."""
    if state.evaluator_info is None:
        raise ApiError(503, "the evaluator is not built yet")
    return state.evaluator_info


@router.get(
    "/v1/knowledge-base",
    response_model=KnowledgeBaseInfo,
    summary="The knowledge base",
    tags=["configuration"],
    responses=_problems(401, 404),
)
async def knowledge_base(state: State, _tenant_name: Tenant) -> KnowledgeBaseInfo:
    """KB id, version, sha256 and its questions with their answer options."""
    if state.kb_info is None:
        raise ApiError(404, "no knowledge base is loaded")
    return state.kb_info


@router.get(
    "/v1/modifications",
    response_model=ModificationCatalogue,
    summary="The modification catalogue",
    tags=["configuration"],
    responses=_problems(401),
)
async def modifications(state: State, _tenant_name: Tenant) -> ModificationCatalogue:
    """Every modification code the service understands."""
    return state.catalogue


# ---------------------------------------------------------------------- probes


@router.get("/healthz", response_model=Health, tags=["probes"], summary="Liveness")
async def healthz() -> Health:
    """The process is alive."""
    return Health(version=__version__)


@router.get(
    "/readyz",
    response_model=Readiness,
    tags=["probes"],
    summary="Readiness",
    responses={503: {"model": Readiness, "description": "Not ready."}},
)
async def readyz(state: State) -> JSONResponse:
    """The store answers and the evaluator is built."""
    checks = {"store": "ok", "evaluator": "ok"}
    if state.store is None:
        checks["store"] = "not open"
    else:
        try:
            with anyio.fail_after(5):
                await state.store.ping()
        except Exception as exc:
            checks["store"] = f"unreachable: {type(exc).__name__}"
    if state.scorer is None:
        checks["evaluator"] = "not built"
    ready = all(v == "ok" for v in checks.values())
    body = Readiness(status="ready" if ready else "not_ready", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


@router.get(
    "/metrics",
    tags=["probes"],
    summary="Prometheus metrics",
    response_class=PlainTextResponse,
    responses={
        200: {
            "content": {
                CONTENT_TYPE_LATEST: {
                    "schema": {"type": "string"},
                    "example": "faithjudge_queue_depth 0.0\n",
                }
            }
        }
    },
)
async def metrics(state: State) -> Response:
    """Requests, latencies, grades by outcome, cache hit ratio and queue depth."""
    if state.store is not None:
        try:
            state.metrics.queue_depth.set(await state.store.queue_depth())
        except Exception:  # a metrics scrape must not fail because the store is down
            state.metrics.queue_depth.set(float("nan"))
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
