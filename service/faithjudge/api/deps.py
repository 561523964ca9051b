"""FastAPI dependencies: the app state, the job store, the tenant of the key, body checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from faithjudge_client.bodies import (
    JobStatus,
    JudgeInfo,
    KnowledgeBaseInfo,
    ModificationCatalogue,
    ProblemItem,
)
from fastapi import Depends, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from faithjudge.api.info import modification_catalogue
from faithjudge.api.keys import KeyRing, is_loopback
from faithjudge.api.problems import HttpProblem
from faithjudge.api.prometheus import Metrics
from faithjudge.jobs.interface import JobJudge, JobRow, JobStore
from faithjudge.jobs.judge_health import JudgeHealth
from faithjudge.jobs.results import JobRejections
from faithjudge.jobs.worker import Worker
from faithjudge.pipeline.scorer import Scorer
from faithjudge.runners.canary import CanaryWatch
from faithjudge.settings import Settings

_bearer = HTTPBearer(auto_error=False, description="An API key of your tenant.")
DEV_TENANT = "default"


@dataclass
class AppState:
    """What the handlers use; set up by the lifespan."""

    settings: Settings
    keys: KeyRing
    metrics: Metrics
    store: JobStore | None = None
    worker: Worker | None = None
    judge_health: JudgeHealth = field(default_factory=JudgeHealth)
    kb_info: KnowledgeBaseInfo | None = None
    catalogue: ModificationCatalogue = field(default_factory=modification_catalogue)
    scorers: dict[str, Scorer] = field(default_factory=dict)
    """The judges the service offers, by name, the default first."""
    job_judges: dict[str, JobJudge] = field(default_factory=dict)
    """The same judges as a job records them."""
    judge_infos: dict[str, JudgeInfo] = field(default_factory=dict)
    canary: CanaryWatch | None = None
    """The judge canary's checks (None: ``FAITHJUDGE_CANARY_FILE`` unset)."""

    def judge_outages(self) -> dict[str, str]:
        """The judges this process is waiting for now (they stopped answering at the
        connection), each with what happened and for how long."""
        waits = {}
        for name, judge_scorer in self.scorers.items():
            gate = judge_scorer.caller.outage
            outage = gate.state if gate is not None else None
            if outage is not None:
                waits[name] = outage.describe(name)
        return waits

    def outage_detail(self, status: JobStatus, judge_key: str | None) -> JobStatus:
        """``status`` saying that its job waits for its judge when that judge stopped
        answering (the job resumes by itself once the judge is back)."""
        if status.status not in ("queued", "running"):
            return status
        outages = self.judge_outages()
        if not outages:
            return status
        names = [n for n, judge in self.job_judges.items() if judge.key == judge_key]
        name = names[0] if names else next(iter(self.scorers)) if judge_key is None else None
        if name is None or name not in outages:
            return status
        return status.model_copy(update={"detail": outages[name]})

    def judge_named(self, name: str | None) -> str:
        """The judge a request names (None: the default), or a 422 naming the offered ones."""
        if not self.scorers:
            raise HttpProblem(503, "the scorer is not ready")
        if name is None:
            return next(iter(self.scorers))
        if name not in self.scorers:
            offered = ", ".join(self.scorers)
            raise HttpProblem(
                422,
                f"this service offers no judge {name!r}; it offers {offered}",
                errors=[ProblemItem(field="judge", reason=f"one of {offered}")],
            )
        return name


def app_state(request: Request) -> AppState:
    state: AppState = request.app.state.faithjudge
    return state


def _store(state: Annotated[AppState, Depends(app_state)]) -> JobStore:
    if state.store is None:
        raise HttpProblem(503, "the job store is not open")
    return state.store


def _tenant(
    request: Request,
    state: Annotated[AppState, Depends(app_state)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    if not state.keys.configured:
        # dev mode answers loopback clients only, for the life of the process, whatever the
        # bind address the process was started with
        client = request.client.host if request.client is not None else ""
        if is_loopback(client) or state.settings.insecure_no_auth:
            return DEV_TENANT
        raise HttpProblem(
            403,
            "this service has no API keys and answers loopback clients only",
        )
    unauthorized = {"WWW-Authenticate": "Bearer"}
    if credentials is None or not credentials.credentials:
        raise HttpProblem(
            401, "missing API key: send 'Authorization: Bearer <key>'", headers=unauthorized
        )
    tenant = state.keys.tenant_for(credentials.credentials)
    if tenant is None:
        why = "this API key was revoked" if state.keys.is_revoked(credentials.credentials) else ""
        raise HttpProblem(401, why or "unknown API key", headers=unauthorized)
    return tenant


def json_media(request: Request) -> str | None:
    """The request's media type when it is JSON (``application/json`` or ``…+json``)."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media == "application/json" or (media.startswith("application/") and
                                        media.endswith("+json")):  # fmt: skip
        return media
    return None


def _json_body(request: Request) -> None:
    """415 for a body that is not JSON, before anything tries to read it as JSON."""
    if json_media(request) is None:
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        raise HttpProblem(
            415, f"send the ScoreRequest as application/json, not {media or 'no type'}"
        )


State = Annotated[AppState, Depends(app_state)]
JsonBody = Annotated[None, Depends(_json_body)]
Store = Annotated[JobStore, Depends(_store)]
Tenant = Annotated[str, Depends(_tenant)]
JudgeName = Annotated[
    str | None,
    Query(
        max_length=200,
        description="One of the judges GET /v1/config lists (default: the first); a job "
        "keeps the judge it was uploaded under.",
    ),
]
JobId = Annotated[str, Path(description="Job id from POST /v1/jobs.", max_length=100)]


def rejections_of(store: JobStore, row: JobRow) -> JobRejections:
    """Every line the upload rejected, read a page at a time: the row lists the first ones,
    the store keeps them all."""
    return JobRejections.of(store, row)


async def tenant_job(store: JobStore, tenant: str, job_id: str) -> JobRow:
    row = await store.get_job(tenant, job_id)
    if row is None or row.status == "ingesting":
        raise HttpProblem(404, f"no job {job_id!r} for this tenant")
    return row
