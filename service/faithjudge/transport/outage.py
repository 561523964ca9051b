"""A judge that stopped answering is waited for, once, by every call.

A judge restarts, a proxy in front of it loses its backend, a laptop's server is reloaded: for a
few seconds every call fails at the connection. Retrying each call on its own turns a 2-second
restart into hundreds of failed grades (every queued call fails in milliseconds, retries run out
long before the judge is back). Instead, the first call that fails at the connection asks the
judge whether it is there at all (``probe``: a cheap request that any live server answers). When
it is not, the judge is *down*: calls stop being sent, one of the waiting calls probes again with
a growing backoff, and every waiting call is sent again once a probe is answered. A call that
failed while the judge was down is not a failed grade and spends none of its retries.

A judge that answers the probe while one call keeps failing at the connection (a proxy that
drops that one request) is up: the failure is that call's own, and it is retried and finally
failed like any other. Without a probe, a call's connection failure counts as its own when the
judge answered other calls since the call's previous failure, and as the judge being down
otherwise; the waiting calls are then released after each backoff to find out for themselves.

``bound_s`` caps the wait (``FAITHJUDGE_JUDGE_OUTAGE_S`` for the CLI): past it, every waiting and
later call raises ``JudgeOutageTooLong`` naming the judge, the cause and how long it waited. The
service waits without a bound; its status and ``/readyz`` read ``state``. A call made inside
``without_waiting()`` (a synchronous request whose client is waiting on the line) does not hold:
it probes once and raises ``JudgeDown`` when the judge is still not there.
"""

from __future__ import annotations

import contextlib
import contextvars
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from faithjudge.errors import FaithJudgeError

__all__ = [
    "JudgeDown",
    "JudgeOutageTooLong",
    "OutageGate",
    "OutageState",
    "connection_failure",
    "exception_chain",
    "without_waiting",
]

# Backoff between probes: quick enough that a 2-second restart costs about 2 seconds, slow
# enough that a judge gone for minutes sees one cheap request every few seconds.
_FIRST_DELAY_S = 0.25
_MAX_DELAY_S = 5.0
_PROBE_TIMEOUT_S = 10.0
# A proxy whose backend is gone answers these without any answer of the judge's own.
_GATEWAY_STATUSES = (502, 503, 504)


class JudgeOutageTooLong(FaithJudgeError):
    """The judge stopped answering and did not come back within the bound: stop the run."""


class JudgeDown(FaithJudgeError):
    """The judge is not answering now, and this call may not wait for it."""


_HOLD: contextvars.ContextVar[bool] = contextvars.ContextVar("hold_for_outage", default=True)


