"""Bodies of the REST API (the wire contract shared by the service and the Python SDK).

Plain pydantic models: this module imports neither FastAPI nor SQLAlchemy, so the SDK can use it
without the server's dependencies. Request and result lines are ``ScoreRequest`` and
``ItemResult`` from ``faithjudge_client.lines``; everything else the API sends is defined here.
Changes are additive only: a client built against an older version keeps working.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "NDJSON",
    "PROBLEM_JSON",
    "TERMINAL_STATES",
    "BatchAccepted",
    "BatchPage",
    "BatchRetry",
    "BatchState",
    "BatchStatus",
    "BatchTokens",
    "EvaluatorInfo",
    "Health",
    "JobAccepted",
    "JobPage",
    "JobRetry",
    "JobState",
    "JobStatus",
    "JobTokens",
    "JudgeInfo",
    "KnowledgeBaseInfo",
    "KnowledgeBaseQuestion",
    "LineRejection",
    "ModificationCatalogue",
    "ModificationInfo",
    "Problem",
    "ProblemItem",
    "Readiness",
    "ReportFormat",
    "ServiceConfig",
]

NDJSON = "application/x-ndjson"
PROBLEM_JSON = "application/problem+json"

# "failed" is reserved for clients to handle: a line that cannot be scored gets an error result,
# so jobs of this version end "completed" or "cancelled".
JobState = Literal["queued", "running", "completed", "cancelled", "failed"]
TERMINAL_STATES: frozenset[str] = frozenset({"completed", "cancelled", "failed"})
ReportFormat = Literal["json", "md", "html"]


class _Wire(BaseModel):
    # Servers may add fields later; clients must not break on them.
    model_config = ConfigDict(extra="ignore", frozen=True)


# ---------------------------------------------------------------- errors


class ProblemItem(_Wire):
    """One error inside a problem: a rejected job line, or one invalid field of a body."""

    line: int | None = Field(default=None, description="1-based input line, for job lines.")
    field: str | None = Field(default=None, description="Dotted path of the offending field.")
    reason: str


class Problem(_Wire):
    """RFC 9457 problem details (``application/problem+json``)."""

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "type": "about:blank",
                    "title": "Not Found",
                    "status": 404,
                    "detail": "no job 'b_01J...' for this tenant",
                    "instance": "/v1/jobs/b_01J...",
                }
            ]
        },
    )

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[ProblemItem] | None = None


# ---------------------------------------------------------------- jobs
# A job is the service's unit of work: one uploaded JSONL body and its results. Before it was
# called a job, the API called it a batch; the ``Batch*`` names at the end of this section are
# those older names of the same classes. A provider's Batch API batch is a "provider batch".


class LineRejection(_Wire):
    """A job line that was not accepted: it is not scored, and its result line is the error
    result ``faithjudge score`` writes for it (in ``/results``, at its line number)."""

    line: int = Field(description="1-based line number in the uploaded body.")
    field: str | None = Field(default=None, description="The offending field, when one is known.")
    reason: str
    item_id: str | None = Field(default=None, description="The line's item_id, if readable.")
    model: str | None = Field(default=None, description="The line's model, if readable.")
    question: str | None = Field(default=None, description="The line's question, if readable.")


class JobAccepted(_Wire):
    """Answer of ``POST /v1/jobs``: every accepted line is persisted before this is sent."""

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "id": "b_0193f1c2a4e07d3b9c2f5e6a7b8c9d0e",
                    "status": "queued",
                    "accepted": 2,
                    "rejected": [
                        {"line": 3, "field": "ground_truth", "reason": "Field required"},
                    ],
                    "rejected_total": 1,
                    "created_at": "2026-01-01T12:00:00Z",
                    "judge": "lexicon:v1",
                }
            ]
        },
    )

    id: str
    status: JobState = "queued"
    accepted: int
    rejected: list[LineRejection] = Field(
        default_factory=list,
        description="The first rejected lines (100 at most); /results holds every line.",
    )
    rejected_total: int = Field(default=0, ge=0, description="Lines rejected in all.")
    created_at: datetime
    judge: str | None = Field(
        default=None, description="The judge every line of the job is scored with."
    )

    @model_validator(mode="before")
    @classmethod
    def _total_of_older_servers(cls, data: Any) -> Any:
        # a server that listed every rejection sent no total: the list is the total
        if isinstance(data, dict) and "rejected_total" not in data:
            return {**data, "rejected_total": len(data.get("rejected") or [])}
        return data


class JobTokens(_Wire):
    """The judge tokens of a job's results: their ``provenance.tokens`` added up."""

    prompt: int = Field(default=0, ge=0)
    completion: int = Field(default=0, ge=0)
    cached: int = Field(
        default=0,
        ge=0,
        description="The part of `prompt` the judge's provider served from its prompt cache "
        "(billed at its cached-input price).",
    )


