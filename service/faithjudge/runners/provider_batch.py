"""The ``openai-batch:MODEL`` route: judge a whole input through the provider's Batch API.

Two phases. The first reads the input once (streamed), builds every judge request exactly as
the live route would (``Scorer.judge_requests``, ``OpenAIEvaluator.request_body``), keeps those
not already answered (in the response cache) or already in a batch (in the ledger), stages them
into part files and drives them through ``faithjudge.transport.batch.BatchRunner``. The second is an
ordinary scoring run: every answer is read from the cache and verified there, so results equal
the live route's; a request that failed for good comes back from ``OpenAIBatchEvaluator`` as a
``transport`` failure, and no chat-completion call is ever made.

A failure for good belongs to the run that met it, a run being its output file: a plain rerun
into the same output keeps it (``--retry-failed`` asks again), and a run into another output
asks again, since a provider that failed then may answer now.

``judge-requests export`` writes the same request lines to a file for an engine of the user's own;
``import`` caches the answers of its output file, and only answers that carry message content.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from faithjudge_client.lines import ScoreRequest

from faithjudge.errors import ConfigError
from faithjudge.evaluators.base import JudgeRequest
from faithjudge.evaluators.openai_batch import OpenAIBatchEvaluator
from faithjudge.jsonl import numbered_lines
from faithjudge.pipeline import Scorer
from faithjudge.request_lines import parse_line
from faithjudge.settings import Settings
from faithjudge.transport.batch import (
    BatchLedger,
    BatchRunner,
    Ledger,
    PollPolicy,
    ProgressFn,
    outcome_of_line,
    request_line,
)
from faithjudge.transport.cache import ResponseCache, cache_key

__all__ = [
    "BatchReport",
    "CollectStats",
    "ImportStats",
    "batch_runner",
    "collect_requests",
    "export_requests",
    "import_responses",
    "keyed_requests",
    "run_batches",
    "run_of",
]


@dataclass(slots=True)
class CollectStats:
    requests: int = 0
    cached: int = 0
    in_ledger: int = 0
    kept_failures: int = 0  # failed for good earlier in the same run: not asked again
    staged: int = 0
    items: int = 0  # readable request lines of the input
    bad_lines: int = 0  # non-blank input lines that are not a readable request


BadLineFn = Callable[[int, str], None]
"""Called with (line number, reason naming the line) for each unreadable input line."""


def _requests(
    source: Path, stats: CollectStats | None = None, on_bad_line: BadLineFn | None = None
) -> Iterator[ScoreRequest]:
    """The readable requests of ``source``, read line by line as ``faithjudge score`` reads them;
    a bad line is passed to ``on_bad_line`` with the reason ``score`` would give."""
    with source.open("rb") as handle:
        for number, raw in numbered_lines(handle):
            parsed = parse_line(raw, number)
            if isinstance(parsed, ScoreRequest):
                if stats is not None:
                    stats.items += 1
                yield parsed
                continue
            if stats is not None:
                stats.bad_lines += 1
            if on_bad_line is not None:
                detail = parsed.error.detail if parsed.error else None
                on_bad_line(number, detail or f"line {number}: unreadable")


def keyed_requests(
    scorer: Scorer, requests: Iterable[ScoreRequest]
) -> Iterator[tuple[str, JudgeRequest]]:
    """(cache key, judge request) of every cacheable judge request of ``requests``."""
    evaluator = scorer.caller.evaluator
    for item in requests:
        for request in scorer.judge_requests(item):
            material = evaluator.cache_key_material(request)
            if material is not None:
                yield cache_key(material), request


def collect_requests(
    scorer: Scorer,
    body_of: Callable[[JudgeRequest], Mapping[str, Any]],
    requests: Iterable[ScoreRequest],
    *,
    skip: Callable[[str], str | None],
    stats: CollectStats,
) -> Iterator[tuple[str, bytes]]:
    """(key, Batch API line) of each judge request of ``requests`` that ``skip(key)`` keeps.

    ``skip`` answers ``"cached"``, ``"failed"`` (a failure for good kept), another reason, or
    None to keep; it is asked lazily, so it may look at what the caller staged so far.
    """
    for key, request in keyed_requests(scorer, requests):
        stats.requests += 1
        reason = skip(key)
        if reason == "cached":
            stats.cached += 1
        elif reason == "failed":
            stats.kept_failures += 1
        elif reason:
            stats.in_ledger += 1
        else:
            stats.staged += 1
            yield key, request_line(key, body_of(request))


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


def _batch_evaluator(scorer: Scorer, *, needs_cache: bool) -> OpenAIBatchEvaluator:
    evaluator = scorer.caller.evaluator
    if not isinstance(evaluator, OpenAIBatchEvaluator):
        raise ConfigError("the batch route needs an openai-batch:MODEL evaluator")
    if needs_cache and scorer.caller.cache is None:
        raise ConfigError(
            "the batch route keeps its answers in the response cache: drop --no-cache"
        )
    return evaluator


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
    evaluator = _batch_evaluator(scorer, needs_cache=cli)
    file_limits = {
        "max_lines": settings.batch_file_max_requests,
        "max_bytes": int(settings.batch_file_max_mb * 1024 * 1024),
        **(limits or {}),
    }
    return BatchRunner(
        evaluator.client,
        ledger,
        scorer.caller.cache if cli else None,
        max_retries=settings.max_retries,
        poll=PollPolicy(initial=settings.batch_poll_s, maximum=max(60.0, settings.batch_poll_s)),
        **file_limits,
    )


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
    evaluator = _batch_evaluator(scorer, needs_cache=True)
    runner = batch_runner(scorer, settings, evaluator.ledger, limits)
    report = BatchReport()
    if cancel:
        report.cancelled = await runner.cancel()
        return report
    cache = scorer.caller.cache
    assert cache is not None
    ledger = evaluator.ledger
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
            scorer, evaluator.request_body, _requests(source), skip=skip, stats=stats
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
    # the Batch API's discount applies to the cached-input price too: they stack
    report.live_cost = settings.token_cost(
        report.prompt_tokens, report.completion_tokens, report.cached_tokens
    )
    if report.live_cost is not None:
        report.batch_cost = report.live_cost * settings.batch_discount
    return report


def run_of(output: Path | None) -> str:
    """The run an invocation belongs to: its output file (whatever path names it), or a new
    run of its own without one."""
    if output is None:
        return f"unnamed:{uuid.uuid4().hex}"
    return f"output:{output.resolve()}"


def export_requests(
    scorer: Scorer, source: Path, sink: IO[bytes], *, on_bad_line: BadLineFn | None = None
) -> CollectStats:
    """Write the Batch API line of every uncached request of ``source`` to ``sink``.

    Each unreadable input line is passed to ``on_bad_line``; ``items`` and ``bad_lines`` of the
    stats count the readable and the unreadable lines.
    """
    evaluator = scorer.caller.evaluator
    body_of = getattr(evaluator, "request_body", None)
    if body_of is None:
        raise ConfigError(
            f"evaluator {evaluator.id} has no chat-completions body to export: "
            "use openai:MODEL or openai-batch:MODEL"
        )
    cache = scorer.caller.cache
    seen: set[str] = set()
    stats = CollectStats()

    def skip(key: str) -> str | None:
        if cache is not None and cache.get(key) is not None:
            return "cached"
        if key in seen:
            return "duplicate"
        seen.add(key)
        return None

    requests = _requests(source, stats, on_bad_line)
    for _key, line in collect_requests(scorer, body_of, requests, skip=skip, stats=stats):
        sink.write(line)
    return stats


_MAX_NOTES = 20  # messages kept per kind; every line is counted


@dataclass(slots=True)
class ImportStats:
    """What ``import_responses`` did with a Batch API output file."""

    lines: int = 0  # non-blank lines
    stored: int = 0  # answers with message content, cached
    failed: int = 0  # requests that failed, or answered without content: not cached
    bad_lines: int = 0  # lines that are not an output line
    problems: list[str] = field(default_factory=list)  # bad lines (the first few)
    failures: list[str] = field(default_factory=list)  # failed requests (the first few)


def _note(notes: list[str], message: str) -> None:
    if len(notes) < _MAX_NOTES:
        notes.append(message)


def import_responses(lines: Iterable[bytes], cache: ResponseCache) -> ImportStats:
    """Load a Batch API output file into the cache.

    Only an answer is cached: a line whose request failed, or whose completion carries no
    message content (``outcome_of_line``), stays uncached, so a later run asks again.
    """
    stats = ImportStats()
    for number, raw in numbered_lines(lines):
        stats.lines += 1
        try:
            outcome = outcome_of_line(raw)
        except ValueError as exc:
            stats.bad_lines += 1
            _note(stats.problems, f"line {number}: {exc}")
            continue
        if outcome.response is not None:
            cache.put(outcome.key, outcome.response)
            stats.stored += 1
            continue
        stats.failed += 1
        reason = outcome.error or "the request failed"
        if outcome.status is not None and not reason.startswith("HTTP"):
            reason = f"HTTP {outcome.status}: {reason}"
        _note(stats.failures, f"line {number}: {reason}")
    cache.flush()
    return stats
