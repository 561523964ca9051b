"""The ``litellm`` backend: providers that are not OpenAI-compatible, through LiteLLM.

LiteLLM is an optional extra (``pip install 'faithjudge[litellm]'``, pinned to one version) and
is imported only when this backend is built. LiteLLM reads its providers' credentials itself;
its own retries are switched off (``num_retries=0``) because ours live in
``service/faithjudge/transport/resilience.py``. LiteLLM's exception classes subclass OpenAI's, so
failures
are classified the same way as the ``openai`` backend does, by type and status code.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from faithjudge_client.retry import parse_retry_after

from faithjudge.evaluators.base import JudgeRequest
from faithjudge.evaluators.openai import (
    ResponseFormatMode,
    chat_cache_material,
    is_response_format_rejection,
    openai_retry_after,
    openai_should_retry,
    plain_json,
    response_format_for,
)
from faithjudge.transport.base import JudgeResponse, Usage
from faithjudge.transport.providers import load_litellm

__all__ = ["LiteLLMEvaluator"]

# LiteLLM's names for transient failures; looked up on the module because the set differs
# slightly between releases.
_TRANSIENT = (
    "Timeout",
    "APIConnectionError",
    "RateLimitError",
    "ServiceUnavailableError",
    "InternalServerError",
    "BadGatewayError",
)


class LiteLLMEvaluator:
    """A frozen judge reached through ``litellm.acompletion``."""

    def __init__(
        self,
        model: str,
        *,
        temperature: float = 0.0,
        seed: int | None = 0,
        max_tokens: int = 1024,
        api_base: str | None = None,
        timeout: float = 60.0,
        response_format: ResponseFormatMode = "json_schema",
        litellm_module: ModuleType | None = None,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty string")
        self._litellm = litellm_module if litellm_module is not None else load_litellm()
        self._model = model
        self._temperature = temperature
        self._seed = seed
        self._max_tokens = max_tokens
        self._api_base = api_base
        self._timeout = timeout
        self._mode: str = response_format
        transient = (getattr(self._litellm, name, None) for name in _TRANSIENT)
        self._transient: tuple[type[BaseException], ...] = tuple(
            t for t in transient if isinstance(t, type) and issubclass(t, BaseException)
        )

    @property
    def id(self) -> str:
        return f"litellm:{self._model}"

    def settings(self) -> Mapping[str, Any]:
        return {
            "model": self._model,
            "base_url": self._api_base,
            "temperature": self._temperature,
            "seed": self._seed,
            "max_tokens": self._max_tokens,
            "response_format": self._mode,
            "litellm_version": getattr(self._litellm, "__version__", None),
        }

    def cache_key_material(self, request: JudgeRequest) -> Mapping[str, Any] | None:
        return chat_cache_material(
            "litellm",
            base_url=self._api_base,
            model=self._model,
            request=request,
            temperature=self._temperature,
            seed=self._seed,
            max_tokens=self._max_tokens,
            mode=self._mode,
        )

    def should_retry(self, exc: BaseException) -> bool:
        if self._transient and isinstance(exc, self._transient):
            return True
        return openai_should_retry(exc)

    def retry_after(self, exc: BaseException) -> float | None:
        seconds = openai_retry_after(exc)
        # LiteLLM also attaches the provider's headers as plain dicts of any case.
        for name in ("headers", "litellm_response_headers"):
            if seconds is not None:
                break
            headers = getattr(exc, name, None)
            if isinstance(headers, Mapping):
                seconds = parse_retry_after({str(k).lower(): v for k, v in headers.items()})
        return seconds

    async def judge(self, request: JudgeRequest) -> JudgeResponse:
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        mode = self._mode
        try:
            return await self._complete(messages, response_format_for(mode, request))
        except Exception as exc:
            if mode != "json_schema" or not is_response_format_rejection(exc):
                raise
        self._mode = "json_object"
        return await self._complete(messages, response_format_for("json_object", request))

    async def _complete(
        self, messages: list[dict[str, str]], response_format: dict[str, Any] | None
    ) -> JudgeResponse:
        kwargs: dict[str, Any] = {}
        if response_format is not None:
            kwargs["response_format"] = plain_json(response_format)
        if self._seed is not None:
            kwargs["seed"] = self._seed
        if self._api_base is not None:
            kwargs["api_base"] = self._api_base
        result = await self._litellm.acompletion(
            model=self._model,
            messages=messages,
            temperature=self._temperature,
            max_tokens=self._max_tokens,
            num_retries=0,
            timeout=self._timeout,
            **kwargs,
        )
        choices = getattr(result, "choices", None) or []
        text = ""
        if choices:
            text = getattr(choices[0].message, "content", None) or ""
        usage = getattr(result, "usage", None)
        return JudgeResponse(
            text=text,
            model=getattr(result, "model", None),
            usage=Usage(
                prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            ),
            fingerprint=getattr(result, "system_fingerprint", None),
        )

    async def aclose(self) -> None:
        # LiteLLM keeps module-level HTTP clients that it owns and closes itself.
        return None
