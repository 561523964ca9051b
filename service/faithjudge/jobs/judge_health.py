"""Whether each judge answers at all, read from the lines scored with it.

The batch worker and ``POST /v1/score`` both report their results here; ``/readyz`` names a
judge whose last ``DOWN_AFTER`` lines all failed at the transport stage (a dead judge URL
otherwise looks ready while every grade fails).
"""

from __future__ import annotations

from faithjudge_client.lines import ItemResult

__all__ = ["DOWN_AFTER", "JudgeHealth"]

DOWN_AFTER = 3
"""Lines in a row whose every grade failed at the transport stage before a judge reads as down:
one unlucky line is not a dead judge URL, three in a row are not chance."""


class JudgeHealth:
    """Transport-failure streaks by judge name; ``failing`` maps a judge that is down to the
    last error it gave."""

    def __init__(self, down_after: int = DOWN_AFTER) -> None:
        self.down_after = down_after
        self.failing: dict[str, str] = {}
        self._streaks: dict[str, int] = {}

    def note(self, judge: str, result: ItemResult) -> None:
        """A line any grade of which got an answer clears ``judge``; a line all of whose
        failures are at the transport stage counts against it."""
        failures = [m.failure for m in result.metrics.values()]
        if any(f is None or f.stage not in ("transport", "kb", "input") for f in failures):
            self._streaks.pop(judge, None)
            self.failing.pop(judge, None)
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
            self.failing[judge] = transport[-1].detail
