"""What the service scores with: the evaluator, the knowledge base, the modification catalogue."""

from __future__ import annotations

from faithjudge_client.bodies import (
    EvaluatorInfo,
    KnowledgeBaseInfo,
    ModificationCatalogue,
    ServiceConfig,
)
from fastapi import APIRouter

from faithjudge.api.deps import (
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
    "/v1/evaluator",
    response_model=EvaluatorInfo,
    summary="The frozen evaluator",
    tags=["configuration"],
    responses=problems(401, 422, 503),
)
async def evaluator(
    state: State,
    _tenant_name: Tenant,
    judge: JudgeName = None,
) -> EvaluatorInfo:
    """Evaluator id, model, decoding settings and the hashes that make runs comparable."""
    if not state.evaluator_infos:
        raise HttpProblem(503, "the evaluator is not built yet")
    return state.evaluator_infos[state.judge_named(judge)]


@router.get(
    "/v1/config",
    response_model=ServiceConfig,
    summary="The judges the service offers",
    tags=["configuration"],
    responses=problems(401, 503),
)
async def config(state: State, _tenant_name: Tenant) -> ServiceConfig:
    """Every judge a request may name (``judge`` of ``POST /v1/batches`` and ``/v1/score``),
    the default first, each with its frozen configuration."""
    if not state.evaluator_infos:
        raise HttpProblem(503, "the evaluator is not built yet")
    return ServiceConfig(
        default_judge=next(iter(state.evaluator_infos)),
        judges=list(state.evaluator_infos.values()),
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
