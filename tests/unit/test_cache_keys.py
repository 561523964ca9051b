"""The cache key of every chat backend holds each setting that can change an answer, and none
that cannot: change one, and the same request misses the cache."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from faithjudge.judges import make_judge
from faithjudge.judges.base import JudgeRequest
from faithjudge.settings import Settings
from faithjudge.transport.base import JudgeResponse
from faithjudge.transport.cache import ResponseCache, cache_key
from faithjudge.transport.chat import Message
from faithjudge.transport.judge_servers import server_memo

pytestmark = pytest.mark.anyio

REQUEST = JudgeRequest(
    metric="confidence_tone",
    messages=(Message("system", "grade the tone"), Message("user", "Lungs clear.")),
    response_schema={"type": "object", "required": ["score"]},
    schema_name="confidence_tone",
)
SERVER = "http://127.0.0.1:8001/v1"
BASE: dict[str, Any] = {"openai_base_url": SERVER, "openai_api_key": "sk-test"}

# setting (or the model) -> a value that changes what the judge is asked
ANSWER_CHANGING: dict[str, Any] = {
    "model": "judge-2",
    "openai_base_url": "http://127.0.0.1:8002/v1",
    "temperature": 0.7,
    "seed": 1,
    "max_tokens": 512,
    "response_format": "json_object+schema",
}
# settings that change how a call is made, never what it asks
ANSWER_KEEPING: dict[str, Any] = {
    "timeout_s": 5.0,
    "max_retries": 0,
    "retry_base_s": 3.0,
    "concurrency": 3,
    "http_transport": "httpx",
}


async def _key(backend: str, tmp_path: Path, **changes: Any) -> str:
    model = changes.pop("model", "judge-1")
    settings = Settings(**{**BASE, **changes}, data_dir=tmp_path / "data")
    judge = make_judge(f"{backend}:{model}", settings=settings)
    try:
        material = judge.cache_key_material(REQUEST)
        assert material is not None
        return cache_key(material)
    finally:
        await judge.aclose()


@pytest.mark.parametrize("backend", ["openai", "openai-batch"])
@pytest.mark.parametrize("setting", sorted(ANSWER_CHANGING))
async def test_each_setting_that_changes_an_answer_misses_the_cache(
    backend: str, setting: str, tmp_path: Path
) -> None:
    base = await _key(backend, tmp_path)
    changed = await _key(backend, tmp_path, **{setting: ANSWER_CHANGING[setting]})
    assert changed != base
    with ResponseCache(":memory:") as cache:
        cache.put(base, JudgeResponse(text='{"score": 1}'))
        assert cache.get(changed) is None and cache.get(base) is not None


@pytest.mark.parametrize("backend", ["openai", "openai-batch"])
@pytest.mark.parametrize("setting", sorted(ANSWER_KEEPING))
async def test_settings_that_cannot_change_an_answer_keep_the_key(
    backend: str, setting: str, tmp_path: Path
) -> None:
    base = await _key(backend, tmp_path)
    assert await _key(backend, tmp_path, **{setting: ANSWER_KEEPING[setting]}) == base


async def test_the_batch_route_keys_like_the_live_route(tmp_path: Path) -> None:
    assert await _key("openai-batch", tmp_path) == await _key("openai", tmp_path)


async def test_a_format_the_server_refused_changes_the_key(tmp_path: Path) -> None:
    """What ``auto`` learnt is what is sent, so it is what is keyed."""
    before = await _key("openai", tmp_path)
    server_memo(f"{SERVER}/", "judge-1").refused("json_schema")  # the SDK's form of the URL
    learnt = await _key("openai", tmp_path)
    forced = await _key("openai", tmp_path, response_format="json_object+schema")
    assert learnt != before and learnt == forced


# ------------------------------------------------------------------ litellm


class _Module(SimpleNamespace):
    """A stand-in for ``litellm`` that routes as LiteLLM does: ``provider/model``."""

    def get_llm_provider(self, model: str, api_base: str | None = None, **_: Any) -> tuple:
        provider, _sep, bare = model.partition("/")
        return bare, provider, None, None


def _litellm_key(model: str = "openai/judge-1", **kwargs: Any) -> str:
    from faithjudge.judges.litellm import LiteLLMJudge

    judge = LiteLLMJudge(model, litellm_module=_Module(), **kwargs)  # type: ignore[arg-type]
    material = judge.cache_key_material(REQUEST)
    assert isinstance(material, Mapping)
    return cache_key(material)


@pytest.mark.parametrize(
    "change",
    [
        {"model": "openai/judge-2"},
        {"model": "hosted_vllm/judge-1"},  # the same model name behind another provider
        {"api_base": "http://127.0.0.1:8002/v1"},
        {"temperature": 0.7},
        {"seed": None},
        {"max_tokens": 512},
        {"response_format": "json_object"},
    ],
    ids=lambda change: next(iter(change)) + "=" + str(next(iter(change.values()))),
)
def test_litellm_keys_each_setting_that_changes_an_answer(change: dict[str, Any]) -> None:
    base = _litellm_key(api_base=SERVER)
    model = change.pop("model", "openai/judge-1")
    assert _litellm_key(model, **{"api_base": SERVER, **change}) != base
    assert _litellm_key(api_base=SERVER, timeout=5.0) == base


def test_litellm_keys_the_server_it_reads_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LiteLLM reads ``OPENAI_BASE_URL`` itself: the key (and the call) name that server."""
    monkeypatch.setenv("OPENAI_BASE_URL", SERVER)
    first = _litellm_key()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8002/v1")
    assert _litellm_key() != first
    monkeypatch.setenv("HOSTED_VLLM_API_BASE", SERVER)
    assert _litellm_key("hosted_vllm/judge-1") != _litellm_key("hosted_vllm/judge-1", api_base="x")


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")
def test_the_real_litellm_routes_as_the_key_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download at import
    import litellm
    from faithjudge.transport.providers import litellm_route

    monkeypatch.setenv("OPENAI_BASE_URL", SERVER)
    route = litellm_route(litellm, "openai/judge-1")
    assert (route.provider, route.api_base) == ("openai", SERVER)
    assert litellm_route(litellm, "openai/judge-1", "http://h:1/v1").api_base == "http://h:1/v1"
    monkeypatch.setenv("HOSTED_VLLM_API_BASE", "http://127.0.0.1:8003/v1")
    route = litellm_route(litellm, "hosted_vllm/judge-1")
    assert (route.provider, route.api_base) == ("hosted_vllm", "http://127.0.0.1:8003/v1")
