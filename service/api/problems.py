"""Errors as ``application/problem+json``: one mapping from exceptions to HTTP statuses.

Nothing reaches a client as a traceback or a bare 500 page: an unexpected exception is logged
(without request bodies) and answered with a generic problem.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.api.wire import PROBLEM_JSON, Problem, ProblemItem
from service.errors import ConfigError, FaithJudgeError, UserInputError
from service.jobs.ingest import (
    BatchLimitExceeded,
    BodyTooLarge,
    IdempotencyMismatch,
    NothingAccepted,
    TooManyActiveBatches,
)

__all__ = ["ApiError", "install_handlers", "problem_response"]

log = logging.getLogger("faithjudge.api")


class ApiError(Exception):
    """An error the API answers with ``status`` and ``detail``."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        errors: list[ProblemItem] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors
        self.headers = headers


def problem_response(
    request: Request,
    status: int,
    detail: str,
    *,
    errors: list[ProblemItem] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    problem = Problem(
        title=HTTPStatus(status).phrase,
        status=status,
        detail=detail,
        instance=request.url.path,
        errors=errors,
    )
    return JSONResponse(
        problem.model_dump(exclude_none=True),
        status_code=status,
        media_type=PROBLEM_JSON,
        headers=headers,
    )


_USER_ERROR_STATUS: tuple[tuple[type[UserInputError], int], ...] = (
    (BodyTooLarge, 413),
    (BatchLimitExceeded, 413),
    (TooManyActiveBatches, 429),
    (IdempotencyMismatch, 409),
    (NothingAccepted, 422),
)


def _validation_items(errors: Any) -> list[ProblemItem]:
    items = []
    for error in list(errors)[:50]:
        loc = [str(p) for p in error.get("loc", ()) if p != "body"]
        items.append(ProblemItem(field=".".join(loc) or None, reason=str(error.get("msg", ""))))
    return items


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return problem_response(
            request, exc.status, exc.detail, errors=exc.errors, headers=exc.headers
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        return problem_response(
            request, exc.status_code, detail, headers=getattr(exc, "headers", None)
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        items = _validation_items(exc.errors())
        detail = "; ".join(f"{i.field or 'body'}: {i.reason}" for i in items[:5])
        return problem_response(request, 422, detail or "invalid request", errors=items)

    @app.exception_handler(UserInputError)
    async def _user(request: Request, exc: UserInputError) -> JSONResponse:
        status = next((code for kind, code in _USER_ERROR_STATUS if isinstance(exc, kind)), 422)
        errors = None
        if isinstance(exc, NothingAccepted):
            errors = [
                ProblemItem(line=r.line, field=r.field, reason=r.reason) for r in exc.rejections
            ]
        elif exc.field:
            errors = [ProblemItem(field=exc.field, reason=str(exc))]
        return problem_response(request, status, str(exc), errors=errors)

    @app.exception_handler(ConfigError)
    async def _config(request: Request, exc: ConfigError) -> JSONResponse:
        log.error("configuration error: %s", exc)
        return problem_response(request, 503, "the service is misconfigured; see its log")

    @app.exception_handler(FaithJudgeError)
    async def _other(request: Request, exc: FaithJudgeError) -> JSONResponse:
        log.error("request failed: %s", type(exc).__name__)
        return problem_response(request, 502, str(exc))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return problem_response(request, 500, "internal error; it has been logged")
