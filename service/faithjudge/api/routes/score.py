"""``POST /v1/score``: one CoT scored synchronously."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from faithjudge_client.bodies import ProblemItem
from faithjudge_client.lines import ItemResult, ScoreRequest
from fastapi import APIRouter, Body, Request, Response
from fastapi.routing import APIRoute

from faithjudge.api.deps import (
    JsonBody,
    JudgeName,
    State,
    Tenant,
    json_media,
)
from faithjudge.api.examples import (
    EXAMPLE_REQUEST,
    EXAMPLE_RESULT,
    SCORE_BODY_PROBLEM,
    problems,
)
from faithjudge.api.problems import HttpProblem
from faithjudge.jobs.provider_phase import is_batch_route
from faithjudge.pipeline.request_lines import Unreadable, read_request
from faithjudge.transport.outage import JudgeDown, without_waiting
from faithjudge.transport.resilience import call_scope


class _ReadLikeALine(APIRoute):
    """Reads a JSON body with ``read_request`` before FastAPI parses it.

    FastAPI's own reader answers 400 "There was an error parsing the body" for whatever
    ``json.loads`` raises besides a decode error (an integer of more than 4,300 digits, text
    that is not UTF-8, nesting past the recursion limit) and lets NaN through to validation;
    a job line says what is wrong with the same bytes. Reading the body as a line first gives
    ``POST /v1/score`` the job's words, always as a 422 problem.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def read_first(request: Request) -> Response:
            if json_media(request) is not None:
                parsed = read_request(await request.body())  # kept: FastAPI reads it again
                if isinstance(parsed, Unreadable):
                    items = [ProblemItem(field=f, reason=r) for f, r in parsed.problems[:50]]
                    raise HttpProblem(422, parsed.detail, errors=items)
            return await handler(request)

        return read_first


router = APIRouter(route_class=_ReadLikeALine)


@router.post(
    "/v1/score",
    response_model=ItemResult,
    summary="Score one CoT",
    tags=["scoring"],
    responses={
        200: {"content": {"application/json": {"example": EXAMPLE_RESULT}}},
        **problems(401, 409, 413, 415, 422, 503),
        422: SCORE_BODY_PROBLEM,
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
            f"the judge {scorer.judge_id} works through the provider's Batch API "
            "(openai-batch:MODEL): submit the line as a job with POST /v1/jobs",
        )
    # a job line waits for a judge that stopped answering; a synchronous caller is told
    try:
        with call_scope(tenant_name), without_waiting():
            result = await scorer.score(body)
    except* JudgeDown as down:
        raise HttpProblem(503, str(down.exceptions[0]), headers={"Retry-After": "5"}) from None
    state.metrics.observe(result, source="score")
    state.judge_health.note(name, result)
    return result
