"""The provider phase of a job on the batch route (``openai-batch:MODEL``).

Before any line of a job is scored, one process (under a renewed lease in the job store) builds
every judge request of its unscored lines exactly as ``faithjudge score`` would, records in the
job's ledger those it has no answer for, and drives them through the provider's Batch API with
the same ``BatchRunner`` as the CLI. Then the job's lines are released to the ordinary workers,
which read every answer from the ledger (``OpenAIBatchJudge.bind``), so a line is verified
and stored as on the live route; a request that failed for good is its ``transport`` failure.

A process that dies mid-phase leaves a lease that runs out; the next one resumes the same
ledger: a part half-staged is dropped and staged again, submitted batches are polled, and no
request is ever submitted twice. An unreachable store pauses the phase, which resumes once it
answers; it never counts against the job. Requests of a provider batch that ends ``failed`` or
``expired`` go into follow-up batches; a request that fails for good fails for this job only
(another job with the same request asks again), and answers are shared within a tenant only.
A job that ends while its batches run (cancelled through the API, or failed) has them cancelled
by whichever process looks next, within one poll interval, even after a restart. The summary
counts batches and tokens from the ledger, over every process that worked on the job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import anyio
from faithjudge_client.lines import ScoreRequest

from faithjudge.jobs.interface import (
    PHASE_UNDERWAY_PREFIX,
    JobStore,
    LedgerTotals,
    ProviderLedger,
    ProviderPhaseStore,
    StoreUnavailable,
)
from faithjudge.jobs.store_errors import cause_of, store_error_in, until_store_answers
from faithjudge.judges import is_batch_route as backend_is_batch_route
from faithjudge.judges.base import JudgeRequest
from faithjudge.pipeline.request_lines import parse_line
from faithjudge.pipeline.scorer import Scorer
from faithjudge.provider_batch.collect import CollectStats, keyed_requests
from faithjudge.provider_batch.judge import OpenAIBatchJudge
from faithjudge.provider_batch.route import batch_runner
from faithjudge.provider_batch.runner import BatchProgress, BatchRunner
from faithjudge.provider_batch.wire import request_line
from faithjudge.settings import Settings
from faithjudge.transport.base import JudgeResponse
from faithjudge.transport.resilience import describe_exception

__all__ = [
    "MAX_PHASE_TRIES",
    "JobAnswers",
    "ProviderPhase",
    "describe_failure",
    "describe_progress",
    "is_batch_route",
    "phase_cost",
]

log = logging.getLogger("faithjudge.worker")

MAX_PHASE_TRIES = 3
"""Consecutive failures of one job's phase (provider unreachable, refused) before it fails."""
_PAGE = 500
_ENDED_PAGE = 32
"""Ended jobs read per page by the cancel loop (the store's default page)."""


_scoring_job: ContextVar[str | None] = ContextVar("faithjudge_scoring_job", default=None)
"""The job whose line the current task scores (``JobAnswers.scoring``)."""


def _retry_delay(tries: int) -> float:
    return min(30.0, 2.0**tries)


def phase_cost(settings: Settings, totals: LedgerTotals) -> float | None:
    """The price of the phase's tokens at batch prices (cached input at its own price), when
    prices are configured."""
    return settings.token_cost(
        totals.prompt_tokens, totals.completion_tokens, totals.cached_tokens, batch=True
    )


def is_batch_route(scorer: Scorer) -> bool:
    """Whether the scorer's judge goes through a provider phase: the registry says whether its
    backend (its id's part before ``:``) is a Batch API route."""
    return backend_is_batch_route(scorer.judge_id)


def describe_progress(report: BatchProgress) -> str:
    done = report.completed + report.failed
    return (
        f"{PHASE_UNDERWAY_PREFIX}{done:,} of {report.total:,} requests back "
        f"({report.failed:,} failed), batches {report.describe()}"
    )


