"""Calling one judge safely: a concurrency limit, retries with backoff, a cache, dedupe.

``JudgeCaller.call(request)`` is the only way the pipeline reaches a judge (and the sidecar
its VLM server). The caller is generic over the request type: it hands each request to its
target untouched.

1. the response cache is consulted (a hit costs no judge call: ``attempts == 0``);
2. an identical request already in flight is awaited instead of sent again;

both within the caller's ``call_scope`` only: the service scores each tenant's lines in the
tenant's scope, so one tenant never receives an answer (or a failure) another one paid for;
3. otherwise the judge is called under the ``anyio.CapacityLimiter``, retried with tenacity
   while ``judge.should_retry(exc)`` says the failure is transient, and the success is cached
   under the key of what was sent: a target whose request changed since it was keyed (it learnt
   that its server refuses a response format) raises ``RequestChanged``, and the request is keyed
   and looked up again before it is sent.

For a target whose server's parallelism is unknown (``paced``: one on this machine or network),
the limiter's size is learnt from the answers (``faithjudge.transport.pacing``): one call at
first (the configured concurrency when the user set it: ``explicit_concurrency``), more while
answers come back, fewer after timeouts, and one for good once the server cut a streamed reply
because another call arrived (remembered per server and model). Such a cut call is sent again
without counting as an attempt: the judge did not fail it, our second call did. Calls waiting
for a place in the limiter go in prefix order (``pacing.SendOrder``): the one sharing the
longest prompt prefix with the call sent last first, so a server's prompt cache is reused.

Backoff follows METHODS §1.14 [REC]: before retry ``n`` (0-based) wait ``d + U(0, d)`` with
``d = base * multiplier**n``, capped at ``max_delay``; when the server sent ``Retry-After``, that
value (capped the same way) replaces the computed delay. The limiter slot is held only around
the judge call itself, never during a backoff sleep, so waiting requests do not starve others.

A judge that cannot be reached at all (connection refused, DNS failure, 401/403, 404 for the
model or endpoint: ``unreachable_cause``) is never retried, whatever the backend says; with
``fail_fast_after`` set (the CLI sets it), that many such failures in a row before any success
raise ``JudgeUnreachable`` for the call and every later one, so a run against a dead judge stops
in seconds with the cause instead of grading every line ``transport``.

With ``wait_outages``, a judge that stops answering at the connection (refused, reset, a gateway
without its backend: ``outage.connection_failure``) is waited for instead
(``faithjudge.transport.outage``): every call holds until the judge answers its probe again, then
is sent again, none of it counted as an attempt; ``outage_s`` bounds the wait (None: no bound).
Before the judge's first answer, ``fail_fast_after`` still decides.

Failures end as ``JudgeError`` (with ``status`` and ``attempts``) once retries are exhausted or
the error is not retryable. Cancellation is never caught. Responses are returned as raw text: the
caller verifies them, and does so again for every cached read.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import random
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import anyio
from faithjudge_client.retry import RetryPolicy
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from faithjudge.errors import FaithJudgeError, JudgeError
from faithjudge.transport.base import CallTarget, JudgeResponse, RequestChanged
from faithjudge.transport.cache import ResponseCache, cache_key
from faithjudge.transport.judge_servers import ServerMemo, server_memo
from faithjudge.transport.outage import (
    JudgeOutageTooLong,
    OutageGate,
    connection_failure,
    exception_chain,
)
from faithjudge.transport.pacing import Pacing, SendOrder, prompt_key

__all__ = [
    "CallerStats",
    "JudgeCaller",
    "JudgeOutageTooLong",
    "JudgeUnreachable",
    "call_scope",
    "describe_exception",
    "unreachable_cause",
]

log = logging.getLogger(__name__)

_SCOPE: contextvars.ContextVar[str | None] = contextvars.ContextVar("call_scope", default=None)


@contextlib.contextmanager
def call_scope(scope: str | None) -> Iterator[None]:
    """Calls made inside share cached and in-flight answers only with calls of the same scope
    (None, the CLI's: one scope for everything)."""
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)


class JudgeUnreachable(FaithJudgeError):
    """The judge refused or could not be reached on every call so far: stop the run."""


