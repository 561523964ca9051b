"""Tables of the job store (SQLAlchemy Core; the Alembic migrations create them).

Times are Unix seconds (floats): the same on SQLite and PostgreSQL, and cheap to compare.
Request lines are kept as the raw JSON text the client sent; results as ItemResult JSON text.
Per-line outcome and token columns let the status of a job be computed with one SQL aggregate.

The tables keep the names they had when the service called a job a batch (renaming them would
take a migration): an ``fj_batches`` row is a job, ``fj_batch_lines`` and ``fj_batch_rejections``
hold its lines and rejected lines, and a ``batch_id`` column (in every table, the provider
tables' too) holds a job's id. A provider's Batch API batch id is ``provider_batch_id``.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from faithjudge.jobs.interface import LINE_STAGES, LINE_STATUSES

__all__ = [
    "STAGE_COLUMNS",
    "STATUS_COLUMNS",
    "TOKEN_COLUMNS",
    "batch_lines",
    "batch_rejections",
    "batches",
    "judge_answers",
    "metadata",
    "provider_parts",
    "provider_requests",
]

metadata = MetaData()

STATUS_COLUMNS = {status: f"n_{status}" for status in LINE_STATUSES}
STAGE_COLUMNS = {stage: f"stage_{stage}" for stage in LINE_STAGES}
TOKEN_COLUMNS = ("prompt_tokens", "completion_tokens", "cached_tokens")
"""A line's judge tokens, named as the fields of ``Usage`` (``DoneLine.tokens``)."""

