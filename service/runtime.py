"""Assemble a ready ``Scorer`` from ``Settings``: evaluator, cache, limiter, assets.

This is the one place where settings turn into objects, shared by the CLI and (later) the app.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio

from service.errors import ConfigError
from service.evaluators import make_evaluator
from service.knowledge import load_knowledge_base
from service.pipeline import Scorer, ScoringParams
from service.prompts import load_prompt_set
from service.scoring.metrics import CalibrationParams
from service.settings import Settings
from service.transport.cache import ResponseCache
from service.transport.resilience import JudgeCaller, RetryPolicy

T = TypeVar("T")

__all__ = ["open_scorer", "run_async"]


def run_async(func: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run ``func(*args)`` on a fresh event loop, uvloop's where it is installed.

    uvloop roughly halves the event loop's own CPU per evaluator call, which is what bounds
    calls/s at high concurrency on a small machine.
    """
    use_uvloop = importlib.util.find_spec("uvloop") is not None
    return anyio.run(func, *args, backend_options={"use_uvloop": use_uvloop})


@asynccontextmanager
async def open_scorer(settings: Settings) -> AsyncIterator[Scorer]:
    """Build the scorer for ``settings`` and close its evaluator and cache on exit."""
    if not settings.evaluator:
        raise ConfigError(
            "no evaluator configured: pass --evaluator (lexicon:v1, openai:MODEL, "
            "litellm:MODEL or replay:FILE) or set FAITHJUDGE_EVALUATOR"
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
