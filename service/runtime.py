"""Assemble a ready ``Scorer`` from ``Settings``: evaluator, cache, limiter, assets.

This is the one place where settings turn into objects, shared by the CLI and (later) the app.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from clients.cache import ResponseCache
from clients.resilience import JudgeCaller, RetryPolicy
from service.errors import ConfigError
from service.evaluators import make_evaluator
from service.knowledge import load_knowledge_base
from service.pipeline import Scorer, ScoringParams
from service.prompts import load_prompt_set
from service.scoring.metrics import CalibrationParams
from service.settings import Settings

__all__ = ["open_scorer"]


@asynccontextmanager
async def open_scorer(settings: Settings) -> AsyncIterator[Scorer]:
    """Build the scorer for ``settings`` and close its evaluator and cache on exit."""
    if not settings.evaluator:
        raise ConfigError(
            "no evaluator configured: pass --evaluator (openai:MODEL, litellm:MODEL or "
            "replay:FILE) or set FAITHJUDGE_EVALUATOR"
        )
    evaluator = make_evaluator(settings.evaluator, settings=settings)
    cache = None
    try:
        if settings.cache:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            cache = ResponseCache(settings.cache_path)
        caller = JudgeCaller(
            evaluator,
            limiter=anyio.CapacityLimiter(settings.concurrency),
            policy=RetryPolicy(max_retries=settings.max_retries, base=settings.retry_base_s),
            cache=cache,
        )
        scorer = Scorer(
            caller=caller,
            prompts=load_prompt_set(settings.prompt_set),
            knowledge_base=load_knowledge_base(settings.knowledge_base),
            params=ScoringParams(
                quote_tolerance=settings.quote_tolerance,
                calibration=CalibrationParams(alpha=settings.cc_alpha, beta=settings.cc_beta),
                min_ordinal_flip_grades=settings.min_ordinal_flip_grades,
            ),
        )
        yield scorer
    finally:
        if cache is not None:
            cache.close()
        await evaluator.aclose()
