"""The batch worker: claims lines from the job store, scores them, writes results in batches.

One worker per process drives the same ``Scorer`` as ``faithjudge score``: up to
``settings.concurrency`` lines are scored at once (one for a judge in the process; their
judge calls share the scorer's limiter), claims are topped up before the scorers run dry,
and results are committed every ``commit_every`` lines or ``commit_interval_s`` seconds,
whichever comes first. Leases are renewed while lines are held, so only the lines of a process
that died are taken over. The judge's answers reach the response cache, and in the service the
job store (``faithjudge.jobs.answer_cache``, written as they arrive), before the results that
use them reach the store; a line is claimed with the answers kept for it, so a line taken over,
by this process after a restart or by another replica, is scored again without paying for its
judge calls twice.

A service may offer several judges (one scorer each); a job is scored only by the scorer of the
judge it was uploaded under (``faithjudge.jobs.judges``). A job whose judge this process does not
offer is left queued, its status saying which judge it waits for.

On the batch route (``openai-batch:MODEL``) a job's lines are claimed only once its provider
phase (``faithjudge.jobs.provider_phase``) has sent its judge requests through the Batch API and
recorded the answers in the store, where the judge reads them.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any

import anyio
import anyio.abc
import orjson
from faithjudge_client.lines import Failure, ItemResult, ScoreRequest

from faithjudge.jobs.answer_cache import StoreAnswerCache
from faithjudge.jobs.interface import (
    ClaimedLine,
    DoneLine,
    JobJudge,
    JobStore,
    StoreUnavailable,
)
from faithjudge.jobs.judge_health import JudgeHealth
from faithjudge.jobs.judges import job_judge, waiting_detail
from faithjudge.jobs.provider_phase import JobAnswers, ProviderPhase, is_batch_route
from faithjudge.jobs.store_errors import cause_of, store_error_in, until_store_answers
from faithjudge.pipeline.request_lines import parse_line
from faithjudge.pipeline.scorer import Scorer
from faithjudge.provider_batch.judge import OpenAIBatchJudge
from faithjudge.settings import Settings
from faithjudge.transport.base import Usage
from faithjudge.transport.resilience import call_scope

__all__ = ["Worker", "done_line"]

log = logging.getLogger("faithjudge.worker")


ResultHook = Callable[[ItemResult], None]

WAITING_EVERY_S = 2.0
"""How often the jobs no judge of this process may score are looked for, to say so in their
status."""


def done_line(job_id: str, seq: int, result: ItemResult) -> DoneLine:
    """The stored form of a result: its JSON and the outcome counts and tokens the status
    sums."""
    statuses: dict[str, int] = {}
    stages: dict[str, int] = {}
    for metric in result.metrics.values():
        statuses[metric.status] = statuses.get(metric.status, 0) + 1
        if metric.failure is not None:
            stages[metric.failure.stage] = stages.get(metric.failure.stage, 0) + 1
    if result.error is not None:
        stages[result.error.stage] = stages.get(result.error.stage, 0) + 1
    tokens = result.provenance.tokens if result.provenance is not None else None
    return DoneLine(
        job_id=job_id,
        seq=seq,
        result=orjson.dumps(result.model_dump(mode="json")),
        is_error=int(result.error is not None),
        statuses=statuses,
        stages=stages,
        tokens=Usage()
        if tokens is None
        else Usage(tokens.prompt, tokens.completion, tokens.cached),
    )


class Worker:
    """Drains queued batches of the store until cancelled, each with its judge's scorer."""

    def __init__(
        self,
        store: JobStore,
        scorer: Scorer | Mapping[str, Scorer],
        settings: Settings,
        *,
        on_result: ResultHook | None = None,
        judge_health: JudgeHealth | None = None,
    ) -> None:
        self.store = store
        # by judge name, the default first; a lone scorer is the first judge the settings name
        self.scorers: dict[str, Scorer] = (
            dict(scorer)
            if isinstance(scorer, Mapping)
            else {(settings.offered_judges or ("default",))[0]: scorer}
        )
        self.owner = f"w_{uuid.uuid4().hex[:24]}"
        self._settings = settings
        self._on_result = on_result
        self._concurrency = max(
            s.items_at_once(settings.concurrency) for s in self.scorers.values()
        )
        # a judge in the process scores one item at a time even beside one behind the network
        self._item_limits = {
            name: anyio.CapacityLimiter(at_once)
            for name, s in self.scorers.items()
            if (at_once := s.items_at_once(settings.concurrency)) < self._concurrency
        }
        self._judges: dict[str, JobJudge] = {}
        """The offered judges by key, known once ``run`` starts."""
        self._by_key: dict[str, str] = {}
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
        self.judge_health = judge_health if judge_health is not None else JudgeHealth()
        """Which judges answer at all; readiness reports those that do not."""
        self._phases: list[ProviderPhase] = []
        self._after_phase: set[str] = set()
        for name, judge_scorer in self.scorers.items():
            if is_batch_route(judge_scorer):
                judge = judge_scorer.caller.judge
                assert isinstance(judge, OpenAIBatchJudge)
                # answers are read for the job being scored, and a store outage is waited out
                judge.bind(JobAnswers(store, failing=self.failing))
                self._after_phase.add(name)
                phase_store: Any = _JudgeStore(store, functools.partial(self._keys_of, name))
                self._phases.append(
                    ProviderPhase(
                        phase_store,
                        judge_scorer,
                        settings,
                        self.owner,
                        on_done=self.notify,
                        on_provider=functools.partial(self.judge_health.note_provider, name),
                    )
                )

    def notify(self) -> None:
        """New work was queued in this process: claim now instead of at the next poll."""
        self._wake.set()
        for phase in self._phases:
            phase.wake.set()

    @property
    def judges(self) -> list[JobJudge]:
        """The judges this worker offers, the default first (once ``run`` has started)."""
        return list(self._judges.values())

    def _offer(self) -> None:
        for name, judge_scorer in self.scorers.items():
            judge = job_judge(name, judge_scorer)
            self._judges[judge.key] = judge
            self._by_key[judge.key] = name

    def _keys_of(self, name: str) -> list[str | None]:
        """The keys of the jobs judge ``name`` scores; the default judge also takes the jobs
        stored before jobs recorded their judge."""
        keys: list[str | None] = [k for k, n in self._by_key.items() if n == name]
        if name == next(iter(self.scorers)):
            keys.append(None)
        return keys

    async def run(self) -> None:
        self._offer()
        await until_store_answers(
            self.store.recover, what="recovering leases", failing=self.failing
        )
        send, receive = anyio.create_memory_object_stream[ClaimedLine](self._max_held)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._claim_loop, send)
                group.start_soon(self._commit_loop)
                group.start_soon(self._heartbeat)
                for phase in self._phases:
                    group.start_soon(phase.run)
                group.start_soon(self._waiting_loop)
                for cache in self._answer_caches():
                    group.start_soon(cache.run)
                with receive:
                    for _ in range(self._concurrency):
                        group.start_soon(self._score_loop, receive.clone())
                self.started.set()
        finally:
            with anyio.CancelScope(shield=True):
                await self._flush()
                try:
                    # answers to lines cut short: whoever scores them next reads them
                    for cache in self._answer_caches():
                        await cache.drain()
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
                    job_ids = await self.store.active_job_ids(
                        judges={
                            key: name in self._after_phase
                            for name in self.scorers
                            for key in self._keys_of(name)
                        }
                    )
                    if job_ids:
                        claimed = await self.store.claim(
                            self.owner,
                            job_ids=job_ids,
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
                await self._prefetch(claimed)
                for item in claimed:
                    await send.send(item)

    async def _score_loop(self, receive: anyio.abc.ObjectReceiveStream[ClaimedLine]) -> None:
        async with receive:
            async for item in receive:
                if item.judge is not None and item.judge not in self._by_key:
                    # claims ask only for this process's judges: nothing lands here, but were
                    # it to, the line is left to its lease rather than scored by another judge
                    log.error(
                        "line %d of %s needs a judge not offered here", item.line, item.job_id
                    )
                    self._held -= 1
                    self._room.set()
                    continue
                result = await self._score(item)
                self._done.append(done_line(item.job_id, item.seq, result))
                self.judge_health.note(self._judge_of(item), result)
                if self._on_result is not None:
                    self._on_result(result)
                if len(self._done) >= self._settings.commit_every:
                    self._flush_now.set()

    async def _score(self, item: ClaimedLine) -> ItemResult:
        parsed = parse_line(item.request.encode(), item.line)
        if not isinstance(parsed, ScoreRequest):
            return parsed  # accepted at upload, so only a changed schema lands here
        name = self._judge_of(item)
        while True:
            try:
                with (
                    JobAnswers.scoring(item.job_id),
                    StoreAnswerCache.scoring(item.job_id, item.seq),
                    call_scope(item.tenant),
                ):
                    limit = self._item_limits.get(name)
                    if limit is None:
                        result = await self.scorers[name].score(parsed, line=item.line)
                    else:
                        async with limit:
                            result = await self.scorers[name].score(parsed, line=item.line)
                self.failing.pop("scoring lines", None)
                return result
            except Exception as exc:  # a bug must not stall the batch: the line records it
                lost = store_error_in(exc)
                if lost is not None:  # the store's fault, not the line's: score it again
                    log.warning("scoring line %d of %s: %s", item.line, item.job_id, lost)
                    self.failing["scoring lines"] = str(lost)
                    await anyio.sleep(1.0)
                    continue
                log.exception("scoring line %d of %s failed", item.line, item.job_id)
                cause = type(cause_of(exc)).__name__
                return ItemResult(
                    line=item.line,
                    item_id=parsed.item_id,
                    model=parsed.model,
                    question=parsed.question,
                    # not judged, so the line counts against coverage; the detail says it was a bug
                    error=Failure(stage="transport", detail=f"internal error: {cause}"),
                )

    def _judge_of(self, item: ClaimedLine) -> str:
        name = self._by_key.get(item.judge) if item.judge is not None else None
        return name or next(iter(self.scorers))

    async def _waiting_loop(self) -> None:
        """Say in the status of each job no judge here may score which judge it waits for."""
        offered = self.judges
        while True:
            try:
                for row in await self.store.waiting_jobs(list(self._judges)):
                    await self.store.note_waiting(row.id, waiting_detail(row, offered))
            except StoreUnavailable as exc:
                log.warning("noting waiting jobs: %s", exc)
            except Exception:
                log.warning("noting waiting jobs failed", exc_info=True)
            await anyio.sleep(WAITING_EVERY_S)

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
            # answers before the results built on them: a line committed as done never
            # needs its judge calls again, and one taken over finds them in the cache
            for judge_scorer in self.scorers.values():
                if judge_scorer.caller.cache is not None:
                    judge_scorer.caller.cache.flush()
            for cache in self._answer_caches():
                await cache.drain()
            await self.store.complete(self.owner, chunk)
        except BaseException:
            self._done[:0] = chunk  # keep them for the next try
            raise
        self._held -= len(chunk)
        self._room.set()

    def _answer_caches(self) -> list[StoreAnswerCache]:
        """The caches that keep answers in the store (the judges share one)."""
        found: dict[int, StoreAnswerCache] = {}
        for judge_scorer in self.scorers.values():
            cache = judge_scorer.caller.cache
            if isinstance(cache, StoreAnswerCache):
                found[id(cache)] = cache
        return list(found.values())

    async def _prefetch(self, claimed: list[ClaimedLine]) -> None:
        """Read the answers another process kept for these lines (one it took over from, or
        this one before a restart) before they are scored."""
        caches = self._answer_caches()
        if not caches:
            return
        by_job: dict[str, list[int]] = {}
        for item in claimed:
            by_job.setdefault(item.job_id, []).append(item.seq)
        try:
            for job_id, seqs in by_job.items():
                for cache in caches:
                    await cache.prefetch(job_id, seqs)
        except Exception as exc:
            # the lines are ours now: scored without those answers (paid again) rather than
            # dropped, which would leave them leased to a process that does not score them
            log.warning("reading kept judge answers: %s", exc)

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


class _JudgeStore:
    """The store as one judge's provider phase sees it: it claims only that judge's jobs."""

    def __init__(self, store: JobStore, keys: Callable[[], Collection[str | None]]) -> None:
        self._store = store
        self._keys = keys

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def claim_provider_phase(self, owner: str, *, lease_s: float) -> str | None:
        return await self._store.claim_provider_phase(owner, lease_s=lease_s, judges=self._keys())

    async def ended_provider_phases(
        self, limit: int = 32, *, after: str | None = None
    ) -> list[str]:
        return await self._store.ended_provider_phases(limit, after=after, judges=self._keys())
