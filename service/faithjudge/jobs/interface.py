"""The job-store contract: what the API, the ingest and the workers may ask of a store.

The dataclasses are the rows a store speaks in, the constants its states and the exceptions its
errors; nothing here knows SQL. ``JobStore`` is the union of the roles the domain uses, each a
protocol of its own: ``JobIntake`` (an upload), ``JobReader`` (status, results, control),
``LineQueue`` (the workers' leases), ``ProviderPhaseStore`` (the batch route's phase and a
``ProviderLedger`` per job) and ``AnswerStore`` (judge answers every replica reads); a module
that needs one role asks for that role only.

A store claims its URL schemes in ``JOB_STORES`` (by a lazy ``"module:Class"`` reference, so
this module imports no store) and ``open_job_store(url)`` looks the scheme up: ``SqlJobStore``
(``faithjudge.jobs.sql.store``, SQLAlchemy) claims ``sqlite``, ``sqlite+aiosqlite``,
``postgresql``, ``postgres`` and ``postgresql+asyncpg``; ``MemoryJobStore``
(``faithjudge.jobs.memory_store``) claims ``memory``. A new store implements every role and
passes the contract suite (``tests/integration/test_job_store_contract.py``, which runs on every
registered store); it claims its schemes in code with ``register_job_store``, or from a package
of its own through the ``faithjudge.job_stores`` entry-point group (``SCHEME =
package.module:StoreClass``, one entry point per scheme), like judge backends and metrics.
"""

from __future__ import annotations

import inspect
import re
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from faithjudge_client.registry import PluginError, Registry, UnknownName

from faithjudge.errors import ConfigError, FaithJudgeError
from faithjudge.provider_batch.ledger import Ledger
from faithjudge.transport.base import Usage

if TYPE_CHECKING:
    from faithjudge.transport.base import JudgeResponse

__all__ = [
    "ACTIVE_STATES",
    "DONE",
    "JOB_STORES",
    "LEASED",
    "LINE_STAGES",
    "LINE_STATUSES",
    "OCCUPYING_STATES",
    "PENDING",
    "PHASE_UNDERWAY_PREFIX",
    "RECENT_S",
    "WAITING_PREFIX",
    "ActiveJobLimit",
    "AnswerStore",
    "ClaimedLine",
    "DoneLine",
    "IdempotencyConflict",
    "JobIntake",
    "JobJudge",
    "JobReader",
    "JobRow",
    "JobStore",
    "JobStoreClass",
    "KeptAnswer",
    "LedgerTotals",
    "LineCounts",
    "LineQueue",
    "ProviderLedger",
    "ProviderPhaseStore",
    "StoreUnavailable",
    "new_job_id",
    "open_job_store",
    "register_job_store",
    "store_schemes",
]

# line states
PENDING, LEASED, DONE = 0, 1, 2
# batch states a worker scores
ACTIVE_STATES = ("queued", "running")
RECENT_S = 30.0
"""Window of the recent-throughput count (the ETA's rate)."""
PHASE_UNDERWAY_PREFIX = "Batch API phase underway: "
"""How the details of a provider phase still running begin (its progress, a try to be made
again): once the job ends, or waits for its judge with no phase held, they no longer hold."""
WAITING_PREFIX = "waiting for a worker that offers judge "
"""How the detail of a job that no worker may score begins; the first claim of its lines clears
such a detail (and no other)."""
LINE_STATUSES = ("valid", "abstained", "invalid")
"""Metric statuses a store counts per line (``DoneLine.statuses``) and sums (``LineCounts``)."""
LINE_STAGES = ("parse", "schema", "evidence", "abstain", "transport", "kb", "input")
"""Failure stages a store counts per line (``DoneLine.stages``) and sums (``LineCounts``)."""
OCCUPYING_STATES = ("ingesting", "queued", "running")
"""Batch states that hold one of the tenant's slots (an upload holds one already)."""


def new_job_id() -> str:
    """A fresh batch id (``b_`` and 32 hex digits), unique across processes and stores."""
    return f"b_{uuid.uuid4().hex}"


class StoreUnavailable(FaithJudgeError):
    """The job store cannot be reached (the API answers 503 with Retry-After; workers wait)."""


class IdempotencyConflict(Exception):
    """Another batch of this tenant already holds the idempotency key."""


class ActiveJobLimit(Exception):
    """The tenant already has its maximum of batches uploading, queued or running."""


@dataclass(frozen=True, slots=True)
class JobRow:
    id: str
    tenant: str
    name: str | None
    status: str
    created_at: float
    updated_at: float
    started_at: float | None
    finished_at: float | None
    total: int
    rejected_count: int
    rejections: str
    idempotency_key: str | None
    body_sha256: str | None
    detail: str | None
    judge: str | None = None
    """The judge the job was uploaded under (None: stored before judges were recorded)."""
    judge_key: str | None = None
    judge_config: str | None = None
    """That judge's configuration as JSON (``JobJudge.config``)."""


