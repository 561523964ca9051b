"""JudgeCaller and RetryPolicy against a scripted in-process judge (no network, no sleeping)."""

from __future__ import annotations

import importlib.util
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from faithjudge.errors import ConfigError, JudgeError
from faithjudge.judges.base import Judge, JudgeRequest
from faithjudge.transport.base import JudgeResponse, RequestChanged
from faithjudge.transport.cache import ResponseCache, cache_key
from faithjudge.transport.chat import Message
from faithjudge.transport.resilience import JudgeCaller
from faithjudge_client.retry import RetryPolicy, parse_retry_after

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Transient(Exception):
    """A failure the scripted judge calls retryable."""

    def __init__(self, retry_after: float | None = None, status_code: int = 503) -> None:
        super().__init__(f"transient {status_code}")
        self.retry_after = retry_after
        self.status_code = status_code


class Fatal(Exception):
    status_code = 400


@dataclass
class Scripted:
    """Judge whose n-th call per request text raises or answers as scripted."""

    script: dict[str, list[BaseException | str]] = field(default_factory=dict)
    delay: float = 0.0
    gate: anyio.Event | None = None
    cacheable: bool = True
    calls: int = 0
    running: int = 0
    max_running: int = 0
    format: str = "json_schema"

    @property
    def id(self) -> str:
        return "scripted:test"

    def settings(self) -> Mapping[str, Any]:
        return {}

    def cache_key_material(self, request: JudgeRequest) -> Mapping[str, Any] | None:
        if not self.cacheable:
            return None
        return {"messages": [[m.role, m.content] for m in request.messages], "fmt": self.format}

    def should_retry(self, exc: BaseException) -> bool:
        return isinstance(exc, Transient)

    def retry_after(self, exc: BaseException) -> float | None:
        return getattr(exc, "retry_after", None)

    async def judge(self, request: JudgeRequest) -> JudgeResponse:
        self.calls += 1
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.delay:
                await anyio.sleep(self.delay)
            steps = self.script.get(request.messages[-1].content, [])
            step = steps.pop(0) if steps else '{"score": 1}'
            if isinstance(step, BaseException):
                raise step
            return JudgeResponse(text=step, model="scripted-1")
        finally:
            self.running -= 1

    async def aclose(self) -> None:
        return None


def request(text: str = "cot") -> JudgeRequest:
    return JudgeRequest(
        metric="confidence_tone",
        messages=(Message("system", "grade"), Message("user", text)),
        response_schema={"type": "object"},
        schema_name="confidence_tone",
    )


class SleepRecorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def make_caller(judge: Scripted, **kwargs: Any) -> tuple[JudgeCaller, SleepRecorder]:
    sleep = SleepRecorder()
    kwargs.setdefault("policy", RetryPolicy(jitter=False))
    return JudgeCaller(judge, sleep=sleep, **kwargs), sleep


def test_scripted_judge_satisfies_the_protocol() -> None:
    assert isinstance(Scripted(), Judge)


# ------------------------------------------------------------------ backoff arithmetic


def test_policy_defaults_follow_methods() -> None:
    policy = RetryPolicy()
    assert (policy.max_retries, policy.base, policy.multiplier) == (5, 1.0, 2.0)
    assert policy.max_delay == 60.0 and policy.jitter is True


def test_delays_double_without_jitter_and_are_capped() -> None:
    policy = RetryPolicy(jitter=False, max_delay=10.0)
    assert [policy.delay(n) for n in range(5)] == [1.0, 2.0, 4.0, 8.0, 10.0]


def test_jitter_adds_up_to_one_more_step() -> None:
    policy, rng = RetryPolicy(), random.Random(7)
    for n in range(5):
        for _ in range(50):
            assert 2**n <= policy.delay(n, rng=rng) <= 2 ** (n + 1)


def test_retry_after_replaces_the_computed_delay() -> None:
    policy = RetryPolicy(max_delay=30.0)
    assert policy.delay(3, retry_after=2.5) == 2.5
    assert policy.delay(0, retry_after=-4.0) == 0.0
    assert policy.delay(0, retry_after=500.0) == 30.0


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    date = "Wed, 21 Oct 2015 07:28:10 GMT"
    assert parse_retry_after({"retry-after": date}, now=1445412480.0) == pytest.approx(10.0)
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None


