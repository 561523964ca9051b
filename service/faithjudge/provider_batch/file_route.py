"""The ``openai-batch:MODEL`` route: judge a whole input through the provider's Batch API.

Two phases. The first reads the input once (streamed), builds every judge request exactly as
the live route would (``Scorer.judge_requests``, ``OpenAIJudge.request_body``), keeps those
not already answered (in the response cache) or already in a batch (in the ledger), stages them
into part files and drives them through ``BatchRunner``. The second is an ordinary scoring
run: every answer is read from the cache and verified there, so results equal the live route's;
a request that failed for good comes back from ``OpenAIBatchJudge`` as a
``transport`` failure, and no chat-completion call is ever made.

A failure for good belongs to the run that met it, a run being its output file: a plain rerun
into the same output keeps it (``--retry-failed`` asks again), and a run into another output
asks again, since a provider that failed then may answer now.

``judge-requests export`` and ``import`` (``request_files``) move the same request lines through
an engine of the user's own instead.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faithjudge.pipeline.scorer import Scorer
from faithjudge.provider_batch.collect import CollectStats, collect_requests, read_requests
from faithjudge.provider_batch.route import batch_judge, batch_runner
from faithjudge.provider_batch.runner import ProgressFn
from faithjudge.settings import Settings

__all__ = ["BatchReport", "run_batches", "run_of"]


@dataclass(slots=True)
class BatchReport:
    """What the batch phase did in this invocation (for the summary)."""

    requests: int = 0
    cached: int = 0
    in_batches: int = 0
    kept_failures: int = 0
    """Requests that failed for good in an earlier invocation of this run, not asked again."""
    staged: int = 0
    parts: int = 0
    files_uploaded: int = 0
    batches_created: int = 0
    answered: int = 0
    failed: int = 0
    """Requests failed for good in this run (its output), kept ones included."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """The part of ``prompt_tokens`` the provider served from its prompt cache."""
    live_cost: float | None = None
    batch_cost: float | None = None
    cancelled: int | None = None  # set when the run cancelled: how many batches were open
    staging_s: float = 0.0
    staging_cpu_s: float = 0.0
    exchange_s: float = 0.0
    exchange_cpu_s: float = 0.0

    @property
    def saving(self) -> float | None:
        if self.live_cost is None or self.batch_cost is None:
            return None
        return self.live_cost - self.batch_cost


async def run_batches(
    scorer: Scorer,
    settings: Settings,
    source: Path,
    *,
    progress: ProgressFn | None = None,
    cancel: bool = False,
    limits: Mapping[str, Any] | None = None,
    output: Path | None = None,
    retry_failed: bool = False,
) -> BatchReport:
    """Stage what ``source`` still needs, then drive every batch to its end (or cancel them).

    The run is ``output``'s (a new one of its own when None): a request that failed for good
    in another run is asked again, one that failed in this run only with ``retry_failed``.
    """
    judge = batch_judge(scorer, needs_cache=True)
    runner = batch_runner(scorer, settings, judge.ledger, limits)
    report = BatchReport()
    if cancel:
        report.cancelled = await runner.cancel()
        return report
    cache = scorer.caller.cache
    assert cache is not None
    ledger = judge.ledger
    ledger.begin_run(run_of(output))
    writer = runner.writer()
    stats = CollectStats()

    def skip(key: str) -> str | None:
        if cache.get(key) is not None:
            return "cached"
        if writer.holds(key):
            return "ledger"
        state = ledger.state_of(key)
        if state == "failed":
            return None if retry_failed else "failed"
        # new; another run's failure; or answered but no longer in the cache: ask (again)
        if state in (None, "failed_elsewhere", "answered"):
            return None
        return "ledger"

    wall, cpu = time.perf_counter(), time.process_time()
    try:
        for key, line in collect_requests(
            scorer, judge.request_body, read_requests(source), skip=skip, stats=stats
        ):
            await writer.add(key, line)
        await writer.close_part()
    except BaseException:
        await writer.abort()
        raise
    report.staging_s = time.perf_counter() - wall
    report.staging_cpu_s = time.process_time() - cpu
    report.requests, report.cached = stats.requests, stats.cached
    report.kept_failures = stats.kept_failures
    report.in_batches, report.staged, report.parts = (
        stats.in_ledger,
        stats.staged,
        len(writer.parts),
    )
    wall, cpu = time.perf_counter(), time.process_time()
    await runner.run(progress)
    report.exchange_s = time.perf_counter() - wall
    report.exchange_cpu_s = time.process_time() - cpu
    report.files_uploaded = runner.files_uploaded
    report.batches_created = runner.batches_created
    report.answered = runner.answered
    report.failed = ledger.failed_in_run()
    report.prompt_tokens, report.completion_tokens = runner.prompt_tokens, runner.completion_tokens
    report.cached_tokens = runner.cached_tokens
    tokens = (report.prompt_tokens, report.completion_tokens, report.cached_tokens)
    report.live_cost = settings.token_cost(*tokens)
    report.batch_cost = settings.token_cost(*tokens, batch=True)
    return report


def run_of(output: Path | None) -> str:
    """The run an invocation belongs to: its output file (whatever path names it), or a new
    run of its own without one."""
    if output is None:
        return f"unnamed:{uuid.uuid4().hex}"
    return f"output:{output.resolve()}"
