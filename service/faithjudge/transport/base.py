"""What the transport sends through and gets back: a call target and its raw response.

The transport never looks inside a request: ``JudgeCaller`` hands it to the target's ``judge``
and derives its cache key from ``cache_key_material``. So it is generic over the request type
(the pipeline's ``JudgeRequest``, the sidecar's ``ChatCall``) and owns only the response side,
which its cache stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = ["CallTarget", "JudgeResponse", "RequestT", "Usage"]

RequestT = TypeVar("RequestT", contravariant=True)
"""The request type a target accepts; the transport passes it through untouched."""


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True, slots=True)
class JudgeResponse:
    """Raw model output; ``attempts`` and ``cached`` are filled in by ``JudgeCaller``."""

    text: str
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    fingerprint: str | None = None
    attempts: int = 1
    cached: bool = False


@runtime_checkable
class CallTarget(Protocol[RequestT]):
    """One endpoint as ``JudgeCaller`` sees it: retry classification plus one raw call."""

    @property
    def id(self) -> str: ...

    def settings(self) -> Mapping[str, Any]:
        """Frozen settings that change the output (model, decoding, base URL); no secrets."""
        ...

    def cache_key_material(self, request: RequestT) -> Mapping[str, Any] | None:
        """The request exactly as it would be sent, or None when responses must not be cached."""
        ...

    def should_retry(self, exc: BaseException) -> bool:
        """True for transient failures (429, 5xx, timeouts, connection errors) only."""
        ...

    def retry_after(self, exc: BaseException) -> float | None:
        """Seconds the server asked us to wait before the next try, if it said so."""
        ...

    async def judge(self, request: RequestT) -> JudgeResponse: ...

    async def aclose(self) -> None: ...
