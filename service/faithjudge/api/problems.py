"""Errors as ``application/problem+json``: one mapping from exceptions to HTTP statuses.

Nothing reaches a client as a traceback or a bare 500 page: an unexpected exception is logged
(without request bodies) and answered with a generic problem.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from http import HTTPStatus
from typing import Any

from faithjudge_client.bodies import PROBLEM_JSON, Problem, ProblemItem
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from faithjudge.errors import ConfigError, FaithJudgeError, UserInputError
from faithjudge.jobs.ingest import (
    BodyTooLarge,
    IdempotencyMismatch,
    JobLimitExceeded,
    NothingAccepted,
    TooManyActiveJobs,
)
from faithjudge.jobs.interface import StoreUnavailable
from faithjudge.jsonl import describe_json_error, field_problems

__all__ = ["HttpProblem", "install_handlers", "problem_response"]

# Seconds a client should wait before retrying: while the job store is unreachable, and while
# every job slot of its tenant is taken.
STORE_RETRY_AFTER = "5"
JOB_SLOT_RETRY_AFTER = "30"
log = logging.getLogger("faithjudge.api")


class HttpProblem(Exception):
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
    (JobLimitExceeded, 413),
    (TooManyActiveJobs, 429),
    (IdempotencyMismatch, 409),
    (NothingAccepted, 422),
)


def _validation_items(errors: Any, body: Any) -> list[ProblemItem]:
    errors = list(errors)
    if any(error.get("type") == "json_invalid" for error in errors):
        # the location of a decode error is a character offset, not a field: say what the
        # CLI and a job upload say of the same text
        text = body if isinstance(body, str | bytes) else ""
        return [ProblemItem(reason=describe_json_error(text))]
    return [ProblemItem(field=f, reason=r) for f, r in field_problems(errors)[:50]]


def _leaf_routes(routes: Iterable[Any]) -> Iterator[Any]:
    for route in routes:
        nested = getattr(route, "original_router", None) or getattr(route, "router", None)
        if nested is not None and hasattr(nested, "routes"):
            yield from _leaf_routes(nested.routes)
        else:
            yield route


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app serves at the request's path."""
    methods: set[str] = set()
    for route in _leaf_routes(request.app.router.routes):
        route_methods = getattr(route, "methods", None)
        if not route_methods:
            continue
        match, _ = route.matches({**request.scope, "method": next(iter(route_methods))})
        if match != Match.NONE:
            methods |= set(route_methods)
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(HttpProblem)
    async def _http_problem(request: Request, exc: HttpProblem) -> JSONResponse:
        return problem_response(
            request, exc.status, exc.detail, errors=exc.errors, headers=exc.headers
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:
            # the router names the methods of the first route whose path matched; the path
            # may have more (GET and DELETE on a job)
            headers["Allow"] = ", ".join(allowed_methods(request))
        return problem_response(request, exc.status_code, detail, headers=headers or None)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        items = _validation_items(exc.errors(), exc.body)
        detail = "; ".join(f"{i.field}: {i.reason}" if i.field else i.reason for i in items[:5])
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
        # a slot frees when one of the tenant's jobs finishes: a hint of when to ask again
        headers = {"Retry-After": JOB_SLOT_RETRY_AFTER} if status == 429 else None
        return problem_response(request, status, str(exc), errors=errors, headers=headers)

    @app.exception_handler(StoreUnavailable)
    async def _store_down(request: Request, exc: StoreUnavailable) -> JSONResponse:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        return problem_response(
            request, 503, f"{exc}; try again shortly", headers={"Retry-After": STORE_RETRY_AFTER}
        )

    @app.exception_handler(ConfigError)
    async def _config(request: Request, exc: ConfigError) -> JSONResponse:
        log.error("configuration error: %s", exc)
        return problem_response(request, 503, "the service is misconfigured; see its log")

    @app.exception_handler(FaithJudgeError)
    async def _other(request: Request, exc: FaithJudgeError) -> JSONResponse:
        log.error("request failed: %s", type(exc).__name__)
        return problem_response(request, 502, str(exc))

    @app.exception_handler(ClientDisconnect)
    async def _hung_up(request: Request, exc: ClientDisconnect) -> JSONResponse:
        # nothing was stored (an upload persists only once its body is whole) and nobody is
        # left to read an answer: a line in the log, not a traceback
        log.info(
            "%s %s: the client closed the connection mid-body", request.method, request.url.path
        )
        return problem_response(
            request, 400, "the client closed the connection before the body was read"
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return problem_response(request, 500, "internal error; it has been logged")
