"""The Batch API's wire format: a request line out, what an output or error line says back.

A request line is ``{"custom_id": KEY, "method": "POST", "url": "/v1/chat/completions",
"body": BODY}`` where ``KEY`` is the response-cache key of the request and ``BODY`` exactly what
the live ``openai`` backend would send, so an answer that comes back through a batch is stored
where the live route would have stored it and is verified the same way when it is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from faithjudge.errors import JudgeError
from faithjudge.transport.base import JudgeResponse
from faithjudge.transport.chat import completion_from_data, json_default

__all__ = [
    "BATCH_ENDPOINT",
    "COMPLETION_WINDOW",
    "RequestOutcome",
    "outcome_of_line",
    "request_line",
]

BATCH_ENDPOINT: Final = "/v1/chat/completions"
COMPLETION_WINDOW: Final = "24h"
_RETRYABLE_CODES = frozenset({"batch_expired", "rate_limit_exceeded", "server_error", "timeout"})


def request_line(key: str, body: Mapping[str, Any]) -> bytes:
    """One Batch API input line (newline-terminated) for the request cached under ``key``."""
    line = {"custom_id": key, "method": "POST", "url": BATCH_ENDPOINT, "body": body}
    return orjson.dumps(line, default=json_default, option=orjson.OPT_APPEND_NEWLINE)


@dataclass(frozen=True, slots=True)
class RequestOutcome:
    """What one output or error line says about its request."""

    key: str
    response: JudgeResponse | None = None
    status: int | None = None
    error: str | None = None
    retryable: bool = False


def _retryable_status(status: int | None) -> bool:
    return status is not None and (status in (408, 429) or status >= 500)


def outcome_of_line(raw: bytes) -> RequestOutcome:
    """Read one output/error file line (OpenAI's format, which vLLM's batch runner also writes)."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("custom_id"), str):
        raise ValueError("no custom_id")
    key = data["custom_id"]
    response = data.get("response") or None
    error = data.get("error") or None
    if isinstance(response, dict) and "choices" in response and "body" not in response:
        response = {"status_code": 200, "body": response}  # a bare completion, no envelope
    if isinstance(response, dict):
        status = response.get("status_code")
        status = status if isinstance(status, int) and not isinstance(status, bool) else None
        body = response.get("body")
        if status == 200 and isinstance(body, dict):
            try:
                answer = completion_from_data(body)
            except JudgeError as exc:
                return RequestOutcome(key, status=200, error=str(exc))
            if not answer.text.strip():
                # cached, an answer without content ("choices": []) would fail for good; as a
                # failed request it is asked again
                return RequestOutcome(
                    key, status=200, error="the answer carries no message content", retryable=True
                )
            return RequestOutcome(key, response=answer)
        message = _error_message(body) or f"HTTP {status}"
        return RequestOutcome(
            key, status=status, error=message, retryable=_retryable_status(status)
        )
    if isinstance(error, dict):
        code = str(error.get("code") or "")
        message = str(error.get("message") or code or "the request failed")
        return RequestOutcome(
            key, error=f"{code}: {message}" if code else message, retryable=code in _RETRYABLE_CODES
        )
    raise ValueError("neither a response nor an error")


def _error_message(body: Any) -> str | None:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return None
