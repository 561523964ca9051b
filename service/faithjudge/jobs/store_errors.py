"""A lost job store waited out instead of recorded.

A store raises ``StoreUnavailable`` when it cannot be reached (the SQL store converts its
driver's errors in ``faithjudge.jobs.sql.errors``); callers that must not lose work (the worker,
the provider phase, the answer lookups of the batch route) wait it out with
``until_store_answers``, so an outage of the store is a pause, never a line's result or a job's
failure. Nothing here knows how a store reaches its data.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import anyio
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from faithjudge.jobs.interface import StoreUnavailable

__all__ = ["cause_of", "store_error_in", "until_store_answers"]

log = logging.getLogger("faithjudge.worker")

R = TypeVar("R")

STORE_WAIT_MAX_S = 5.0
"""The longest pause between two tries of a store call during an outage."""


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def store_error_in(exc: BaseException) -> StoreUnavailable | None:
    """The ``StoreUnavailable`` ``exc`` is or holds (task groups wrap it), else None."""
    for leaf in _leaves(exc):
        if isinstance(leaf, StoreUnavailable):
            return leaf
    return None


def cause_of(exc: BaseException) -> BaseException:
    """What really went wrong: the first leaf of a group that is not a cancellation."""
    leaves = list(_leaves(exc))
    for leaf in leaves:
        if not isinstance(leaf, anyio.get_cancelled_exc_class()):
            return leaf
    return leaves[0] if leaves else exc


async def until_store_answers(
    call: Callable[[], Awaitable[R]],
    *,
    what: str,
    failing: dict[str, str] | None = None,
) -> R:
    """``call()``, tried again with a growing pause for as long as the store is unreachable.

    ``failing`` (the worker's readiness map) holds ``what`` while the store keeps failing.
    """

    def note(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        if failing is not None:
            failing[what] = str(exc)
        if state.attempt_number == 1 or state.attempt_number % 10 == 0:
            log.warning("%s: %s; waiting for the store (try %d)", what, exc, state.attempt_number)

    retrying = AsyncRetrying(
        retry=retry_if_exception_type(StoreUnavailable),
        wait=wait_exponential(multiplier=0.1, max=STORE_WAIT_MAX_S),
        before_sleep=note,
        sleep=anyio.sleep,
        reraise=True,
    )

    async def attempt() -> R:  # a coroutine function, which tenacity awaits
        return await call()

    result: R = await retrying(attempt)
    if failing is not None:
        failing.pop(what, None)
    return result
