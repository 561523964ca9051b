"""A judge that stops answering is waited for by every call at once (``transport.outage``)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from faithjudge.errors import JudgeError
from faithjudge.transport.base import JudgeResponse, Usage
from faithjudge.transport.outage import (
    JudgeOutageTooLong,
    OutageGate,
    connection_failure,
)
from faithjudge.transport.resilience import JudgeCaller
from faithjudge_client.retry import RetryPolicy

pytestmark = pytest.mark.anyio


class _Status(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status


def _refused() -> Exception:
    try:
        raise ConnectionRefusedError(111, "Connect call failed")
    except ConnectionRefusedError as inner:
        outer = TimeoutError("Request timed out.")  # as an SDK may name a refusal
        outer.__cause__ = inner
        return outer


def test_connection_failures_are_told_from_answers_and_timeouts() -> None:
    assert "connection refused" in (connection_failure(_refused()) or "")
    assert "DNS" in (connection_failure(socket.gaierror(-2, "Name or service not known")) or "")
    assert "reset" in (connection_failure(ConnectionResetError(104, "reset by peer")) or "")
    assert "HTTP 503" in (connection_failure(_Status(503)) or "")
    # the server answered, or was only slow: not an outage
    assert connection_failure(_Status(500)) is None
    assert connection_failure(_Status(404)) is None
    assert connection_failure(TimeoutError("timed out")) is None


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await anyio.lowlevel.checkpoint()


class _Server:
    """A judge that is down until ``back_at`` on the fake clock."""

    def __init__(self, clock: _Clock, back_at: float) -> None:
        self.clock = clock
        self.back_at = back_at
        self.probes = 0

    async def probe(self) -> None:
        self.probes += 1
        if self.clock.now < self.back_at:
            raise _refused()


async def test_one_probe_decides_and_every_waiting_call_resumes() -> None:
    clock = _Clock()
    server = _Server(clock, back_at=2.0)
    gate = OutageGate("openai:j", bound_s=None, probe=server.probe, sleep=clock.sleep, clock=clock)
    assert await gate.failed("connection refused", gate.answers) is True
    assert gate.state is not None and gate.state.cause == "connection refused"
    resumed = []

    async def call(i: int) -> None:
        await gate.wait()
        resumed.append(i)

    async with anyio.create_task_group() as group:
        for i in range(20):
            group.start_soon(call, i)
    assert sorted(resumed) == list(range(20))
    assert gate.state is None and clock.now >= 2.0
    # backoff: a handful of probes for a 2-second outage, not one per waiting call
    assert 2 <= server.probes <= 6


async def test_a_judge_that_answers_its_probe_is_up_and_the_failure_is_the_calls_own() -> None:
    clock = _Clock()
    server = _Server(clock, back_at=0.0)
    gate = OutageGate("openai:j", bound_s=None, probe=server.probe, sleep=clock.sleep, clock=clock)
    assert await gate.failed("connection reset", gate.answers) is False
    assert gate.state is None


async def test_past_the_bound_every_call_stops_naming_the_judge_cause_and_wait() -> None:
    clock = _Clock()
    server = _Server(clock, back_at=1e9)
    gate = OutageGate("openai:j", bound_s=15, probe=server.probe, sleep=clock.sleep, clock=clock)
    assert await gate.failed("connection refused (111)", gate.answers)
    with pytest.raises(JudgeOutageTooLong) as stopped:
        await gate.wait()
    text = str(stopped.value)
    assert "openai:j" in text and "connection refused" in text and "waited 15 s" in text
    assert clock.now == pytest.approx(15.0)
    with pytest.raises(JudgeOutageTooLong):  # later calls stop at once
        await gate.wait()


async def test_without_a_probe_answers_to_other_calls_tell_a_calls_own_failure() -> None:
    clock = _Clock()
    gate = OutageGate("litellm:j", bound_s=None, sleep=clock.sleep, clock=clock)
    seen = gate.answers
    gate.answered()  # another call got an answer since this one was sent
    assert await gate.failed("connection reset", seen) is False
    assert await gate.failed("connection refused", gate.answers) is True
    await gate.wait()  # released after the backoff: the calls find out for themselves
    assert gate.state is None


# ---------------------------------------------------------------- through the JudgeCaller


class _Judge:
    """A target whose server is down for the calls numbered in ``down`` (1-based)."""

    id = "openai:fake"

    def __init__(self, down: Callable[[int], bool], *, probe_up: Callable[[], bool]) -> None:
        self.calls = 0
        self._down = down
        self._probe_up = probe_up

    def cache_key_material(self, request: Any) -> None:
        return None

    def should_retry(self, exc: BaseException) -> bool:
        return True

    def retry_after(self, exc: BaseException) -> float | None:
        return None

    async def probe(self) -> None:
        if not self._probe_up():
            raise _refused()

    async def judge(self, request: Any) -> JudgeResponse:
        self.calls += 1
        if self._down(self.calls):
            raise _refused()
        return JudgeResponse(
            text="{}", model="m", usage=Usage(1, 1), fingerprint=None, attempts=1, cached=False
        )

    async def aclose(self) -> None:
        return None


async def _no_wait(_: float) -> None:
    await anyio.lowlevel.checkpoint()


async def test_a_call_that_met_the_outage_is_sent_again_and_counts_one_attempt() -> None:
    probes = 0

    def probe_up() -> bool:  # the server is back from the third probe on
        nonlocal probes
        probes += 1
        return probes >= 3

    judge = _Judge(lambda n: probes < 3, probe_up=probe_up)
    caller = JudgeCaller(judge, sleep=_no_wait, wait_outages=True, fail_fast_after=None)
    response = await caller.call("request")
    assert response.attempts == 1 and judge.calls == 2
    assert caller.stats.outage_waits == 1 and caller.stats.failures == 0


async def test_a_call_failing_alone_while_the_judge_is_up_ends_as_its_own_failure() -> None:
    judge = _Judge(lambda n: True, probe_up=lambda: True)
    caller = JudgeCaller(
        judge, sleep=_no_wait, wait_outages=True, policy=RetryPolicy(max_retries=2)
    )
    with pytest.raises(JudgeError) as failed:
        await caller.call("request")
    assert failed.value.attempts == 1  # a refusal is not retried
    assert str(failed.value).startswith("connection refused")
    assert "raised as TimeoutError" in str(failed.value)
    assert "sent nothing" not in str(failed.value)


async def test_a_judge_gone_for_good_stops_the_call_past_the_bound() -> None:
    judge = _Judge(lambda n: n > 1, probe_up=lambda: False)
    caller = JudgeCaller(judge, sleep=_no_wait, wait_outages=True, outage_s=0.05, fail_fast_after=3)
    await caller.call("first")  # answered: from now on a refusal is an outage, not a dead URL
    with pytest.raises(JudgeOutageTooLong):
        await caller.call("second")
    assert caller.stats.failures == 0
