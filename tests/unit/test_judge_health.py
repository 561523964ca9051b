"""Which judges answer at all: a streak of lines failed at the transport stage marks a judge
down, a line it answers clears it, and a mark without new failures is forgotten."""

from __future__ import annotations

from faithjudge.jobs.judge_health import DOWN_AFTER, JudgeHealth
from faithjudge_client.lines import Failure, ItemResult, MetricResult


def _line(stage: str | None) -> ItemResult:
    failure = None if stage is None else Failure(stage=stage, detail=f"{stage} failed")
    status = "valid" if failure is None else "invalid"
    return ItemResult(
        line=1, metrics={"clinical_fidelity": MetricResult(status=status, failure=failure)}
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_streak_marks_a_judge_down_and_an_answer_clears_it() -> None:
    health = JudgeHealth()
    for _ in range(DOWN_AFTER - 1):
        health.note("j", _line("transport"))
    assert health.failing == {}  # one unlucky line is not a dead judge
    health.note("j", _line("transport"))
    assert health.failing == {"j": "transport failed"}
    health.note("other", _line(None))
    assert "j" in health.failing  # judges are followed one by one
    health.note("j", _line(None))
    assert health.failing == {}


def test_lines_the_judge_never_saw_say_nothing_of_it() -> None:
    health = JudgeHealth(down_after=1)
    health.note("j", _line("kb"))
    health.note("j", _line("input"))
    assert health.failing == {}


def test_a_mark_without_new_failures_is_forgotten() -> None:
    clock = Clock()
    health = JudgeHealth(down_after=1, forget_after_s=60, clock=clock)
    health.note("j", _line("transport"))
    clock.now = 59.0
    assert "j" in health.failing
    health.note("j", _line("transport"))  # a new failure renews the mark
    clock.now = 118.0
    assert "j" in health.failing
    clock.now = 120.0
    assert health.failing == {}


def test_a_failed_provider_phase_marks_the_provider_down_until_one_goes_through() -> None:
    clock = Clock()
    health = JudgeHealth(forget_after_s=60.0, clock=clock)
    health.note_provider("batch", "Batch API: APIConnectionError: Connection error.")
    assert health.providers_failing == {"batch": "Batch API: APIConnectionError: Connection error."}
    assert health.failing == {}  # the judge's lines say nothing yet: none was scored
    health.note_provider("batch", None)
    assert health.providers_failing == {}
    health.note_provider("batch", "Batch API: refused")
    clock.now = 61.0  # no phase failed since: it may be back, as a judge is forgotten
    assert health.providers_failing == {}