def describe_exception(exc: BaseException) -> str:
    """The innermost cause the transport saw, class and message, and what the SDK raised for it
    when that differs (an SDK may report a refused connection as a timeout)."""
    root = exception_chain(exc)[-1]
    text = f"{type(root).__name__}: {str(root)[:300]}".rstrip(": ")
    if root is not exc:
        text += f" (raised as {type(exc).__name__})"
    return text


def unreachable_cause(exc: BaseException) -> str | None:
    """Why the judge cannot be reached at all, or None for anything a retry might cure."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        if status in (401, 403):
            return f"the judge refused our credentials (HTTP {status}): {str(exc)[:200]}"
        if status == 404:
            return f"model or endpoint not found (HTTP 404): {str(exc)[:200]}"
        return None
    for cause in exception_chain(exc):
        if isinstance(cause, ConnectionRefusedError):
            return f"connection refused ({cause})"
        if isinstance(cause, socket.gaierror):
            return f"DNS lookup failed ({cause})"
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"TLS certificate rejected ({cause})"
    return None


SleepFn = Callable[[float], Awaitable[Any]]
Request = TypeVar("Request")


@dataclass(slots=True)
class CallerStats:
    """Running counters of one ``JudgeCaller`` (for logs and benchmarks)."""

    requests: int = 0
    cache_hits: int = 0
    shared: int = 0
    judge_calls: int = 0
    retries: int = 0
    failures: int = 0
    rekeyed: int = 0
    """Requests keyed again because the target changed what it sends (a response format)."""
    outage_waits: int = 0
    """Sends that met a judge gone down and were sent again once it was back."""
    cut_resent: int = 0
    """Replies a serial server cut short because another call arrived, sent again without
    counting as an attempt."""


class _MetOutage(Exception):
    """A send met the judge gone down: wait for it, then send again (never a failed attempt)."""


class _CutByUs(Exception):
    """A serial server cut the reply because we sent it another call: send it again (never a
    failed attempt)."""


@dataclass(slots=True)
class _Flight:
    """One request in flight; identical requests wait on ``done`` and reuse its outcome."""

    done: anyio.Event = field(default_factory=anyio.Event)
    response: JudgeResponse | None = None
    error: JudgeError | None = None


# A request is keyed again at most once per response format a server may refuse, and a little.
_MAX_REKEYS = 8
# Cut replies of one call sent again for free; past them a cut is an ordinary failed attempt
# (a server that cuts replies while it is sent one call at a time is not cut by us).
_FREE_RESENDS = 2


class JudgeCaller(Generic[Request]):
    """Wraps one judge with a limiter, retries, an optional cache and in-flight dedupe.

    ``sleep`` is the backoff sleep (tests pass a recorder that returns at once); ``rng`` draws
    the jitter. Requests whose ``cache_key_material`` is None (replay) skip cache and dedupe.
    ``clock`` measures latencies for pacing (tests pass a fake one). ``explicit_concurrency``:
    the limiter's size was set by the user, so a paced server starts at it, not at one call.
    """

    def __init__(
        self,
        judge: CallTarget[Request],
        *,
        limiter: anyio.CapacityLimiter | None = None,
        policy: RetryPolicy | None = None,
        cache: ResponseCache | None = None,
        sleep: SleepFn | None = None,
        rng: random.Random | None = None,
        fail_fast_after: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        wait_outages: bool = False,
        outage_s: float | None = None,
        explicit_concurrency: bool = False,
    ) -> None:
        self.judge = judge
        self.fail_fast_after = fail_fast_after
        probe = getattr(judge, "probe", None)
        self.outage: OutageGate | None = (
            OutageGate(
                judge.id,
                bound_s=outage_s,
                probe=probe if callable(probe) else None,
                sleep=sleep,
            )
            if wait_outages
            else None
        )
        self._unreachable_streak = 0
        self._dead: JudgeUnreachable | None = None
        self.limiter = limiter if limiter is not None else anyio.CapacityLimiter(100)
        self.policy = policy or RetryPolicy()
        self.cache = cache
        self.stats = CallerStats()
        self._sleep: SleepFn = sleep or anyio.sleep
        self._rng = rng
        self._inflight: dict[str, _Flight] = {}
        self._retry = retry_if_exception(self._is_retryable)
        # a judge that runs in this process: no I/O to wait on, nothing to limit or overlap
        self.in_process = bool(getattr(judge, "in_process", False))
        self._stop_after_first = stop_after_attempt(max(1, self.policy.max_retries))
        self._clock = clock
        self._order = SendOrder(self.limiter)
        self.pacing: Pacing | None = None
        if getattr(judge, "paced", False) and not self.in_process:
            timeout = getattr(judge, "timeout_s", None)
            self.pacing = Pacing(
                self.limiter,
                timeout_s=timeout if isinstance(timeout, int | float) else None,
                explicit=explicit_concurrency,
                memo=_memo_of(judge),
                on_resize=self._order.dispatch,
            )

    async def call(self, request: Request) -> JudgeResponse:
        """The judge's response to ``request``; raises ``JudgeError`` when it fails."""
        self.stats.requests += 1
        for _ in range(_MAX_REKEYS):
            material = self.judge.cache_key_material(request)
            if material is None:
                return await self._call_judge(request, None)
            try:
                return await self._call_keyed(request, material)
            except RequestChanged:
                self.stats.rekeyed += 1
        raise JudgeError(
            f"the judge {self.judge.id} changed its request {_MAX_REKEYS} times in a row"
        )

    async def _call_keyed(self, request: Request, material: Mapping[str, Any]) -> JudgeResponse:
        scope = _SCOPE.get()
        # unscoped keys stay those of the request alone, so a CLI cache outlives upgrades
        key = cache_key(material if scope is None else {"scope": scope, "request": material})
        while True:
            if self.cache is not None:
                hit = self._cached(key)
                if hit is not None:
                    self.stats.cache_hits += 1
                    return hit
            flight = self._inflight.get(key)
            if flight is None:
                break
            await flight.done.wait()
            if flight.response is not None:
                self.stats.shared += 1
                return replace(flight.response, attempts=0, cached=True)
            if flight.error is not None:
                err = flight.error
                raise JudgeError(str(err), status=err.status, body=err.body, attempts=0)
            # The first caller was cancelled before an outcome: look again, maybe lead.

        flight = _Flight()
        self._inflight[key] = flight
        try:
            # ``_call_judge`` sends exactly ``material`` or raises ``RequestChanged``: the
            # answer belongs under ``key``.
            response = await self._call_judge(request, material, key)
            flight.response = response
            return response
        except JudgeError as exc:
            flight.error = exc
            raise
        finally:
            del self._inflight[key]
            flight.done.set()

    def _cached(self, key: str) -> JudgeResponse | None:
        assert self.cache is not None
        try:
            return self.cache.get(key)
        except Exception:  # a cache that cannot be read is a miss, never a failed grade
            log.warning("could not read the response cache", exc_info=True)
            return None

    async def _keep(self, key: str, response: JudgeResponse) -> None:
        """Put a paid answer in the cache, and wait until it is durable where the cache says it
        is not yet (the service's store-backed cache): the call's place is held until then, so
        answers received but not yet kept never outnumber the calls allowed in flight."""
        assert self.cache is not None
        try:
            self.cache.put(key, response)
            kept = getattr(self.cache, "kept", None)
            if callable(kept):
                await kept(key)
        except Exception:  # the answer is paid for: a cache fault must not fail it
            log.warning("could not keep the judge's answer in the cache", exc_info=True)

    async def _call_judge(
        self, request: Request, material: Mapping[str, Any] | None, answer_key: str | None = None
    ) -> JudgeResponse:
        if self._dead is not None:
            raise self._dead
        attempts = 0
        pacing = self.pacing
        outage = self.outage
        answers_seen = 0
        latency: float | None = None
        resends = 0
        # a judge in the process has no I/O to wait on: a concurrency limit only costs
        key = None if self.in_process else prompt_key(request)

        async def attempt() -> JudgeResponse:
            if self.in_process:
                return await send()
            borrower = await self._order.acquire(key)
            try:
                return await send()
            finally:
                self._order.release(borrower)

        async def send() -> JudgeResponse:
            nonlocal attempts, answers_seen, resends, latency
            # keyed before waiting for the limiter: the target may have learnt since that
            # its server wants another request (a response format it refused)
            if (
                material is not None
                and not self.in_process
                and self.judge.cache_key_material(request) != material
            ):
                raise RequestChanged("the request changed while it waited to be sent")
            attempts += 1
            self.stats.judge_calls += 1
            if outage is not None:
                answers_seen = outage.answers
            sent_at = time.monotonic()
            if pacing is None and outage is None:
                response = await self.judge.judge(request)
                latency = time.monotonic() - sent_at
                if answer_key is not None and self.cache is not None:
                    await self._keep(answer_key, response)
                return response
            (stamp, beside), started = (
                (pacing.send(), self._clock()) if pacing else ((0, False), 0.0)
            )
            try:
                response = await self.judge.judge(request)
            except Exception as exc:
                if await self._judge_down(exc, answers_seen):
                    attempts -= 1
                    raise _MetOutage() from exc
                if outage is not None and connection_failure(exc) is None:
                    outage.answered()  # the server replied, if only to refuse
                kind = self._note_overload(pacing, stamp, exc) if pacing is not None else None
                if kind == "cut" and resends < _FREE_RESENDS:
                    resends += 1
                    attempts -= 1
                    raise _CutByUs() from exc
                raise
            finally:
                if pacing is not None:
                    pacing.back()
            latency = time.monotonic() - sent_at
            if outage is not None:
                outage.answered()
            if pacing is not None:
                pacing.answered(self._clock() - started, beside=beside)
            if answer_key is not None and self.cache is not None:
                await self._keep(answer_key, response)
            return response

        async def attempt_with_retries() -> JudgeResponse:
            # The first try runs outside tenacity: nearly every call succeeds at once, and the
            # retry machinery costs more CPU than the call itself at a few hundred calls/s.
            try:
                return await attempt()
            except Exception as exc:
                if self.policy.max_retries == 0 or not self._is_retryable(exc):
                    raise
                self.stats.retries += 1
                await self._sleep(self._delay(0, exc))
            retrying = AsyncRetrying(
                sleep=self._sleep,
                stop=self._stop_after_first,
                wait=self._wait,
                retry=self._retry,
                before_sleep=self._count_retry,
                reraise=True,
            )
            return await retrying(attempt)

        while True:
            if outage is not None:
                await outage.wait()  # raises JudgeOutageTooLong past the bound
            try:
                response = await attempt_with_retries()
                break
            except _MetOutage:
                self.stats.outage_waits += 1
            except _CutByUs:
                self.stats.cut_resent += 1
            except RequestChanged:
                raise
            except JudgeError as exc:
                self.stats.failures += 1
                raise JudgeError(
                    _with_explanation(str(exc), self._explain(exc)),
                    status=exc.status,
                    body=exc.body,
                    attempts=attempts,
                ) from exc
            except FaithJudgeError:
                # A configuration or input problem of our own: retrying or hiding it helps no one.
                raise
            except Exception as exc:
                self.stats.failures += 1
                self._note_unreachable(exc, attempts)
                raise _as_judge_error(
                    exc, attempts, self._is_retryable(exc), self._explain(exc)
                ) from exc
        self._unreachable_streak = -1  # the judge answered once: no longer "dead at the start"
        return replace(
            response,
            attempts=attempts,
            cached=False,
            # a judge in this process has no call to time, and its outputs stay reproducible
            latency_s=None if self.in_process else latency,
        )

    async def _judge_down(self, exc: Exception, answers_seen: int) -> bool:
        """Whether ``exc`` met the judge gone down (so the call waits for it and is sent again)
        rather than failing on its own."""
        if self.outage is None or isinstance(exc, FaithJudgeError):
            return False
        cause = connection_failure(exc)
        if cause is None:
            return False
        if self.fail_fast_after is not None and self._unreachable_streak >= 0:
            return False  # no answer yet: a judge that never answered stops the run at once
        return await self.outage.failed(cause, answers_seen)

    def _note_overload(self, pacing: Pacing, stamp: int, exc: Exception) -> str | None:
        """Tell pacing what ``exc`` shows of the server's load; the kind (``silent``, ``cut``)
        or None."""
        if connection_failure(exc) is not None:
            return None  # an SDK may raise a refused connection as a timeout: not an overload
        overloaded = getattr(self.judge, "overloaded", None)
        kind = overloaded(exc) if callable(overloaded) else None
        if kind not in ("silent", "cut"):
            return None
        pacing.overloaded(stamp, silent=kind == "silent")
        return str(kind)

    def _explain(self, exc: BaseException) -> str | None:
        explain = getattr(self.judge, "explain", None)
        if not callable(explain):
            return None
        try:
            text = explain(exc)
        except Exception:  # an explanation must never hide the failure it explains
            return None
        return text if isinstance(text, str) and text else None

    def _note_unreachable(self, exc: Exception, attempts: int) -> None:
        cause = unreachable_cause(exc)
        if cause is None or self.fail_fast_after is None or self._unreachable_streak < 0:
            if self._unreachable_streak > 0:
                self._unreachable_streak = 0
            return
        self._unreachable_streak += 1
        if self._unreachable_streak >= self.fail_fast_after and self._dead is None:
            self._dead = JudgeUnreachable(
                f"the judge {self.judge.id} is unreachable: {cause}; stopped after "
                f"{self._unreachable_streak} calls failed in a row before any answer "
                f"({describe_exception(exc)})"
            )
        if self._dead is not None:
            raise self._dead from exc

    def _is_retryable(self, exc: BaseException) -> bool:
        # Only ordinary exceptions are classified: cancellation and exits must propagate. A judge
        # that refuses us or does not exist is not retried like a 5xx, whatever the backend says.
        # A changed request is not a failure: the caller keys it again.
        return (
            isinstance(exc, Exception)
            and not isinstance(exc, RequestChanged | _MetOutage | _CutByUs)
            and unreachable_cause(exc) is None
            and bool(self.judge.should_retry(exc))
        )

    def _delay(self, retry_index: int, exc: BaseException | None) -> float:
        retry_after = self.judge.retry_after(exc) if exc is not None else None
        return self.policy.delay(retry_index, retry_after=retry_after, rng=self._rng)

    def _wait(self, state: RetryCallState) -> float:
        # tenacity's attempt n is the call's attempt n + 1 (the first ran before it)
        exc = state.outcome.exception() if state.outcome is not None else None
        return self._delay(state.attempt_number, exc)

    def _count_retry(self, state: RetryCallState) -> None:
        self.stats.retries += 1


