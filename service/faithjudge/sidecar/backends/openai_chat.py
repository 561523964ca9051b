"""The ``openai`` backend: a VLM behind any OpenAI-compatible server (vLLM, SGLang, ...).

Images travel as base64 PNG data URIs in ``image_url`` parts, before the text of their turn.
Calls go through the judge's transport (``faithjudge.transport.resilience.JudgeCaller``): the
same concurrency limiter, backoff policy (METHODS §1.14: base 1 s, x2, 5 retries, jitter) and
transient-error classification as the judge, and the same client factory
(``faithjudge.transport.providers.make_openai_client``, SDK retries off). Generation is greedy:
temperature 0 and a fixed seed where the server honours one.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import orjson
from faithjudge_client.retry import RetryPolicy

from faithjudge.errors import JudgeError
from faithjudge.sidecar.backends.base import Conversation, Generation
from faithjudge.transport.base import JudgeResponse
from faithjudge.transport.chat import max_tokens_field_for
from faithjudge.transport.openai_errors import openai_retry_after, openai_should_retry
from faithjudge.transport.resilience import JudgeCaller

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from PIL import Image

__all__ = [
    "ChatCall",
    "OpenAIVLMBackend",
    "chat_messages",
    "generate_through",
    "png_data_uri",
    "read_completion",
]


def png_data_uri(image: Image.Image) -> str:
    """The image as a ``data:image/png;base64,...`` URI (lossless: overlays stay exact)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def chat_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """Chat-completions messages; turns with images get a content list, others plain text."""
    messages: list[dict[str, Any]] = []
    for turn in conversation:
        if not turn.images:
            messages.append({"role": turn.role, "content": turn.text})
            continue
        parts: list[dict[str, Any]] = [
            {"type": "image_url", "image_url": {"url": png_data_uri(img)}} for img in turn.images
        ]
        parts.append({"type": "text", "text": turn.text})
        messages.append({"role": turn.role, "content": parts})
    return messages


def read_completion(raw: str) -> Generation:
    """A ``Generation`` from a chat-completion body; a body that is not one is an error."""
    try:
        data = orjson.loads(raw)
        choice = data["choices"][0]
        text = (choice.get("message") or {}).get("content")
        finish = choice.get("finish_reason")
        usage = data.get("usage") or {}
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError) as exc:
        return Generation("", "error", error=f"the server's reply is not a chat completion ({exc})")
    return Generation(
        text=text if isinstance(text, str) else "",
        finish_reason="length" if finish == "length" else "stop",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
    )


@dataclass(frozen=True, slots=True)
class ChatCall:
    """One wire-ready chat-completions body: the request type of the sidecar's ``JudgeCaller``,
    which hands it to the target's ``judge`` as is."""

    body: Mapping[str, Any]


async def generate_through(
    caller: JudgeCaller[ChatCall],
    conversations: Sequence[Conversation],
    body: Callable[[list[dict[str, Any]]], dict[str, Any]],
) -> list[Generation]:
    """Run every conversation as one chat call through ``caller``, concurrently, in order.

    A call that stays failed after the retries becomes an ``error`` generation for its item
    alone; the others go on.
    """
    results: list[Generation] = [Generation("", "error", error="not run")] * len(conversations)

    async def one(index: int, conversation: Conversation) -> None:
        # PNG encoding of a radiograph takes tens of ms: keep it off the event loop.
        messages = await anyio.to_thread.run_sync(chat_messages, conversation)
        try:
            response = await caller.call(ChatCall(body(messages)))
        except JudgeError as exc:
            results[index] = Generation("", "error", error=str(exc)[:500])
            return
        results[index] = read_completion(response.text)

    async with anyio.create_task_group() as group:
        for index, conversation in enumerate(conversations):
            group.start_soon(one, index, conversation)
    return results


class _ChatTarget:
    """The server as ``JudgeCaller`` sees it: retry classification plus one raw call."""

    def __init__(self, client: AsyncOpenAI, model: str) -> None:
        self._client = client
        self._model = model

    @property
    def id(self) -> str:
        return f"openai:{self._model}"

    def settings(self) -> Mapping[str, Any]:
        return {"model": self._model, "base_url": str(self._client.base_url)}

    def cache_key_material(self, request: ChatCall) -> Mapping[str, Any] | None:
        return None  # every generation is a fresh call; the model under test is never cached

    def should_retry(self, exc: BaseException) -> bool:
        return openai_should_retry(exc)

    def retry_after(self, exc: BaseException) -> float | None:
        return openai_retry_after(exc)

    async def judge(self, request: ChatCall) -> JudgeResponse:
        raw = await self._client.post(
            "/chat/completions", cast_to=bytes, content=orjson.dumps(request.body)
        )
        return JudgeResponse(text=raw.decode("utf-8", "replace"), model=self._model)

    async def aclose(self) -> None:
        await self._client.close()


class OpenAIVLMBackend:
    """A VLM served through the OpenAI chat-completions API."""

    def __init__(
        self,
        model: str,
        *,
        client: AsyncOpenAI,
        max_tokens: int = 2048,
        temperature: float = 0.0,
        seed: int | None = 0,
        concurrency: int = 100,
        policy: RetryPolicy | None = None,
        caller: JudgeCaller[ChatCall] | None = None,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty string")
        if max_tokens < 1 or concurrency < 1:
            raise ValueError("max_tokens and concurrency must be >= 1")
        self._model = model
        self._target = _ChatTarget(client, model)
        self._caller = caller or JudgeCaller(
            self._target,
            limiter=anyio.CapacityLimiter(concurrency),
            policy=policy or RetryPolicy(),
        )
        self._base_url = str(client.base_url)
        self._max_tokens_field = max_tokens_field_for(self._base_url)
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._seed = seed
        self._concurrency = concurrency

    @property
    def id(self) -> str:
        return f"openai:{self._model}"

    @property
    def model(self) -> str:
        return self._model

    @property
    def caller(self) -> JudgeCaller[ChatCall]:
        return self._caller

    def settings(self) -> Mapping[str, Any]:
        policy = self._caller.policy
        return {
            "backend": "openai",
            "model": self._model,
            "base_url": self._base_url,
            "temperature": self._temperature,
            "seed": self._seed,
            "max_tokens": self._max_tokens,
            "concurrency": self._concurrency,
            "retries": {"max": policy.max_retries, "base_s": policy.base, "x": policy.multiplier},
            "image_encoding": "png",
        }

    def _body(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": messages,
            "temperature": self._temperature,
            self._max_tokens_field: self._max_tokens,
        }
        if self._seed is not None:
            body["seed"] = self._seed
        return body

    async def generate(self, conversations: Sequence[Conversation]) -> list[Generation]:
        return await generate_through(self._caller, conversations, self._body)

    async def aclose(self) -> None:
        await self._target.aclose()