# ------------------------------------------------------------------ retries


async def test_success_on_first_try() -> None:
    caller, sleep = make_caller(Scripted())
    response = await caller.call(request())
    assert (response.attempts, response.cached, response.text) == (1, False, '{"score": 1}')
    assert sleep.delays == []


async def test_transient_errors_are_retried_and_counted() -> None:
    judge = Scripted(script={"cot": [Transient(), Transient(), "ok"]})
    caller, sleep = make_caller(judge)
    response = await caller.call(request())
    assert (response.text, response.attempts, judge.calls) == ("ok", 3, 3)
    assert sleep.delays == [1.0, 2.0]
    assert caller.stats.retries == 2


async def test_server_retry_after_is_honoured() -> None:
    judge = Scripted(script={"cot": [Transient(retry_after=7.0), Transient(0.0), "ok"]})
    caller, sleep = make_caller(judge)
    assert (await caller.call(request())).attempts == 3
    assert sleep.delays == [7.0, 0.0]


async def test_exhausted_retries_raise_with_six_attempts() -> None:
    judge = Scripted(script={"cot": [Transient(status_code=503) for _ in range(10)]})
    caller, sleep = make_caller(judge)
    with pytest.raises(JudgeError) as info:
        await caller.call(request())
    assert info.value.attempts == 6 and judge.calls == 6
    assert info.value.status == 503
    assert "Transient" in str(info.value) and "503" in str(info.value)
    assert sleep.delays == [1.0, 2.0, 4.0, 8.0, 16.0]


async def test_non_retryable_error_fails_at_once() -> None:
    judge = Scripted(script={"cot": [Fatal("bad request")]})
    caller, sleep = make_caller(judge)
    with pytest.raises(JudgeError) as info:
        await caller.call(request())
    assert (info.value.attempts, info.value.status, sleep.delays) == (1, 400, [])
    assert "not retryable" in str(info.value)


async def test_judge_errors_keep_their_message_and_gain_attempts() -> None:
    judge = Scripted(script={"cot": [JudgeError("no recorded response", status=None)]})
    caller, _ = make_caller(judge)
    with pytest.raises(JudgeError, match="no recorded response") as info:
        await caller.call(request())
    assert info.value.attempts == 1


async def test_configuration_errors_propagate_unchanged() -> None:
    judge = Scripted(script={"cot": [ConfigError("install the extra")]})
    caller, _ = make_caller(judge)
    with pytest.raises(ConfigError):
        await caller.call(request())


async def test_zero_retries_policy() -> None:
    judge = Scripted(script={"cot": [Transient(), "ok"]})
    caller, _ = make_caller(judge, policy=RetryPolicy(max_retries=0))
    with pytest.raises(JudgeError) as info:
        await caller.call(request())
    assert info.value.attempts == 1


# ------------------------------------------------------------------ limiter


async def test_limiter_caps_concurrent_judge_calls() -> None:
    judge = Scripted(delay=0.01)
    caller, _ = make_caller(judge, limiter=anyio.CapacityLimiter(3))
    async with anyio.create_task_group() as group:
        for i in range(20):
            group.start_soon(caller.call, request(f"cot {i}"))
    assert judge.max_running == 3 and judge.calls == 20


async def test_limiter_slot_is_free_during_backoff() -> None:
    limiter = anyio.CapacityLimiter(1)
    judge = Scripted(script={"cot": [Transient(), "ok"]})
    seen: list[float] = []

    async def sleep(seconds: float) -> None:
        seen.append(limiter.borrowed_tokens)

    caller = JudgeCaller(judge, limiter=limiter, sleep=sleep)
    await caller.call(request())
    assert seen == [0]


async def test_default_limiter_is_per_caller() -> None:
    a, _ = make_caller(Scripted())
    b, _ = make_caller(Scripted())
    assert a.limiter is not b.limiter and a.limiter.total_tokens == 100


