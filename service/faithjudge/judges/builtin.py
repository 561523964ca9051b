"""The shipped backends' factories and the settings they declare.

Each factory turns the part of a spec after ``backend:`` and the service ``Settings`` into a
ready judge. SDKs are imported inside the factories, so importing this module costs
nothing and an optional extra is needed only when its backend is built. The backends are
registered by reference in ``faithjudge.judges`` (``JUDGES``); the ``openai-batch``
backend's factory is the Batch API route's own (``faithjudge.provider_batch.judge``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, SecretStr

from faithjudge.judges.base import Judge
from faithjudge.settings import Settings

__all__ = [
    "OpenAIOptions",
    "PromptCacheOptions",
    "lexicon",
    "litellm",
    "openai",
    "replay",
]


class PromptCacheOptions(BaseModel):
    """What the chat backends (``openai``, ``openai-batch``, ``litellm``) read about the
    provider's prompt cache."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt_cache_key: bool = True
    """Send OpenAI's ``prompt_cache_key`` (a hash of the metric and the question), which routes
    calls that share a prompt prefix to the same cache; a server that refuses it is learnt and
    asked without it. ``false`` never sends it."""


class OpenAIOptions(PromptCacheOptions):
    """What the ``openai`` and ``openai-batch`` backends read: ``FAITHJUDGE_<FIELD>`` or
    ``Settings(<field>=...)``. Without them the SDK's own ``OPENAI_BASE_URL`` and
    ``OPENAI_API_KEY`` apply (``faithjudge.transport.providers.make_openai_client``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    openai_base_url: str | None = None
    """Overrides ``OPENAI_BASE_URL``; any OpenAI-compatible server (vLLM, SGLang, Ollama...)."""
    openai_api_key: SecretStr | None = None
    """Overrides ``OPENAI_API_KEY``."""
    http_transport: Literal["aiohttp", "httpx"] = "aiohttp"
    """``aiohttp`` (measured faster under high concurrency) or ``httpx``."""


def openai(target: str, settings: Settings) -> Judge:
    from faithjudge.judges.openai import OpenAIJudge
    from faithjudge.transport.providers import make_openai_client

    options = settings.options(OpenAIOptions)
    key = options.openai_api_key.get_secret_value() if options.openai_api_key else None
    client = make_openai_client(
        base_url=options.openai_base_url,
        api_key=key,
        timeout=settings.timeout_s,
        transport=options.http_transport,
    )
    return OpenAIJudge(
        target,
        client=client,
        temperature=settings.temperature,
        seed=settings.seed,
        max_tokens=settings.max_tokens,
        response_format=settings.response_format,
        send_prompt_cache_key=options.prompt_cache_key,
    )


def litellm(target: str, settings: Settings) -> Judge:
    from faithjudge.judges.litellm import LiteLLMJudge

    return LiteLLMJudge(
        target,
        temperature=settings.temperature,
        seed=settings.seed,
        max_tokens=settings.max_tokens,
        timeout=settings.timeout_s,
        response_format=settings.response_format,
        send_prompt_cache_key=settings.options(PromptCacheOptions).prompt_cache_key,
    )


def replay(target: str, settings: Settings) -> Judge:
    from faithjudge.judges.replay import ReplayJudge

    path, sep, judge = target.rpartition("#")
    if not sep:
        path, judge = target, ""
    return ReplayJudge(path, judge=judge or None)


def lexicon(target: str, settings: Settings) -> Judge:
    from faithjudge.judges.lexicon import LexiconJudge

    return LexiconJudge(target)
