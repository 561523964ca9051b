"""The provider phase of a job on the batch route (``openai-batch:MODEL``).

Before any line of a job is scored, one process (under a renewed lease in the job store) builds
every judge request of its unscored lines exactly as ``faithjudge score`` would, records in the
job's ledger those it has no answer for, and drives them through the provider's Batch API with
the same ``BatchRunner`` as the CLI. Then the job's lines are released to the ordinary workers,
which read every answer from the ledger (``OpenAIBatchEvaluator.bind``), so a line is verified
and stored as on the live route; a request that failed for good is its ``transport`` failure.

A process that dies mid-phase leaves a lease that runs out; the next one resumes the same
ledger: a part half-staged is dropped and staged again, submitted batches are polled, and no
request is ever submitted twice. A job cancelled through the API has its batches cancelled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import anyio
from faithjudge_client.lines import ScoreRequest

from faithjudge.evaluators.base import JudgeRequest
from faithjudge.evaluators.openai_batch import OpenAIBatchEvaluator
from faithjudge.jobs.interface import JobStore, ProviderLedger, StoreUnavailable
from faithjudge.pipeline import Scorer
from faithjudge.request_lines import parse_line
from faithjudge.runners.provider_batch import CollectStats, batch_runner, keyed_requests
from faithjudge.settings import Settings
from faithjudge.transport.base import JudgeResponse
from faithjudge.transport.batch import BatchProgress, BatchRunner, request_line
from faithjudge.transport.resilience import describe_exception

__all__ = ["MAX_PHASE_TRIES", "ProviderPhase", "describe_progress", "is_batch_route"]

log = logging.getLogger("faithjudge.worker")

MAX_PHASE_TRIES = 3
"""Consecutive failures of one job's phase (provider unreachable, refused) before it fails."""
_PAGE = 500


def _retry_delay(tries: int) -> float:
    return min(30.0, 2.0**tries)


def is_batch_route(scorer: Scorer) -> bool:
    return isinstance(scorer.caller.evaluator, OpenAIBatchEvaluator)


def describe_progress(report: BatchProgress) -> str:
    done = report.completed + report.failed
    return (
        f"Batch API: {done:,} of {report.total:,} requests back "
        f"({report.failed:,} failed), batches {report.describe()}"
    )


