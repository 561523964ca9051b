"""The ``litellm`` backend: providers that are not OpenAI-compatible, through LiteLLM.

LiteLLM is an optional extra (``pip install 'faithjudge[litellm]'``, pinned to one version) and
is imported only when this backend is built. LiteLLM reads its providers' credentials itself;
its own retries are switched off (``num_retries=0``) because ours live in
``service/faithjudge/transport/resilience.py``. Failures are classified by type and status code
in the transport (``faithjudge.transport.openai_errors.LiteLLMErrors``), as the ``openai``
backend's are.

Where a call goes is resolved once, when the backend is built
(``faithjudge.transport.providers.litellm_route``): LiteLLM's provider for the model and the
endpoint it would take from the environment. The endpoint is passed to every call explicitly and
both are part of the cache key, so a run pointed at another server asks that server. The
response format is learnt per endpoint and model exactly as for the ``openai`` backend, and so is
a refusal of ``prompt_cache_key`` (LiteLLM refuses a parameter its provider does not take).
Cached prompt tokens are read from LiteLLM's ``usage.prompt_tokens_details.cached_tokens``,
where it puts every provider's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import ModuleType
from typing import Any

from faithjudge.judges.base import JudgeRequest
from faithjudge.judges.openai import (
    Overload,
    ResponseFormatMode,
    chat_cache_material,
    explain_chat_failure,
    plain_json,
    prompt_cache_key,
    response_format_for,
)
from faithjudge.transport.base import JudgeResponse, RequestChanged, Usage
from faithjudge.transport.chat import usage_from
from faithjudge.transport.judge_servers import (
    RESPONSE_FORMATS,
    is_local_server,
    refuses_prompt_cache_key,
    refuses_response_format,
    server_memo,
)
from faithjudge.transport.openai_errors import LiteLLMErrors
from faithjudge.transport.providers import litellm_route, load_litellm

__all__ = ["LiteLLMJudge"]


class LiteLLMJudge:
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
        response_format: ResponseFormatMode = "auto",
        litellm_module: ModuleType | None = None,
        send_prompt_cache_key: bool = True,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty string")
        if response_format != "auto" and response_format not in RESPONSE_FORMATS:
            raise ValueError(
                f"response_format must be auto or one of {', '.join(RESPONSE_FORMATS)}"
            )
        self._litellm = litellm_module if litellm_module is not None else load_litellm()
        self._model = model
        self._temperature = temperature
        self._seed = seed
        self._max_tokens = max_tokens
        route = litellm_route(self._litellm, model, api_base)
        self._provider = route.provider
        self._api_base = route.api_base
        self._timeout = timeout
        self._setting = response_format
        self._forced = None if response_format == "auto" else response_format
        self._send_cache_key = send_prompt_cache_key
        # keyed like the openai backend's: the same server refuses the same formats
        self._server = server_memo(self._api_base or f"litellm:{self._provider}", model)
        self._errors = LiteLLMErrors(self._litellm)
        self.paced = is_local_server(self._api_base)
        """An endpoint on this machine or network: the caller learns how many calls it takes."""

    @property
    def id(self) -> str:
        return f"litellm:{self._model}"

    @property
    def response_format(self) -> str:
        """The response format requests are sent in now."""
        return self._forced or self._server.response_format

    @property
    def timeout_s(self) -> float:
        return self._timeout

    def settings(self) -> Mapping[str, Any]:
        return {
            "model": self._model,
            "provider": self._provider,
            "base_url": self._api_base,
            "temperature": self._temperature,
            "seed": self._seed,
            "max_tokens": self._max_tokens,
            "response_format": self._setting,
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
            mode=self.response_format,
            route={"provider": self._provider},
        )

    def should_retry(self, exc: BaseException) -> bool:
        if refuses_response_format(exc) or refuses_prompt_cache_key(exc):
            return False  # the same request would be refused again
        return self._errors.should_retry(exc)

    def retry_after(self, exc: BaseException) -> float | None:
        return self._errors.retry_after(exc)

    def overloaded(self, exc: BaseException) -> Overload | None:
        timeout = getattr(self._litellm, "Timeout", None)
        if isinstance(timeout, type) and isinstance(exc, timeout):
            return "silent"
        return None

    def explain(self, exc: BaseException) -> str | None:
        return explain_chat_failure(exc, timeout=self._timeout, forced=self._forced)

    async def judge(self, request: JudgeRequest) -> JudgeResponse:
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        mode = self.response_format
        response_format = response_format_for(mode, request)
        try:
            response = await self._complete_keyed(messages, response_format, request)
        except Exception as exc:
            if self._forced is None and refuses_response_format(exc) and self._server.refused(mode):
                raise RequestChanged(
                    f"{self._api_base or self._provider} refuses response_format {mode}"
                ) from exc
            raise
        return replace(response, response_format=mode)

    async def _complete_keyed(
        self,
        messages: list[dict[str, str]],
        response_format: dict[str, Any] | None,
        request: JudgeRequest,
    ) -> JudgeResponse:
        """The reply, asked with ``prompt_cache_key`` unless the endpoint refused it; a refusal
        is learnt for the endpoint and the call sent again without it, within the attempt."""
        if not self._send_cache_key or self._server.prompt_cache_key_refused:
            return await self._complete(messages, response_format)
        try:
            return await self._complete(messages, response_format, prompt_cache_key(request))
        except Exception as exc:
            if not refuses_prompt_cache_key(exc):
                raise
            self._server.prompt_cache_key_refused = True
        return await self._complete(messages, response_format)

    async def _complete(
        self,
        messages: list[dict[str, str]],
        response_format: dict[str, Any] | None,
        cache_key: str | None = None,
    ) -> JudgeResponse:
        kwargs: dict[str, Any] = {}
        if cache_key is not None:
            kwargs["prompt_cache_key"] = cache_key
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
        text, finish = "", None
        if choices:
            text = getattr(choices[0].message, "content", None) or ""
            finish = getattr(choices[0], "finish_reason", None)
        return JudgeResponse(
            text=text,
            model=getattr(result, "model", None),
            usage=_usage_of(getattr(result, "usage", None)),
            fingerprint=getattr(result, "system_fingerprint", None),
            finish_reason=finish if isinstance(finish, str) else None,
        )

    async def aclose(self) -> None:
        # LiteLLM keeps module-level HTTP clients that it owns and closes itself.
        return None


def _usage_of(usage: Any) -> Usage:
    """The token counts of LiteLLM's ``Usage``: it writes every provider's cached prompt tokens
    (Anthropic's ``cache_read_input_tokens``, DeepSeek's ``prompt_cache_hit_tokens``) into
    OpenAI's ``prompt_tokens_details.cached_tokens``, where the chat wire keeps them too."""
    if usage is None:
        return Usage()
    if isinstance(usage, Mapping):
        return usage_from(usage)
    details = getattr(usage, "prompt_tokens_details", None)
    cached = (
        details.get("cached_tokens")
        if isinstance(details, Mapping)
        else getattr(details, "cached_tokens", None)
    )
    return usage_from(
        {
            "prompt_tokens": getattr(usage, "prompt_tokens", 0),
            "completion_tokens": getattr(usage, "completion_tokens", 0),
            "prompt_tokens_details": {"cached_tokens": cached},
        }
    )
