"""Calling one evaluator safely: a concurrency limit, retries with backoff, a cache, dedupe.

``JudgeCaller.call(request)`` is the only way the pipeline reaches an evaluator (and the sidecar
its VLM server). The caller is generic over the request type: it hands each request to its
target untouched.

1. the response cache is consulted (a hit costs no evaluator call: ``attempts == 0``);
2. an identical request already in flight is awaited instead of sent again;
3. otherwise the evaluator is called under the ``anyio.CapacityLimiter``, retried with tenacity
   while ``evaluator.should_retry(exc)`` says the failure is transient, and the success is cached.

Backoff follows METHODS §1.14 [REC]: before retry ``n`` (0-based) wait ``d + U(0, d)`` with
``d = base * multiplier**n``, capped at ``max_delay``; when the server sent ``Retry-After``, that
value (capped the same way) replaces the computed delay. The limiter slot is held only around
the evaluator call itself, never during a backoff sleep, so waiting requests do not starve others.

A judge that cannot be reached at all (connection refused, DNS failure, 401/403, 404 for the
model or endpoint: ``unreachable_cause``) is never retried, whatever the backend says; with
``fail_fast_after`` set (the CLI sets it), that many such failures in a row before any success
raise ``JudgeUnreachable`` for the call and every later one, so a run against a dead judge stops
in seconds with the cause instead of grading every line ``transport``.

Failures end as ``EvaluatorError`` (with ``status`` and ``attempts``) once retries are exhausted or
the error is not retryable. Cancellation is never caught. Responses are returned as raw text: the
caller verifies them, and does so again for every cached read.
"""

from __future__ import annotations

import contextlib
import random
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import anyio
from faithjudge_client.retry import RetryPolicy
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from faithjudge.errors import EvaluatorError, FaithJudgeError
from faithjudge.transport.base import CallTarget, JudgeResponse
from faithjudge.transport.cache import ResponseCache, cache_key

__all__ = [
    "CallerStats",
    "JudgeCaller",
    "JudgeUnreachable",
    "describe_exception",
    "unreachable_cause",
]


