"""Cached prompt tokens: read from every wire, kept in the results, priced as configured; the
``prompt_cache_key`` refusal told apart from any other."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from faithjudge.judges.base import JudgeRequest
from faithjudge.judges.litellm import LiteLLMJudge
from faithjudge.judges.openai import prompt_cache_key
from faithjudge.settings import Settings
from faithjudge.transport.base import Usage
from faithjudge.transport.chat import CompletionChunks, Message, completion_from_data, usage_from
from faithjudge.transport.judge_servers import (
    forget_servers,
    refuses_prompt_cache_key,
    refuses_response_format,
    refuses_stream,
)
from faithjudge_client.lines import TokenUsage

from tests.unit.test_judge_servers import status_error

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}}


def _request(question: str = "Is there an effusion?", metric: str = "clinical_fidelity") -> Any:
    return JudgeRequest(
        metric=metric,  # type: ignore[arg-type]
        messages=(Message("system", "rubric"), Message("user", "cot")),
        response_schema=SCHEMA,
        schema_name=metric,
        inputs={"cot": "cot", "question": question},
    )


@pytest.mark.parametrize(
    ("usage", "cached"),
    [
        ({"prompt_tokens": 2048, "prompt_tokens_details": {"cached_tokens": 1920}}, 1920),
        ({"prompt_tokens": 2048, "prompt_tokens_details": {"cached_tokens": None}}, 0),
        ({"prompt_tokens": 2048, "prompt_tokens_details": None}, 0),
        ({"prompt_tokens": 2048, "prompt_cache_hit_tokens": 1024}, 1024),  # DeepSeek's
        ({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 500}}, 100),
        ({}, 0),
    ],
)
def test_cached_tokens_are_read_where_servers_put_them(usage: dict[str, Any], cached: int) -> None:
    assert usage_from(usage).cached_tokens == cached


def test_an_unstreamed_and_a_streamed_reply_carry_the_same_counts() -> None:
    usage = {"prompt_tokens": 1500, "completion_tokens": 40,
             "prompt_tokens_details": {"cached_tokens": 1152}}  # fmt: skip
    reply = {"model": "m", "choices": [{"message": {"content": "{}"}, "finish_reason": "stop"}],
             "usage": usage}  # fmt: skip
    chunks = CompletionChunks()
    chunks.add({"model": "m", "choices": [{"index": 0, "delta": {"content": "{}"}}]})
    chunks.add({"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    chunks.add({"model": "m", "choices": [], "usage": usage})
    expected = Usage(prompt_tokens=1500, completion_tokens=40, cached_tokens=1152)
    assert completion_from_data(reply).usage == chunks.response().usage == expected
    assert expected + expected == Usage(3000, 80, 2304)


def test_a_line_names_cached_tokens_only_when_there_were_some() -> None:
    assert TokenUsage(prompt=10, completion=2).model_dump() == {"prompt": 10, "completion": 2}
    kept = TokenUsage(prompt=2048, completion=2, cached=1024)
    assert kept.model_dump(mode="json")["cached"] == 1024
    assert TokenUsage.model_validate_json('{"prompt": 1, "completion": 1}').cached == 0
    with pytest.raises(ValueError, match="cached"):
        TokenUsage(prompt=1, completion=1, cached=-1)


def test_cached_tokens_cost_the_input_price_unless_one_is_set() -> None:
    unpriced = Settings(price_input_per_mtok=2.0)
    assert unpriced.token_cost(1_000_000, 0, 500_000) is None  # no output price: no dollars
    plain = Settings(price_input_per_mtok=2.0, price_output_per_mtok=8.0)
    assert plain.token_cost(1_000_000, 100_000, 600_000) == pytest.approx(2.0 + 0.8)
    cheaper = Settings(
        price_input_per_mtok=2.0, price_output_per_mtok=8.0, price_cached_input_per_mtok=0.5
    )
    assert cheaper.token_cost(1_000_000, 100_000, 600_000) == pytest.approx(0.8 + 0.3 + 0.8)


def test_the_key_depends_on_the_metric_and_the_question_only() -> None:
    key = prompt_cache_key(_request())
    assert key == prompt_cache_key(_request()) and key.startswith("fj-") and len(key) <= 64
    assert key != prompt_cache_key(_request(question="Is the tube in place?"))
    assert key != prompt_cache_key(_request(metric="causal_attribution"))


def test_a_refused_key_is_told_apart_from_other_refusals() -> None:
    openai_style = status_error(400, {"error": {
        "message": "Unrecognized request argument supplied: prompt_cache_key",
        "type": "invalid_request_error", "param": "prompt_cache_key", "code": None}})  # fmt: skip
    extra = {"loc": ["body", "prompt_cache_key"], "msg": "Extra inputs are not permitted"}
    fastapi_style = status_error(422, {"detail": [extra]})
    other = status_error(400, {"error": {"message": "bad", "param": "messages"}})
    assert refuses_prompt_cache_key(openai_style) and refuses_prompt_cache_key(fastapi_style)
    assert not refuses_prompt_cache_key(other)
    assert not refuses_stream(openai_style) and not refuses_response_format(openai_style)
    assert not refuses_prompt_cache_key(status_error(429, {"error": {"param": "prompt_cache_key"}}))


class _Refused(Exception):
    """LiteLLM's ``UnsupportedParamsError`` as it reads: status 400, the provider's words."""

    status_code = 400
    message = "litellm.UnsupportedParamsError: anthropic does not support parameters: " + (
        "['prompt_cache_key']"
    )


async def _litellm_judged(refuse: bool) -> tuple[Any, list[dict[str, Any]], LiteLLMJudge]:
    calls: list[dict[str, Any]] = []
    details = SimpleNamespace(cached_tokens=1024)
    usage = SimpleNamespace(prompt_tokens=2000, completion_tokens=9, prompt_tokens_details=details)
    answer = SimpleNamespace(
        choices=[SimpleNamespace(message=SimpleNamespace(content="{}"), finish_reason="stop")],
        model="claude-x",
        usage=usage,
        system_fingerprint=None,
    )

    async def acompletion(**kwargs: Any) -> Any:
        calls.append(kwargs)
        if refuse and "prompt_cache_key" in kwargs:
            raise _Refused(_Refused.message)
        return answer

    module = SimpleNamespace(acompletion=acompletion)
    judge = LiteLLMJudge(
        "anthropic/claude-x",
        api_base="https://api.example.com",
        litellm_module=module,  # type: ignore[arg-type]
    )
    return await judge.judge(_request()), calls, judge


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_litellm_counts_cached_tokens_and_learns_a_refused_key(anyio_backend: str) -> None:
    forget_servers()
    try:
        response, calls, _ = await _litellm_judged(refuse=False)
        assert response.usage == Usage(2000, 9, 1024)
        assert calls[0]["prompt_cache_key"] == prompt_cache_key(_request())
        forget_servers()
        response, calls, judge = await _litellm_judged(refuse=True)
        assert response.usage.cached_tokens == 1024
        assert ["prompt_cache_key" in call for call in calls] == [True, False]
        await judge.judge(_request())  # learnt: not sent again
        assert ["prompt_cache_key" in call for call in calls] == [True, False, False]
        assert judge.should_retry(_Refused(_Refused.message)) is False
    finally:
        forget_servers()
