"""A batch's status from its row and line aggregates: pending, progress, ETA, counts."""

from __future__ import annotations

from faithjudge.jobs.interface import JobRow, LineCounts
from faithjudge.jobs.status import build_status
from faithjudge.jobs.worker import done_line
from faithjudge_client.lines import Failure, ItemResult, MetricResult

NOW = 1_000_000.0


def _row(status: str, *, total: int = 100, started: float | None = NOW - 10) -> JobRow:
    return JobRow(
        id="b_1",
        tenant="t",
        name=None,
        status=status,
        created_at=NOW - 20,
        updated_at=NOW,
        started_at=started,
        finished_at=None,
        total=total,
        rejected_count=2,
        rejections="[]",
        idempotency_key=None,
        body_sha256=None,
        detail=None,
    )


def _counts(done: int, *, recent: int = 0, first: float | None = None) -> LineCounts:
    return LineCounts(
        done=done,
        statuses={"valid": done, "abstained": 0, "invalid": 0},
        stages={"kb": 1, "parse": 0},
        errors=0,
        recent_done=recent,
        first_done_at=first,
    )


def test_a_young_batch_estimates_from_its_average_rate() -> None:
    status = build_status(_row("running"), _counts(20, first=NOW - 9), now=NOW)
    assert (status.done, status.pending, status.progress) == (20, 80, 0.2)
    assert status.eta_seconds == 40.0  # 20 lines in 10 s: 80 more take 40 s
    assert status.counts == {"valid": 20, "error": 0}
    assert status.failure_stages == {"kb": 1}
    assert status.rejected == 2


def test_an_older_batch_estimates_from_the_recent_window() -> None:
    status = build_status(_row("running"), _counts(50, recent=30, first=NOW - 100), now=NOW)
    assert status.eta_seconds == 50.0  # 1 line/s over the last 30 s


def test_no_rate_yet_no_eta_and_terminal_batches_have_nothing_pending() -> None:
    assert build_status(_row("queued", started=None), _counts(0), now=NOW).eta_seconds is None
    cancelled = build_status(_row("cancelled"), _counts(30, first=NOW - 5), now=NOW)
    assert cancelled.pending == 0 and cancelled.eta_seconds is None and cancelled.progress == 0.3


def test_done_line_counts_statuses_and_failure_stages() -> None:
    result = ItemResult(
        line=3,
        metrics={
            "clinical_fidelity": MetricResult(
                status="invalid", failure=Failure(stage="evidence", detail="x")
            ),
            "confidence_tone": MetricResult(status="valid", score=2),
        },
    )
    stored = done_line("b_1", 2, result)
    assert stored.statuses == {"invalid": 1, "valid": 1}
    assert stored.stages == {"evidence": 1}
    assert stored.is_error == 0
    assert ItemResult.model_validate_json(stored.result) == result


def _graded(statuses: dict[str, int], stages: dict[str, int]) -> LineCounts:
    return LineCounts(
        done=50, statuses=statuses, stages=stages, errors=0, recent_done=0, first_done_at=None
    )


def test_a_completed_batch_that_judged_nothing_says_so() -> None:
    dead_judge = _graded({"invalid": 150}, {"transport": 142, "kb": 8})
    status = build_status(_row("completed", total=50), dead_judge, now=NOW)
    assert status.status == "completed"
    assert status.detail == (
        "completed, but not one grade was judged (KB misses 8, transport failures 142)"
    )
    # while it runs, and once one grade reached the judge, nothing is said
    assert build_status(_row("running", total=50), dead_judge, now=NOW).detail is None
    judged = _graded({"invalid": 149, "valid": 1}, {"transport": 141, "kb": 8})
    assert build_status(_row("completed", total=50), judged, now=NOW).detail is None


def test_a_kb_miss_is_not_judged_not_invalid() -> None:
    """The batch status names a KB miss as ``score`` and the reports do: not judged."""
    counts = _graded({"valid": 40, "invalid": 10}, {"evidence": 3, "kb": 6, "transport": 1})
    status = build_status(_row("completed", total=50), counts, now=NOW)
    assert status.counts == {"valid": 40, "invalid": 4, "not_judged": 6, "error": 0}
    assert status.failure_stages == {"evidence": 3, "kb": 6, "transport": 1}
    only_kb = build_status(_row("completed", total=50), _graded({"invalid": 8}, {"kb": 8}), now=NOW)
    assert only_kb.counts == {"not_judged": 8, "error": 0}
    assert only_kb.detail == "completed, but not one grade was judged (KB misses 8)"


