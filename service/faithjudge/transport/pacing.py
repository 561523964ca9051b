"""How many calls go to a judge server at once, learnt from how it answers, and in what order
the calls waiting for it are sent.

A server on this machine or network often serves one request at a time (llama-cpp-python, a
llama.cpp server with one slot, Ollama on a CPU) and queues the rest without a byte, so a run
that sends a hundred calls at once sees every queued one time out, and the abandoned requests
stay in the server's queue ahead of their retries (llama-cpp-python even cuts the reply it is
streaming when another request waits). ``Pacing`` drives the caller's ``CapacityLimiter`` for
such a server:

- it starts with one call in flight, or at the configured concurrency when the user set it
  (``--concurrency``, ``FAITHJUDGE_CONCURRENCY``: they know their server);
- the first answer lets a second call go out beside the next one: a server that cuts a
  streamed reply when another request arrives shows it there, on one call, before a hundred
  are queued behind it. Once a call that went out beside another one is answered, the window
  jumps to the calls a server answering one at a time could still clear within half the
  timeout (``timeout / (2 * latency)``), so a quick server is at full concurrency after its
  second round trip; each later answer lets one more call go (the window doubles per round
  trip);
- a server that cut a streamed reply is serial: it is held at one call in flight from then on,
  for every caller of that server and model in the process (``ServerMemo.serial``), and the
  cut call is sent again without counting as a failed attempt (``JudgeCaller``);
- a call that timed out halves the window, once per round (a whole queue timing out together
  is one signal, not a hundred), and from then on the window grows by one call per round of
  answers, waiting twice as long after each overload, so a server that can take only one call
  is probed a logarithmic number of times;
- a server that never answered at all teaches nothing: after three silent calls the window
  opens to the configured concurrency again, so a hung server is found as fast as before.

Servers that are not paced (public APIs) keep the configured concurrency throughout.

``SendOrder`` decides which waiting call takes a free place in the window: the one whose
prompt shares the longest prefix with the call sent last (same metric, then same question and
knowledge-base entry, then the rest, oldest first). A single-slot server keeps only the last
prompt it read and reads the next one from the first token that differs, so this order is
what lets it reuse what it read (the system prompt of a metric is most of each prompt); a
server with a prefix cache of its own (vLLM, OpenAI) gains the same way. Calls that find a free
place and nobody waiting go at once, in any order.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from typing import Any

import anyio
import anyio.lowlevel

from faithjudge.transport.judge_servers import ServerMemo

__all__ = ["Pacing", "SendOrder", "prompt_key"]

# Calls that timed out before any answer after which pacing gives up on a server (it is hung).
_SILENT_BEFORE_GIVING_UP = 3
_MAX_PATIENCE = 64
# A waiting call passed over by this many sends goes next, whatever it shares: the order never
# starves a call (the file runner's window bounds the wait far below this in practice).
_MAX_PASSED_OVER = 2_000


class Pacing:
    """The window of calls in flight to one server, applied to ``limiter``.

    ``limiter.total_tokens`` when created is the ceiling (``FAITHJUDGE_CONCURRENCY``); the
    window starts at one, or at the ceiling when ``explicit`` (the user set it). ``send()`` is
    called when a call goes out and ``back()`` when it returns, whatever its outcome;
    ``send()``'s round is handed back with an ``overloaded`` signal, so that a round of calls
    failing together shrinks the window once. ``memo`` is the server's memo: a serial server
    found by an earlier caller is held at one call from the start. ``on_resize`` runs after
    every change of the window (``SendOrder.dispatch``: a wider window lets waiting calls go).
    """

    def __init__(
        self,
        limiter: anyio.CapacityLimiter,
        *,
        timeout_s: float | None,
        explicit: bool = False,
        memo: ServerMemo | None = None,
        on_resize: Callable[[], None] | None = None,
    ) -> None:
        ceiling = limiter.total_tokens
        self.ceiling = int(ceiling) if math.isfinite(ceiling) else 10_000
        self._limiter = limiter
        self._timeout = timeout_s
        self._memo = memo
        self._on_resize = on_resize
        self._epoch = 0
        self._answered = False
        self._proven = explicit
        self._overloaded = False
        self._silent = 0
        self._credit = 0
        self._patience = 1
        self._out = 0
        self._set(self.ceiling if explicit else 1)

    @property
    def limit(self) -> int:
        return int(self._limiter.total_tokens)

    @property
    def serial(self) -> bool:
        """The server cut a streamed reply when another call arrived: one call at a time."""
        return self._memo is not None and self._memo.serial

    def stamp(self) -> int:
        """The round a call going out now belongs to."""
        return self._epoch

    def send(self) -> tuple[int, bool]:
        """A call goes out: its round, and whether another call was out beside it."""
        beside = self._out > 0
        self._out += 1
        return self._epoch, beside

    def back(self) -> None:
        """A call sent with ``send()`` came back (answered or not)."""
        self._out = max(0, self._out - 1)

    def answered(self, latency_s: float, *, beside: bool = False) -> None:
        """A call came back with an answer after ``latency_s`` seconds; ``beside``: it went out
        while another call was out (``send()``)."""
        self._silent = 0
        if self.serial:
            self._set(1)
            return
        limit = self.limit
        if not self._answered:
            self._answered = True
            if not self._overloaded and not self._proven:
                self._set(max(limit, 2))  # a second call beside the next: the probe
                return
        if not self._proven and beside and not self._overloaded:
            # two calls were out together and neither was cut or timed out
            self._proven = True
            self._set(max(limit + 1, self._clearable(latency_s)))
            return
        if limit >= self.ceiling:
            return
        if not self._overloaded:
            self._set(limit + 1)
            return
        self._credit += 1
        if self._credit >= limit * self._patience:
            self._credit = 0
            self._set(limit + 1)

    def overloaded(self, stamp: int, *, silent: bool) -> None:
        """A call sent in round ``stamp`` timed out (``silent``) or had its reply cut short."""
        if not silent:
            self.cut()
            return
        if self.serial:
            return
        if not self._answered:
            self._silent += 1
            if self._silent >= _SILENT_BEFORE_GIVING_UP:
                self._set(self.ceiling)  # nothing to learn from a server that never answers
                return
        if stamp != self._epoch:
            return  # the window already shrank after this call went out
        self._epoch += 1
        self._overloaded = True
        self._credit = 0
        self._patience = min(self._patience * 2, _MAX_PATIENCE)
        self._set(max(1, self.limit // 2))

    def cut(self) -> None:
        """The server cut a streamed reply short: it serves one call at a time, and another
        call it was sent made it stop. Held at one call from now on, for this server."""
        if self._memo is not None:
            self._memo.serial = True
        else:
            self._memo = ServerMemo(serial=True)
        self._epoch += 1
        self._set(1)

    def _clearable(self, latency_s: float) -> int:
        """Calls a server answering one at a time clears within half the timeout."""
        if self._timeout is None or latency_s <= 0:
            return 1
        return int(self._timeout / (2 * latency_s))

    def _set(self, limit: int) -> None:
        if self.serial:
            limit = 1
        self._limiter.total_tokens = max(1, min(self.ceiling, limit))
        if self._on_resize is not None:
            self._on_resize()


PromptKey = tuple[str, ...]


def prompt_key(request: Any) -> PromptKey | None:
    """The texts of a request's messages, in order (what a server reads as its prompt), or
    None for a request without plain-text messages (its calls go oldest first)."""
    messages = getattr(request, "messages", None)
    if not isinstance(messages, tuple | list) or not messages:
        return None
    texts = tuple(getattr(message, "content", None) for message in messages)
    return texts if all(isinstance(text, str) for text in texts) else None  # type: ignore[return-value]


def shared_prefix(a: PromptKey, b: PromptKey) -> int:
    """How many leading characters the prompts ``a`` and ``b`` share, message by message."""
    shared = 0
    for left, right in zip(a, b, strict=False):
        if left == right:
            shared += len(left)
            continue
        return shared + _common_start(left, right)
    return shared


def _common_start(left: str, right: str) -> int:
    # halving on slices: a few comparisons of C speed, not a Python loop per character
    low, high = 0, min(len(left), len(right))
    while low < high:
        middle = (low + high + 1) // 2
        if left[:middle] == right[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


@dataclass(eq=False, slots=True)
class _Waiter:
    key: PromptKey
    seq: int
    arrived: int
    """Sends made before it came: those made since passed it over."""
    borrower: object = field(default_factory=object)
    event: anyio.Event = field(default_factory=anyio.Event)
    granted: bool = False


class SendOrder:
    """Places in ``limiter`` given out in prefix order (see the module docstring).

    ``acquire(key)`` waits for a place and returns the borrower to ``release``; a call that
    finds a free place and nobody waiting takes it at once. When places free up (a call
    returns, the window widens: ``dispatch``), the waiting call whose prompt shares the most
    with the prompt sent last goes next; among calls sharing nothing with it, the oldest.
    """

    def __init__(self, limiter: anyio.CapacityLimiter) -> None:
        self._limiter = limiter
        self._sorted: list[tuple[PromptKey, int]] = []
        self._by_seq: dict[int, _Waiter] = {}  # insertion order: the oldest first
        self._seq = count()
        self._sent = 0
        self._last: PromptKey = ()

    @property
    def waiting(self) -> int:
        return len(self._by_seq)

    async def acquire(self, key: PromptKey | None) -> object:
        key = key or ()
        if not self._by_seq and self._limiter.available_tokens >= 1:
            borrower = object()
            self._limiter.acquire_on_behalf_of_nowait(borrower)
            self._sent_now(key)
            # let the other tasks run up to here too, as a limiter does, so a call that waits
            # is keyed while this one is out (it may learn that its server wants another form)
            await anyio.lowlevel.cancel_shielded_checkpoint()
            return borrower
        waiter = _Waiter(key, next(self._seq), self._sent)
        insort(self._sorted, (key, waiter.seq))
        self._by_seq[waiter.seq] = waiter
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:
                self.release(waiter.borrower)
            else:
                self._forget(waiter)
            raise
        return waiter.borrower

    def release(self, borrower: object) -> None:
        self._limiter.release_on_behalf_of(borrower)
        self.dispatch()

    def dispatch(self) -> None:
        """Give every free place to a waiting call, in prefix order."""
        while self._by_seq and self._limiter.available_tokens >= 1:
            waiter = self._next()
            self._forget(waiter)
            self._limiter.acquire_on_behalf_of_nowait(waiter.borrower)
            waiter.granted = True
            self._sent_now(waiter.key)
            waiter.event.set()

    def _sent_now(self, key: PromptKey) -> None:
        self._sent += 1
        self._last = key

    def _next(self) -> _Waiter:
        oldest = next(iter(self._by_seq.values()))
        if self._sent - oldest.arrived > _MAX_PASSED_OVER:
            return oldest
        # Of all prompts, the ones sharing the longest prefix with the last one sent sit
        # beside it in sorted order: only its two neighbours need comparing.
        at = bisect_left(self._sorted, (self._last, -1))
        best: _Waiter | None = None
        best_shared = 0
        for index in (at - 1, at):
            if 0 <= index < len(self._sorted):
                candidate = self._by_seq[self._sorted[index][1]]
                shared = shared_prefix(self._last, candidate.key)
                if shared > best_shared or (
                    shared == best_shared and best is not None and candidate.seq < best.seq
                ):
                    best, best_shared = candidate, shared
        return best if best is not None and best_shared > 0 else oldest

    def _forget(self, waiter: _Waiter) -> None:
        entry = (waiter.key, waiter.seq)
        index = bisect_left(self._sorted, entry)
        if index < len(self._sorted) and self._sorted[index] == entry:
            del self._sorted[index]
        self._by_seq.pop(waiter.seq, None)
