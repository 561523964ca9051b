"""How many calls go to a judge server at once, learnt from how it answers.

A server on this machine or network often serves one request at a time (llama-cpp-python, a
llama.cpp server with one slot, Ollama on a CPU) and queues the rest without a byte, so a run
that sends a hundred calls at once sees every queued one time out, and the abandoned requests
stay in the server's queue ahead of their retries (llama-cpp-python even cuts the reply it is
streaming when another request waits). ``Pacing`` drives the caller's ``CapacityLimiter`` for
such a server:

- it starts with one call in flight;
- each answer lets one more call go out (the window doubles per round trip), but the first
  jump goes straight to the calls a server answering one at a time could still clear within
  half the timeout (``timeout / (2 * latency)``), so a quick server is at full concurrency
  after its first answer;
- a call that timed out or whose streamed reply was cut short halves the window, once per
  round (a whole queue timing out together is one signal, not a hundred), and from then on
  the window grows by one call per round of answers, waiting twice as long after each
  overload, so a server that can take only one call is probed a logarithmic number of times;
- a server that never answered at all teaches nothing: after three silent calls the window
  opens to the configured concurrency again, so a hung server is found as fast as before.

Servers that are not paced (public APIs) keep the configured concurrency throughout.
"""

from __future__ import annotations

import math

import anyio

__all__ = ["Pacing"]

# Calls that timed out before any answer after which pacing gives up on a server (it is hung).
_SILENT_BEFORE_GIVING_UP = 3
_MAX_PATIENCE = 64


class Pacing:
    """The window of calls in flight to one server, applied to ``limiter``.

    ``limiter.total_tokens`` when created is the ceiling (``FAITHJUDGE_CONCURRENCY``); the
    window starts at one. ``stamp()`` is taken when a call goes out and handed back with an
    ``overloaded`` signal, so that a round of calls failing together shrinks the window once.
    """

    def __init__(self, limiter: anyio.CapacityLimiter, *, timeout_s: float | None) -> None:
        ceiling = limiter.total_tokens
        self.ceiling = int(ceiling) if math.isfinite(ceiling) else 10_000
        self._limiter = limiter
        self._timeout = timeout_s
        self._epoch = 0
        self._answered = False
        self._overloaded = False
        self._silent = 0
        self._credit = 0
        self._patience = 1
        self._set(1)

    @property
    def limit(self) -> int:
        return int(self._limiter.total_tokens)

    def stamp(self) -> int:
        """The round a call going out now belongs to."""
        return self._epoch

    def answered(self, latency_s: float) -> None:
        """A call came back with an answer after ``latency_s`` seconds."""
        self._silent = 0
        limit = self.limit
        if not self._answered:
            self._answered = True
            if not self._overloaded:
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
        if silent and not self._answered:
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

    def _clearable(self, latency_s: float) -> int:
        """Calls a server answering one at a time clears within half the timeout."""
        if self._timeout is None or latency_s <= 0:
            return 1
        return int(self._timeout / (2 * latency_s))

    def _set(self, limit: int) -> None:
        self._limiter.total_tokens = max(1, min(self.ceiling, limit))
