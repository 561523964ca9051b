"""What the transport sends through and gets back: a call target and its raw response.

The transport never looks inside a request: ``JudgeCaller`` hands it to the target's ``judge``
and derives its cache key from ``cache_key_material``. So it is generic over the request type
(the pipeline's ``JudgeRequest``, the sidecar's ``ChatCall``) and owns only the response side,
which its cache stores.

A target may also carry these optional members, which ``JudgeCaller`` reads with defaults:

- ``paced`` (bool, default False): the server's parallelism is unknown (it runs on this machine
  or network), so the caller learns how many calls it takes at once
  (``faithjudge.transport.pacing``);
- ``timeout_s`` (float): how long the target waits in silence for its server;
- ``overloaded(exc) -> "silent" | "cut" | None``: the failure shows the server has more calls
  than it serves (a timeout, a streamed reply cut short: the server is then sent one call at a
  time, remembered under the ``base_url`` and ``model`` its ``settings()`` name);
- ``explain(exc) -> str | None``: what the user should know about a failure (the server's own
  message, the setting that bounds it), added to the recorded failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = ["CallTarget", "JudgeResponse", "RequestChanged", "RequestT", "Usage"]

RequestT = TypeVar("RequestT", contravariant=True)
"""The request type a target accepts; the transport passes it through untouched."""


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """The part of ``prompt_tokens`` the provider read from its prompt cache (OpenAI's
    ``usage.prompt_tokens_details.cached_tokens``), billed at the cached-input price."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_tokens + other.cached_tokens,
        )


@dataclass(frozen=True, slots=True)
class JudgeResponse:
    """Raw model output; ``attempts`` and ``cached`` are filled in by ``JudgeCaller``."""

    text: str
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    fingerprint: str | None = None
    attempts: int = 1
    cached: bool = False
    finish_reason: str | None = None
    """Why the reply ended, as the server said (``stop``; ``length``: cut at the token limit)."""
    response_format: str | None = None
    """The response format the reply was asked in (``faithjudge.transport.judge_servers``)."""
    latency_s: float | None = None
    """Seconds from sending the call that was answered to its answer (None: not called now,
    the answer came from the cache or another call)."""


class RequestChanged(Exception):
    """Raised by a target's ``judge`` when what it sends for a request changed since the caller
    keyed it: it learnt that its server refuses a response format. The caller keys the request
    again, looks in the cache and among the calls in flight, and only then calls again, so an
    answer is always cached under the request that was really sent."""


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