# ------------------------------------------------------------------ cache and dedupe


async def test_cache_hit_makes_no_call() -> None:
    judge = Scripted(script={"cot": ["first"]})
    with ResponseCache(":memory:") as cache:
        caller, _ = make_caller(judge, cache=cache)
        fresh = await caller.call(request())
        hit = await caller.call(request())
    assert judge.calls == 1
    assert (fresh.cached, fresh.attempts) == (False, 1)
    assert (hit.cached, hit.attempts, hit.text, hit.model) == (True, 0, "first", "scripted-1")


async def test_failures_are_not_cached() -> None:
    judge = Scripted(script={"cot": [Fatal("no"), "later"]})
    with ResponseCache(":memory:") as cache:
        caller, _ = make_caller(judge, cache=cache)
        with pytest.raises(JudgeError):
            await caller.call(request())
        assert (await caller.call(request())).text == "later"


class Switching(Scripted):
    """Its server refuses ``json_schema``: the first call learns so and says the request
    changed, as the chat backends do."""

    async def judge(self, request: JudgeRequest) -> JudgeResponse:
        if self.format == "json_schema":
            self.calls += 1
            self.format = "json_object"
            raise RequestChanged("the server refuses json_schema")
        return await super().judge(request)


async def test_cache_entry_uses_the_key_of_what_was_sent() -> None:
    """A backend that changes its wire format is cached under the format it sent."""
    judge = Switching()
    with ResponseCache(":memory:") as cache:
        caller, _ = make_caller(judge, cache=cache)
        first = await caller.call(request())
        assert (first.attempts, caller.stats.rekeyed) == (1, 1)
        material = judge.cache_key_material(request())
        assert material is not None and cache.get(cache_key(material)) is not None
        old = {**material, "fmt": "json_schema"}
        assert cache.get(cache_key(old)) is None
        assert (await caller.call(request())).cached
    assert judge.calls == 2


async def test_a_changed_request_is_looked_up_again_before_it_is_sent() -> None:
    """Its answer already cached under the new format, the request is not sent again; and a
    request keyed in the old format while waiting for the limiter is keyed again too."""
    with ResponseCache(":memory:") as cache:
        cache.put(
            cache_key({"messages": [["system", "grade"], ["user", "cot"]], "fmt": "json_object"}),
            JudgeResponse(text='{"score": 2}'),
        )
        judge = Switching()
        caller, _ = make_caller(judge, cache=cache, limiter=anyio.CapacityLimiter(1))
        responses: list[JudgeResponse] = []

        async def one(text: str) -> None:
            responses.append(await caller.call(request(text)))

        async with anyio.create_task_group() as group:
            group.start_soon(one, "cot")
            group.start_soon(one, "other")
        by_text = sorted((r.text, r.cached) for r in responses)
        assert by_text == [('{"score": 1}', False), ('{"score": 2}', True)]
        # the refused call, then only "other" in the new format: "cot" was in the cache
        assert judge.calls == 2 and caller.stats.rekeyed == 2


async def test_identical_requests_in_flight_share_one_call() -> None:
    judge = Scripted(gate=anyio.Event(), script={"cot": ["shared"]})
    caller, _ = make_caller(judge)
    results: list[JudgeResponse] = []

    async def one() -> None:
        results.append(await caller.call(request()))

    async with anyio.create_task_group() as group:
        group.start_soon(one)
        group.start_soon(one)
        await anyio.wait_all_tasks_blocked()
        assert judge.gate is not None
        judge.gate.set()
    assert judge.calls == 1
    assert sorted((r.attempts, r.cached, r.text) for r in results) == [
        (0, True, "shared"),
        (1, False, "shared"),
    ]
    assert caller.stats.shared == 1


