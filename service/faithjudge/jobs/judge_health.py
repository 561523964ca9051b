"""Whether each judge answers at all, read from the lines scored with it.

The batch worker and ``POST /v1/score`` both report their results here; ``/readyz`` names a
judge whose last ``DOWN_AFTER`` lines all failed at the transport stage (a dead judge URL
otherwise looks ready while every grade fails). On the batch route the provider phase reports
here too: a phase that fails names the judge's provider until one goes through.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from faithjudge_client.lines import ItemResult

__all__ = ["DOWN_AFTER", "FORGET_AFTER_S", "JudgeHealth"]

DOWN_AFTER = 3
"""Lines in a row whose every grade failed at the transport stage before a judge reads as down:
one unlucky line is not a dead judge URL, three in a row are not chance."""

FORGET_AFTER_S = 60.0
"""How long a judge reads as down without a new failing line: a replica taken out of a load
balancer by its readiness gets no more lines to learn that its judge is back."""


class JudgeHealth:
    """Transport-failure streaks by judge name; ``failing`` maps a judge that is down to the
    last error it gave, for ``forget_after_s`` after its last failing line."""

    def __init__(
        self,
        down_after: int = DOWN_AFTER,
        forget_after_s: float = FORGET_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.down_after = down_after
        self.forget_after_s = forget_after_s
        self._clock = clock
        self._down: dict[str, tuple[str, float]] = {}
        self._streaks: dict[str, int] = {}
        self._providers: dict[str, tuple[str, float]] = {}

    @property
    def failing(self) -> dict[str, str]:
        """The judges down now, each with the last error it gave."""
        now = self._clock()
        return {
            judge: error
            for judge, (error, since) in self._down.items()
            if now - since < self.forget_after_s
        }

    def note(self, judge: str, result: ItemResult) -> None:
        """A line any grade of which got an answer clears ``judge``; a line all of whose
        failures are at the transport stage counts against it."""
        failures = [m.failure for m in result.metrics.values()]
        if any(f is None or f.stage not in ("transport", "kb", "input") for f in failures):
            self._streaks.pop(judge, None)
            self._down.pop(judge, None)
            return
        transport = [
            f for f in [*failures, result.error] if f is not None and f.stage == "transport"
        ]
        # a bug of ours is reported as a transport failure too, but says nothing of the judge
        transport = [f for f in transport if not f.detail.startswith("internal error")]
        if not transport:
            return  # rejected input or a question the KB lacks: the judge was not asked
        streak = self._streaks[judge] = self._streaks.get(judge, 0) + 1
        if streak >= self.down_after:
            self._down[judge] = (transport[-1].detail, self._clock())

    @property
    def providers_failing(self) -> dict[str, str]:
        """The judges whose Batch API provider is down now (their provider phase failed), each
        with the error it gave: on the batch route no line is scored to count against it."""
        now = self._clock()
        return {
            judge: error
            for judge, (error, since) in self._providers.items()
            if now - since < self.forget_after_s
        }

    def note_provider(self, judge: str, error: str | None) -> None:
        """The provider phase of ``judge`` failed with ``error``, or (None) went through."""
        if error is None:
            self._providers.pop(judge, None)
        else:
            self._providers[judge] = (error, self._clock())
