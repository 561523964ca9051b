"""The batch worker: claims lines from the job store, scores them, writes results in batches.

One worker per process drives the same ``Scorer`` as ``faithjudge score``: up to
``settings.concurrency`` lines are scored at once (one for a judge in the process; their
evaluator calls share the scorer's limiter), claims are topped up before the scorers run dry,
and results are committed every ``commit_every`` lines or ``commit_interval_s`` seconds,
whichever comes first. Leases are renewed while lines are held, so only the lines of a process
that died are taken over.

On the batch route (``openai-batch:MODEL``) a job's lines are claimed only once its provider
phase (``faithjudge.jobs.provider_phase``) has sent its judge requests through the Batch API and
recorded the answers in the store, where the evaluator reads them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

import anyio
import anyio.abc
import orjson
from faithjudge_client.lines import Failure, ItemResult, ScoreRequest

from faithjudge.evaluators.openai_batch import OpenAIBatchEvaluator
from faithjudge.jobs.interface import ClaimedLine, DoneLine, JobStore, StoreUnavailable
from faithjudge.jobs.provider_phase import ProviderPhase, is_batch_route
from faithjudge.pipeline import Scorer
from faithjudge.request_lines import parse_line
from faithjudge.settings import Settings

__all__ = ["Worker", "done_line"]

log = logging.getLogger("faithjudge.worker")

ResultHook = Callable[[ItemResult], None]


def done_line(batch_id: str, seq: int, result: ItemResult) -> DoneLine:
    """The stored form of a result: its JSON and the outcome counts the status sums."""
    statuses: dict[str, int] = {}
    stages: dict[str, int] = {}
    for metric in result.metrics.values():
        statuses[metric.status] = statuses.get(metric.status, 0) + 1
        if metric.failure is not None:
            stages[metric.failure.stage] = stages.get(metric.failure.stage, 0) + 1
    if result.error is not None:
        stages[result.error.stage] = stages.get(result.error.stage, 0) + 1
    return DoneLine(
        batch_id=batch_id,
        seq=seq,
        result=orjson.dumps(result.model_dump(mode="json")),
        is_error=int(result.error is not None),
        statuses=statuses,
        stages=stages,
    )


class Worker:
    """Drains queued batches of the store with one scorer until cancelled."""

    def __init__(
        self,
        store: JobStore,
        scorer: Scorer,
        settings: Settings,
        *,
        on_result: ResultHook | None = None,
    ) -> None:
        self.store = store
        self.scorer = scorer
        self.owner = f"w_{uuid.uuid4().hex[:24]}"
        self._settings = settings
        self._on_result = on_result
        self._concurrency = scorer.items_at_once(settings.concurrency)
        # claimed but not yet committed: bounded so memory and leases stay small
        self._max_held = 2 * self._concurrency + settings.claim_size
        self._held = 0
        self._done: list[DoneLine] = []
        self._wake = anyio.Event()
        self._flush_now = anyio.Event()
        self._room = anyio.Event()
        self.started = anyio.Event()
        self.failing: dict[str, str] = {}
        """Store calls failing now, by what they do; readiness reports them (empty when well)."""
        self._phase: ProviderPhase | None = None
        if is_batch_route(scorer):
            evaluator = scorer.caller.evaluator
            assert isinstance(evaluator, OpenAIBatchEvaluator)
            evaluator.bind(store)
            self._phase = ProviderPhase(store, scorer, settings, self.owner, on_done=self.notify)

    def notify(self) -> None:
        """New work was queued in this process: claim now instead of at the next poll."""
        self._wake.set()
        if self._phase is not None:
            self._phase.wake.set()

    async def run(self) -> None:
        await self.store.recover()
        send, receive = anyio.create_memory_object_stream[ClaimedLine](self._max_held)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._claim_loop, send)
                group.start_soon(self._commit_loop)
                group.start_soon(self._heartbeat)
                if self._phase is not None:
                    group.start_soon(self._phase.run)
                with receive:
                    for _ in range(self._concurrency):
                        group.start_soon(self._score_loop, receive.clone())
                self.started.set()
        finally:
            with anyio.CancelScope(shield=True):
                await self._flush()
                try:
                    await self.store.release(self.owner)
                except Exception:  # the store may be what failed; leases then expire
                    log.warning("could not release leases on shutdown", exc_info=True)

    # ------------------------------------------------------------------ loops

    async def _claim_loop(self, send: anyio.abc.ObjectSendStream[ClaimedLine]) -> None:
        settings = self._settings
        async with send:
            while True:
                room = self._max_held - self._held
                if room < settings.claim_size:
                    self._room = anyio.Event()
                    await self._room.wait()
                    continue
                claimed: list[ClaimedLine] = []
                try:
                    batch_ids = await self.store.active_batch_ids(
                        provider_done=self._phase is not None
                    )
                    if batch_ids:
                        claimed = await self.store.claim(
                            self.owner,
                            batch_ids=batch_ids,
                            limit=min(room, settings.claim_size),
                            lease_s=settings.lease_s,
                        )
                except StoreUnavailable as exc:
                    log.warning("claiming work: %s; retrying", exc)
                    self.failing["claiming work"] = str(exc)
                    await anyio.sleep(1.0)
                    continue
                except Exception as exc:
                    log.exception("claiming work failed; retrying")
                    self.failing["claiming work"] = type(exc).__name__
                    await anyio.sleep(1.0)
                    continue
                self.failing.pop("claiming work", None)
                if not claimed:
                    self._wake = anyio.Event()
                    with anyio.move_on_after(0.5):
                        await self._wake.wait()
                    continue
                self._held += len(claimed)
                for item in claimed:
                    await send.send(item)

    async def _score_loop(self, receive: anyio.abc.ObjectReceiveStream[ClaimedLine]) -> None:
        async with receive:
            async for item in receive:
                result = await self._score(item)
                self._done.append(done_line(item.batch_id, item.seq, result))
                if self._on_result is not None:
                    self._on_result(result)
                if len(self._done) >= self._settings.commit_every:
                    self._flush_now.set()

    async def _score(self, item: ClaimedLine) -> ItemResult:
        parsed = parse_line(item.request.encode(), item.line)
        if not isinstance(parsed, ScoreRequest):
            return parsed  # accepted at upload, so only a changed schema lands here
        try:
            return await self.scorer.score(parsed, line=item.line)
        except Exception as exc:  # a bug must not stall the batch: the line records it
            log.exception("scoring line %d of %s failed", item.line, item.batch_id)
            return ItemResult(
                line=item.line,
                item_id=parsed.item_id,
                model=parsed.model,
                question=parsed.question,
                # not judged, so the line counts against coverage; the detail says it was a bug
                error=Failure(stage="transport", detail=f"internal error: {type(exc).__name__}"),
            )

    async def _commit_loop(self) -> None:
        while True:
            with anyio.move_on_after(self._settings.commit_interval_s):
                await self._flush_now.wait()
            self._flush_now = anyio.Event()
            try:
                await self._flush()
            except StoreUnavailable as exc:
                log.warning("writing results: %s; retrying", exc)
                self.failing["writing results"] = str(exc)
                await anyio.sleep(1.0)
            except Exception as exc:
                log.exception("writing results failed; retrying")
                self.failing["writing results"] = type(exc).__name__
                await anyio.sleep(1.0)
            else:
                self.failing.pop("writing results", None)

    async def _flush(self) -> None:
        if not self._done:
            return
        chunk, self._done = self._done, []
        try:
            await self.store.complete(self.owner, chunk)
        except BaseException:
            self._done[:0] = chunk  # keep them for the next try
            raise
        self._held -= len(chunk)
        self._room.set()

    async def _heartbeat(self) -> None:
        period = max(0.05, self._settings.lease_s / 3)
        while True:
            await anyio.sleep(period)
            try:
                await self.store.renew(self.owner, lease_s=self._settings.lease_s)
            except StoreUnavailable as exc:
                log.warning("renewing leases: %s", exc)
                self.failing["renewing leases"] = str(exc)
            except Exception as exc:
                log.warning("renewing leases failed", exc_info=True)
                self.failing["renewing leases"] = type(exc).__name__
            else:
                self.failing.pop("renewing leases", None)
