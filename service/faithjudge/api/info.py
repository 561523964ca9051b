"""The frozen configuration the service scores with: judge, prompt set, KB, catalogue."""

from __future__ import annotations

import hashlib

import orjson
from faithjudge_client.bodies import (
    JudgeInfo,
    KnowledgeBaseInfo,
    KnowledgeBaseQuestion,
    ModificationCatalogue,
    ModificationInfo,
)

from faithjudge import __version__
from faithjudge.assets.schemas import SCHEMA_VERSION, schemas_sha256
from faithjudge.pipeline.scorer import Scorer
from faithjudge.scoring.modifications import ALL_MODIFICATIONS
from faithjudge.settings import Settings

__all__ = ["describe_judge", "knowledge_base_info", "modification_catalogue"]


def describe_judge(scorer: Scorer, settings: Settings) -> JudgeInfo:
    """The judge configuration; the settings hash is the one in every result's provenance."""
    frozen = dict(scorer.judge_settings)
    judge_id = scorer.judge_id
    prompts, kb = scorer.prompts, scorer.knowledge_base
    frozen_json = orjson.loads(orjson.dumps(frozen, option=orjson.OPT_SORT_KEYS, default=str))
    return JudgeInfo(
        judge=judge_id,
        evaluator=judge_id,
        model=frozen.get("model") if isinstance(frozen.get("model"), str) else None,
        temperature=settings.temperature,
        seed=settings.seed,
        max_tokens=settings.max_tokens,
        settings=frozen_json,
        settings_sha256=hashlib.sha256(
            orjson.dumps(frozen, option=orjson.OPT_SORT_KEYS, default=str)
        ).hexdigest(),
        prompt_set=prompts.id,
        prompt_sha256=prompts.sha256,
        kb_id=kb.id if kb is not None else None,
        kb_version=kb.version if kb is not None else None,
        kb_sha256=kb.sha256 if kb is not None else None,
        schema_version=SCHEMA_VERSION,
        schemas_sha256=schemas_sha256(),
        service_version=__version__,
    )


def knowledge_base_info(scorer: Scorer) -> KnowledgeBaseInfo | None:
    """The knowledge base the scorer looks questions up in, if it has one."""
    kb = scorer.knowledge_base
    if kb is None:
        return None
    return KnowledgeBaseInfo(
        id=kb.id,
        version=kb.version,
        description=kb.description,
        sha256=kb.sha256,
        questions=[
            KnowledgeBaseQuestion(question=q, type=e.type, answers=list(e.answers))
            for q, e in kb.entries.items()
        ],
    )


def modification_catalogue() -> ModificationCatalogue:
    return ModificationCatalogue(
        items=[
            ModificationInfo(
                id=spec.id,
                code=spec.code,
                kind=spec.kind,
                channel=spec.channel,
                paper=spec.paper,
                description=spec.description,
                targets_answer=spec.targets_answer,
                question_types=sorted(spec.question_types) if spec.question_types else None,
                aliases=list(spec.aliases),
            )
            for spec in ALL_MODIFICATIONS
        ]
    )
