"""Retry timing shared by the SDK and the service's judge calls: backoff with jitter, and the
server's own ``Retry-After`` (seconds, milliseconds or an HTTP date)."""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["RetryPolicy", "parse_retry_after"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with uniform jitter; ``max_retries`` retries after the first try."""

    max_retries: int = 5
    base: float = 1.0
    multiplier: float = 2.0
    max_delay: float = 60.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.base < 0 or self.multiplier < 1 or self.max_delay < 0:
            raise ValueError("base and max_delay must be >= 0 and multiplier >= 1")

    def delay(
        self,
        retry_index: int,
        *,
        retry_after: float | None = None,
        rng: random.Random | None = None,
    ) -> float:
        """Seconds to wait before retry ``retry_index`` (0 for the first retry)."""
        if retry_after is not None and math.isfinite(retry_after):
            return min(max(retry_after, 0.0), self.max_delay)
        step = self.base * self.multiplier**retry_index
        if self.jitter and step > 0:
            step += (rng or random).uniform(0.0, step)
        return min(step, self.max_delay)


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), if present."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return when.timestamp() - (time.time() if now is None else now)