class JobAnswers:
    """The batch route's answers as the worker's scorers read them (an ``AnswerSource``).

    A lookup is scoped to the job whose line is being scored (``scoring``): an answer from any
    job of its tenant, a failure for good from that job only. An unreachable store is waited
    out: the line is scored once it answers, never recorded as a failure.
    """

    def __init__(self, store: ProviderPhaseStore, *, failing: dict[str, str] | None = None) -> None:
        self._store = store
        self._failing = failing

    @staticmethod
    @contextmanager
    def scoring(job_id: str) -> Iterator[None]:
        """Lookups made in the block (and the tasks it starts) are for job ``job_id``."""
        token = _scoring_job.set(job_id)
        try:
            yield
        finally:
            _scoring_job.reset(token)

    async def answer_of(self, key: str) -> JudgeResponse | None:
        job = _scoring_job.get()
        return await until_store_answers(
            lambda: self._store.answer_of(key, job_id=job),
            what="reading batch answers",
            failing=self._failing,
        )

    async def failure_of(self, key: str) -> tuple[int, int | None, str] | None:
        job = _scoring_job.get()
        return await until_store_answers(
            lambda: self._store.failure_of(key, job_id=job),
            what="reading batch answers",
            failing=self._failing,
        )


def describe_failure(exc: BaseException) -> str:
    """What went wrong, from inside task groups and past the cancellations they caused."""
    leaf = cause_of(exc)
    text = describe_exception(leaf)
    if text.startswith("CancelledError"):  # the cause chain ends at a cancellation we caused
        text = f"{type(leaf).__name__}: {leaf}".rstrip(": ")
    return text


