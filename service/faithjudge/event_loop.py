"""The event loop every command line runs its async work on.

Kept apart from ``runtime`` (which assembles a scorer) so that a command that scores nothing,
such as the sidecar's, runs on the same loop without importing the pipeline and the judges.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")

__all__ = ["run_async"]


def run_async(func: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run ``func(*args)`` on a fresh event loop, uvloop's where it is installed.

    uvloop roughly halves the event loop's own CPU per judge call, which is what bounds
    calls/s at high concurrency on a small machine.
    """
    use_uvloop = importlib.util.find_spec("uvloop") is not None
    return anyio.run(func, *args, backend_options={"use_uvloop": use_uvloop})
