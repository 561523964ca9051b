"""OpenAIJudge + JudgeCaller against the fake judge over real loopback HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import orjson
import pytest
from faithjudge.errors import ConfigError, JudgeError
from faithjudge.judges import make_judge
from faithjudge.judges.base import JudgeRequest
from faithjudge.judges.openai import OpenAIJudge
from faithjudge.settings import Settings
from faithjudge.transport.base import JudgeResponse
from faithjudge.transport.cache import ResponseCache
from faithjudge.transport.chat import Message
from faithjudge.transport.providers import LOCAL_API_KEY, make_openai_client
from faithjudge.transport.resilience import JudgeCaller
from faithjudge_client.retry import RetryPolicy

from tests.fakes.judge_server import FakeJudge, FakeJudgeConfig, run_fake_judge

pytestmark = pytest.mark.anyio

CLIENT_TIMEOUT = 0.5
SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeJudge]:
    with run_fake_judge() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeJudge, monkeypatch: pytest.MonkeyPatch) -> FakeJudge:
    for name in _PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    server.app.config = FakeJudgeConfig(hang_s=5.0)
    server.reset()
    return server


class Sleeps:
    """Backoff sleep that records the requested delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def judge_request(cot: str, metric: str = "clinical_fidelity") -> JudgeRequest:
    fenced = f"<<<BEGIN UNTRUSTED COT COT-0a1b2c3d>>>\n{cot}\n<<<END UNTRUSTED COT COT-0a1b2c3d>>>"
    return JudgeRequest(
        metric=metric,  # type: ignore[arg-type]
        messages=(
            Message("system", f"You are a strict judge. metric: {metric}"),
            Message("user", f"Grade this reasoning.\n{fenced}"),
        ),
        response_schema=SCHEMA,
        schema_name=metric,
    )


@pytest.fixture(params=["aiohttp", "httpx"])
async def judge(request: pytest.FixtureRequest, fake: FakeJudge) -> AsyncIterator[OpenAIJudge]:
    client = make_openai_client(
        base_url=fake.base_url, api_key="test", timeout=CLIENT_TIMEOUT, transport=request.param
    )
    judge = OpenAIJudge("judge-1", client=client)
    yield judge
    await judge.aclose()


def caller_for(judge: OpenAIJudge, **kwargs: object) -> tuple[JudgeCaller, Sleeps]:
    sleeps = Sleeps()
    return JudgeCaller(judge, sleep=sleeps, **kwargs), sleeps  # type: ignore[arg-type]


async def test_normal_answer_carries_model_usage_and_fingerprint(
    fake: FakeJudge, judge: OpenAIJudge
) -> None:
    caller, _ = caller_for(judge)
    response = await caller.call(judge_request("The heart is normal."))
    reply = orjson.loads(response.text)
    assert reply["score"] == 1 and reply["basis"] == "QSK" and reply["abstain"] is False
    assert (response.model, response.fingerprint, response.attempts) == (
        "judge-1",
        "fp_fake_judge",
        1,
    )
    assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
    sent = fake.requests[-1]
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"] == {
        "name": "clinical_fidelity",
        "schema": SCHEMA,
        "strict": True,
    }
    assert (sent["temperature"], sent["seed"], sent["max_tokens"]) == (0.0, 0, 1024)


@pytest.mark.parametrize(
    ("fault", "attempts"),
    [
        ("rate_limit*2", 3),
        ("server_error*1", 2),
        ("unavailable*2", 3),
        ("hang*1", 2),
        ("drop*1", 2),
    ],
)
async def test_transient_faults_are_retried(
    fake: FakeJudge, judge: OpenAIJudge, fault: str, attempts: int
) -> None:
    caller, sleeps = caller_for(judge, policy=RetryPolicy(jitter=False))
    response = await caller.call(judge_request(f"Lungs clear. [[fake:{fault}]]"))
    assert orjson.loads(response.text)["score"] == 1
    assert response.attempts == attempts and fake.counters.total == attempts
    assert fake.counters.by_fault[fault.split("*")[0]] == attempts - 1
    expected = (
        [0.0] * (attempts - 1) if fault.startswith("rate_limit") else [1.0, 2.0][: attempts - 1]
    )
    assert sleeps.delays == expected


