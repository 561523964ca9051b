"""Python client of the FaithJudge REST API (sync and async, over httpx).

``Client`` (``FaithJudgeClient``) and ``AsyncClient`` (``AsyncFaithJudgeClient``) score single
CoTs, upload batches (streamed),
wait on them with a progress callback, stream and download their results, fetch reports and
list or cancel batches. The bodies are the service's own models (``faithjudge_client.bodies``,
``faithjudge_client.lines``); errors are the typed tree documented in ``faithjudge_client.errors``.
"""

from faithjudge_client._version import __version__
from faithjudge_client.aio import AsyncFaithJudgeClient, AsyncProgressCallback
from faithjudge_client.bodies import (
    TERMINAL_STATES,
    BatchAccepted,
    BatchPage,
    BatchStatus,
    LineRejection,
    Problem,
)
from faithjudge_client.client import FaithJudgeClient, ProgressCallback
from faithjudge_client.errors import (
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
from faithjudge_client.lines import ItemResult, ScoreRequest
from faithjudge_client.retry import RetryPolicy

Client = FaithJudgeClient
AsyncClient = AsyncFaithJudgeClient

__all__ = [
    "TERMINAL_STATES",
    "ApiError",
    "AsyncClient",
    "AsyncFaithJudgeClient",
    "AsyncProgressCallback",
    "AuthError",
    "BatchAccepted",
    "BatchPage",
    "BatchStatus",
    "Client",
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
    "__version__",
]