def _memo_of(judge: object) -> ServerMemo | None:
    """The memo of the server a paced target calls, by the base URL and model its settings
    name (the keys its own memo is kept under), or None when they name none."""
    settings = getattr(judge, "settings", None)
    named = settings() if callable(settings) else None
    if not isinstance(named, Mapping):
        return None
    base_url, model = named.get("base_url"), named.get("model")
    if not isinstance(base_url, str) or not isinstance(model, str):
        return None
    return server_memo(base_url, model)


def _with_explanation(message: str, explanation: str | None) -> str:
    if not explanation or explanation in message:
        return message
    return f"{message}; {explanation}"


def _as_judge_error(
    exc: Exception, attempts: int, retryable: bool, explanation: str | None = None
) -> JudgeError:
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    body = getattr(exc, "body", None)
    if body is not None and not isinstance(body, str):
        body = repr(body)
    plural = "s" if attempts != 1 else ""
    connection = connection_failure(exc)
    if connection is not None and status is None:
        # named by what happened, not by the SDK's class (aiohttp's refusal is raised as a
        # timeout) nor by the backend's explanation of that class
        return JudgeError(
            f"{connection} after {attempts} attempt{plural}, "
            f"{'retries exhausted' if retryable else 'not retried'} (raised as "
            f"{type(exc).__name__})",
            status=None,
            body=body[:2000] if body else None,
            attempts=attempts,
        )
    what = type(exc).__name__ + (f" (HTTP {status})" if status is not None else "")
    why = "retries exhausted" if retryable else "not retryable"
    cause = unreachable_cause(exc)
    if cause is not None:
        why = f"not retried: {cause}"
    detail = describe_exception(exc)[:400]
    message = f"{what} after {attempts} attempt{plural}, {why}"
    if explanation:
        message = f"{message}: {explanation}"
    return JudgeError(
        f"{message}: {detail}" if detail else message,
        status=status,
        body=body[:2000] if body else None,
        attempts=attempts,
    )
