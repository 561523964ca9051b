"""The ``openai`` backend: chat completions against any OpenAI-compatible server.

The client is built elsewhere (``service/faithjudge/transport/providers.py`` owns credentials and
transport)
and injected, with the SDK's own retries off: retries, limits and caching wrap this class from
outside (``service/faithjudge/transport/resilience.py``). This module owns the wire format only.

The response format is strict ``json_schema`` by default. A server that rejects it with a 400
naming ``response_format`` (by the error's ``param``/``code`` fields, not its prose) is asked again
with ``json_object``, and so is every later call of this instance; the cache key material always
shows the format in use, so cached answers reflect what was really sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import openai
import orjson
from faithjudge_client.retry import parse_retry_after

from faithjudge.evaluators.base import JudgeRequest
from faithjudge.transport.base import JudgeResponse
from faithjudge.transport.chat import json_default, parse_completion

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "OpenAIEvaluator",
    "ResponseFormatMode",
    "chat_cache_material",
    "is_response_format_rejection",
    "json_default",
    "max_tokens_field_for",
    "openai_retry_after",
    "openai_should_retry",
    "parse_completion",
    "plain_json",
    "response_format_for",
]

ResponseFormatMode = Literal["json_schema", "json_object", "none"]
_MODES: tuple[str, ...] = ("json_schema", "json_object", "none")


def plain_json(value: Any) -> Any:
    """``value`` with read-only mappings and tuples turned into dicts and lists (SDK-safe)."""
    if isinstance(value, Mapping):
        return {k: plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    return value


def response_format_for(mode: str, request: JudgeRequest) -> dict[str, Any] | None:
    """The ``response_format`` body field for ``mode`` (None: send none).

    The schema is embedded as given (possibly a read-only mapping): serializers here use
    ``json_default``; pass the result through ``plain_json`` for any other JSON encoder.
    """
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {
                "name": request.schema_name,
                "schema": request.response_schema,
                "strict": True,
            },
        }
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def chat_cache_material(
    backend: str,
    *,
    base_url: str | None,
    model: str,
    request: JudgeRequest,
    temperature: float,
    seed: int | None,
    max_tokens: int,
    mode: str,
) -> dict[str, Any]:
    """What a chat-completions call sends, as the cache keys it (no timeouts, no retries)."""
    return {
        "backend": backend,
        "base_url": base_url,
        "model": model,
        "messages": [[m.role, m.content] for m in request.messages],
        "temperature": temperature,
        "seed": seed,
        "max_tokens": max_tokens,
        "response_format": response_format_for(mode, request),
    }


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def openai_should_retry(exc: BaseException) -> bool:
    """Transient failures of an OpenAI-style API: 408, 429, 5xx, timeouts, connection errors."""
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return True
    if isinstance(exc, openai.RateLimitError | openai.InternalServerError):
        return True
    status = _status_of(exc)
    return status is not None and (status in (408, 429) or status >= 500)


def openai_retry_after(exc: BaseException) -> float | None:
    """Seconds from the error response's ``retry-after-ms`` / ``retry-after`` header."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        return parse_retry_after(headers)
    except (TypeError, AttributeError):
        return None


def is_response_format_rejection(exc: BaseException) -> bool:
    """A 400 whose structured ``param``/``code`` fields blame the response format."""
    if _status_of(exc) != 400:
        return False
    for field_name in ("param", "code"):
        value = getattr(exc, field_name, None)
        if isinstance(value, str) and "response_format" in value.lower():
            return True
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            for field_name in ("param", "code"):
                value = inner.get(field_name)
                if isinstance(value, str) and "response_format" in value.lower():
                    return True
    return False


def max_tokens_field_for(base_url: str) -> str:
    """``max_completion_tokens`` for OpenAI and Azure OpenAI, ``max_tokens`` elsewhere.

    OpenAI's reasoning models refuse the deprecated ``max_tokens``; local servers (vLLM, SGLang,
    llama.cpp, Ollama) all accept it, while some ignore the newer name. The base URL is part of
    the cache key, so the key still says exactly what was sent.
    """
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "api.openai.com" or host.endswith((".openai.com", ".openai.azure.com")):
        return "max_completion_tokens"
    return "max_tokens"


