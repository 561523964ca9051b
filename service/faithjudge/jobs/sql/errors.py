"""A lost database told apart from a failed statement: the SQL store's side of
``StoreUnavailable``.

Every ``SqlJobStore`` call and every call of a job's ``JobLedger`` turns a refused or lost
connection into ``StoreUnavailable`` here; the domain waits it out
(``faithjudge.jobs.store_errors.until_store_answers``), so an outage of the store is a pause,
never a line's result or a job's failure.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, ParamSpec, TypeVar

import anyio
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from faithjudge.jobs.interface import StoreUnavailable

__all__ = ["converted", "converted_iter", "shielded", "unreachable"]

P = ParamSpec("P")
R = TypeVar("R")


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
