"""What the SDK raises: one tree under FaithJudge's ``FaithJudgeError``.

    FaithJudgeError                 the base of everything FaithJudge raises, SDK and service alike
    ├── UserInputError              a bad argument, file or line the caller can fix (``field``)
    ├── ConfigError                 no or a malformed server URL (the service adds its own cases)
    └── ClientError                 anything else the SDK raises
        ├── ApiError                the server answered with an error status (``status``,
        │   │                       ``problem``: the parsed ``application/problem+json``)
        │   ├── AuthError               401 / 403: missing or wrong API key
        │   ├── NotFound                404: unknown job, or another tenant's
        │   ├── Conflict                409: idempotency key reused with a different body
        │   ├── PayloadTooLarge         413: the body is over the server's limit
        │   ├── UnsupportedMediaType    415
        │   ├── ValidationFailed        422: ``errors`` lists each bad field or line
        │   ├── RateLimited             429: ``retry_after`` seconds, when the server said
        │   └── ServerError             5xx
        ├── TransportError          no answer: connection refused or lost, timeout, bad stream
        ├── ProtocolError           an answer that breaks the wire contract (not this API?)
        └── WaitTimeout             ``wait`` gave up before the job ended

Errors are chosen by status code alone (never by message text), in ``error_from_response``.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import ValidationError

from faithjudge_client.base_errors import ConfigError, FaithJudgeError, UserInputError
from faithjudge_client.bodies import PROBLEM_JSON, Problem, ProblemItem
from faithjudge_client.retry import parse_retry_after

__all__ = [
    "ApiError",
    "AuthError",
    "ClientError",
    "ConfigError",
    "Conflict",
    "FaithJudgeError",
    "NotFound",
    "PayloadTooLarge",
    "ProtocolError",
    "RateLimited",
    "ServerError",
    "TransportError",
    "UnsupportedMediaType",
    "UserInputError",
    "ValidationFailed",
    "WaitTimeout",
    "error_from_response",
]


_MAX_DETAIL = 500


class ClientError(FaithJudgeError):
    """Base of every error the SDK raises."""


class TransportError(ClientError):
    """The request got no HTTP answer (after the retries allowed); ``__cause__`` is httpx's."""


class ProtocolError(ClientError):
    """A success answer whose body is not what the contract says (wrong URL or version?)."""


class WaitTimeout(ClientError):
    """The job did not reach a terminal status in time; ``last`` is the last status seen."""

    def __init__(self, message: str, *, last: Any = None) -> None:
        super().__init__(message)
        self.last = last


class ApiError(ClientError):
    """The server answered ``status`` with ``problem`` (synthesised when the body was not one)."""

    def __init__(
        self, problem: Problem, *, headers: httpx.Headers | None = None, content: bytes = b""
    ) -> None:
        self.problem = problem
        self.status = problem.status
        self.headers = headers if headers is not None else httpx.Headers()
        self.content = content
        message = f"HTTP {problem.status} {problem.title}: {problem.detail}"
        if problem.errors:
            shown = "; ".join(_describe(item) for item in problem.errors[:5])
            more = len(problem.errors) - 5
            message += f" ({shown}{f'; and {more} more' if more > 0 else ''})"
        super().__init__(message)

    @property
    def detail(self) -> str:
        return self.problem.detail

    @property
    def errors(self) -> list[ProblemItem]:
        """Each offending field or job line, as the server listed them."""
        return list(self.problem.errors or [])


class AuthError(ApiError):
    """401 or 403: send ``Authorization: Bearer <key>`` with a key the server knows."""


class NotFound(ApiError):
    """404: no such job for this API key (another tenant's jobs are 404 too)."""


class Conflict(ApiError):
    """409: the ``Idempotency-Key`` was used before with a different body."""


class PayloadTooLarge(ApiError):
    """413: the request body is larger than the server accepts; split the file."""


class UnsupportedMediaType(ApiError):
    """415: the body's content type is not one the endpoint reads."""


class ValidationFailed(ApiError):
    """422: the body (or every line of a job) is invalid; ``errors`` says where and why."""


class RateLimited(ApiError):
    """429: the tenant is over its limit; ``retry_after`` is the wait the server asked for."""

    @property
    def retry_after(self) -> float | None:
        return parse_retry_after(self.headers)


class ServerError(ApiError):
    """5xx: the server (or a proxy in front of it) failed."""


_BY_STATUS: dict[int, type[ApiError]] = {
    401: AuthError,
    403: AuthError,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    422: ValidationFailed,
    429: RateLimited,
}


def error_from_response(response: httpx.Response) -> ApiError:
    """The typed error of an error ``response`` (its body must have been read)."""
    status = response.status_code
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(_problem_of(response), headers=response.headers, content=response.content)


def _problem_of(response: httpx.Response) -> Problem:
    media_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type in (PROBLEM_JSON, "application/json"):
        try:
            problem = Problem.model_validate_json(response.content)
        except ValidationError:
            pass
        else:
            # The status line is the truth; a body copied from elsewhere may say otherwise.
            if problem.status != response.status_code:
                problem = problem.model_copy(update={"status": response.status_code})
            return problem
    # Not a problem document (a proxy's HTML page, a plain-text error): keep a short excerpt.
    text = response.text.strip()
    return Problem(
        title=response.reason_phrase or "Error",
        status=response.status_code,
        detail=text[:_MAX_DETAIL] if text else "(empty body)",
        instance=response.request.url.path if _has_request(response) else None,
    )


def _has_request(response: httpx.Response) -> bool:
    try:
        response.request  # noqa: B018 - the property raises when the response has none
    except RuntimeError:
        return False
    return True


def _describe(item: ProblemItem) -> str:
    where = []
    if item.line is not None:
        where.append(f"line {item.line}")
    if item.field:
        where.append(item.field)
    return f"{' '.join(where)}: {item.reason}" if where else item.reason
