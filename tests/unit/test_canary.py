"""The judge canary's rule (``faithjudge.stats.canary``), its ``[canary]`` table and its pinned
file's reader."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from faithjudge.errors import ConfigError, UserInputError
from faithjudge.reports.canary import canary_findings, parse_canary_table
from faithjudge.runners.canary import read_pinned
from faithjudge.stats.canary import (
    CanaryCheck,
    CanaryRecords,
    Grade,
    JudgeIdentity,
    Tolerance,
    compare,
)


def _grades(*scores: int | str) -> dict[tuple[str, str], Grade]:
    return {
        (f"item-{i}", "clinical_fidelity"): (
            Grade(outcome="valid", score=s) if isinstance(s, int) else Grade(outcome=s)
        )
        for i, s in enumerate(scores)
    }


def test_the_same_grades_pass_and_list_nothing() -> None:
    comparison = compare(_grades(1, 3, 5, "parse"), _grades(1, 3, 5, "parse"))
    assert comparison.verdict == "pass"
    assert comparison.agreement == 100.0
    assert comparison.differing == ()


def test_a_score_within_the_tolerance_agrees_and_one_beyond_it_does_not() -> None:
    pinned, now = _grades(3, 3), _grades(4, 5)
    assert len(compare(pinned, now).differing) == 2
    within = compare(pinned, now, Tolerance(score_tolerance=1, min_agreement=50))
    assert [p.item for p in within.differing] == ["item-1"]
    assert within.verdict == "pass"
    assert within.differing[0].describe() == "item-1, CF: score 3 -> score 5"


def test_another_outcome_never_agrees_whatever_the_score_tolerance() -> None:
    comparison = compare(_grades(3), _grades("schema"), Tolerance(score_tolerance=4))
    assert comparison.verdict == "drift"
    assert comparison.differing[0].describe() == "item-0, CF: score 3 -> schema"


def test_the_agreement_threshold_is_inclusive() -> None:
    pinned = _grades(*([2] * 10))
    now = _grades(*([2] * 9 + [4]))
    assert compare(pinned, now, Tolerance(min_agreement=90)).verdict == "pass"
    assert compare(pinned, now, Tolerance(min_agreement=90.1)).verdict == "drift"
    assert compare(pinned, now).verdict == "pass"  # the default: 90 %


def test_an_unanswered_grade_is_not_compared_and_the_check_could_not_run() -> None:
    comparison = compare(_grades(2, 2), _grades(2, "transport"))
    assert comparison.verdict == "unreached"
    assert len(comparison.compared) == 1 and comparison.agreement == 100.0
    assert "1 grade(s) got no answer" in comparison.summary()


def test_a_grade_no_longer_given_is_missing_and_drifts() -> None:
    comparison = compare(_grades(2, 2), dict(list(_grades(2, 2).items())[:1]))
    assert comparison.differing[0].now.outcome == "missing"


def test_judge_changes_name_what_changed_fingerprint_included() -> None:
    was = JudgeIdentity(judge="openai:m", model="m-1", judge_sha256="a" * 64,
                        prompt_sha256="p", fingerprints=("fp_1",))  # fmt: skip
    now = was.model_copy(update={"judge_sha256": "b" * 64, "prompt_sha256": "q",
                                 "fingerprints": ("fp_2",)})  # fmt: skip
    assert was.changes(now) == [
        f"judge configuration {'a' * 12} -> {'b' * 12} (prompt set)",
        "system_fingerprint fp_1 -> fp_2",
    ]
    assert was.changes(was) == []


def _check(checked_at: str, scores_now: tuple[int, ...], sha: str = "s") -> CanaryCheck:
    judge = JudgeIdentity(judge="lexicon:v1")
    return CanaryCheck(pinned_file="c.jsonl", pinned_sha256=sha, recorded_at="t0",
                       pinned_judge=judge, judge=judge, checked_at=checked_at,
                       comparison=compare(_grades(1, 1), _grades(*scores_now)))  # fmt: skip


def test_the_records_keep_when_a_file_last_passed() -> None:
    records = CanaryRecords().with_check(_check("t1", (1, 1)))
    assert records.checks["s"].last_passed_at == "t1"
    records = records.with_check(_check("t2", (4, 4)))
    assert records.checks["s"].verdict == "drift"
    assert records.checks["s"].last_passed_at == "t1"
    again = CanaryRecords.parse(records.model_dump_json().encode())
    assert again == records
    with pytest.raises(ValueError, match="not a canary record"):
        CanaryRecords.parse(b'{"checks": {"s": {"pinned_file": 3}}}')


def test_the_table_names_a_bad_key(tmp_path: Path) -> None:
    table = parse_canary_table({"pinned": "c.jsonl", "min_agreement": 95}, tmp_path)
    assert table.pinned == tmp_path / "c.jsonl"
    assert table.tolerance == Tolerance(score_tolerance=0, min_agreement=95.0)
    for bad, named in (({}, "pinned"), ({"pinned": "c", "score_tolerance": 1.5}, "score_tolerance"),
                       ({"pinned": "c", "min_agreement": 101}, "min_agreement"),
                       ({"pinned": "c", "tolerance": 1}, "unknown keys")):  # fmt: skip
        with pytest.raises(ConfigError, match=named):
            parse_canary_table(bad, tmp_path)


def test_the_gate_fails_a_check_older_than_its_age_limit(tmp_path: Path) -> None:
    pinned = tmp_path / "c.jsonl"
    pinned.write_text("pinned\n")
    sha = hashlib.sha256(pinned.read_bytes()).hexdigest()
    records = CanaryRecords().with_check(_check("2025-01-01T00:00:00Z", (1, 1), sha))
    table = parse_canary_table({"pinned": "c.jsonl", "max_age_hours": 24}, tmp_path)
    fresh = datetime(2025, 1, 1, 12, tzinfo=UTC)
    agreement, _judge = canary_findings(table, records, None, now=fresh)
    assert agreement.passed is True and agreement.value == 100.0
    stale, _ = canary_findings(table, records, None, now=fresh + timedelta(days=1))
    assert stale.passed is False and "36.0 h old, more than max_age_hours 24" in stale.detail
    assert canary_findings(table, CanaryRecords(), None)[0].passed is None


def test_a_pinned_file_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "pinned.jsonl"
    path.write_text('{"item_id": "x"}\n')
    with pytest.raises(UserInputError, match="not a pinned canary"):
        read_pinned(path)
    header = {"faithjudge_canary": 1, "recorded_at": "t", "judge": {"judge": "lexicon:v1"}}
    path.write_text(json.dumps(header) + '\n{"item": "a", "line": 1, "grades": {}}\n')
    with pytest.raises(UserInputError, match=r"pinned.jsonl:2: .*grades"):
        read_pinned(path)
