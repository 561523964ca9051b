"""Assemble a ready ``Scorer`` from ``Settings``: judge, cache, limiter, assets.

This is the one place where settings turn into objects, shared by the CLI and (later) the app.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from faithjudge_client.retry import RetryPolicy

from faithjudge.assets.knowledge import load_knowledge_base
from faithjudge.assets.prompts import load_prompt_set
from faithjudge.errors import ConfigError
from faithjudge.judges import judge_forms, make_judge
from faithjudge.pipeline.scorer import Scorer, ScoringParams
from faithjudge.private_files import private_dir
from faithjudge.scoring.metrics import CalibrationParams
from faithjudge.settings import Settings
from faithjudge.transport.cache import ResponseCache
from faithjudge.transport.resilience import JudgeCaller

__all__ = ["FAIL_FAST_AFTER", "CacheFactory", "open_scorer", "open_scorers"]

CacheFactory = Callable[[Path], ResponseCache]
"""Builds the response cache from the path of its file."""

# Calls in a row that found the judge unreachable, before any answer, that stop a run: enough
# not to trip on one unlucky connection, few enough to stop in seconds.
FAIL_FAST_AFTER = 3


@asynccontextmanager
async def open_scorer(settings: Settings, *, fail_fast: bool = False) -> AsyncIterator[Scorer]:
    """Build the scorer for ``settings`` and close its judge and cache on exit.

    ``fail_fast`` (a one-off run, not the service) stops at the first few calls when the judge
    cannot be reached at all, raising ``JudgeUnreachable`` with the cause.
    """
    if not settings.judge:
        raise ConfigError(
            f"no judge configured: pass --judge ({', '.join(judge_forms())}) "
            "or set FAITHJUDGE_JUDGE"
        )
    async with _open_scorers(settings, (settings.judge,), fail_fast=fail_fast) as scorers:
        yield scorers[settings.judge]


@asynccontextmanager
async def open_scorers(
    settings: Settings, *, make_cache: CacheFactory | None = None
) -> AsyncIterator[dict[str, Scorer]]:
    """One scorer per judge the service offers (``settings.offered_judges``, the default first), by
    judge name; they share the response cache, each has its own judge and limiter.

    ``make_cache`` builds that cache from its file's path when the cache is on (the service
    passes one that keeps answers in its job store too); by default a plain ``ResponseCache``.
    """
    if not settings.offered_judges:
        raise ConfigError(
            f"no judge configured: set FAITHJUDGE_JUDGES or FAITHJUDGE_JUDGE "
            f"({', '.join(judge_forms())})"
        )
    async with _open_scorers(
        settings, settings.offered_judges, fail_fast=False, make_cache=make_cache or ResponseCache
    ) as scorers:
        yield scorers


@asynccontextmanager
async def _open_scorers(
    settings: Settings,
    specs: tuple[str, ...],
    *,
    fail_fast: bool,
    make_cache: CacheFactory = ResponseCache,
) -> AsyncIterator[dict[str, Scorer]]:
    judges = []
    cache = None
    try:
        for spec in specs:
            judges.append(make_judge(spec, settings=settings))
        if settings.cache:
            private_dir(settings.data_dir)
            cache = make_cache(settings.cache_path)
        prompts = load_prompt_set(settings.prompt_set)
        knowledge_base = load_knowledge_base(settings.knowledge_base)
        params = ScoringParams(
            quote_tolerance=settings.quote_tolerance,
            calibration=CalibrationParams(alpha=settings.cc_alpha, beta=settings.cc_beta),
            min_ordinal_flip_grades=settings.min_ordinal_flip_grades,
        )
        scorers: dict[str, Scorer] = {}
        for spec, judge in zip(specs, judges, strict=True):
            caller = JudgeCaller(
                judge,
                limiter=anyio.CapacityLimiter(settings.concurrency),
                policy=RetryPolicy(max_retries=settings.max_retries, base=settings.retry_base_s),
                cache=cache,
                fail_fast_after=FAIL_FAST_AFTER if fail_fast else None,
                wait_outages=True,
                outage_s=settings.judge_outage_s if fail_fast else None,
                # set by the user (flag, environment, config): a local server starts there
                explicit_concurrency="concurrency" in settings.model_fields_set,
            )
            scorers[spec] = Scorer(
                caller=caller, prompts=prompts, knowledge_base=knowledge_base, params=params
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
            yield scorers
        finally:
            if owns_freeze:
                gc.unfreeze()
    finally:
        if cache is not None:
            cache.close()
        for judge in judges:
            await judge.aclose()
