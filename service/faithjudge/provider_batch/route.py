"""A scorer's batch route over a ledger: its judge checked, its ``BatchRunner`` built.

The CLI's file route and a service job's provider phase both drive their ledger through the
runner made here, with the file limits and poll interval of the settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faithjudge.errors import ConfigError
from faithjudge.pipeline.scorer import Scorer
from faithjudge.provider_batch.file_ledger import BatchLedger
from faithjudge.provider_batch.judge import OpenAIBatchJudge
from faithjudge.provider_batch.ledger import Ledger
from faithjudge.provider_batch.runner import BatchRunner, PollPolicy
from faithjudge.settings import Settings

__all__ = ["batch_judge", "batch_runner"]


def batch_judge(scorer: Scorer, *, needs_cache: bool) -> OpenAIBatchJudge:
    """The scorer's judge, refused unless it is the batch route's (and, when the route
    keeps its answers in the response cache, ``needs_cache``, unless the scorer has one)."""
    judge = scorer.caller.judge
    if not isinstance(judge, OpenAIBatchJudge):
        raise ConfigError("the batch route needs an openai-batch:MODEL judge")
    if needs_cache and scorer.caller.cache is None:
        raise ConfigError(
            "the batch route keeps its answers in the response cache: drop --no-cache"
        )
    return judge


def batch_runner(
    scorer: Scorer,
    settings: Settings,
    ledger: Ledger,
    limits: Mapping[str, Any] | None = None,
) -> BatchRunner:
    """The runner of the batch route for ``ledger`` (the CLI's file, or a job's in the store).

    The CLI's ledger keeps its answers only in the response cache. A job's keeps them itself,
    for its tenant: the process-wide cache, shared by every tenant, is left out of its route.
    """
    cli = isinstance(ledger, BatchLedger)
    judge = batch_judge(scorer, needs_cache=cli)
    file_limits = {
        "max_lines": settings.batch_file_max_requests,
        "max_bytes": int(settings.batch_file_max_mb * 1024 * 1024),
        **(limits or {}),
    }
    return BatchRunner(
        judge.client,
        ledger,
        scorer.caller.cache if cli else None,
        max_retries=settings.max_retries,
        poll=PollPolicy(initial=settings.batch_poll_s, maximum=max(60.0, settings.batch_poll_s)),
        **file_limits,
    )
