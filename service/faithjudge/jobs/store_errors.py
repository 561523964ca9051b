"""A lost job store, told apart from a failed statement, and waited out instead of recorded.

Every store call (``SqlJobStore``'s methods, a job's ``JobLedger``) turns a refused or lost
connection into ``StoreUnavailable``; callers that must not lose work (the worker, the provider
phase, the answer lookups of the batch route) wait it out with ``until_store_answers``, so an
outage of the store is a pause, never a line's result or a job's failure.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, ParamSpec, TypeVar

import anyio
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from faithjudge.jobs.interface import StoreUnavailable

__all__ = [
    "cause_of",
    "converted",
    "converted_iter",
    "shielded",
    "store_error_in",
    "unreachable",
    "until_store_answers",
]

log = logging.getLogger("faithjudge.worker")

P = ParamSpec("P")
R = TypeVar("R")

STORE_WAIT_MAX_S = 5.0
"""The longest pause between two tries of a store call during an outage."""


def unreachable(exc: BaseException) -> bool:
    """A failure of the connection to the database, not of the statement or of our code."""
    if isinstance(exc, OperationalError | InterfaceError | PoolTimeout):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, OSError | TimeoutError):
        return True
    # asyncpg's own connection errors, when they reach us unwrapped
    return type(exc).__module__.startswith("asyncpg") and "Connection" in type(exc).__name__


def _unavailable(exc: BaseException) -> StoreUnavailable:
    text = str(getattr(exc, "orig", None) or exc)
    cause = text.splitlines()[0][:200] if text.strip() else ""
    return StoreUnavailable(f"the job store is unreachable ({type(exc).__name__}: {cause})")


@contextlib.contextmanager
def converted() -> Iterator[None]:
    """Raise a lost or refused connection met in the block as ``StoreUnavailable``."""
    try:
        yield
    except Exception as exc:
        if not unreachable(exc):
            raise
        raise _unavailable(exc) from exc


def shielded(
    method: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """Let a store call finish even if its caller is cancelled; name an unreachable database.

    A statement cut off by cancellation invalidates its pooled connection, and closing an
    aiosqlite connection from a cancelled task can hang; every call here is short, so it runs to
    the end and the cancellation takes effect right after. A lost or refused connection comes
    out as ``StoreUnavailable`` with its cause, which the API turns into a 503.
    """

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with anyio.CancelScope(shield=True), converted():
            return await method(*args, **kwargs)
        raise AssertionError("unreachable")  # the shield never swallows: here for the checker

    return wrapper


async def converted_iter(items: AsyncIterator[R]) -> AsyncIterator[R]:
    """``items`` with a lost connection met while reading them raised as ``StoreUnavailable``;
    what the consumer raises meanwhile is its own, and closes ``items``."""
    try:
        while True:
            with converted():
                try:
                    item = await items.__anext__()
                except StopAsyncIteration:
                    return
            yield item
    finally:
        close = getattr(items, "aclose", None)
        if close is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await close()


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
