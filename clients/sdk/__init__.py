"""Python client of the FaithJudge REST API (sync and async, over httpx).

``FaithJudgeClient`` and ``AsyncFaithJudgeClient`` score single CoTs, upload batches (streamed),
wait on them with a progress callback, stream and download their results, fetch reports and
list or cancel batches. The bodies are the service's own models (``service.wire``,
``service.contracts``); errors are the typed tree documented in ``clients.sdk.errors``.
"""

from clients.sdk.aio import AsyncFaithJudgeClient, AsyncProgressCallback
from clients.sdk.client import FaithJudgeClient, ProgressCallback
from clients.sdk.errors import (
    ApiError,
    AuthError,
    ClientError,
    Conflict,
    FaithJudgeError,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    RateLimited,
    ServerError,
    TransportError,
    UnsupportedMediaType,
    ValidationFailed,
    WaitTimeout,
)
from service.contracts import ItemResult, ScoreRequest
from service.transport.resilience import RetryPolicy
from service.wire import (
    TERMINAL_STATES,
    BatchAccepted,
    BatchPage,
    BatchStatus,
    LineRejection,
    Problem,
)

__all__ = [
    "TERMINAL_STATES",
    "ApiError",
    "AsyncFaithJudgeClient",
    "AsyncProgressCallback",
    "AuthError",
    "BatchAccepted",
    "BatchPage",
    "BatchStatus",
    "ClientError",
    "Conflict",
    "FaithJudgeClient",
    "FaithJudgeError",
    "ItemResult",
    "LineRejection",
    "NotFound",
    "PayloadTooLarge",
    "Problem",
    "ProgressCallback",
    "ProtocolError",
    "RateLimited",
    "RetryPolicy",
    "ScoreRequest",
    "ServerError",
    "TransportError",
    "UnsupportedMediaType",
    "ValidationFailed",
    "WaitTimeout",
]