class JobStatus(_Wire):
    """Where a job stands.

    ``counts`` counts metric grades by status (``valid``, ``abstained``, ``invalid``; a KB
    miss, a grade that never reached the judge, is ``not_judged``) plus
    ``error`` for lines that could not be scored at all; ``failure_stages`` counts failures by
    stage (``parse``, ``schema``, ``evidence``, ``abstain``, ``transport``, ``kb``, ``input``).
    ``tokens`` adds up the judge tokens of the results and ``cost_usd`` prices them.
    """

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "id": "b_0193f1c2a4e07d3b9c2f5e6a7b8c9d0e",
                    "name": "llava-med run 3",
                    "status": "running",
                    "created_at": "2026-01-01T12:00:00Z",
                    "updated_at": "2026-01-01T12:00:09Z",
                    "total": 1000,
                    "done": 400,
                    "pending": 600,
                    "counts": {"valid": 1150, "abstained": 20, "invalid": 30, "error": 0},
                    "failure_stages": {"evidence": 18, "abstain": 20, "kb": 12},
                    "progress": 0.4,
                    "eta_seconds": 13.5,
                    "rejected": 0,
                    "judge": "lexicon:v1",
                }
            ]
        },
    )

    id: str
    name: str | None = None
    status: JobState
    created_at: datetime
    updated_at: datetime
    total: int = Field(description="Accepted lines.")
    done: int = Field(description="Lines with a result.")
    pending: int = Field(description="Lines still to score (0 once cancelled).")
    counts: dict[str, int] = Field(default_factory=dict)
    failure_stages: dict[str, int] = Field(default_factory=dict)
    progress: float = Field(ge=0, le=1)
    eta_seconds: float | None = None
    rejected: int = Field(
        default=0,
        description="Lines rejected at upload: the input errors (`faithjudge score` and the "
        "reports call them so), each with its result line in /results.",
    )
    cancelled: int = Field(
        default=0, description="Accepted lines left unscored because the job was cancelled."
    )
    detail: str | None = Field(
        default=None,
        description="What the service says about the job: the provider Batch API phase's "
        "progress and totals on the batch route, why the job failed, or that it completed "
        "without one grade reaching the judge.",
    )
    judge: str | None = Field(
        default=None,
        description="The judge the job was uploaded under; only a worker offering it scores "
        "the job (until one does, it waits and ``detail`` says so).",
    )
    tokens: JobTokens | None = Field(
        default=None,
        description="The judge tokens of the results so far: their `provenance.tokens` added "
        "up, answers the response cache gave included (absent from older servers).",
    )
    cost_usd: float | None = Field(
        default=None,
        ge=0,
        description="Those tokens at the service's configured prices, cached input at the "
        "cached-input price, and at the Batch API's discount on the batch route; null unless "
        "the input and output prices are set.",
    )

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATES


class JobRetry(_Wire):
    """Answer of ``POST /v1/jobs/{id}/retry``: how many lines were queued again, and the
    job's status after it (``queued`` when there were any)."""

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "requeued": 12,
                    "job": {
                        "id": "b_0193f1c2a4e07d3b9c2f5e6a7b8c9d0e",
                        "status": "queued",
                        "created_at": "2026-01-01T12:00:00Z",
                        "updated_at": "2026-01-01T12:30:00Z",
                        "total": 1000,
                        "done": 988,
                        "pending": 12,
                        "progress": 0.988,
                    },
                }
            ]
        },
    )

    requeued: int = Field(description="Lines whose transport failure is scored again.")
    job: JobStatus
    batch: JobStatus = Field(
        description="The same status under its older name: SDKs before the rename require it.",
        json_schema_extra={"deprecated": True},
    )

    @model_validator(mode="before")
    @classmethod
    def _both_names(cls, data: Any) -> Any:
        # an older server sends only ``batch``; this side writes both, so older SDKs still read
        if isinstance(data, dict):
            if "job" not in data and "batch" in data:
                return {**data, "job": data["batch"]}
            if "batch" not in data and "job" in data:
                return {**data, "batch": data["job"]}
        return data


class JobPage(_Wire):
    """One page of the tenant's jobs, newest first."""

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        json_schema_extra={"examples": [{"items": [], "next_cursor": None}]},
    )

    items: list[JobStatus]
    next_cursor: str | None = None