@contextlib.contextmanager
def without_waiting() -> Iterator[None]:
    """Calls made inside raise ``JudgeDown`` instead of holding while the judge is down."""
    token = _HOLD.set(False)
    try:
        yield
    finally:
        _HOLD.reset(token)


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps (``__cause__``, ``__context__``, aiohttp's ``os_error``)."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(chain) < 16:
        seen.add(id(current))
        chain.append(current)
        wrapped = getattr(current, "os_error", None)  # aiohttp keeps the socket's error there
        if isinstance(wrapped, BaseException) and id(wrapped) not in seen:
            seen.add(id(wrapped))
            chain.append(wrapped)
        current = current.__cause__ or current.__context__
    return chain


def _disconnect_types() -> tuple[type[BaseException], ...]:
    """The HTTP stacks' own classes for a connection lost without a reply (only of the stacks
    already imported: an error of a stack never loaded cannot occur)."""
    types: list[type[BaseException]] = []
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is not None:
        types += [aiohttp.ServerDisconnectedError, aiohttp.ClientConnectorError]
    for name in ("httpx", "httpx2", "httpcore"):
        module = sys.modules.get(name)
        for attr in ("ConnectError", "RemoteProtocolError"):
            kind = getattr(module, attr, None) if module is not None else None
            if isinstance(kind, type) and issubclass(kind, BaseException):
                types.append(kind)
    return tuple(types)


def connection_failure(exc: BaseException) -> str | None:
    """What went wrong when ``exc`` means the judge's server could not be talked to at all
    (refused, reset, DNS, disconnected before replying, a gateway without its backend), or None
    for a failure that the server itself answered or a timeout (a slow judge is not a gone one).
    """
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        if status in _GATEWAY_STATUSES:
            return f"HTTP {status} from the server or a gateway in front of it"
        return None
    disconnects = _disconnect_types()
    for cause in exception_chain(exc):
        if isinstance(cause, ConnectionRefusedError):
            return f"connection refused ({cause})"
        if isinstance(cause, socket.gaierror):
            return f"DNS lookup failed ({cause})"
        if isinstance(cause, ConnectionResetError | ConnectionAbortedError | BrokenPipeError):
            return f"connection reset ({type(cause).__name__}: {cause})"
    for cause in exception_chain(exc):
        if disconnects and isinstance(cause, disconnects):
            return f"connection lost before a reply ({type(cause).__name__}: {cause})"
    return None


@dataclass(slots=True)
class OutageState:
    """A judge that is down now: why, for how long, and how often it was asked again."""

    cause: str
    waited_s: float
    probes: int

    def describe(self, judge: str) -> str:
        return (
            f"waiting for the judge {judge}: {self.cause}; down for {self.waited_s:.0f} s, "
            f"asked again {self.probes} time{'s' if self.probes != 1 else ''}"
        )


@dataclass(slots=True)
class _Outage:
    cause: str
    started: float
    delay: float = _FIRST_DELAY_S
    probes: int = 0
    probing: bool = False
    turn: anyio.Event = field(default_factory=anyio.Event)
    """Set (and replaced) after each probe, so that waiting calls look again."""


Probe = Callable[[], Awaitable[Any]]
Sleep = Callable[[float], Awaitable[Any]]


class OutageGate:
    """The shared state of one judge's reachability, for every call of one ``JudgeCaller``."""

    def __init__(
        self,
        judge: str,
        *,
        bound_s: float | None,
        probe: Probe | None = None,
        sleep: Sleep | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if bound_s is not None and bound_s <= 0:
            raise ValueError("the outage bound must be positive")
        self.judge = judge
        self.bound_s = bound_s
        self._probe = probe
        self._sleep: Sleep = sleep or anyio.sleep
        self._clock = clock
        self._outage: _Outage | None = None
        # a judge without a probe is released to the calls after each backoff; how long it has
        # been down (and the backoff) carries over until some call gets an answer
        self._down_since: float | None = None
        self._delay = _FIRST_DELAY_S
        self._probes = 0
        self._probing: anyio.Event | None = None
        self._dead: JudgeOutageTooLong | None = None
        self.answers = 0
        """Calls answered so far (any reply of the server's own)."""
        self.outages = 0
        """Times the judge went down."""
        self.down_s = 0.0
        """Seconds the judge was down, over the outages it came back from."""

    @property
    def state(self) -> OutageState | None:
        outage = self._outage
        if outage is None:
            return None
        return OutageState(
            cause=outage.cause,
            waited_s=self._clock() - outage.started,
            probes=outage.probes,
        )

    def answered(self) -> None:
        """A call got a reply from the server (whatever it said)."""
        self.answers += 1
        if self._down_since is not None:
            self.down_s += self._clock() - self._down_since
        self._down_since = None
        self._delay = _FIRST_DELAY_S
        self._probes = 0
        if self._outage is not None:
            self._end()

    async def wait(self) -> None:
        """Return when calls may be sent; raise ``JudgeOutageTooLong`` past the bound (and
        ``JudgeDown`` at once inside ``without_waiting``)."""
        if not _HOLD.get():
            return await self._look()
        while True:
            if self._dead is not None:
                raise self._dead
            outage = self._outage
            if outage is None:
                return
            if outage.probing:
                await outage.turn.wait()
                continue
            outage.probing = True
            try:
                await self._probe_once(outage)
            finally:
                outage.probing = False
                turn, outage.turn = outage.turn, anyio.Event()
                turn.set()

    async def _look(self) -> None:
        """One look at a judge that is down, for a call that may not wait."""
        if self._dead is not None:
            raise self._dead
        outage = self._outage
        if outage is None:
            return
        if outage.probing:  # what the probe under way finds holds for this call too
            await outage.turn.wait()
            if self._outage is None:
                return
        elif self._probe is None:
            return self._end()  # the call finds out for itself
        else:
            outage.probing = True
            try:
                down = await self._ask()
            finally:
                outage.probing = False
                turn, outage.turn = outage.turn, anyio.Event()
                turn.set()
            if down is None:
                return self._end() if self._outage is outage else None
            outage.cause = down
        state = self.state
        raise JudgeDown(state.describe(self.judge) if state is not None else outage.cause)

    async def failed(self, cause: str, answers_seen: int) -> bool:
        """A call failed at the connection (``cause``): True when the judge is down (the call
        waits and is sent again), False when the failure is the call's own. ``answers_seen`` is
        ``answers`` when the call was sent."""
        if self._dead is not None:
            raise self._dead
        if self._outage is not None:
            return True
        if self._probe is None:
            if self.answers > answers_seen:
                return False
            self._begin(cause)
            return True
        # one probe answers for every call that failed at the same moment
        if self._probing is not None:
            await self._probing.wait()
            return self._outage is not None
        self._probing = probing = anyio.Event()
        try:
            down = await self._ask()
            if down is not None:
                self._begin(cause)
        finally:
            self._probing = None
            probing.set()
        return down is not None

    def _begin(self, cause: str) -> None:
        if self._down_since is None:
            self._down_since = self._clock()
            self.outages += 1
        self._outage = _Outage(
            cause=cause, started=self._down_since, delay=self._delay, probes=self._probes
        )

    def _end(self) -> None:
        outage, self._outage = self._outage, None
        if outage is not None:
            outage.turn.set()

    async def _probe_once(self, outage: _Outage) -> None:
        delay = outage.delay
        if self.bound_s is not None:  # the last probe comes when the bound is reached
            delay = min(delay, max(0.0, self.bound_s - (self._clock() - outage.started)))
        await self._sleep(delay)
        if self._outage is not outage:
            return
        outage.probes += 1
        self._probes = outage.probes
        outage.delay = self._delay = min(outage.delay * 2, _MAX_DELAY_S)
        # without a probe the calls themselves find out; one that fails again at the
        # connection before any answer begins the next wait, its time carried over
        if self._probe is not None:
            down = await self._ask()
            if down is None:
                self._end()
                return
            outage.cause = down  # what the judge's address does now, not what it did first
        waited = self._clock() - outage.started
        if self.bound_s is not None and waited >= self.bound_s:
            self._dead = JudgeOutageTooLong(
                f"the judge {self.judge} stopped answering: {outage.cause}; waited {waited:.0f} s "
                f"for it (FAITHJUDGE_JUDGE_OUTAGE_S={self.bound_s:g}) and asked again "
                f"{outage.probes} times. The lines not yet answered were not written: run the "
                "same command again once the judge is back, and they are scored"
            )
            self._end()
            raise self._dead
        if self._probe is None:
            self._end()

    async def _ask(self) -> str | None:
        """None when the judge's server answers its probe at all, else why it does not."""
        assert self._probe is not None
        try:
            with anyio.fail_after(_PROBE_TIMEOUT_S):
                await self._probe()
        except Exception as exc:
            cause = connection_failure(exc)
            if cause is None and isinstance(exc, TimeoutError):
                return f"no reply to a probe within {_PROBE_TIMEOUT_S:g} s"
            return cause
        return None
