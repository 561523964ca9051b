"""Pacing: how many calls go to a server on this machine or network at once."""

from __future__ import annotations

import anyio
import pytest
from faithjudge.transport.base import JudgeResponse
from faithjudge.transport.pacing import Pacing
from faithjudge.transport.resilience import JudgeCaller


def paced(
    ceiling: int = 100, timeout_s: float | None = 60.0
) -> tuple[Pacing, anyio.CapacityLimiter]:
    limiter = anyio.CapacityLimiter(ceiling)
    return Pacing(limiter, timeout_s=timeout_s), limiter


def test_it_starts_with_one_call() -> None:
    pacing, limiter = paced()
    assert pacing.ceiling == 100 and limiter.total_tokens == 1 == pacing.limit


def test_a_quick_first_answer_opens_what_a_serial_server_could_clear() -> None:
    pacing, _ = paced()
    pacing.answered(1.0)  # 60 s of timeout: 30 one-second replies fit in half of it
    assert pacing.limit == 30
    pacing, _ = paced()
    pacing.answered(0.001)
    assert pacing.limit == 100  # never past the configured concurrency


def test_a_slow_first_answer_probes_one_more_call() -> None:
    pacing, _ = paced()
    pacing.answered(100.0)
    assert pacing.limit == 2
    pacing, _ = paced(timeout_s=None)  # no timeout known: nothing to size by
    pacing.answered(0.01)
    assert pacing.limit == 2


def test_each_answer_lets_one_more_call_go_until_an_overload() -> None:
    pacing, _ = paced()
    pacing.answered(40.0)
    for expected in (3, 4, 5):
        pacing.answered(40.0)
        assert pacing.limit == expected


def test_a_round_of_timeouts_halves_the_window_once() -> None:
    pacing, _ = paced()
    pacing.answered(5.0)
    assert pacing.limit == 6
    stamps = [pacing.stamp() for _ in range(6)]  # six calls out in the same round
    for stamp in stamps:
        pacing.overloaded(stamp, silent=True)
    assert pacing.limit == 3
    pacing.overloaded(pacing.stamp(), silent=False)  # a later round: a stream cut short
    assert pacing.limit == 1
    pacing.overloaded(pacing.stamp(), silent=True)
    assert pacing.limit == 1  # never below one call


def test_after_an_overload_growth_waits_longer_each_time() -> None:
    """A server that takes one call at a time is probed ever more rarely."""
    pacing, _ = paced()
    pacing.answered(100.0)
    assert pacing.limit == 2
    probes = []
    for _ in range(5):
        pacing.overloaded(pacing.stamp(), silent=True)  # the probe at 2 timed out in the queue
        assert pacing.limit == 1
        answers = 0
        while pacing.limit == 1:
            pacing.answered(100.0)
            answers += 1
        probes.append(answers)
    assert probes == [2, 4, 8, 16, 32]


def test_a_server_that_never_answers_is_not_paced() -> None:
    """Three timeouts before any answer: a hung server; found as fast as without pacing."""
    pacing, limiter = paced(ceiling=50)
    for _ in range(2):
        pacing.overloaded(pacing.stamp(), silent=True)
        assert limiter.total_tokens == 1
    pacing.overloaded(pacing.stamp(), silent=True)
    assert limiter.total_tokens == 50
    # cut streams are answers of a kind: they never count as silence
    pacing, limiter = paced(ceiling=50)
    for _ in range(5):
        pacing.overloaded(pacing.stamp(), silent=False)
    assert limiter.total_tokens == 1


def test_an_answer_after_silence_keeps_learning() -> None:
    pacing, _ = paced()
    pacing.overloaded(pacing.stamp(), silent=True)
    pacing.overloaded(pacing.stamp(), silent=True)
    pacing.answered(50.0)  # not hung after all: no third silence can open the window now
    pacing.overloaded(pacing.stamp(), silent=True)
    assert pacing.limit == 1


@pytest.mark.anyio
async def test_the_limiter_follows_the_window() -> None:
    pacing, limiter = paced(ceiling=4)
    running = peak = 0

    async def call() -> None:
        nonlocal running, peak
        async with limiter:
            running += 1
            peak = max(peak, running)
            await anyio.sleep(0.01)
            running -= 1

    async with anyio.create_task_group() as group:
        for _ in range(6):
            group.start_soon(call)
    assert peak == 1
    pacing.answered(0.001)
    async with anyio.create_task_group() as group:
        for _ in range(8):
            group.start_soon(call)
    assert peak == 4


class _Timeout(Exception):
    """A call that got no byte within the timeout."""


class _LocalJudge:
    """A judge on this machine: answers, or times out when its script says so."""

    id = "local:test"
    paced = True
    timeout_s = 1.0

    def __init__(self, script: list[str]) -> None:
        self.script = script

    def settings(self) -> dict[str, object]:
        return {}

    def cache_key_material(self, request: str) -> None:
        return None

    def should_retry(self, exc: BaseException) -> bool:
        return isinstance(exc, _Timeout)

    def retry_after(self, exc: BaseException) -> None:
        return None

    def overloaded(self, exc: BaseException) -> str | None:
        return "silent" if isinstance(exc, _Timeout) else None

    async def judge(self, request: str) -> JudgeResponse:
        if self.script.pop(0) == "timeout":
            raise _Timeout()
        return JudgeResponse(text="{}")

    async def aclose(self) -> None:
        return None


@pytest.mark.anyio
async def test_the_caller_paces_a_local_judge_by_its_answers() -> None:
    ticks = iter(float(n) / 10 for n in range(100))  # every reading 0.1 s after the last

    async def no_wait(seconds: float) -> None:
        return None

    judge = _LocalJudge(["answer", "timeout", "answer"])
    limiter = anyio.CapacityLimiter(50)
    caller = JudgeCaller(judge, limiter=limiter, sleep=no_wait, clock=lambda: next(ticks))
    assert caller.pacing is not None and limiter.total_tokens == 1
    await caller.call("first")  # answered in 0.1 s: 1 s of timeout / (2 * 0.1 s)
    assert limiter.total_tokens == 5
    response = await caller.call("second")  # timed out once, then answered
    assert response.attempts == 2 and limiter.total_tokens == 2


@pytest.mark.anyio
async def test_a_public_judge_keeps_the_configured_concurrency() -> None:
    judge = _LocalJudge(["answer"])
    judge.paced = False  # type: ignore[misc]
    caller = JudgeCaller(judge, limiter=anyio.CapacityLimiter(50))
    assert caller.pacing is None and caller.limiter.total_tokens == 50