class ProviderPhase:
    """Runs the provider phase of one job after another, until cancelled."""

    def __init__(
        self,
        store: JobStore,
        scorer: Scorer,
        settings: Settings,
        owner: str,
        *,
        on_done: Callable[[], None],
        limits: dict[str, int] | None = None,
    ) -> None:
        evaluator = scorer.caller.evaluator
        if not isinstance(evaluator, OpenAIBatchEvaluator):
            raise TypeError("the provider phase needs an openai-batch:MODEL evaluator")
        self._store = store
        self._scorer = scorer
        self._evaluator = evaluator
        self._settings = settings
        self._owner = owner
        self._on_done = on_done
        self._limits = limits or {}
        self._failures: dict[str, int] = {}
        self.wake = anyio.Event()

    async def run(self) -> None:
        while True:
            try:
                batch_id = await self._store.claim_provider_phase(
                    self._owner, lease_s=self._settings.lease_s
                )
            except StoreUnavailable as exc:
                log.warning("claiming a provider phase: %s; retrying", exc)
                await anyio.sleep(1.0)
                continue
            if batch_id is None:
                self.wake = anyio.Event()
                with anyio.move_on_after(0.5):
                    await self.wake.wait()
                continue
            try:
                ended = await self._drive(batch_id)
            except Exception as exc:
                await self._failed(batch_id, exc)
                continue
            self._failures.pop(batch_id, None)
            if ended:
                self._on_done()

    async def _failed(self, batch_id: str, exc: Exception) -> None:
        tries = self._failures[batch_id] = self._failures.get(batch_id, 0) + 1
        why = f"Batch API: {describe_exception(exc)[:300]}"
        log.warning("provider phase of %s failed (%d): %s", batch_id, tries, why)
        try:
            if tries >= MAX_PHASE_TRIES:
                self._failures.pop(batch_id, None)
                await self._store.fail_batch(batch_id, f"{why} (gave up after {tries} tries)")
            else:
                await self._store.end_provider_phase(
                    self._owner, batch_id, done=False, detail=f"{why}; retrying"
                )
        except StoreUnavailable as store_exc:
            log.warning("recording the failure: %s", store_exc)  # the lease runs out instead
        await anyio.sleep(_retry_delay(tries))

    async def _drive(self, batch_id: str) -> bool:
        """Stage and run the job's batches; True once its lines may be scored."""
        ledger = self._store.provider_ledger(batch_id, self._render)
        runner = batch_runner(self._scorer, self._settings, ledger, self._limits)
        held = {"state": "held"}

        async def renew() -> None:
            detail = describe_progress(await runner.progress())
            held["state"] = await self._store.renew_provider_phase(
                self._owner, batch_id, lease_s=self._settings.lease_s, detail=detail
            )

        async def heartbeat() -> None:  # keeps the lease through staging and long polls
            while True:
                await anyio.sleep(max(0.05, self._settings.lease_s / 3))
                await renew()

        async def stop() -> bool:  # after every poll round: a cancel is seen at once
            await renew()
            return held["state"] != "held"

        async with anyio.create_task_group() as group:
            group.start_soon(heartbeat)
            await ledger.drop_unsealed()
            await self._stage(batch_id, ledger, runner)
            finished = not await stop() and await runner.run(stop=stop)
            group.cancel_scope.cancel()
        if not finished:
            if held["state"] == "ended":  # cancelled through the API: so are its batches
                cancelled = await runner.cancel()
                log.info("job %s cancelled: %d provider batch(es) cancelled", batch_id, cancelled)
            return False
        counts = await ledger.counts()
        summary = (
            f"Batch API: {counts.get('answered', 0):,} answered, "
            f"{counts.get('failed', 0):,} failed for good; "
            f"{runner.batches_created} batch(es) created, "
            f"{runner.prompt_tokens:,} prompt + {runner.completion_tokens:,} completion tokens"
        )
        await self._store.end_provider_phase(self._owner, batch_id, done=True, detail=summary)
        return True

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
                out.append((key, request_line(key, self._evaluator.request_body(request))))
        return out

    async def _stage(self, batch_id: str, ledger: ProviderLedger, runner: BatchRunner) -> None:
        """Record every judge request of the job's unscored lines that has no answer yet."""
        known = await ledger.keys()
        cache = self._scorer.caller.cache
        writer = runner.writer()
        stats = CollectStats()
        body_of = self._evaluator.request_body
        after = -1
        try:
            while page := await self._store.unscored_requests(batch_id, after=after, limit=_PAGE):
                after = page[-1][0]
                pairs = [
                    (seq, key, request)
                    for seq, line, raw in page
                    for key, request in self._requests_of(line, raw)
                ]
                # settled by an earlier job (answered, or failed for good): not sent again,
                # as a rerun of the CLI's batch route sends nothing it already settled
                settled = await ledger.settled([key for _, key, _ in pairs])
                answered: list[tuple[str, JudgeResponse]] = []
                for seq, key, request in pairs:
                    stats.requests += 1
                    if key in known or key in settled:
                        stats.in_ledger += 1
                        continue
                    known.add(key)
                    hit = cache.get(key) if cache is not None else None
                    if hit is not None:
                        stats.cached += 1
                        answered.append((key, hit))
                        continue
                    stats.staged += 1
                    await writer.add(key, request_line(key, body_of(request)), seq)
                await ledger.record_answers(answered)
            await writer.close_part()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await writer.abort()
            raise
        log.info(
            "job %s: %d judge requests, %d cached, %d already settled, %d staged",
            batch_id,
            stats.requests,
            stats.cached,
            stats.in_ledger,
            stats.staged,
        )
