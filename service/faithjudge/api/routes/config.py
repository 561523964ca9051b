"""What the service scores with: the judge, the knowledge base, the modification catalogue."""

from __future__ import annotations

from faithjudge_client.bodies import (
    JudgeInfo,
    KnowledgeBaseInfo,
    ModificationCatalogue,
    ServiceConfig,
)
from fastapi import APIRouter

from faithjudge.api.deps import (
    AppState,
    JudgeName,
    State,
    Tenant,
)
from faithjudge.api.examples import (
    problems,
)
from faithjudge.api.problems import HttpProblem

router = APIRouter()


@router.get(
    "/v1/judge",
    response_model=JudgeInfo,
    summary="The frozen judge",
    tags=["configuration"],
    responses=problems(401, 422, 503),
)
async def judge(
    state: State,
    _tenant_name: Tenant,
    judge: JudgeName = None,
) -> JudgeInfo:
    """Judge id, model, decoding settings and the hashes that make runs comparable."""
    return _judge_info(state, judge)


@router.get(
    "/v1/evaluator",
    response_model=JudgeInfo,
    summary="The frozen judge",
    tags=["configuration"],
    responses=problems(401, 422, 503),
    deprecated=True,
)
async def evaluator(
    state: State,
    _tenant_name: Tenant,
    judge: JudgeName = None,
) -> JudgeInfo:
    """Judge id, model, decoding settings and the hashes that make runs comparable."""
    # the path's older name, still served for clients written before the rename
    return _judge_info(state, judge)


def _judge_info(state: AppState, name: str | None) -> JudgeInfo:
    if not state.judge_infos:
        raise HttpProblem(503, "the judge is not built yet")
    return state.judge_infos[state.judge_named(name)]


@router.get(
    "/v1/config",
    response_model=ServiceConfig,
    summary="The judges the service offers",
    tags=["configuration"],
    responses=problems(401, 503),
)
async def config(state: State, _tenant_name: Tenant) -> ServiceConfig:
    """Every judge a request may name (``judge`` of ``POST /v1/jobs`` and ``/v1/score``),
    the default first, each with its frozen configuration."""
    if not state.judge_infos:
        raise HttpProblem(503, "the judge is not built yet")
    return ServiceConfig(
        default_judge=next(iter(state.judge_infos)),
        judges=list(state.judge_infos.values()),
    )


@router.get(
    "/v1/knowledge-base",
    response_model=KnowledgeBaseInfo,
    summary="The knowledge base",
    tags=["configuration"],
    responses=problems(401, 404),
)
async def knowledge_base(state: State, _tenant_name: Tenant) -> KnowledgeBaseInfo:
    """KB id, version, sha256 and its questions with their answer options."""
    if state.kb_info is None:
        raise HttpProblem(404, "no knowledge base is loaded")
    return state.kb_info


@router.get(
    "/v1/modifications",
    response_model=ModificationCatalogue,
    summary="The modification catalogue",
    tags=["configuration"],
    responses=problems(401),
)
async def modifications(state: State, _tenant_name: Tenant) -> ModificationCatalogue:
    """Every modification code the service understands."""
    return state.catalogue