batches = Table(
    "fj_batches",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("tenant", String(200), nullable=False),
    Column("name", String(200)),
    # ingesting (not yet acknowledged), queued, running, completed, cancelled, failed
    Column("status", String(16), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("started_at", Float),
    Column("finished_at", Float),
    Column("total", Integer, nullable=False, server_default="0"),
    Column("rejected_count", Integer, nullable=False, server_default="0"),
    Column("rejections", Text, nullable=False, server_default="[]"),
    Column("idempotency_key", String(200)),
    Column("body_sha256", String(64)),
    Column("detail", Text),
    # the provider Batch API phase (openai-batch judge): workers score the lines only after
    # it is done; one process at a time runs it, under a renewed lease
    Column("provider_done_at", Float),
    Column("provider_owner", String(64)),
    Column("provider_lease_until", Float),
    # the judge the job was uploaded under: its name (``lexicon:v1``), the hash of its
    # configuration (judge settings, prompt set, KB, scoring settings) that a worker must
    # offer to score it, and that configuration as JSON (for the status of a waiting job);
    # NULL for jobs stored before judges were recorded
    # Text: a judge is named by its spec (``replay:PATH#judge``), of any length
    Column("judge", Text),
    Column("judge_key", String(64)),
    Column("judge_config", Text),
    UniqueConstraint("tenant", "idempotency_key", name="uq_fj_batches_idempotency"),
    Index("ix_fj_batches_tenant_created", "tenant", "created_at", "id"),
    Index("ix_fj_batches_status", "status"),
)

batch_lines = Table(
    "fj_batch_lines",
    metadata,
    Column(
        "batch_id",
        String(40),
        ForeignKey("fj_batches.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("line", Integer, nullable=False),
    Column("request", Text, nullable=False),
    Column("state", SmallInteger, nullable=False, server_default="0"),
    Column("owner", String(64)),
    Column("lease_until", Float),
    Column("result", Text),
    Column("done_at", Float),
    Column("is_error", SmallInteger, nullable=False, server_default="0"),
    *(
        Column(name, SmallInteger, nullable=False, server_default="0")
        for name in STATUS_COLUMNS.values()
    ),
    *(
        Column(name, SmallInteger, nullable=False, server_default="0")
        for name in STAGE_COLUMNS.values()
    ),
    *(Column(name, Integer, nullable=False, server_default="0") for name in TOKEN_COLUMNS),
    Index("ix_fj_batch_lines_todo", "batch_id", "state", "seq"),
    Index("ix_fj_batch_lines_owner", "owner", "state"),
)


batch_rejections = Table(
    "fj_batch_rejections",
    metadata,
    Column(
        "batch_id",
        String(40),
        ForeignKey("fj_batches.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("line", Integer, primary_key=True, autoincrement=False),
    Column("rejection", Text, nullable=False),
)
"""Every line rejected at upload (a ``LineRejection`` as JSON), written while the body streams:
the batch row keeps only the first ones, which the 202 answer lists."""


def _job() -> Column[str]:
    return Column(
        "batch_id", String(40), ForeignKey("fj_batches.id", ondelete="CASCADE"), nullable=False
    )


provider_parts = Table(
    "fj_provider_parts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    _job(),
    Column("lines", Integer, nullable=False, server_default="0"),
    Column("bytes", BigInteger, nullable=False, server_default="0"),
    # a part is sealed once all its requests are written; an unsealed one died while staging
    Column("sealed", SmallInteger, nullable=False, server_default="0"),
    Column("file_id", String(200)),
    Column("provider_batch_id", String(200)),
    Column("state", String(16), nullable=False, server_default="staged"),
    Column("done", SmallInteger, nullable=False, server_default="0"),
    Column("completed", Integer, nullable=False, server_default="0"),
    Column("failed", Integer, nullable=False, server_default="0"),
    Column("prompt_tokens", BigInteger, nullable=False, server_default="0"),
    Column("completion_tokens", BigInteger, nullable=False, server_default="0"),
    # the part of prompt_tokens the provider served from its prompt cache
    Column("cached_tokens", BigInteger, nullable=False, server_default="0"),
    Index("ix_fj_provider_parts_job", "batch_id", "done"),
)
"""The parts of a job's provider phase: one uploaded file and one provider batch each."""

provider_requests = Table(
    "fj_provider_requests",
    metadata,
    _job(),
    Column("key", String(64), nullable=False),
    Column("part", Integer),
    Column("tries", Integer, nullable=False, server_default="0"),
    # staged, submitted, retry, answered, failed (``faithjudge.provider_batch.ledger.Ledger``)
    Column("state", String(16), nullable=False),
    Column("status", Integer),
    Column("error", Text),
    # the job's line the request comes from: its Batch API line is rebuilt from that line when
    # a part is uploaded, not stored (~10 KB a request)
    Column("seq", Integer),
    Column("answer", Text),
    PrimaryKeyConstraint("batch_id", "key"),
    Index("ix_fj_provider_requests_key", "key", "state"),
    Index("ix_fj_provider_requests_part", "batch_id", "part", "state"),
)
"""Each judge request of a job's provider phase: where it comes from, and its answer or failure
(kept here, not only in one process's response cache, so any replica can score the lines)."""


judge_answers = Table(
    "fj_judge_answers",
    metadata,
    # ``faithjudge.transport.cache.cache_key`` of the request as sent, the tenant's scope in it
    Column("key", String(64), primary_key=True),
    # the job line whose scoring paid for it: a process that takes the line over reads its
    # answers by line, before scoring it (no foreign key: an answer outlives nothing it names)
    Column("batch_id", String(40), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("text", Text, nullable=False),
    Column("model", Text),
    Column("fingerprint", Text),
    Column("prompt_tokens", Integer, nullable=False, server_default="0"),
    Column("completion_tokens", Integer, nullable=False, server_default="0"),
    Column("cached_tokens", Integer, nullable=False, server_default="0"),
    Column("finish_reason", Text),
    Column("response_format", Text),
    Column("created_at", Float, nullable=False),
    Index("ix_fj_judge_answers_line", "batch_id", "seq"),
)
"""Every judge answer a worker received, as the response cache keeps it (raw text, verified
again on every read), committed within moments of its arrival: a replica that takes over the
lines of one that died reads them instead of paying for them again."""