@dataclass(frozen=True, slots=True)
class JobJudge:
    """A judge as a job records it: the name it is picked by and its whole configuration.

    A worker scores a job only with a judge of the same ``key`` (the hash of ``config``), so a
    service restarted with another judge, prompt set, knowledge base or scoring settings
    never finishes a job with them.
    """

    name: str
    key: str
    config: str
    """JSON: the judge, its frozen settings' hash, prompt set, KB and scoring settings."""


@dataclass(frozen=True, slots=True)
class LineCounts:
    """Aggregates over the lines of one batch."""

    done: int
    statuses: dict[str, int]
    stages: dict[str, int]
    errors: int
    recent_done: int
    first_done_at: float | None
    tokens: Usage = field(default_factory=Usage)
    """The judge tokens of the lines done: their ``DoneLine.tokens`` added up."""


@dataclass(frozen=True, slots=True)
class ClaimedLine:
    job_id: str
    seq: int
    line: int
    request: str
    judge: str | None = None
    """The job's ``judge_key`` (None: a job stored without one)."""
    tenant: str | None = None
    """The job's tenant: its lines share judge answers with that tenant's only."""


@dataclass(frozen=True, slots=True)
class DoneLine:
    """A scored line, with the outcome columns the status aggregate sums."""

    job_id: str
    seq: int
    result: bytes
    is_error: int
    statuses: dict[str, int]
    stages: dict[str, int]
    tokens: Usage = field(default_factory=Usage)
    """The result's ``provenance.tokens`` (prompt, completion, and the prompt's part the
    provider served from its prompt cache): the status adds them up and prices them."""


@dataclass(frozen=True, slots=True)
class KeptAnswer:
    """A judge answer a worker received while scoring line ``seq`` of job ``job_id``, under
    its response-cache key (the tenant's scope in it)."""

    key: str
    job_id: str
    seq: int
    response: JudgeResponse


@dataclass(frozen=True, slots=True)
class LedgerTotals:
    """What a job's provider phase cost, over every process that worked on it."""

    files_uploaded: int
    batches_created: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    """The part of ``prompt_tokens`` the provider served from its prompt cache, from the usage
    of the answers collected (0 for parts collected before it was recorded)."""


class ProviderLedger(Ledger, Protocol):
    """A job's Batch API ledger in the store: the runner's ``Ledger`` plus staging helpers."""

    async def drop_unsealed(self) -> None:
        """Forget a part whose staging died half-way (its requests are staged again)."""
        ...

    async def keys(self) -> set[str]:
        """Every request key the job's phase already holds."""
        ...

    async def settled(self, keys: list[str]) -> set[str]:
        """Those of ``keys`` that a job of this job's tenant has an answer to."""
        ...

    async def reused_tokens(self, keys: list[str]) -> tuple[int, int]:
        """(prompt, completion) tokens of the answers ``settled`` finds for ``keys``: paid
        by the jobs that asked, reused by this one."""
        ...

    async def record_answers(self, answers: list[tuple[str, JudgeResponse]]) -> None:
        """Answers known without a batch (the response cache), readable by every replica."""
        ...

    async def counts(self) -> dict[str, int]:
        """Requests by state (``answered``, ``failed``, ...)."""
        ...

    async def totals(self) -> LedgerTotals:
        """Files, batches and tokens of the job's parts, over every process that ran them."""
        ...


class JobIntake(Protocol):
    """An upload: a job is invisible to workers until ``finish_ingest``."""

    async def begin_job(
        self,
        *,
        tenant: str,
        name: str | None,
        idempotency_key: str | None,
        judge: JobJudge | None = None,
        max_active: int | None = None,
    ) -> JobRow:
        """A new job in state ``ingesting``. With ``max_active``, raises ``ActiveJobLimit``
        when the tenant already occupies that many slots: the count and the insert are one
        atomic step, so concurrent uploads never exceed it."""
        ...

    async def add_lines(self, job_id: str, rows: Sequence[tuple[int, int, str]]) -> None: ...
    async def add_rejections(self, job_id: str, rows: Sequence[tuple[int, str]]) -> None:
        """Keep rejected lines ``(line, LineRejection JSON)`` as the upload streams."""
        ...

    async def finish_ingest(
        self,
        job_id: str,
        *,
        total: int,
        rejections: list[dict[str, Any]],
        body_sha256: str,
        rejected: int | None = None,
    ) -> JobRow:
        """Queue the job; its row keeps ``rejections`` (the first ones when ``rejected``, the
        count of them all, is larger)."""
        ...

    async def discard_job(self, job_id: str) -> None: ...
    async def find_by_idempotency_key(self, tenant: str, key: str) -> JobRow | None: ...
    async def count_occupying(self, tenant: str) -> int: ...