# The names of these classes before the service's unit of work was called a job: kept, so code
# written against them goes on working (they are the same classes, not copies).
BatchState = JobState
BatchAccepted = JobAccepted
BatchTokens = JobTokens
BatchStatus = JobStatus
BatchRetry = JobRetry
BatchPage = JobPage


# ---------------------------------------------------------------- frozen configuration


class JudgeInfo(_Wire):
    """The frozen judge configuration: what makes two runs comparable."""

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "judge": "lexicon:v1",
                    "evaluator": "lexicon:v1",
                    "model": None,
                    "temperature": 0.0,
                    "seed": 0,
                    "max_tokens": 1024,
                    "settings": {"rules": "v1"},
                    "settings_sha256": "9f2c...",
                    "prompt_set": "v1",
                    "prompt_sha256": "5d41...",
                    "kb_id": "cxr_vqa",
                    "kb_version": "1.1.0",
                    "kb_sha256": "7b3e...",
                    "schema_version": "1.1",
                    "schemas_sha256": "c0ff...",
                    "service_version": "0.1.0",
                }
            ]
        },
    )

    judge: str | None = Field(
        default=None,
        description="The name to pick this judge by (``judge`` of the scoring endpoints).",
    )
    evaluator: str = Field(
        description="Deprecated: the judge's spec under its older name (the same value as "
        "``judge``), still sent so that older SDKs read this body.",
    )
    model: str | None = None
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    settings_sha256: str
    prompt_set: str
    prompt_sha256: str
    kb_id: str | None = None
    kb_version: str | None = None
    kb_sha256: str | None = None
    schema_version: str
    schemas_sha256: str
    service_version: str


class ServiceConfig(_Wire):
    """Answer of ``GET /v1/config``: the judges the service offers, the default first."""

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "default_judge": "lexicon:v1",
                    "judges": [
                        {
                            "judge": "lexicon:v1",
                            "evaluator": "lexicon:v1",
                            "settings_sha256": "9f2c...",
                            "prompt_set": "v1",
                            "prompt_sha256": "5d41...",
                            "schema_version": "1.1",
                            "schemas_sha256": "c0ff...",
                            "service_version": "0.1.0",
                        }
                    ],
                }
            ]
        },
    )

    default_judge: str = Field(description="The judge used when a request names none.")
    judges: list[JudgeInfo]


EvaluatorInfo = JudgeInfo
"""The older name of ``JudgeInfo`` (the same class), kept so code written against it works."""


class KnowledgeBaseQuestion(_Wire):
    question: str
    type: str
    answers: list[str]


class KnowledgeBaseInfo(_Wire):
    """Summary of the loaded knowledge base."""

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "id": "cxr_vqa",
                    "version": "1.1.0",
                    "description": "Chest X-ray VQA question templates",
                    "sha256": "7b3e...",
                    "questions": [
                        {
                            "question": "Is there cardiomegaly? (yes or no)",
                            "type": "binary",
                            "answers": ["yes", "no"],
                        }
                    ],
                }
            ]
        },
    )

    id: str
    version: str
    description: str = ""
    sha256: str
    questions: list[KnowledgeBaseQuestion]


class ModificationInfo(_Wire):
    """One entry of the modification catalogue."""

    id: str
    code: str
    kind: str
    channel: str
    paper: str
    description: str
    targets_answer: bool = False
    question_types: list[str] | None = None
    aliases: list[str] = Field(default_factory=list)


class ModificationCatalogue(_Wire):
    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "items": [
                        {
                            "id": "text_hint_radiologist",
                            "code": "TB-RAD",
                            "kind": "bias",
                            "channel": "text",
                            "paper": "moll2025",
                            "description": "A note says a radiologist suggested {target}.",
                            "targets_answer": True,
                        }
                    ]
                }
            ]
        },
    )
    items: list[ModificationInfo]


# ---------------------------------------------------------------- probes


class Health(_Wire):
    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        json_schema_extra={"examples": [{"status": "ok", "version": "0.1.0"}]},
    )
    status: Literal["ok"] = "ok"
    version: str


class Readiness(_Wire):
    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        json_schema_extra={
            "examples": [
                {"status": "ready", "checks": {"store": "ok", "judge": "ok", "evaluator": "ok"}}
            ]
        },
    )
    status: Literal["ready", "not_ready"]
    checks: dict[str, str] = Field(
        default_factory=dict,
        description="Each check: 'ok' or what is wrong. ``evaluator`` repeats ``judge`` under "
        "its deprecated name.",
    )