class JudgeUnreachable(FaithJudgeError):
    """The judge refused or could not be reached on every call so far: stop the run."""


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps (``__cause__``, ``__context__``, aiohttp's ``os_error``)."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(chain) < 16:
        seen.add(id(current))
        chain.append(current)
        wrapped = getattr(current, "os_error", None)
        if isinstance(wrapped, BaseException) and id(wrapped) not in seen:
            chain.append(wrapped)
            seen.add(id(wrapped))
        current = current.__cause__ or current.__context__
    return chain


def describe_exception(exc: BaseException) -> str:
    """The innermost cause the transport saw, class and message, and what the SDK raised for it
    when that differs (an SDK may report a refused connection as a timeout)."""
    root = _causes(exc)[-1]
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
    for cause in _causes(exc):
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
    evaluator_calls: int = 0
    retries: int = 0
    failures: int = 0


@dataclass(slots=True)
class _Flight:
    """One request in flight; identical requests wait on ``done`` and reuse its outcome."""

    done: anyio.Event = field(default_factory=anyio.Event)
    response: JudgeResponse | None = None
    error: EvaluatorError | None = None


_NO_LIMIT = contextlib.nullcontext()


class JudgeCaller(Generic[Request]):
    """Wraps one evaluator with a limiter, retries, an optional cache and in-flight dedupe.

    ``sleep`` is the backoff sleep (tests pass a recorder that returns at once); ``rng`` draws
    the jitter. Requests whose ``cache_key_material`` is None (replay) skip cache and dedupe.
    """

    def __init__(
        self,
        evaluator: CallTarget[Request],
        *,
        limiter: anyio.CapacityLimiter | None = None,
        policy: RetryPolicy | None = None,
        cache: ResponseCache | None = None,
        sleep: SleepFn | None = None,
        rng: random.Random | None = None,
        fail_fast_after: int | None = None,
    ) -> None:
        self.evaluator = evaluator
        self.fail_fast_after = fail_fast_after
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
        self.in_process = bool(getattr(evaluator, "in_process", False))
        self._stop_after_first = stop_after_attempt(max(1, self.policy.max_retries))

    async def call(self, request: Request) -> JudgeResponse:
        """The evaluator's response to ``request``; raises ``EvaluatorError`` when it fails."""
        self.stats.requests += 1
        material = self.evaluator.cache_key_material(request)
        if material is None:
            return await self._call_evaluator(request)
        key = cache_key(material)
        while True:
            if self.cache is not None:
                hit = self.cache.get(key)
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
                raise EvaluatorError(str(err), status=err.status, body=err.body, attempts=0)
            # The first caller was cancelled before an outcome: look again, maybe lead.

        flight = _Flight()
        self._inflight[key] = flight
        try:
            response = await self._call_evaluator(request)
            flight.response = response
            if self.cache is not None:
                # Key by what was actually sent: a backend may have changed its wire format
                # during the call (the OpenAI json_schema -> json_object fallback).
                after = self.evaluator.cache_key_material(request)
                self.cache.put(cache_key(after) if after is not None else key, response)
            return response
        except EvaluatorError as exc:
            flight.error = exc
            raise
        finally:
            del self._inflight[key]
            flight.done.set()

    async def _call_evaluator(self, request: Request) -> JudgeResponse:
        if self._dead is not None:
            raise self._dead
        attempts = 0

        async def attempt() -> JudgeResponse:
            nonlocal attempts
            # a judge in the process has no I/O to wait on: a concurrency limit only costs
            async with _NO_LIMIT if self.in_process else self.limiter:
                attempts += 1
                self.stats.evaluator_calls += 1
                return await self.evaluator.judge(request)

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

        try:
            response = await attempt_with_retries()
        except EvaluatorError as exc:
            self.stats.failures += 1
            raise EvaluatorError(
                str(exc), status=exc.status, body=exc.body, attempts=attempts
            ) from exc
        except FaithJudgeError:
            # A configuration or input problem of our own: retrying or hiding it helps no one.
            raise
        except Exception as exc:
            self.stats.failures += 1
            self._note_unreachable(exc, attempts)
            raise _as_evaluator_error(exc, attempts, self._is_retryable(exc)) from exc
        self._unreachable_streak = -1  # the judge answered once: no longer "dead at the start"
        return replace(response, attempts=attempts, cached=False)

    def _note_unreachable(self, exc: Exception, attempts: int) -> None:
        cause = unreachable_cause(exc)
        if cause is None or self.fail_fast_after is None or self._unreachable_streak < 0:
            if self._unreachable_streak > 0:
                self._unreachable_streak = 0
            return
        self._unreachable_streak += 1
        if self._unreachable_streak >= self.fail_fast_after and self._dead is None:
            self._dead = JudgeUnreachable(
                f"the judge {self.evaluator.id} is unreachable: {cause}; stopped after "
                f"{self._unreachable_streak} calls failed in a row before any answer "
                f"({describe_exception(exc)})"
            )
        if self._dead is not None:
            raise self._dead from exc

    def _is_retryable(self, exc: BaseException) -> bool:
        # Only ordinary exceptions are classified: cancellation and exits must propagate. A judge
        # that refuses us or does not exist is not retried like a 5xx, whatever the backend says.
        return (
            isinstance(exc, Exception)
            and unreachable_cause(exc) is None
            and bool(self.evaluator.should_retry(exc))
        )

    def _delay(self, retry_index: int, exc: BaseException | None) -> float:
        retry_after = self.evaluator.retry_after(exc) if exc is not None else None
        return self.policy.delay(retry_index, retry_after=retry_after, rng=self._rng)

    def _wait(self, state: RetryCallState) -> float:
        # tenacity's attempt n is the call's attempt n + 1 (the first ran before it)
        exc = state.outcome.exception() if state.outcome is not None else None
        return self._delay(state.attempt_number, exc)

    def _count_retry(self, state: RetryCallState) -> None:
        self.stats.retries += 1


def _as_evaluator_error(exc: Exception, attempts: int, retryable: bool) -> EvaluatorError:
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    body = getattr(exc, "body", None)
    if body is not None and not isinstance(body, str):
        body = repr(body)
    what = type(exc).__name__ + (f" (HTTP {status})" if status is not None else "")
    why = "retries exhausted" if retryable else "not retryable"
    cause = unreachable_cause(exc)
    if cause is not None:
        why = f"not retried: {cause}"
    detail = describe_exception(exc)[:400]
    message = f"{what} after {attempts} attempt{'s' if attempts != 1 else ''}, {why}"
    return EvaluatorError(
        f"{message}: {detail}" if detail else message,
        status=status,
        body=body[:2000] if body else None,
        attempts=attempts,
    )
