"""The FastAPI app: ``create_app(settings)`` builds it; its lifespan opens everything it needs.

On start-up the job store is opened and migrated, the scorer is built (``open_scorer``, the same
as ``faithjudge score``) and, unless ``settings.workers`` is off, a job worker starts and
resumes any unfinished job. Handlers stay thin: the work lives in ``faithjudge.jobs``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from faithjudge_client.bodies import Problem
from faithjudge_client.metric_catalogue import metrics
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from faithjudge import __version__
from faithjudge.api.deps import AppState
from faithjudge.api.info import describe_judge, knowledge_base_info
from faithjudge.api.keys import KeyRing
from faithjudge.api.problems import install_handlers
from faithjudge.api.prometheus import Metrics, MetricsMiddleware
from faithjudge.api.uploads import BodyLimitMiddleware
from faithjudge.jobs.answer_cache import StoreAnswerCache
from faithjudge.jobs.interface import open_job_store
from faithjudge.jobs.judges import job_judge
from faithjudge.jobs.worker import Worker
from faithjudge.pipeline.runtime import open_scorers
from faithjudge.runners.canary import canary_watch
from faithjudge.settings import Settings

__all__ = ["create_app"]

# Swagger UI ships with the package (api/static/swagger-ui, see SOURCE there): a CDN copy would
# leave /docs blank on a machine without network access.
SWAGGER_UI_PREFIX = "/static/swagger-ui"
_SWAGGER_UI_DIR = Path(__file__).resolve().parent / "static" / "swagger-ui"

log = logging.getLogger("faithjudge.api")

_DESCRIPTION = """\
Verified faithfulness scores ({metrics}) for the
chain-of-thought explanations of medical vision-language models.

* `POST /v1/score` scores one line synchronously.
* `POST /v1/jobs` uploads JSONL (a job); every accepted line is stored before the answer; workers
  score them in the background. Follow with `/events` (SSE), download `/results` (NDJSON, in
  line order) and `/report`. The same routes under `/v1/batches`, their name before a job was
  called a job, are deprecated and answer the same.

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


def _install_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI from the packaged assets, nothing fetched from elsewhere."""
    app.mount(SWAGGER_UI_PREFIX, StaticFiles(directory=_SWAGGER_UI_DIR), name="swagger-ui-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{SWAGGER_UI_PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{SWAGGER_UI_PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{SWAGGER_UI_PREFIX}/favicon-32x32.png",
            # the default validator badge would call validator.swagger.io
            swagger_ui_parameters={"validatorUrl": None},
        )


def create_app(settings: Settings) -> FastAPI:
    """Build the app for ``settings`` (nothing is opened until the lifespan starts)."""
    from faithjudge.api.routes import router  # the endpoints, which import the deps, not the app

    state = AppState(settings=settings, keys=KeyRing.from_settings(settings), metrics=Metrics())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        canary = canary_watch(settings)  # a bad canary setting stops the start, naming it
        store = await open_job_store(settings.job_store_url, schema=settings.database_schema)
        try:
            # judge answers go to the job store too, where every replica reads them
            answers_in = functools.partial(StoreAnswerCache, store)
            async with (
                open_scorers(settings, make_cache=answers_in) as scorers,
                anyio.create_task_group() as group,
            ):
                scorer = next(iter(scorers.values()))
                state.store, state.scorers = store, scorers
                state.job_judges = {n: job_judge(n, s) for n, s in scorers.items()}
                state.judge_infos = {
                    n: describe_judge(s, settings).model_copy(update={"judge": n})
                    for n, s in scorers.items()
                }
                state.kb_info = knowledge_base_info(scorer)
                if settings.workers:
                    state.worker = Worker(
                        store,
                        scorers,
                        settings,
                        on_result=lambda r: state.metrics.observe(r, source="job"),
                        judge_health=state.judge_health,
                    )
                    group.start_soon(state.worker.run)
                if canary is not None:  # its own scorer: real calls, never the answer cache
                    state.canary = canary
                    group.start_soon(canary.run)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
        finally:
            state.store = state.worker = state.canary = None
            state.scorers, state.job_judges, state.judge_infos = {}, {}, {}
            await store.close()

    app = FastAPI(
        title="FaithJudge",
        version=__version__,
        description=_description(),
        lifespan=lifespan,
        docs_url=None,  # served by _install_docs from the packaged assets
        redoc_url=None,  # ReDoc would load from a CDN; /docs documents the API
    )
    app.state.faithjudge = state
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    install_handlers(app)
    _install_docs(app)
    app.include_router(router)
    app.add_middleware(
        BodyLimitMiddleware,
        limit=settings.max_score_body_bytes,
        exempt=(("POST", "/v1/jobs"), ("POST", "/v1/batches")),
    )
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    return app
