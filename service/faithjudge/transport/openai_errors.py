"""Which failures of an OpenAI-style API are worth another try, and after how long.

Decided by exception type and status code (and the ``Retry-After`` headers), never by the text
of a message. The judge's ``openai`` and ``litellm`` judges and the sidecar's VLM backends
classify their failures here, so a 429 means the same wait for all of them. LiteLLM's exception
classes subclass OpenAI's; ``LiteLLMErrors`` adds the transient ones that do not.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

import openai
from faithjudge_client.retry import parse_retry_after

from faithjudge.transport.judge_servers import status_of

__all__ = [
    "LiteLLMErrors",
    "openai_retry_after",
    "openai_should_retry",
]

# LiteLLM's names for transient failures; looked up on the module because the set differs
# slightly between releases.
_LITELLM_TRANSIENT = (
    "Timeout",
    "APIConnectionError",
    "RateLimitError",
    "ServiceUnavailableError",
    "InternalServerError",
    "BadGatewayError",
)


def openai_should_retry(exc: BaseException) -> bool:
    """Transient failures of an OpenAI-style API: 408, 429, 5xx, timeouts, connection errors."""
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return True
    if isinstance(exc, openai.RateLimitError | openai.InternalServerError):
        return True
    status = status_of(exc)
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


class LiteLLMErrors:
    """The retry classification of calls through one ``litellm`` module."""

    def __init__(self, litellm_module: ModuleType) -> None:
        transient = (getattr(litellm_module, name, None) for name in _LITELLM_TRANSIENT)
        self._transient: tuple[type[BaseException], ...] = tuple(
            t for t in transient if isinstance(t, type) and issubclass(t, BaseException)
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
