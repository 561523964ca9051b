"""The chat-completions wire format, as the transport reads and writes it.

Shared by the live ``openai`` backend and the Batch API route, so both serialise requests and
read replies the same way; the prompt sets render into its ``Message`` and the sidecar's VLM
backends name their token limit as the judge does (``max_tokens_field_for``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import orjson

from faithjudge.errors import JudgeError
from faithjudge.transport.base import JudgeResponse, Usage
from faithjudge.transport.judge_servers import CONTEXT_SETTING

__all__ = [
    "CONTEXT_CUT_WORDS",
    "CONTEXT_FULL",
    "CompletionChunks",
    "Message",
    "StreamCutShort",
    "completion_from_data",
    "context_cut_note",
    "json_default",
    "max_tokens_field_for",
    "parse_completion",
    "usage_from",
]


@dataclass(frozen=True, slots=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


def json_default(value: Any) -> Any:
    """orjson ``default`` hook for read-only mappings."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def parse_completion(raw: bytes) -> JudgeResponse:
    """A ``JudgeResponse`` from a chat-completion reply body.

    A reply cut at max tokens (``finish_reason`` ``length``) is returned as it is: verification
    reports the truncated JSON as a parse failure, which the coverage report counts.
    """
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _not_a_completion(exc, raw) from exc
    return completion_from_data(data, raw)


def completion_from_data(data: Any, raw: bytes | None = None) -> JudgeResponse:
    """The same from a reply already decoded (a Batch API output line holds it decoded)."""
    try:
        choices = data.get("choices") or []
        text = (choices[0].get("message") or {}).get("content") if choices else None
        finish = choices[0].get("finish_reason") if choices else None
        return JudgeResponse(
            text=text if isinstance(text, str) else "",
            model=data.get("model"),
            usage=usage_from(data.get("usage") or {}),
            fingerprint=data.get("system_fingerprint"),
            finish_reason=finish if isinstance(finish, str) else None,
        )
    except (AttributeError, TypeError, ValueError, IndexError, KeyError) as exc:
        raise _not_a_completion(exc, raw if raw is not None else orjson.dumps(data)) from exc


def usage_from(usage: Mapping[str, Any]) -> Usage:
    """The token counts of a reply's ``usage`` object (unstreamed, or a stream's last chunk).

    The cached part of the prompt is where OpenAI, Azure, vLLM and LiteLLM's proxy put it,
    ``prompt_tokens_details.cached_tokens``, or DeepSeek's ``prompt_cache_hit_tokens``; it is
    never more than the prompt (a server that says otherwise is believed for the prompt).
    """
    prompt = int(usage.get("prompt_tokens") or 0)
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cached_tokens=min(int(cached or 0), prompt),
    )


CONTEXT_FULL = "context_length"
"""The finish reason recorded for a reply the server's context window cut: the server says
``length`` as for the token limit, and the transport tells the two apart (the reply held fewer
tokens than the limit, or prompt and reply filled the context)."""


CONTEXT_CUT_WORDS = "the reply filled the judge server's context window"
"""How ``context_cut_note`` begins (what a reader of failure details looks for)."""


def context_cut_note(n_ctx: int | None = None) -> str:
    """What a failure detail says of a reply cut by the server's context window."""
    window = f" ({n_ctx:,} tokens)" if n_ctx else ""
    return (
        f"{CONTEXT_CUT_WORDS}{window} before the token limit (finish_reason: length): raise "
        f"{CONTEXT_SETTING}; FAITHJUDGE_MAX_TOKENS cannot help"
    )


class StreamCutShort(JudgeError):
    """A streamed reply ended before the server said why it stopped (no ``finish_reason``):
    the server cut it, as llama-cpp-python does when another request is waiting. Worth another
    try, with fewer calls in flight. ``events`` counts the chunks that came: none at all is not
    a reply cut short but a call the server gave up before answering (llama-cpp-python ends a
    stream so when the prompt does not fit its context, its reason only in its log)."""

    def __init__(self, message: str, *, body: str | None = None, events: int = 0) -> None:
        super().__init__(message, body=body)
        self.events = events


class CompletionChunks:
    """A streamed chat completion (``stream: true``), assembled chunk by chunk.

    ``add`` takes each decoded ``data:`` payload of the event stream; ``response`` returns the
    reply as ``parse_completion`` would have read it unstreamed (text, model, usage when the
    server sends it, fingerprint, finish reason), or raises ``StreamCutShort`` when the stream
    ended without a ``finish_reason``. ``counted`` says whether the server sent token counts
    (llama-cpp-python sends none for a streamed reply).
    """

    __slots__ = ("_events", "_fingerprint", "_finish", "_model", "_parts", "_usage", "counted")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._model: str | None = None
        self._fingerprint: str | None = None
        self._finish: str | None = None
        self._usage = Usage()
        self._events = 0
        self.counted = False

    def add(self, chunk: Any) -> None:
        if not isinstance(chunk, Mapping):
            return
        self._events += 1
        model = chunk.get("model")
        if isinstance(model, str) and model:
            self._model = model
        fingerprint = chunk.get("system_fingerprint")
        if isinstance(fingerprint, str) and fingerprint:
            self._fingerprint = fingerprint
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self.counted = True
            self._usage = usage_from(usage)
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            content = delta.get("content") if isinstance(delta, Mapping) else None
            if isinstance(content, str):
                self._parts.append(content)
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self._finish = finish

    def response(self) -> JudgeResponse:
        text = "".join(self._parts)
        if self._finish is None:
            if self._events == 0:
                raise StreamCutShort(
                    "the server ended the stream before any reply, without saying why",
                    events=0,
                )
            raise StreamCutShort(
                f"the server ended the streamed reply after {len(text)} characters without "
                "saying why (no finish_reason): it cut the reply short",
                body=text[:2000] or None,
                events=self._events,
            )
        return JudgeResponse(
            text=text,
            model=self._model,
            usage=self._usage,
            fingerprint=self._fingerprint,
            finish_reason=self._finish,
        )


def _not_a_completion(exc: Exception, raw: bytes) -> JudgeError:
    return JudgeError(
        f"the server answered 200 but not with a chat completion ({exc})",
        status=200,
        body=raw[:2000].decode("utf-8", "replace"),
    )


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
