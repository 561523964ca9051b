"""The FastAPI app: ``create_app(settings)`` builds it; its lifespan opens everything it needs.

On start-up the job store is opened and migrated, the scorer is built (``open_scorer``, the same
as ``faithjudge score``) and, unless ``settings.workers`` is off, a batch worker starts and
resumes any unfinished batch. Handlers stay thin: the work lives in ``faithjudge.jobs``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
from faithjudge_client.bodies import Problem
from faithjudge_client.metric_catalogue import metrics
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from faithjudge import __version__
from faithjudge.api.deps import AppState
from faithjudge.api.info import describe_evaluator, knowledge_base_info
from faithjudge.api.keys import KeyRing
from faithjudge.api.problems import install_handlers
from faithjudge.api.prometheus import Metrics, MetricsMiddleware
from faithjudge.api.uploads import BodyLimitMiddleware
from faithjudge.jobs.interface import open_job_store
from faithjudge.jobs.worker import Worker
from faithjudge.runtime import open_scorer
from faithjudge.settings import Settings

__all__ = ["create_app"]

log = logging.getLogger("faithjudge.api")

_DESCRIPTION = """\
Verified faithfulness scores ({metrics}) for the
chain-of-thought explanations of medical vision-language models.

* `POST /v1/score` scores one line synchronously.
* `POST /v1/batches` uploads JSONL; every accepted line is stored before the answer; workers
  score them in the background. Follow with `/events` (SSE), download `/results` (NDJSON, in
  line order) and `/report`.

Authenticate with `Authorization: Bearer <API key>` (`faithjudge keys create --tenant T`).
Errors are `application/problem+json`.
"""


def _description() -> str:
    """The OpenAPI description, naming the metrics of the catalogue."""
    return _DESCRIPTION.format(metrics=", ".join(spec.title for spec in metrics()))


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus the problem schema the error responses refer to."""
    if app.openapi_schema is None:
        document = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(problem.pop("$defs", {}))
        schemas["Problem"] = problem
        app.openapi_schema = document
    return app.openapi_schema


def create_app(settings: Settings) -> FastAPI:
    """Build the app for ``settings`` (nothing is opened until the lifespan starts)."""
    from faithjudge.api.routes import router  # the endpoints, which import the deps, not the app

    state = AppState(settings=settings, keys=KeyRing.from_settings(settings), metrics=Metrics())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = await open_job_store(settings.job_store_url, schema=settings.database_schema)
        try:
            async with open_scorer(settings) as scorer, anyio.create_task_group() as group:
                state.store, state.scorer = store, scorer
                state.evaluator_info = describe_evaluator(scorer, settings)
                state.kb_info = knowledge_base_info(scorer)
                if settings.workers:
                    state.worker = Worker(
                        store,
                        scorer,
                        settings,
                        on_result=lambda r: state.metrics.observe(r, source="batch"),
                    )
                    group.start_soon(state.worker.run)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
        finally:
            state.store = state.scorer = state.worker = None
            await store.close()

    app = FastAPI(
        title="FaithJudge",
        version=__version__,
        description=_description(),
        lifespan=lifespan,
    )
    app.state.faithjudge = state
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    install_handlers(app)
    app.include_router(router)
    app.add_middleware(
        BodyLimitMiddleware,
        limit=settings.max_score_body_bytes,
        exempt=(("POST", "/v1/batches"),),
    )
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    return app
