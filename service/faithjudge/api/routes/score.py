"""``POST /v1/score``: one CoT scored synchronously."""

from __future__ import annotations

from typing import Annotated

from faithjudge_client.lines import ItemResult, ScoreRequest
from fastapi import APIRouter, Body

from faithjudge.api.deps import (
    JsonBody,
    State,
    Tenant,
)
from faithjudge.api.examples import (
    EXAMPLE_REQUEST,
    EXAMPLE_RESULT,
    problems,
)
from faithjudge.api.problems import HttpProblem
from faithjudge.jobs.provider_phase import is_batch_route

router = APIRouter()


@router.post(
    "/v1/score",
    response_model=ItemResult,
    summary="Score one CoT",
    tags=["scoring"],
    responses={
        200: {"content": {"application/json": {"example": EXAMPLE_RESULT}}},
        **problems(401, 409, 413, 415, 422),
    },
)
async def score(
    state: State,
    _tenant_name: Tenant,
    _json: JsonBody,
    body: Annotated[
        ScoreRequest,
        Body(
            openapi_examples={"hinted": {"summary": "A CoT under a hint", "value": EXAMPLE_REQUEST}}
        ),
    ],
) -> ItemResult:
    """Score one ScoreRequest synchronously; item problems end up in the result, not as errors."""
    if state.scorer is None:
        raise HttpProblem(503, "the scorer is not ready")
    if is_batch_route(state.scorer):
        # a Batch API answer takes minutes to hours: no request waits that long
        raise HttpProblem(
            409,
            "this service judges through the provider's Batch API (openai-batch:MODEL): "
            "submit the line as a batch with POST /v1/batches",
        )
    result = await state.scorer.score(body)
    state.metrics.observe(result, source="score")
    return result
