"""``POST /v1/score``: one CoT scored synchronously."""

from __future__ import annotations

from typing import Annotated

from faithjudge_client.lines import ItemResult, ScoreRequest
from fastapi import APIRouter, Body

from faithjudge.api.deps import (
    JsonBody,
    JudgeName,
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
from faithjudge.transport.resilience import call_scope

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
    tenant_name: Tenant,
    _json: JsonBody,
    body: Annotated[
        ScoreRequest,
        Body(
            openapi_examples={"hinted": {"summary": "A CoT under a hint", "value": EXAMPLE_REQUEST}}
        ),
    ],
    judge: JudgeName = None,
) -> ItemResult:
    """Score one ScoreRequest synchronously; item problems end up in the result, not as errors."""
    name = state.judge_named(judge)
    scorer = state.scorers.get(name)
    if scorer is None:
        raise HttpProblem(503, "the scorer is not ready")
    if is_batch_route(scorer):
        # a Batch API answer takes minutes to hours: no request waits that long
        raise HttpProblem(
            409,
            f"the judge {scorer.evaluator_id} works through the provider's Batch API "
            "(openai-batch:MODEL): submit the line as a batch with POST /v1/batches",
        )
    with call_scope(tenant_name):
        result = await scorer.score(body)
    state.metrics.observe(result, source="score")
    state.judge_health.note(name, result)
    return result