class JobReader(Protocol):
    """What the API reads and changes of a tenant's batches."""

    async def get_job(self, tenant: str, job_id: str) -> JobRow | None: ...
    async def line_counts(self, job_id: str) -> LineCounts: ...
    async def list_jobs(
        self, tenant: str, *, limit: int, before: tuple[float, str] | None
    ) -> list[JobRow]: ...
    async def results_page(
        self, job_id: str, *, start: int, limit: int, with_line: bool = False
    ) -> list[Any]: ...
    async def line_number(self, job_id: str, seq: int) -> int: ...
    async def queue_depth(self) -> int: ...
    async def cancel(self, tenant: str, job_id: str) -> JobRow | None: ...
    async def retry_transport_failures(
        self, tenant: str, job_id: str, *, max_active: int | None = None
    ) -> int | None:
        """Queue again the lines of a completed batch whose result holds a ``transport``
        failure, and the job with them: how many, or None when the job is not completed
        (it is still scored, was cancelled or failed). The other lines keep their results.
        With ``max_active``, raises ``ActiveJobLimit`` (and queues nothing) when lines would
        be queued while the tenant already occupies that many slots."""
        ...

    async def rejections_page(
        self, job_id: str, *, after: int, limit: int, skip: int = 0
    ) -> list[tuple[int, str]]:
        """What ``add_rejections`` kept for lines numbered above ``after``, in line order: at
        most ``limit``, the first ``skip`` passed over."""
        ...

    async def count_rejections(self, job_id: str, *, before: int | None = None) -> int:
        """How many rejected lines ``add_rejections`` kept (those numbered below ``before``)."""
        ...


class LineQueue(Protocol):
    """The workers' side: lines leased, renewed, released and completed."""

    async def recover(self) -> None: ...
    async def active_job_ids(
        self,
        limit: int = 32,
        *,
        provider_done: bool = False,
        judges: Mapping[str | None, bool] | None = None,
    ) -> list[str]:
        """Queued or running jobs, oldest first; with ``provider_done`` only those whose
        provider phase has ended (what the batch route's workers may score). ``judges`` keeps
        only jobs of those judge keys (None: jobs stored without one), each mapped to whether
        its jobs wait for the provider phase (then ``provider_done`` is not used)."""
        ...

    async def waiting_jobs(self, judges: Collection[str], *, limit: int = 32) -> list[JobRow]:
        """Active jobs of a judge not in ``judges`` that no process is working on now."""
        ...

    async def note_waiting(self, job_id: str, detail: str) -> None:
        """Set the detail of a job nobody scores (unless another worker took it meanwhile)."""
        ...

    async def claim(
        self, owner: str, *, job_ids: Iterable[str], limit: int, lease_s: float
    ) -> list[ClaimedLine]: ...
    async def renew(self, owner: str, *, lease_s: float) -> None: ...
    async def release(self, owner: str) -> None: ...
    async def complete(self, owner: str, done: Sequence[DoneLine]) -> None: ...


class ProviderPhaseStore(Protocol):
    """The provider phase (``openai-batch``): one process at a time sends a job's judge
    requests through the Batch API, under a lease; its ledger and answers live in the store."""

    def provider_ledger(
        self,
        job_id: str,
        render: Callable[[Sequence[tuple[str, int, str]]], list[tuple[str, bytes]]],
    ) -> ProviderLedger:
        """Job ``job_id``'s ledger; ``render`` turns (key, line number, request line JSON) of
        requests into their Batch API lines (the store keeps only which line each came from)."""
        ...

    async def claim_provider_phase(
        self, owner: str, *, lease_s: float, judges: Collection[str | None] | None = None
    ) -> str | None:
        """Lease the provider phase of the oldest job that needs one (of ``judges`` only, by
        key, when given)."""
        ...

    async def renew_provider_phase(
        self, owner: str, job_id: str, *, lease_s: float, detail: str | None = None
    ) -> str:
        """``held``, ``ended`` (the job is no longer active) or ``taken`` (by another owner)."""
        ...

    async def end_provider_phase(
        self, owner: str, job_id: str, *, done: bool, detail: str | None = None
    ) -> None: ...
    async def fail_job(self, job_id: str, detail: str, *, owner: str | None = None) -> None:
        """End an active job as ``failed``; with ``owner``, only while that process holds its
        provider phase (a process whose lease ran out must not fail a job another took over)."""
        ...

    async def unscored_requests(
        self, job_id: str, *, after: int, limit: int
    ) -> list[tuple[int, int, str]]: ...
    async def answer_of(self, key: str, *, job_id: str | None = None) -> JudgeResponse | None:
        """The answer to ``key`` from a job of ``job_id``'s tenant (or of any job)."""
        ...

    async def failure_of(
        self, key: str, *, job_id: str | None = None
    ) -> tuple[int, int | None, str] | None:
        """(tries, status, message) of ``key`` failed for good in job ``job_id`` (or any)."""
        ...

    async def ended_provider_phases(
        self,
        limit: int = 32,
        *,
        after: str | None = None,
        judges: Collection[str | None] | None = None,
    ) -> list[str]:
        """Jobs no longer active whose provider ledger still has open parts (to cancel), of
        ``judges`` only (by key) when given: a page in id order, those after id ``after``."""
        ...