async def test_waiters_get_the_leaders_error() -> None:
    judge = Scripted(gate=anyio.Event(), script={"cot": [Fatal("boom")]})
    caller, _ = make_caller(judge)
    errors: list[JudgeError] = []

    async def one() -> None:
        try:
            await caller.call(request())
        except JudgeError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(one)
        group.start_soon(one)
        await anyio.wait_all_tasks_blocked()
        assert judge.gate is not None
        judge.gate.set()
    assert judge.calls == 1 and len(errors) == 2
    assert str(errors[0]) == str(errors[1]) and "Fatal" in str(errors[0])


async def test_uncacheable_requests_are_not_deduplicated() -> None:
    judge = Scripted(delay=0.01, cacheable=False)
    caller, _ = make_caller(judge, cache=ResponseCache(":memory:"))
    async with anyio.create_task_group() as group:
        group.start_soon(caller.call, request())
        group.start_soon(caller.call, request())
    assert judge.calls == 2


async def test_cancellation_propagates_and_a_waiter_takes_over() -> None:
    judge = Scripted(gate=anyio.Event())
    caller, _ = make_caller(judge)
    scopes: list[anyio.CancelScope] = []
    follower: list[JudgeResponse] = []

    async def lead() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await caller.call(request())

    async def follow() -> None:
        follower.append(await caller.call(request()))

    async with anyio.create_task_group() as group:
        group.start_soon(lead)
        await anyio.wait_all_tasks_blocked()  # the leader is inside the judge
        group.start_soon(follow)
        await anyio.wait_all_tasks_blocked()  # the follower waits on the leader
        scopes[0].cancel()
        await anyio.wait_all_tasks_blocked()  # the follower now leads
        assert judge.gate is not None
        judge.gate.set()
    assert scopes[0].cancelled_caught
    assert len(follower) == 1 and (follower[0].attempts, follower[0].cached) == (1, False)
    assert judge.calls == 2


# ------------------------------------------------------------------ LiteLLM classification


def _fake_litellm(answer: Any) -> SimpleNamespace:
    import openai

    class Timeout(openai.APITimeoutError):
        pass

    calls: list[dict[str, Any]] = []

    async def acompletion(**kwargs: Any) -> Any:
        calls.append(kwargs)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    return SimpleNamespace(acompletion=acompletion, Timeout=Timeout, calls=calls)


async def test_litellm_backend_with_a_stand_in_module() -> None:
    from faithjudge.judges.litellm import LiteLLMJudge

    message = SimpleNamespace(content='{"score": 1}')
    answer = SimpleNamespace(
        choices=[SimpleNamespace(message=message)],
        model="claude-x",
        usage=SimpleNamespace(prompt_tokens=11, completion_tokens=3),
        system_fingerprint=None,
    )
    module = _fake_litellm(answer)
    judge = LiteLLMJudge("anthropic/claude-x", litellm_module=module)  # type: ignore[arg-type]
    response = await judge.judge(request())
    assert judge.id == "litellm:anthropic/claude-x"
    assert (response.text, response.model, response.usage.prompt_tokens) == (
        '{"score": 1}',
        "claude-x",
        11,
    )
    sent = module.calls[0]
    assert sent["num_retries"] == 0 and sent["response_format"]["type"] == "json_schema"
    material = judge.cache_key_material(request())
    assert material is not None and material["backend"] == "litellm"
    assert judge.should_retry(Fatal()) is False
    assert judge.should_retry(SimpleNamespace(status_code=429)) is True  # type: ignore[arg-type]
    assert judge.should_retry(SimpleNamespace(status_code=401)) is False  # type: ignore[arg-type]
    limited = SimpleNamespace(status_code=429, headers={"Retry-After": "4"})
    assert judge.retry_after(limited) == 4.0  # type: ignore[arg-type]


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")
def test_real_litellm_exceptions_are_classified() -> None:
    import httpx
    import litellm
    from faithjudge.judges.litellm import LiteLLMJudge

    judge = LiteLLMJudge("openai/gpt-x")
    response = httpx.Response(429, request=httpx.Request("POST", "http://x"))
    rate = litellm.RateLimitError("slow down", llm_provider="openai", model="m", response=response)
    assert judge.should_retry(rate)
    assert judge.should_retry(litellm.Timeout("t", model="m", llm_provider="openai"))
