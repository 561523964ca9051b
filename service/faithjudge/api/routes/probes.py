"""Health, readiness and Prometheus metrics."""

from __future__ import annotations

import anyio
from faithjudge_client.bodies import (
    Health,
    Readiness,
)
from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST

from faithjudge import __version__
from faithjudge.api.deps import (
    State,
)
from faithjudge.jobs.interface import StoreUnavailable

router = APIRouter()


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
    """The store answers and keeps what the worker writes, and the judge is built and
    reachable (not while a judge is waited for after it stopped answering, nor when its recent
    lines all failed at the transport stage, nor when its Batch API provider failed the last
    provider phase); with the judge canary on (``FAITHJUDGE_CANARY_FILE``), its last check
    passed: ``canary`` names the drifted grades, or says it has not run yet."""
    checks = {"store": "ok", "judge": "ok"}
    if state.store is None:
        checks["store"] = "not open"
    else:
        try:
            with anyio.fail_after(5):
                await state.store.ping()
        except StoreUnavailable as exc:
            checks["store"] = str(exc)
        except Exception as exc:
            checks["store"] = f"unreachable: {type(exc).__name__}"
    if checks["store"] == "ok" and state.worker is not None and state.worker.failing:
        # reads can answer while writes fail (a full disk, a read-only file): the worker's own
        # calls say whether results are being kept
        failing = "; ".join(f"{what}: {why}" for what, why in state.worker.failing.items())
        checks["store"] = f"failing writes ({failing})"[:500]
    if not state.scorers:
        checks["judge"] = "not built"
    elif outages := state.judge_outages():
        checks["judge"] = "; ".join(outages.values())[:500]
    elif state.judge_health.failing or state.judge_health.providers_failing:
        failing = "; ".join(
            [
                f"every recent line of the judge {judge} is a transport failure "
                f"(last error: {error})"
                for judge, error in state.judge_health.failing.items()
            ]
            + [
                f"the Batch API provider of the judge {judge} failed its last provider phase "
                f"({error})"
                for judge, error in state.judge_health.providers_failing.items()
            ]
        )
        checks["judge"] = failing[:500]
    # the judge check's older name, for monitors written before it was renamed
    checks["evaluator"] = checks["judge"]
    if state.canary is not None:
        checks["canary"] = state.canary.problem or "ok"
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
