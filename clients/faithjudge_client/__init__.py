"""Python client of the FaithJudge REST API (sync and async, over httpx).

``Client`` (``FaithJudgeClient``) and ``AsyncClient`` (``AsyncFaithJudgeClient``) score single
CoTs, submit jobs (JSONL uploads, streamed), wait on them with a progress callback, stream and
download their results, fetch reports and list or cancel jobs. The ``Batch*`` names are the older
names of the ``Job*`` classes. The bodies are the service's own models
(``faithjudge_client.bodies``, ``faithjudge_client.lines``); errors are the typed tree documented
in ``faithjudge_client.errors``.

The names below load on first use: the service imports the wire contracts of this package on
every run (``faithjudge_client.lines``), and that should not cost it the HTTP client's imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from faithjudge_client._version import __version__

if TYPE_CHECKING:
    from faithjudge_client.aio import AsyncFaithJudgeClient, AsyncProgressCallback
    from faithjudge_client.bodies import (
        TERMINAL_STATES,
        BatchAccepted,
        BatchPage,
        BatchStatus,
        JobAccepted,
        JobPage,
        JobRetry,
        JobStatus,
        JobTokens,
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

_HOMES = {
    "aio": ("AsyncFaithJudgeClient", "AsyncProgressCallback"),
    "bodies": ("TERMINAL_STATES", "BatchAccepted", "BatchPage", "BatchStatus", "JobAccepted",
               "JobPage", "JobRetry", "JobStatus", "JobTokens", "LineRejection", "Problem"),
    "client": ("FaithJudgeClient", "ProgressCallback"),
    "errors": ("ApiError", "AuthError", "ClientError", "Conflict", "FaithJudgeError", "NotFound",
               "PayloadTooLarge", "ProtocolError", "RateLimited", "ServerError", "TransportError",
               "UnsupportedMediaType", "ValidationFailed", "WaitTimeout"),
    "lines": ("ItemResult", "ScoreRequest"),
    "retry": ("RetryPolicy",),
}  # fmt: skip
_ALIASES = {"Client": "FaithJudgeClient", "AsyncClient": "AsyncFaithJudgeClient"}
_WHERE = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    target = _ALIASES.get(name, name)
    module = _WHERE.get(target)
    if module is None:
        raise AttributeError(f"module 'faithjudge_client' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"faithjudge_client.{module}"), target)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


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
    "JobAccepted",
    "JobPage",
    "JobRetry",
    "JobStatus",
    "JobTokens",
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
