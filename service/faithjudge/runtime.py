"""Assemble a ready ``Scorer`` from ``Settings``: evaluator, cache, limiter, assets.

This is the one place where settings turn into objects, shared by the CLI and (later) the app.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from faithjudge_client.retry import RetryPolicy

from faithjudge.errors import ConfigError
from faithjudge.evaluators import evaluator_forms, make_evaluator
from faithjudge.knowledge import load_knowledge_base
from faithjudge.pipeline import Scorer, ScoringParams
from faithjudge.private_files import private_dir
from faithjudge.prompts import load_prompt_set
from faithjudge.scoring.metrics import CalibrationParams
from faithjudge.settings import Settings
from faithjudge.transport.cache import ResponseCache
from faithjudge.transport.resilience import JudgeCaller

__all__ = ["FAIL_FAST_AFTER", "open_scorer"]

# Calls in a row that found the judge unreachable, before any answer, that stop a run: enough
# not to trip on one unlucky connection, few enough to stop in seconds.
FAIL_FAST_AFTER = 3


@asynccontextmanager
async def open_scorer(settings: Settings, *, fail_fast: bool = False) -> AsyncIterator[Scorer]:
    """Build the scorer for ``settings`` and close its evaluator and cache on exit.

    ``fail_fast`` (a one-off run, not the service) stops at the first few calls when the judge
    cannot be reached at all, raising ``JudgeUnreachable`` with the cause.
    """
    if not settings.evaluator:
        raise ConfigError(
            f"no evaluator configured: pass --evaluator ({', '.join(evaluator_forms())}) "
            "or set FAITHJUDGE_EVALUATOR"
        )
    evaluator = make_evaluator(settings.evaluator, settings=settings)
    cache = None
    try:
        if settings.cache:
            private_dir(settings.data_dir)
            cache = ResponseCache(settings.cache_path)
        caller = JudgeCaller(
            evaluator,
            limiter=anyio.CapacityLimiter(settings.concurrency),
            policy=RetryPolicy(max_retries=settings.max_retries, base=settings.retry_base_s),
            cache=cache,
            fail_fast_after=FAIL_FAST_AFTER if fail_fast else None,
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
        # Everything alive now (modules, the compiled lexicon, the knowledge base, schemas)
        # lives as long as the scorer: out of the cyclic collector's reach, a full collection
        # no longer walks it again each time the per-item memos grow (a tenth of a lexicon
        # run's time before). Handed back on close, so whatever of it turns to garbage then
        # is collected as usual. A heap someone else froze (an enclosing scorer, a host
        # application before it forks) is theirs to hand back: left alone.
        owns_freeze = gc.get_freeze_count() == 0
        if owns_freeze:
            gc.freeze()
        try:
            yield scorer
        finally:
            if owns_freeze:
                gc.unfreeze()
    finally:
        if cache is not None:
            cache.close()
        await evaluator.aclose()