def test_submit_names_kb_misses_as_score_does() -> None:
    from faithjudge.cli.common import err
    from faithjudge.cli.submit import _print_status

    counts = _graded({"valid": 40, "invalid": 10}, {"evidence": 3, "kb": 6, "transport": 1})
    with err.capture() as captured:
        _print_status(build_status(_row("completed", total=50), counts, now=NOW))
    said = " ".join(captured.get().split())
    assert "KB misses (not judged) │ 6" in said and "metric not judged (KB misses) │ 6" in said
    assert "metric invalid │ 4" in said and "failure: kb" not in said
    assert "transport failures (not judged) │ 1" in said and "judge failure: evidence │ 3" in said


def test_a_job_that_ended_mid_phase_no_longer_shows_the_phases_progress() -> None:
    from dataclasses import replace

    from faithjudge.jobs.interface import PHASE_UNDERWAY_PREFIX

    progress = f"{PHASE_UNDERWAY_PREFIX}0 of 15 requests back (0 failed), batches 5 validating"
    running = build_status(replace(_row("running"), detail=progress), _counts(0), now=NOW)
    assert running.detail == progress  # current while the phase runs
    cancelled = build_status(replace(_row("cancelled"), detail=progress), _counts(0), now=NOW)
    assert cancelled.detail is not None and cancelled.detail.startswith("cancelled")
    assert "validating" not in cancelled.detail
    # what the phase said of itself at its end, or why a job failed, is kept as written
    summary = "Batch API: 15 answered, 0 failed for good; 1 batch(es) created"
    kept = build_status(replace(_row("cancelled"), detail=summary), _counts(0), now=NOW)
    assert kept.detail == summary


def _tokens_done(prompt: int, completion: int, cached: int) -> LineCounts:
    from dataclasses import replace

    from faithjudge.transport.base import Usage

    return replace(_counts(10), tokens=Usage(prompt, completion, cached))


def _judged_by(judge: str) -> JobRow:
    from dataclasses import replace

    # a stored judge configuration names its spec ``evaluator`` (hashed, so never renamed)
    return replace(_row("completed"), judge=judge, judge_config=f'{{"evaluator": "{judge}"}}')


def test_the_status_prices_its_lines_tokens_cached_input_at_its_own_price() -> None:
    from faithjudge.settings import Settings

    prices = Settings(
        price_input_per_mtok=2, price_output_per_mtok=8, price_cached_input_per_mtok=0.5
    )
    counts = _tokens_done(3_000_000, 100_000, 2_000_000)
    live = build_status(_judged_by("openai:m"), counts, now=NOW, settings=prices)
    assert live.tokens is not None
    assert (live.tokens.prompt, live.tokens.completion, live.tokens.cached) == (
        3_000_000,
        100_000,
        2_000_000,
    )
    assert live.cost_usd == 2.0 + 1.0 + 0.8  # uncached input, cached input, output
    assert live.cost_usd == prices.token_cost(3_000_000, 100_000, 2_000_000)
    # the batch route's lines were answered by its provider batches: at the Batch API's price
    batch = build_status(_judged_by("openai-batch:m"), counts, now=NOW, settings=prices)
    assert batch.cost_usd == (2.0 + 1.0 + 0.8) * prices.batch_discount
    # no prices, or no settings at all: tokens without dollars
    unpriced = build_status(_judged_by("openai:m"), counts, now=NOW, settings=Settings())
    assert unpriced.cost_usd is None and unpriced.tokens == live.tokens
    assert build_status(_judged_by("openai:m"), counts, now=NOW).cost_usd is None


def test_a_status_without_tokens_still_reads_and_submit_shows_them() -> None:
    from faithjudge.cli.common import err
    from faithjudge.cli.submit import _print_status
    from faithjudge.settings import Settings
    from faithjudge_client.bodies import BatchStatus

    prices = Settings(price_input_per_mtok=2, price_output_per_mtok=8)
    status = build_status(
        _judged_by("openai:m"), _tokens_done(4000, 200, 1000), now=NOW, settings=prices
    )
    body = status.model_dump(mode="json")
    older = {k: v for k, v in body.items() if k not in ("tokens", "cost_usd")}
    assert BatchStatus.model_validate(older).tokens is None  # from a server that predates them
    assert BatchStatus.model_validate(body) == status
    with err.capture() as captured:
        _print_status(status)
    said = " ".join(captured.get().split())
    assert "judge prompt tokens │ 4,000" in said
    assert "of which cached by the provider │ 1,000 (25.0%)" in said
    assert "judge completion tokens │ 200" in said and "price │ $0.0096" in said