class OpenAIEvaluator:
    """A frozen judge served through the OpenAI chat completions API."""

    def __init__(
        self,
        model: str,
        *,
        client: AsyncOpenAI,
        temperature: float = 0.0,
        seed: int | None = 0,
        max_tokens: int = 1024,
        response_format: ResponseFormatMode = "json_schema",
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty string")
        if response_format not in _MODES:
            raise ValueError(f"response_format must be one of {', '.join(_MODES)}")
        self._model = model
        self._client = client
        self._temperature = temperature
        self._seed = seed
        self._max_tokens = max_tokens
        self._mode: str = response_format
        self._base_url = str(client.base_url)
        self._max_tokens_field = max_tokens_field_for(self._base_url)

    @property
    def id(self) -> str:
        return f"openai:{self._model}"

    @property
    def client(self) -> AsyncOpenAI:
        """The SDK client (the Batch API route sends its files and batches through it)."""
        return self._client

    @property
    def response_format(self) -> str:
        """The response format now in use (``json_object`` after a fallback)."""
        return self._mode

    def settings(self) -> Mapping[str, Any]:
        return {
            "model": self._model,
            "base_url": self._base_url,
            "temperature": self._temperature,
            "seed": self._seed,
            "max_tokens": self._max_tokens,
            "max_tokens_field": self._max_tokens_field,
            "response_format": self._mode,
        }

    def cache_key_material(self, request: JudgeRequest) -> Mapping[str, Any] | None:
        return chat_cache_material(
            "openai",
            base_url=self._base_url,
            model=self._model,
            request=request,
            temperature=self._temperature,
            seed=self._seed,
            max_tokens=self._max_tokens,
            mode=self._mode,
        )

    def should_retry(self, exc: BaseException) -> bool:
        return openai_should_retry(exc)

    def retry_after(self, exc: BaseException) -> float | None:
        return openai_retry_after(exc)

    async def judge(self, request: JudgeRequest) -> JudgeResponse:
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        mode = self._mode
        try:
            return await self._create(messages, response_format_for(mode, request))
        except openai.BadRequestError as exc:
            if mode != "json_schema" or not is_response_format_rejection(exc):
                raise
        # This server does not take strict schemas: ask for plain JSON from now on.
        self._mode = "json_object"
        return await self._create(messages, response_format_for("json_object", request))

    def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        """The chat-completions body ``judge`` sends for ``request`` in the current format.

        The Batch API route writes exactly this body into its request lines, so a batch answer
        is the answer to the request the live route would have sent, under the same cache key.
        """
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        return self._body(messages, response_format_for(self._mode, request))

    def _body(
        self, messages: list[dict[str, str]], response_format: dict[str, Any] | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": messages,
            "temperature": self._temperature,
            self._max_tokens_field: self._max_tokens,
        }
        if self._seed is not None:
            body["seed"] = self._seed
        if response_format is not None:
            body["response_format"] = response_format
        return body

    async def _create(
        self, messages: list[dict[str, str]], response_format: dict[str, Any] | None
    ) -> JudgeResponse:
        body = self._body(messages, response_format)
        # The typed ``chat.completions.create`` runs every parameter, the JSON schema included,
        # through the SDK's TypedDict transform and builds pydantic models from the reply: half
        # the client CPU of a call on the aiohttp transport (measured ~4 ms vs ~2 ms). The body
        # here is already wire-ready, so it goes out through the SDK's documented ``post`` for
        # custom requests; the SDK still sends auth headers and raises its typed errors (429,
        # 5xx, timeouts, connection errors) exactly as ``create`` would.
        raw = await self._client.post(
            "/chat/completions", cast_to=bytes, content=orjson.dumps(body, default=json_default)
        )
        return parse_completion(raw)

    async def aclose(self) -> None:
        await self._client.close()