@pytest.mark.parametrize("fault", ["not_json", "truncated", "schema_violation", "bad_quote"])
async def test_bad_answers_are_returned_not_retried(
    fake: FakeJudge, judge: OpenAIJudge, fault: str
) -> None:
    caller, sleeps = caller_for(judge)
    response = await caller.call(judge_request(f"Lungs clear. [[fake:{fault}]]"))
    assert response.attempts == 1 and fake.counters.total == 1 and sleeps.delays == []
    if fault == "not_json":
        assert response.text == "I think the score is 4."
    elif fault == "truncated":
        assert response.text.startswith('{"abstain":false')
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(response.text)
    elif fault == "schema_violation":
        assert orjson.loads(response.text)["score"] == 7
    else:
        reply = orjson.loads(response.text)
        assert reply["score"] == 3 and reply["quotes"][0] not in "Lungs clear."


async def test_retry_after_header_sets_the_delay(fake: FakeJudge, judge: OpenAIJudge) -> None:
    fake.config.retry_after = "7"
    caller, sleeps = caller_for(judge)
    response = await caller.call(judge_request("[[fake:rate_limit*1]]"))
    assert response.attempts == 2 and sleeps.delays == [7.0]


async def test_permanent_rate_limit_exhausts_six_attempts(
    fake: FakeJudge, judge: OpenAIJudge
) -> None:
    caller, sleeps = caller_for(judge)
    with pytest.raises(JudgeError) as info:
        await caller.call(judge_request("[[fake:rate_limit]]"))
    assert info.value.attempts == 6 and info.value.status == 429
    assert "RateLimitError" in str(info.value) and "429" in str(info.value)
    assert fake.counters.total == 6 and sleeps.delays == [0.0] * 5


async def test_permanent_hang_ends_as_timeout_error(fake: FakeJudge, judge: OpenAIJudge) -> None:
    caller, _ = caller_for(judge, policy=RetryPolicy(max_retries=1))
    with pytest.raises(JudgeError) as info:
        await caller.call(judge_request("[[fake:hang]]"))
    assert info.value.attempts == 2 and info.value.status is None
    assert "APITimeoutError" in str(info.value)


async def test_bad_request_is_not_retried(fake: FakeJudge, judge: OpenAIJudge) -> None:
    caller, sleeps = caller_for(judge)
    with pytest.raises(JudgeError) as info:
        await caller.call(judge_request("[[fake:no_such_fault]]"))
    assert (info.value.attempts, info.value.status, fake.counters.total) == (1, 400, 1)
    assert "BadRequestError" in str(info.value) and sleeps.delays == []


async def test_json_schema_rejection_falls_back_to_json_object(
    fake: FakeJudge, judge: OpenAIJudge
) -> None:
    fake.config.reject_json_schema = True
    with ResponseCache(":memory:") as cache:
        caller, _ = caller_for(judge, cache=cache)
        before = judge.cache_key_material(judge_request("Heart normal."))
        first = await caller.call(judge_request("Heart normal."))
        assert judge.response_format == "json_object+schema"
        assert fake.counters.rejected_json_schema == 1 and fake.counters.total == 2
        with_schema = {"type": "json_object", "schema": SCHEMA}
        assert fake.requests[-1]["response_format"] == with_schema
        after = judge.cache_key_material(judge_request("Heart normal."))
        assert before is not None and after is not None
        assert after["response_format"] == with_schema != before["response_format"]
        # cached under what was actually sent: the same request now hits
        again = await caller.call(judge_request("Heart normal."))
        assert again.cached and again.text == first.text and fake.counters.total == 2
        # later requests go straight to json_object
        await caller.call(judge_request("Other text."))
    assert fake.counters.rejected_json_schema == 1 and fake.counters.total == 3


