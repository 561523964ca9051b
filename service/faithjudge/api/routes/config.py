"""What the service scores with: the evaluator, the knowledge base, the modification catalogue."""

from __future__ import annotations

from faithjudge_client.bodies import (
    EvaluatorInfo,
    KnowledgeBaseInfo,
    ModificationCatalogue,
)
from fastapi import APIRouter

from faithjudge.api.deps import (
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
    responses=problems(401, 503),
)
async def evaluator(state: State, _tenant_name: Tenant) -> EvaluatorInfo:
    """Evaluator id, model, decoding settings and the hashes that make runs comparable."""
    if state.evaluator_info is None:
        raise HttpProblem(503, "the evaluator is not built yet")
    return state.evaluator_info


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
