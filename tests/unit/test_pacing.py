"""Pacing: how many calls go to a server on this machine or network at once."""

from __future__ import annotations

import itertools

import anyio
import pytest
from faithjudge.transport import pacing as pacing_module
from faithjudge.transport.base import JudgeResponse
from faithjudge.transport.judge_servers import ServerMemo
from faithjudge.transport.pacing import Pacing, PromptKey, SendOrder, shared_prefix
from faithjudge.transport.resilience import JudgeCaller


def paced(
    ceiling: int = 100, timeout_s: float | None = 60.0
) -> tuple[Pacing, anyio.CapacityLimiter]:
    limiter = anyio.CapacityLimiter(ceiling)
    return Pacing(limiter, timeout_s=timeout_s), limiter


def test_it_starts_with_one_call() -> None:
    pacing, limiter = paced()
    assert pacing.ceiling == 100 and limiter.total_tokens == 1 == pacing.limit


def test_a_quick_answer_beside_another_call_opens_what_a_serial_server_could_clear() -> None:
    pacing, _ = paced()
    pacing.answered(1.0)
    assert pacing.limit == 2  # the probe: a second call beside the next one
    pacing.answered(1.0, beside=True)  # 60 s of timeout: 30 one-second replies fit in half
    assert pacing.limit == 30
    pacing, _ = paced()
    pacing.answered(0.001)
    pacing.answered(0.001, beside=True)
    assert pacing.limit == 100  # never past the configured concurrency


def test_only_an_answer_that_went_out_beside_another_proves_the_server_takes_two() -> None:
    pacing, _ = paced()
    _, beside = pacing.send()
    assert not beside
    pacing.back()
    pacing.answered(0.01)
    assert pacing.limit == 2
    _, beside_a = pacing.send()
    _, beside_b = pacing.send()
    assert (beside_a, beside_b) == (False, True)


def test_a_concurrency_the_user_set_is_not_paced_from_one() -> None:
    limiter = anyio.CapacityLimiter(100)
    pacing = Pacing(limiter, timeout_s=60.0, explicit=True)
    assert limiter.total_tokens == 100
    pacing.answered(0.5)
    assert limiter.total_tokens == 100
    pacing.overloaded(pacing.stamp(), silent=True)  # a timeout still shrinks it
    assert limiter.total_tokens == 50


def test_a_cut_reply_holds_the_server_at_one_call_for_every_caller() -> None:
    memo = ServerMemo()
    limiter = anyio.CapacityLimiter(100)
    pacing = Pacing(limiter, timeout_s=60.0, explicit=True, memo=memo)
    pacing.overloaded(pacing.stamp(), silent=False)
    assert limiter.total_tokens == 1 and memo.serial
    for _ in range(50):  # no answer ever opens it again, nor silence
        pacing.answered(0.01, beside=True)
    pacing.overloaded(pacing.stamp(), silent=True)
    assert limiter.total_tokens == 1
    # a later caller of the same server starts (and stays) there, whatever the user set
    later = anyio.CapacityLimiter(100)
    Pacing(later, timeout_s=60.0, explicit=True, memo=memo).answered(0.01, beside=True)
    assert later.total_tokens == 1


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
    pacing.answered(5.0, beside=True)
    assert pacing.limit == 6
    stamps = [pacing.stamp() for _ in range(6)]  # six calls out in the same round
    for stamp in stamps:
        pacing.overloaded(stamp, silent=True)
    assert pacing.limit == 3
    pacing.overloaded(pacing.stamp(), silent=True)  # a later round
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
    pacing.answered(0.001, beside=True)
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

    judge = _LocalJudge(["answer", "answer", "answer", "timeout", "answer"])
    limiter = anyio.CapacityLimiter(50)
    caller = JudgeCaller(judge, limiter=limiter, sleep=no_wait, clock=lambda: next(ticks))
    assert caller.pacing is not None and limiter.total_tokens == 1
    await caller.call("first")
    assert limiter.total_tokens == 2
    async with anyio.create_task_group() as group:  # two calls out together, both answered
        group.start_soon(caller.call, "second")
        group.start_soon(caller.call, "third")
    assert limiter.total_tokens >= 3  # past the probe: 1 s of timeout / (2 * latency)
    response = await caller.call("fourth")  # timed out once, then answered
    assert response.attempts == 2 and limiter.total_tokens <= 3