async def test_cache_hit_makes_no_server_call(
    fake: FakeJudge, judge: OpenAIJudge, tmp_path: Path
) -> None:
    fake.config.quote_mode = "first_sentence"
    path = tmp_path / "cache.sqlite3"
    with ResponseCache(path) as cache:
        caller, _ = caller_for(judge, cache=cache)
        first = await caller.call(judge_request("Mild cardiomegaly. No effusion."))
    with ResponseCache(path) as cache:
        caller, _ = caller_for(judge, cache=cache)
        second = await caller.call(judge_request("Mild cardiomegaly. No effusion."))
    assert fake.counters.total == 1
    assert (second.text, second.cached, second.attempts) == (first.text, True, 0)
    assert orjson.loads(first.text)["quotes"] == ["Mild cardiomegaly."]


async def test_identical_concurrent_requests_make_one_call(
    fake: FakeJudge, judge: OpenAIJudge
) -> None:
    fake.config.latency_s = 0.2
    caller, _ = caller_for(judge)
    results: list[JudgeResponse] = []

    async def one() -> None:
        results.append(await caller.call(judge_request("Same text.")))

    async with anyio.create_task_group() as group:
        group.start_soon(one)
        group.start_soon(one)
    assert fake.counters.total == 1 and results[0].text == results[1].text
    assert sorted(r.attempts for r in results) == [0, 1]


async def test_limiter_caps_requests_in_flight(fake: FakeJudge, judge: OpenAIJudge) -> None:
    fake.config.latency_s = 0.05
    caller, _ = caller_for(judge, limiter=anyio.CapacityLimiter(4))
    async with anyio.create_task_group() as group:
        for i in range(24):
            group.start_soon(caller.call, judge_request(f"text {i}"))
    assert fake.counters.total == 24 and fake.counters.max_in_flight == 4


async def test_many_concurrent_calls_overlap(fake: FakeJudge) -> None:
    fake.config.latency_s = 0.3
    client = make_openai_client(base_url=fake.base_url, api_key="test", timeout=10)
    judge = OpenAIJudge("judge-1", client=client)
    judge.paced = False  # the transport's own overlap; pacing a local server is tested apart
    caller, _ = caller_for(judge)
    async with anyio.create_task_group() as group:
        for i in range(100):
            group.start_soon(caller.call, judge_request(f"text {i}", "confidence_tone"))
    await judge.aclose()
    assert fake.counters.total == 100 and fake.counters.max_in_flight >= 50


# ------------------------------------------------------------------ factories


async def test_factory_builds_a_working_openai_judge(fake: FakeJudge) -> None:
    settings = Settings.model_construct(openai_base_url=fake.base_url, http_transport="httpx")
    judge = make_judge("openai:judge-2", settings=settings)
    assert judge.id == "openai:judge-2"
    assert judge.settings()["base_url"] == fake.base_url + "/"
    response = await JudgeCaller(judge).call(judge_request("ok", "causal_attribution"))
    assert orjson.loads(response.text)["claimed_influence"] == "none"
    await judge.aclose()


def test_local_servers_get_a_dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = make_openai_client(base_url="http://127.0.0.1:9/v1")
    assert client.api_key == LOCAL_API_KEY and client.max_retries == 0


def test_openai_without_key_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        make_openai_client()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert str(make_openai_client().base_url) == "https://api.openai.com/v1/"


def test_openai_api_uses_max_completion_tokens() -> None:
    client = make_openai_client(api_key="sk-test", base_url="https://api.openai.com/v1")
    assert OpenAIJudge("gpt-x", client=client).settings()["max_tokens_field"] == (
        "max_completion_tokens"
    )
