"""The ``litellm`` backend: hosted VLMs (Gemini, Claude, ...) through LiteLLM.

LiteLLM is the optional ``litellm`` extra, imported only when this backend is built
(``faithjudge.transport.providers.load_litellm`` explains how to install it when it is missing).
Its own retries are off; calls go through the same ``JudgeCaller`` as the ``openai`` backend,
with LiteLLM's transient errors classified as the judge's LiteLLM backend does
(``faithjudge.transport.openai_errors.LiteLLMErrors``). Provider
credentials are read by LiteLLM itself. Images are PNG data URIs in OpenAI's ``image_url``
format, which LiteLLM translates for each provider.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import anyio
import orjson
from faithjudge_client.retry import RetryPolicy

from faithjudge.sidecar.backends.base import Conversation, Generation
from faithjudge.sidecar.backends.openai_chat import ChatCall, generate_through
from faithjudge.transport.base import JudgeResponse
from faithjudge.transport.openai_errors import LiteLLMErrors
from faithjudge.transport.providers import load_litellm
from faithjudge.transport.resilience import JudgeCaller

__all__ = ["LiteLLMVLMBackend"]


class _LiteLLMTarget:
    def __init__(self, module: ModuleType, model: str, api_base: str | None, timeout: float):
        self._litellm = module
        self._model = model
        self._api_base = api_base
        self._timeout = timeout
        self._errors = LiteLLMErrors(module)

    @property
    def id(self) -> str:
        return f"litellm:{self._model}"

    def settings(self) -> Mapping[str, Any]:
        return {"model": self._model, "api_base": self._api_base}

    def cache_key_material(self, request: ChatCall) -> Mapping[str, Any] | None:
        return None

    def should_retry(self, exc: BaseException) -> bool:
        return self._errors.should_retry(exc)

    def retry_after(self, exc: BaseException) -> float | None:
        return self._errors.retry_after(exc)

    async def judge(self, request: ChatCall) -> JudgeResponse:
        body = dict(request.body)
        if self._api_base is not None:
            body["api_base"] = self._api_base
        result = await self._litellm.acompletion(num_retries=0, timeout=self._timeout, **body)
        # LiteLLM's ModelResponse has the chat-completion shape: read it like the openai reply.
        reply = result.model_dump() if hasattr(result, "model_dump") else result
        return JudgeResponse(text=orjson.dumps(reply, default=str).decode(), model=self._model)

    async def aclose(self) -> None:
        return None


class LiteLLMVLMBackend:
    """A hosted VLM reached through ``litellm.acompletion``."""

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = 2048,
        temperature: float = 0.0,
        seed: int | None = 0,
        api_base: str | None = None,
        timeout: float = 300.0,
        concurrency: int = 100,
        policy: RetryPolicy | None = None,
        litellm_module: ModuleType | None = None,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty string")
        module = litellm_module if litellm_module is not None else load_litellm()
        self._model = model
        self._target = _LiteLLMTarget(module, model, api_base, timeout)
        self._caller = JudgeCaller(
            self._target,
            limiter=anyio.CapacityLimiter(concurrency),
            policy=policy or RetryPolicy(),
        )
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._seed = seed
        self._api_base = api_base
        self._concurrency = concurrency
        self._version = getattr(module, "__version__", None)

    @property
    def id(self) -> str:
        return f"litellm:{self._model}"

    @property
    def model(self) -> str:
        return self._model

    def settings(self) -> Mapping[str, Any]:
        return {
            "backend": "litellm",
            "model": self._model,
            "api_base": self._api_base,
            "temperature": self._temperature,
            "seed": self._seed,
            "max_tokens": self._max_tokens,
            "concurrency": self._concurrency,
            "litellm_version": self._version,
            "image_encoding": "png",
        }

    def _body(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": messages,
            "temperature": self._temperature,
            "max_tokens": self._max_tokens,
        }
        if self._seed is not None:
            body["seed"] = self._seed
        return body

    async def generate(self, conversations: Sequence[Conversation]) -> list[Generation]:
        return await generate_through(self._caller, conversations, self._body)

    async def aclose(self) -> None:
        return None