@pytest.mark.anyio
async def test_a_public_judge_keeps_the_configured_concurrency() -> None:
    judge = _LocalJudge(["answer"])
    judge.paced = False  # type: ignore[misc]
    caller = JudgeCaller(judge, limiter=anyio.CapacityLimiter(50))
    assert caller.pacing is None and caller.limiter.total_tokens == 50


# ------------------------------------------------------------------ the order calls are sent in


async def _send_order(
    waiting: list[PromptKey | None], *, first: PromptKey = ("cf system", "Question: Q1\nCoT 0")
) -> list[PromptKey | None]:
    """The order in which ``waiting`` calls get the one place of a limiter held by ``first``."""
    order = SendOrder(anyio.CapacityLimiter(1))
    held = await order.acquire(first)
    sent: list[PromptKey | None] = []

    async def call(key: PromptKey | None) -> None:
        borrower = await order.acquire(key)
        sent.append(key)
        order.release(borrower)

    async with anyio.create_task_group() as group:
        for key in waiting:
            group.start_soon(call, key)
        await anyio.wait_all_tasks_blocked()
        assert order.waiting == len(waiting)
        order.release(held)
    return sent


@pytest.mark.anyio
async def test_waiting_calls_go_same_metric_then_same_question_then_the_rest() -> None:
    waiting: list[PromptKey | None] = []
    for line, question in enumerate(("Q1", "Q2", "Q1", "Q3"), start=1):
        for metric in ("cf", "ca", "ct"):
            waiting.append((f"{metric} system", f"Question: {question}\nCoT {line}"))
    sent = await _send_order(waiting)
    assert sorted(sent, key=str) == sorted(waiting, key=str)  # every call, once
    # the metric just sent first, and within it the question just sent
    assert sent[:2] == [("cf system", "Question: Q1\nCoT 1"), ("cf system", "Question: Q1\nCoT 3")]
    metrics = [key[0] for key in sent if key is not None]
    changes = sum(1 for a, b in itertools.pairwise(metrics) if a != b)
    assert changes == 2  # each metric's calls one after another
    for metric in ("cf system", "ca system", "ct system"):  # one question's calls together
        group = [key[1] for key in sent if key is not None and key[0] == metric]
        first_q1 = [n for n, text in enumerate(group) if text.startswith("Question: Q1")]
        assert first_q1[1] - first_q1[0] == 1, group


@pytest.mark.anyio
async def test_calls_sharing_nothing_go_oldest_first() -> None:
    waiting: list[PromptKey | None] = [("b",), None, ("a",), None, ("c",)]
    sent = await _send_order(waiting, first=("x",))
    assert sent == waiting


@pytest.mark.anyio
async def test_a_call_passed_over_too_often_goes_next(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pacing_module, "_MAX_PASSED_OVER", 2)
    waiting: list[PromptKey | None] = [("z",), ("a1",), ("a2",), ("a3",), ("a4",)]
    sent = await _send_order(waiting, first=("a0",))
    assert sent.index(("z",)) <= 3  # not last, though it shares nothing with the others


def test_the_shared_prefix_counts_characters_message_by_message() -> None:
    assert shared_prefix(("system", "user one"), ("system", "user two")) == 6 + 5
    assert shared_prefix(("sys",), ("syx", "more")) == 2
    assert shared_prefix((), ("a",)) == 0


@pytest.mark.anyio
async def test_a_call_cancelled_while_waiting_leaves_its_place() -> None:
    order = SendOrder(anyio.CapacityLimiter(1))
    held = await order.acquire(("a",))
    with anyio.move_on_after(0.01):
        await order.acquire(("a",))
    assert order.waiting == 0
    order.release(held)
    again = await order.acquire(("b",))  # the place is free: nobody holds it
    order.release(again)