class AnswerStore(Protocol):
    """Judge answers of the live route, shared by every process on the store."""

    async def keep_answers(self, answers: Sequence[KeptAnswer]) -> None:
        """Keep ``answers`` in one transaction; a key kept already keeps its first answer."""
        ...

    async def answers_of_lines(
        self, job_id: str, seqs: Collection[int]
    ) -> list[tuple[str, JudgeResponse]]:
        """(key, answer) of every answer kept while scoring lines ``seqs`` of ``job_id``."""
        ...


class JobStore(JobIntake, JobReader, LineQueue, ProviderPhaseStore, AnswerStore, Protocol):
    """Durable batches of request lines, leased to workers and answered once each: every role."""

    embedded: bool
    """True when one process owns the store (SQLite, memory): leases found at start-up are
    stale."""

    async def close(self) -> None: ...
    async def ping(self) -> None:
        """Raise ``StoreUnavailable`` unless the store answers now."""
        ...


class JobStoreClass(Protocol):
    """What a registered store provides: ``open`` builds a connected store for a URL."""

    async def open(self, url: str, *, schema: str | None = None, migrate: bool = True) -> Any:
        """The store at ``url``, connected, and migrated unless ``migrate`` is False."""
        ...


# What RFC 3986 allows before "://": a store under any other name could never be opened.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")


def _installed_store(scheme: str, found: object) -> JobStoreClass:
    """The store class an installed package's ``faithjudge.job_stores`` entry point names, for
    URLs of the entry point's name: anything with an ``open`` coroutine function."""
    if not _SCHEME.match(scheme):
        raise ValueError(f"{scheme!r} is no URL scheme (a letter, then letters, digits, + . -)")
    if not inspect.iscoroutinefunction(getattr(found, "open", None)):
        raise TypeError(f"names a {type(found).__name__} without an async open(url, ...)")
    return cast(JobStoreClass, found)


JOB_STORES: Registry[JobStoreClass] = Registry(
    "job store", group="faithjudge.job_stores", adapt=_installed_store
)
"""Store classes by the URL scheme they claim (the part of a database URL before ``://``): those
registered here, then those of installed packages (``faithjudge.job_stores`` entry points)."""


def register_job_store(
    schemes: Iterable[str], store: JobStoreClass | str, *, replace: bool = False
) -> None:
    """Make URLs of ``schemes`` open ``store`` (a class with ``open``, or a lazy
    ``"module:Class"`` reference imported when such a URL is first opened).

    Raises:
        ValueError: a scheme already claimed by another store (unless ``replace``).
    """
    for scheme in schemes:
        JOB_STORES.register(scheme, store, replace=replace)


register_job_store(
    ("sqlite", "sqlite+aiosqlite", "postgresql", "postgres", "postgresql+asyncpg"),
    "faithjudge.jobs.sql.store:SqlJobStore",
)
register_job_store(("memory",), "faithjudge.jobs.memory_store:MemoryJobStore")


def store_schemes() -> tuple[str, ...]:
    """The URL schemes some registered store claims (nothing is imported)."""
    return JOB_STORES.names()


async def open_job_store(url: str, *, schema: str | None = None, migrate: bool = True) -> JobStore:
    """The store at ``url`` (``sqlite:///PATH``, ``postgresql://...``, ``memory://NAME``, or any
    scheme of ``JOB_STORES``), connected and migrated unless ``migrate`` is False.

    Raises:
        ConfigError: a URL without a scheme, a scheme no store claims (listing them), or one
            an installed package claims with a store that cannot be loaded (naming it).
    """
    scheme, sep, _ = url.partition("://")
    if not sep or not scheme:
        raise ConfigError(f"not a database URL: {url!r} (postgresql://USER@HOST/DB)")
    try:
        store_class = JOB_STORES.get(scheme)
    except UnknownName:
        raise ConfigError(
            f"unsupported database {scheme!r}: use one of {', '.join(store_schemes())} "
            "(postgresql://USER@HOST/DB or sqlite:///PATH)"
        ) from None
    except PluginError as exc:
        raise ConfigError(str(exc)) from exc
    store: JobStore = await store_class.open(url, schema=schema, migrate=migrate)
    return store
