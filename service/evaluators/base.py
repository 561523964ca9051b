"""The evaluator protocol: one async call in, raw text out.

An evaluator knows its wire format and nothing else: concurrency, retries and caching wrap it
from outside (``clients/resilience.py``, ``clients/cache.py``), and verification of what it
returns happens in ``service/scoring/verdict.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from service.contracts import Metric

__all__ = ["Evaluator", "JudgeRequest", "JudgeResponse", "Message", "Usage"]


@dataclass(frozen=True, slots=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    """One grading call: the rendered prompt plus the structured inputs it was rendered from.

    ``messages`` and ``response_schema`` are what an LLM backend sends; ``inputs`` (cot,
    ground truth, KB entry, modification, context) serve offline and replay backends.
    ``item_id`` identifies the item for replay lookups; it never reaches an LLM.
    """

    metric: Metric
    messages: tuple[Message, ...]
    response_schema: Mapping[str, Any]
    schema_name: str
    inputs: Mapping[str, Any] = field(default_factory=dict)
    item_id: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True, slots=True)
class JudgeResponse:
    """Raw evaluator output; ``attempts`` and ``cached`` are filled in by the caller layer."""

    text: str
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    fingerprint: str | None = None
    attempts: int = 1
    cached: bool = False


@runtime_checkable
class Evaluator(Protocol):
    """A frozen judge. ``id`` looks like ``openai:gpt-5-2025-08-07`` or ``replay:FILE``."""

    @property
    def id(self) -> str: ...

    def settings(self) -> Mapping[str, Any]:
        """Frozen settings that change the output (model, decoding, base URL); no secrets."""
        ...

    def cache_key_material(self, request: JudgeRequest) -> Mapping[str, Any] | None:
        """The request exactly as it would be sent, or None when responses must not be cached."""
        ...

    def should_retry(self, exc: BaseException) -> bool:
        """True for transient failures (429, 5xx, timeouts, connection errors) only."""
        ...

    def retry_after(self, exc: BaseException) -> float | None:
        """Seconds the server asked us to wait before the next try, if it said so."""
        ...

    async def judge(self, request: JudgeRequest) -> JudgeResponse: ...

    async def aclose(self) -> None: ...