class ProviderPhase:
    """Runs the provider phase of one job after another, until cancelled, and cancels the
    provider batches of every job that ended (cancelled, failed) while they ran."""

    def __init__(
        self,
        store: JobStore,
        scorer: Scorer,
        settings: Settings,
        owner: str,
        *,
        on_done: Callable[[], None],
        limits: dict[str, int] | None = None,
        on_provider: Callable[[str | None], None] | None = None,
    ) -> None:
        """``on_provider`` hears each phase's end: its error, or None once one went through
        (readiness names a provider that fails)."""
        judge = scorer.caller.judge
        if not isinstance(judge, OpenAIBatchJudge):
            raise TypeError("the provider phase needs an openai-batch:MODEL judge")
        self._store = store
        self._scorer = scorer
        self._judge = judge
        self._settings = settings
        self._owner = owner
        self._on_done = on_done
        self._on_provider = on_provider
        self._limits = limits or {}
        self._failures: dict[str, int] = {}
        self._reused: dict[str, tuple[int, int, int]] = {}
        """By job: (answers, prompt, completion tokens) reused from the tenant's earlier jobs."""
        self._cancelling: set[str] = set()
        self._cancel_tries: dict[str, tuple[int, float]] = {}
        self.wake = anyio.Event()

    async def run(self) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(self._cancel_loop)
            await self._claim_loop()

    async def _claim_loop(self) -> None:
        while True:
            job_id = await until_store_answers(
                lambda: self._store.claim_provider_phase(
                    self._owner, lease_s=self._settings.lease_s
                ),
                what="claiming a provider phase",
            )
            if job_id is None:
                self.wake = anyio.Event()
                with anyio.move_on_after(0.5):
                    await self.wake.wait()
                continue
            await self._work(job_id)

    async def _work(self, job_id: str) -> None:
        """Drive one job's phase to its end; a store outage pauses it, then it resumes."""
        while True:
            try:
                ended = await self._drive(job_id)
            except Exception as exc:
                lost = store_error_in(exc)
                if lost is None:
                    await self._failed(job_id, exc)
                    return
                log.warning("provider phase of %s: %s; resuming once it answers", job_id, lost)
                state = await until_store_answers(
                    lambda: self._store.renew_provider_phase(
                        self._owner, job_id, lease_s=self._settings.lease_s
                    ),
                    what="resuming a provider phase",
                )
                if state == "held":
                    continue
                return  # ended meanwhile (the cancel loop ends its batches) or taken over
            self._failures.pop(job_id, None)
            if self._on_provider is not None:
                self._on_provider(None)
            if ended:
                self._on_done()
            return

    async def _failed(self, job_id: str, exc: Exception) -> None:
        tries = self._failures[job_id] = self._failures.get(job_id, 0) + 1
        why = f"Batch API: {describe_failure(exc)[:300]}"
        log.warning("provider phase of %s failed (%d): %s", job_id, tries, why)
        if self._on_provider is not None:
            self._on_provider(why)
        if tries >= MAX_PHASE_TRIES:
            self._failures.pop(job_id, None)
            # a failed job's provider batches are cancelled by the cancel loop
            await until_store_answers(
                lambda: self._store.fail_job(
                    job_id, f"{why} (gave up after {tries} tries)", owner=self._owner
                ),
                what="recording a failed provider phase",
            )
        else:
            await until_store_answers(
                lambda: self._store.end_provider_phase(
                    self._owner,
                    job_id,
                    done=False,
                    detail=f"{PHASE_UNDERWAY_PREFIX}{why}; retrying",
                ),
                what="recording a failed provider phase",
            )
        await anyio.sleep(_retry_delay(tries))

    # ----------------------------------------------------------------- cancels

    async def _cancel_loop(self) -> None:
        """Every poll interval, cancel the provider batches of jobs that ended meanwhile.

        The cancel is in the store before the API answers it, so whichever process looks next
        (this one after a restart, or another replica) ends the batches, and a job that failed
        leaves none running either.
        """
        async with anyio.create_task_group() as group:
            while True:
                await anyio.sleep(self._settings.batch_poll_s)
                # every ended job, page by page: jobs whose cancel keeps failing (backing off)
                # must not hide the ones after them
                after: str | None = None
                while True:
                    try:
                        ended = await self._store.ended_provider_phases(_ENDED_PAGE, after=after)
                    except StoreUnavailable as exc:
                        log.warning("looking for cancelled jobs: %s", exc)
                        break
                    now = time.monotonic()
                    for job_id in ended:
                        if self._cancel_tries.get(job_id, (0, 0.0))[1] <= now:
                            group.start_soon(self._cancel_job, job_id)
                    if len(ended) < _ENDED_PAGE:
                        break
                    after = ended[-1]

    async def _cancel_job(self, job_id: str) -> None:
        """Cancel job ``job_id``'s open provider batches, keeping what they answered."""
        if job_id in self._cancelling:
            return
        self._cancelling.add(job_id)
        try:
            ledger = self._store.provider_ledger(job_id, self._render)
            runner = batch_runner(self._scorer, self._settings, ledger, self._limits)
            cancelled = await runner.cancel()
        except Exception as exc:
            tries = self._cancel_tries.get(job_id, (0, 0.0))[0] + 1
            self._cancel_tries[job_id] = (tries, time.monotonic() + _retry_delay(tries))
            log.warning("cancelling the provider batches of %s: %s", job_id, describe_failure(exc))
            return
        finally:
            self._cancelling.discard(job_id)
        self._cancel_tries.pop(job_id, None)
        log.info("job %s ended: %d provider batch(es) cancelled", job_id, cancelled)

    # ----------------------------------------------------------------- one job

    async def _drive(self, job_id: str) -> bool:
        """Stage and run the job's batches; True once its lines may be scored."""
        self._reused.pop(job_id, None)  # counted again by this staging, from the store
        ledger = self._store.provider_ledger(job_id, self._render)
        runner = batch_runner(self._scorer, self._settings, ledger, self._limits)
        held = {"state": "held"}

        async def renew() -> None:
            detail = describe_progress(await runner.progress())
            held["state"] = await self._store.renew_provider_phase(
                self._owner, job_id, lease_s=self._settings.lease_s, detail=detail
            )

        async def heartbeat() -> None:  # keeps the lease through staging and long polls
            while True:
                await anyio.sleep(max(0.05, self._settings.lease_s / 3))
                try:
                    await renew()
                except StoreUnavailable as exc:  # the phase's own store calls wait it out
                    log.warning("renewing the provider phase of %s: %s", job_id, exc)

        async def stop() -> bool:  # after every poll round: a cancel is seen at once
            await renew()
            return held["state"] != "held"

        async with anyio.create_task_group() as group:
            group.start_soon(heartbeat)
            await ledger.drop_unsealed()
            await self._stage(job_id, ledger, runner)
            finished = not await stop() and await runner.run(stop=stop)
            group.cancel_scope.cancel()
        if not finished:
            if held["state"] == "ended":  # cancelled through the API: so are its batches
                await self._cancel_job(job_id)
            return False
        await self._store.end_provider_phase(
            self._owner, job_id, done=True, detail=await self._summary(job_id, ledger)
        )
        return True

    async def _summary(self, job_id: str, ledger: ProviderLedger) -> str:
        """How the phase went, from the ledger: every process that worked on the job counts,
        and the answers it reuses from the tenant's earlier jobs are counted apart, as reused
        tokens: neither nothing nor paid again."""
        counts = await ledger.counts()
        totals = await ledger.totals()
        summary = (
            f"Batch API: {counts.get('answered', 0):,} answered, "
            f"{counts.get('failed', 0):,} failed for good; "
            f"{totals.batches_created} batch(es) created, "
            f"{totals.prompt_tokens:,} prompt + {totals.completion_tokens:,} completion tokens"
        )
        cost = phase_cost(self._settings, totals)
        if cost is not None:
            summary = f"{summary}, ${cost:,.4f} at batch prices"
        if totals.cached_tokens:
            summary += f"; {totals.cached_tokens:,} of the prompt tokens cached by the provider"
        answers, prompt, completion = self._reused.pop(job_id, (0, 0, 0))
        if answers:
            summary += (
                f"; {answers:,} answer(s) reused from earlier jobs: {prompt:,} prompt + "
                f"{completion:,} completion tokens reused, not paid again"
            )
        return summary

    def _requests_of(self, line: int, raw: str) -> list[tuple[str, JudgeRequest]]:
        """(cache key, judge request) of every judge request one job line makes."""
        parsed = parse_line(raw.encode(), line)
        if not isinstance(parsed, ScoreRequest):
            return []
        return list(keyed_requests(self._scorer, [parsed]))

    def _render(self, sources: Sequence[tuple[str, int, str]]) -> list[tuple[str, bytes]]:
        """The Batch API lines of requests, rebuilt from the job lines they come from.

        A key its line no longer makes (the judge's settings changed between two processes)
        is left out: its part then answers it as missing, and it ends as a transport failure.
        """
        out: list[tuple[str, bytes]] = []
        made: dict[int, dict[str, JudgeRequest]] = {}
        for key, line, raw in sources:
            requests = made.get(line)
            if requests is None:
                requests = made[line] = dict(self._requests_of(line, raw))
            request = requests.get(key)
            if request is not None:
                out.append((key, request_line(key, self._judge.request_body(request))))
        return out

    async def _stage(self, job_id: str, ledger: ProviderLedger, runner: BatchRunner) -> None:
        """Record every judge request of the job's unscored lines that has no answer yet."""
        known = await ledger.keys()
        writer = runner.writer()
        stats = CollectStats()
        body_of = self._judge.request_body
        after = -1
        try:
            while page := await self._store.unscored_requests(job_id, after=after, limit=_PAGE):
                after = page[-1][0]
                pairs = [
                    (seq, key, request)
                    for seq, line, raw in page
                    for key, request in self._requests_of(line, raw)
                ]
                # answered by an earlier job of the tenant: not sent again, as a rerun of the
                # CLI's batch route sends nothing it already settled. The response cache is
                # not asked: it is the whole process's, every tenant's.
                settled = await ledger.settled([key for _, key, _ in pairs])
                reused = sorted(settled - known)
                if reused:
                    prompt, completion = await ledger.reused_tokens(reused)
                    answers, before_p, before_c = self._reused.get(job_id, (0, 0, 0))
                    self._reused[job_id] = (
                        answers + len(reused),
                        before_p + prompt,
                        before_c + completion,
                    )
                    known.update(reused)
                for seq, key, request in pairs:
                    stats.requests += 1
                    if key in known or key in settled:
                        stats.in_ledger += 1
                        continue
                    known.add(key)
                    stats.staged += 1
                    await writer.add(key, request_line(key, body_of(request)), seq)
            await writer.close_part()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await writer.abort()
            raise
        log.info(
            "job %s: %d judge requests, %d already answered, %d staged",
            job_id,
            stats.requests,
            stats.in_ledger,
            stats.staged,
        )
