"""The chat-completions wire format, as the transport reads and writes it.

Shared by the live ``openai`` backend and the Batch API route, so both serialise requests and
read replies the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from faithjudge.errors import EvaluatorError
from faithjudge.transport.base import JudgeResponse, Usage

__all__ = ["completion_from_data", "json_default", "parse_completion"]


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
        usage = data.get("usage") or {}
        return JudgeResponse(
            text=text if isinstance(text, str) else "",
            model=data.get("model"),
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
            ),
            fingerprint=data.get("system_fingerprint"),
        )
    except (AttributeError, TypeError, ValueError, IndexError, KeyError) as exc:
        raise _not_a_completion(exc, raw if raw is not None else orjson.dumps(data)) from exc


def _not_a_completion(exc: Exception, raw: bytes) -> EvaluatorError:
    return EvaluatorError(
        f"the server answered 200 but not with a chat completion ({exc})",
        status=200,
        body=raw[:2000].decode("utf-8", "replace"),
    )
