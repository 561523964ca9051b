"""``BatchRunner``: every part a ledger holds uploaded, submitted, polled and mapped back.

Each part is uploaded with the Files API and submitted as one batch on
``/v1/chat/completions`` with a 24 h window. A staged part is uploaded, an uploaded one is
submitted (after looking for a batch already created from it, by the ``metadata`` tag every
batch carries), a submitted one is polled. No request is ever submitted twice; a request whose
line came back expired or with a retryable status (408, 429, 5xx), or whose whole batch ended
``failed`` or ``expired``, is staged again in a follow-up part, up to the retry budget, after
which it is recorded as failed with the status and message the provider gave.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from faithjudge.provider_batch.ledger import (
    MAX_FILE_BYTES,
    MAX_FILE_LINES,
    Ledger,
    Outcome,
    PartSink,
    stage_retries,
)
from faithjudge.provider_batch.wire import BATCH_ENDPOINT, COMPLETION_WINDOW, outcome_of_line
from faithjudge.transport.base import Usage
from faithjudge.transport.cache import ResponseCache

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["BatchProgress", "BatchRunner", "PollPolicy", "ProgressFn"]

TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})

SleepFn = Callable[[float], Awaitable[Any]]
StopFn = Callable[[], Awaitable[bool]]


@dataclass(slots=True)
class BatchProgress:
    """What the provider reports across the batches of a run (for the progress bar)."""

    total: int = 0
    completed: int = 0
    failed: int = 0
    states: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        return ", ".join(f"{n} {s}" for s, n in sorted(self.states.items())) or "starting"


ProgressFn = Callable[[BatchProgress], None]


@dataclass(frozen=True, slots=True)
class PollPolicy:
    """Poll every ``initial`` seconds, growing by ``multiplier`` while nothing changes."""

    initial: float = 5.0
    multiplier: float = 1.5
    maximum: float = 60.0

    def delay(self, quiet_polls: int) -> float:
        return min(self.maximum, self.initial * self.multiplier**quiet_polls)


class BatchRunner:
    """Uploads, submits, polls and maps back every part the ledger holds, until none is open."""

    def __init__(
        self,
        client: AsyncOpenAI,
        ledger: Ledger,
        cache: ResponseCache | None,
        *,
        max_retries: int = 5,
        poll: PollPolicy | None = None,
        max_lines: int = MAX_FILE_LINES,
        max_bytes: int = MAX_FILE_BYTES,
        sleep: SleepFn | None = None,
    ) -> None:
        self._client = client
        self._ledger = ledger
        self._cache = cache
        self._max_tries = max_retries + 1
        self._poll = poll or PollPolicy()
        self._max_lines = max_lines
        self._max_bytes = max_bytes
        self._sleep: SleepFn = sleep or anyio.sleep
        self.batches_created = 0
        self.files_uploaded = 0
        self.answered = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_tokens = 0
        """The part of ``prompt_tokens`` the provider served from its prompt cache (this
        process's collections only: the ledger keeps prompt and completion tokens alone)."""

    def writer(self) -> PartSink:
        return self._ledger.writer(max_lines=self._max_lines, max_bytes=self._max_bytes)

    async def run(self, progress: ProgressFn | None = None, *, stop: StopFn | None = None) -> bool:
        """Drive every open part to an end, staging follow-ups for retryable failures.

        ``stop`` is asked after every poll round; when it says so the run returns False and
        leaves the batches as they are (``cancel`` ends them). True once nothing is open.
        """
        quiet = 0
        while True:
            await self._submit_staged()
            open_parts = await self._ledger.parts(done=False)
            if not open_parts:
                if await stage_retries(self._ledger, self.writer()):
                    continue
                return True
            changed = False
            for part in open_parts:
                batch = await self._client.batches.retrieve(part["batch_id"])
                counts = batch.request_counts
                completed = counts.completed if counts else 0
                failed = counts.failed if counts else 0
                if (batch.status, completed, failed) != (
                    part["state"],
                    part["completed"],
                    part["failed"],
                ):
                    changed = True
                    await self._ledger.set_state(part["id"], batch.status, completed, failed)
                if batch.status in TERMINAL:
                    await self._collect(part, batch)
                    changed = True
            if progress is not None:
                progress(await self.progress())
            if stop is not None and await stop():
                return False
            if await self._ledger.parts(done=False):
                quiet = 0 if changed else quiet + 1
                await self._sleep(self._poll.delay(quiet))

    async def progress(self) -> BatchProgress:
        report = BatchProgress()
        for part in await self._ledger.parts(submitted=True):
            report.total += part["lines"]
            report.completed += part["completed"]
            report.failed += part["failed"]
            report.states[part["state"]] = report.states.get(part["state"], 0) + 1
        return report

    async def cancel(self) -> int:
        """Cancel every open batch and keep what they answered; returns how many were open.

        A batch created just before an earlier process died, and never recorded, is found by
        its tag and cancelled too: left alone it would run, and be billed, unseen.
        """
        staged = await self._ledger.parts(submitted=False, done=False)
        for part_id, orphan in (await self._unrecorded_batches(staged)).items():
            await self._ledger.set_submitted(part_id, orphan.id, orphan.status)
        open_parts = await self._ledger.parts(submitted=True, done=False)
        for part in open_parts:
            batch = await self._client.batches.retrieve(part["batch_id"])
            if batch.status not in TERMINAL:
                await self._client.batches.cancel(part["batch_id"])
        quiet = 0
        while pending := await self._ledger.parts(submitted=True, done=False):
            for part in pending:
                batch = await self._client.batches.retrieve(part["batch_id"])
                await self._ledger.set_state(part["id"], batch.status, 0, 0)
                if batch.status in TERMINAL:
                    await self._collect(part, batch, cancelling=True)
            if await self._ledger.parts(submitted=True, done=False):
                quiet += 1
                await self._sleep(self._poll.delay(quiet))
        # Staged parts never sent, and requests waiting for a retry, are simply forgotten.
        for part in await self._ledger.parts(submitted=False, done=False):
            await self._ledger.forget_unfinished(part["id"])
        return len(open_parts)

    # ----------------------------------------------------------------- submission

    async def _submit_staged(self) -> None:
        staged = await self._ledger.parts(submitted=False, done=False)
        adopted = await self._unrecorded_batches(staged)
        for part in staged:
            batch = adopted.get(part["id"])
            if batch is None:
                if part["file_id"] is None:
                    async with self._ledger.open_part(part) as (name, handle):
                        uploaded = await self._client.files.create(
                            file=(name, handle), purpose="batch"
                        )
                    self.files_uploaded += 1
                    await self._ledger.set_file(part["id"], uploaded.id)
                    part["file_id"] = uploaded.id
                batch = await self._client.batches.create(
                    input_file_id=part["file_id"],
                    endpoint=BATCH_ENDPOINT,
                    completion_window=COMPLETION_WINDOW,
                    metadata={"faithjudge_part": self._tag(part)},
                )
                self.batches_created += 1
            await self._ledger.set_submitted(part["id"], batch.id, batch.status)

    def _tag(self, part: dict[str, Any]) -> str:
        return f"{self._ledger.ledger_id}:{part['id']}"

    async def _unrecorded_batches(self, staged: list[dict[str, Any]]) -> dict[Any, Any]:
        """Batches created from these staged parts before a process died and never recorded,
        by part id, from one listing of the provider's batches. Only a part whose file an
        earlier process uploaded can have one."""
        wanted = {self._tag(part): part["id"] for part in staged if part["file_id"] is not None}
        found: dict[Any, Any] = {}
        if not wanted:
            return found
        # Newest first; a batch older than the 24 h window plus a margin cannot be ours.
        async for batch in self._client.batches.list(limit=100):
            part_id = wanted.pop((batch.metadata or {}).get("faithjudge_part", ""), None)
            if part_id is not None:
                found[part_id] = batch
            if not wanted or time.time() - batch.created_at > 2 * 24 * 3600:
                break
        return found

    # ----------------------------------------------------------------- collection

    async def _collect(self, part: dict[str, Any], batch: Any, *, cancelling: bool = False) -> None:
        outcomes: list[Outcome] = []
        used = Usage()
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            async for raw in self._lines(file_id):
                try:
                    outcome = outcome_of_line(raw)
                except ValueError:
                    continue  # a line we cannot read leaves its request to the leftover rule
                if outcome.response is not None:
                    if self._cache is not None:
                        self._cache.put(outcome.key, outcome.response)
                    used += outcome.response.usage
                    outcomes.append((outcome.key, "answered", 200, None, outcome.response))
                else:
                    state = "retry" if outcome.retryable else "failed"
                    outcomes.append((outcome.key, state, outcome.status, outcome.error, None))
        # Answers first, then the ledger: a crash in between only repeats this collection.
        if self._cache is not None:
            self._cache.flush()
        self.answered += sum(1 for o in outcomes if o[1] == "answered")
        self.prompt_tokens += used.prompt_tokens
        self.completion_tokens += used.completion_tokens
        self.cached_tokens += used.cached_tokens
        if cancelling or batch.status == "cancelled":
            await self._ledger.finish_part(part["id"], outcomes, None, self._max_tries, used)
            await self._ledger.forget_unfinished(part["id"])
            return
        if batch.status == "failed":
            # the provider fails whole batches for passing causes too (its enqueued-token
            # limit): the requests go into follow-ups, and keep its reason once out of tries
            errors = getattr(batch, "errors", None)
            data = getattr(errors, "data", None) or []
            why = "; ".join(str(getattr(e, "message", e)) for e in data[:3]) or "batch failed"
            leftover: tuple[str, int | None, str] = ("retry", None, f"batch failed: {why}")
        else:
            leftover = ("retry", None, f"no answer in {batch.status} batch {batch.id}")
        await self._ledger.finish_part(part["id"], outcomes, leftover, self._max_tries, used)

    async def _lines(self, file_id: str) -> Any:
        async with self._client.files.with_streaming_response.content(file_id) as response:
            async for raw in response.iter_lines():
                if raw.strip():
                    yield raw.encode() if isinstance(raw, str) else raw
