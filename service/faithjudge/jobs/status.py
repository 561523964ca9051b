"""A job's status (counts, progress, ETA, tokens and their price) from its row and the
aggregate over its lines."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from faithjudge_client.bodies import TERMINAL_STATES, JobStatus, JobTokens

from faithjudge.errors import ConfigError
from faithjudge.jobs.interface import (
    PHASE_UNDERWAY_PREFIX,
    RECENT_S,
    JobReader,
    JobRow,
    LineCounts,
)
from faithjudge.jobs.judges import job_judge_spec
from faithjudge.judges import is_batch_route
from faithjudge.scoring.outcomes import unjudged_reason
from faithjudge.settings import Settings
from faithjudge.transport.base import Usage

__all__ = ["build_status", "job_status"]


def _eta(row: JobRow, counts: LineCounts, pending: int, now: float) -> float | None:
    if row.status in TERMINAL_STATES:
        return None
    if pending == 0:
        return 0.0
    # recent throughput when the job has run long enough; else the average since it started
    rate = 0.0
    if counts.first_done_at is not None and now - counts.first_done_at >= RECENT_S:
        rate = counts.recent_done / RECENT_S
    elif row.started_at is not None and counts.done > 0:
        rate = counts.done / max(now - row.started_at, 1e-3)
    return round(pending / rate, 1) if rate > 0 else None


def build_status(
    row: JobRow,
    counts: LineCounts,
    *,
    now: float | None = None,
    settings: Settings | None = None,
) -> JobStatus:
    """The status of ``row``; with ``settings``, its tokens priced at their prices."""
    now = time.time() if now is None else now
    pending = 0 if row.status in TERMINAL_STATES else max(row.total - counts.done, 0)
    statuses = _not_judged_apart(counts)
    statuses["error"] = counts.errors
    return JobStatus(
        id=row.id,
        name=row.name,
        status=row.status,  # type: ignore[arg-type]
        created_at=datetime.fromtimestamp(row.created_at, UTC),
        updated_at=datetime.fromtimestamp(row.updated_at, UTC),
        total=row.total,
        done=counts.done,
        pending=pending,
        counts=statuses,
        failure_stages={k: v for k, v in counts.stages.items() if v},
        progress=min(1.0, counts.done / row.total) if row.total else 1.0,
        eta_seconds=_eta(row, counts, pending, now),
        rejected=row.rejected_count,
        cancelled=max(row.total - counts.done, 0) if row.status == "cancelled" else 0,
        detail=_current(row) or _unjudged(row, counts),
        judge=row.judge,
        tokens=JobTokens(
            prompt=counts.tokens.prompt_tokens,
            completion=counts.tokens.completion_tokens,
            cached=counts.tokens.cached_tokens,
        ),
        cost_usd=None if settings is None else _cost(settings, row, counts.tokens),
    )


def _cost(settings: Settings, row: JobRow, tokens: Usage) -> float | None:
    """The price of the lines' tokens as ``faithjudge score`` prices a run's (cached input at
    its own price), at the Batch API's discount for a job of the batch route, whose lines were
    scored with the answers of its provider batches. The ledger's totals in ``detail`` count
    the same answers once more, as the phase paid for them: they are not added here."""
    cost = settings.token_cost(
        tokens.prompt_tokens,
        tokens.completion_tokens,
        tokens.cached_tokens,
        batch=_on_batch_route(row),
    )
    return None if cost is None else round(cost, 6)


def _on_batch_route(row: JobRow) -> bool:
    judge = job_judge_spec(row)
    if judge is None:
        return False
    try:
        return is_batch_route(judge)
    except ConfigError:  # a plugin backend this process cannot load: it scores none of its jobs
        return False


def _not_judged_apart(counts: LineCounts) -> dict[str, int]:
    """Grades by status, with the KB misses (stored as ``invalid``) counted as ``not_judged``,
    as ``score`` and the reports count them; ``failure_stages`` still names the stage.

    Only ``kb`` is moved: it is never a line's own error, whereas a ``transport`` stage count
    mixes failed grades with failed lines, which the aggregate cannot tell apart.
    """
    statuses = {k: v for k, v in counts.statuses.items() if v}
    moved = min(counts.stages.get("kb", 0), statuses.get("invalid", 0))
    if moved:
        statuses["invalid"] -= moved
        statuses["not_judged"] = moved
        if not statuses["invalid"]:
            del statuses["invalid"]
    return statuses


def _current(row: JobRow) -> str | None:
    """The row's detail, unless it is the progress of a provider phase the job outlived: a
    cancelled job whose last word was "batches 5 validating" says it was cancelled instead."""
    detail = row.detail
    if detail is None or not detail.startswith(PHASE_UNDERWAY_PREFIX):
        return detail
    if row.status == "cancelled":
        return (
            "cancelled during its Batch API phase: its provider batches are cancelled too, "
            "and what they answered is kept"
        )
    if row.status in TERMINAL_STATES:
        return f"{row.status} during its Batch API phase"
    return detail


def _unjudged(row: JobRow, counts: LineCounts) -> str | None:
    """A completed job whose every grade failed before the judge (a dead judge URL, a KB
    without its questions) says so: its status alone would read as a success."""
    if row.status != "completed":
        return None
    why = unjudged_reason(counts.statuses, counts.stages)
    return None if why is None else f"completed, but {why}"


async def job_status(store: JobReader, row: JobRow, settings: Settings | None = None) -> JobStatus:
    """``row``'s status from its lines' aggregate; with ``settings``, its tokens priced."""
    return build_status(row, await store.line_counts(row.id), settings=settings)
