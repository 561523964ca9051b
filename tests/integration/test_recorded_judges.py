"""Replay real judge outputs through grading (needs ``../shared/data``).

``judge_outputs/dev.jsonl`` holds what four judges answered on the 66 reader-study items of the
dev split, with the classification of the paper's own harness (``recorded_error``). Every
response is run through :func:`verify` against the item's ``modified_cot``; the per-(judge,
metric) counts of the five outcomes must add up, and our stage must agree with the recorded
error in the large majority of the records that have one. The counts table is printed
(``pytest -s``).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest
from faithjudge.assets.schemas import judge_output_validator
from faithjudge.scoring.grading import verify
from faithjudge.scoring.normalize import normalize
from faithjudge_client.lines import MetricResult

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
JUDGE_OUTPUTS = DATA / "judge_outputs" / "dev.jsonl"
READER_STUDY = DATA / "reader_study" / "dev.jsonl"

pytestmark = [
    pytest.mark.shared_data,
    pytest.mark.skipif(
        not (JUDGE_OUTPUTS.is_file() and READER_STUDY.is_file()),
        reason="needs ../shared/data (reader study + recorded judge outputs)",
    ),
]

OUTCOMES = ("parse", "schema", "abstain", "evidence", "valid")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _outcome(result: MetricResult) -> str:
    if result.status == "valid":
        return "valid"
    assert result.failure is not None
    return result.failure.stage


def _recorded_stage(error: str) -> str | None:
    """The stage of the original harness's error message, when it names one we know."""
    if error == "not a JSON object":
        return "parse"
    if re.match(r"(missing|invalid) '\w+'", error):
        return "schema"
    if re.match(r"quote \d+ not found", error):
        return "evidence"
    return None


@cache
def _replayed() -> list[tuple[dict[str, Any], str, MetricResult]]:
    items = {item["item_id"]: item for item in _read_jsonl(READER_STUDY)}
    cots = {item_id: normalize(item["modified_cot"]) for item_id, item in items.items()}
    out = []
    for record in _read_jsonl(JUDGE_OUTPUTS):
        response = record["response"]
        raw = "" if response is None else orjson.dumps(response).decode()
        metric = record["metric"]
        result = verify(
            raw,
            metric=metric,
            cot=cots[record["item_id"]],
            validator=judge_output_validator(metric),
        )
        out.append((record, _outcome(result), result))
    return out


def _table(rows: list[tuple[dict[str, Any], str, MetricResult]]) -> str:
    counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for record, outcome, _ in rows:
        counts[record["judge"], record["metric"]][outcome] += 1
    lines = [
        f"{'judge':34} {'metric':20} {'n':>4} " + " ".join(f"{o:>8}" for o in OUTCOMES),
    ]
    for (judge, metric), counter in sorted(counts.items()):
        n = sum(counter.values())
        lines.append(
            f"{judge:34} {metric:20} {n:>4} " + " ".join(f"{counter[o]:>8}" for o in OUTCOMES)
        )
    total = Counter(outcome for _, outcome, _ in rows)
    lines.append(f"{'total':55} {len(rows):>4} " + " ".join(f"{total[o]:>8}" for o in OUTCOMES))
    return "\n".join(lines)


def test_every_record_is_classified_exactly_once() -> None:
    rows = _replayed()
    print("\n" + _table(rows))
    records = _read_jsonl(JUDGE_OUTPUTS)
    assert len(rows) == len(records)
    per_group = Counter((r["judge"], r["metric"]) for r in records)
    outcomes_per_group: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for record, outcome, _ in rows:
        assert outcome in OUTCOMES
        outcomes_per_group[record["judge"], record["metric"]][outcome] += 1
    for group, n in per_group.items():
        assert sum(outcomes_per_group[group].values()) == n
    # Sanity: real judges produce a real mix, not one outcome for everything.
    total = Counter(outcome for _, outcome, _ in rows)
    assert total["valid"] > len(rows) / 4
    assert total["parse"] > 0
    assert total["evidence"] > 0


def test_null_responses_are_parse_failures() -> None:
    for record, outcome, result in _replayed():
        if record["response"] is None:
            assert outcome == "parse"
            assert result.failure is not None
            assert result.failure.detail == "empty response"


def _explained(record: dict[str, Any], expected: str, outcome: str, result: MetricResult) -> bool:
    """Known, intended differences from the original harness.

    * it failed abstentions as schema errors (``invalid 'score'``): METHODS makes them abstains;
    * it required an exact quote after normalisation: METHODS allows 2 % edits, so a long quote
      with, say, a capitalised first letter is evidence here.
    """
    response = record["response"]
    if (expected, outcome) == ("schema", "abstain"):
        return isinstance(response, dict) and response.get("abstain") is True
    if (expected, outcome) == ("evidence", "valid"):
        index = int(record["recorded_error"].split()[1])
        return index < len(result.quotes) and result.quotes[index].edits > 0
    return False


def test_stages_agree_with_the_recorded_errors() -> None:
    compared = agreed = explained = 0
    confusion: Counter[tuple[str, str]] = Counter()
    for record, outcome, result in _replayed():
        expected = _recorded_stage(record["recorded_error"] or "")
        if expected is None:
            continue
        compared += 1
        confusion[expected, outcome] += 1
        if outcome == expected:
            agreed += 1
        elif _explained(record, expected, outcome, result):
            explained += 1
    print(
        f"\nrecorded stage -> ours: {dict(confusion)}\n"
        f"{agreed}/{compared} agree, {explained} differ for known reasons, "
        f"{compared - agreed - explained} unexplained"
    )
    assert compared > 0
    assert agreed / compared >= 0.85
    assert (compared - agreed - explained) / compared <= 0.02


def _contradicts_itself(response: Any) -> bool:
    """A grade that names a reason to abstain (the harness ignored the reason)."""
    return (
        isinstance(response, dict)
        and response.get("abstain") is False
        and bool(response.get("abstain_reason"))
    )


def test_what_the_harness_accepted_mostly_stays_valid() -> None:
    accepted = [(r, o, res) for r, o, res in _replayed() if r["recorded_error"] is None]
    outcomes = Counter(outcome for _, outcome, _ in accepted)
    print(f"\nharness-accepted records -> ours: {dict(outcomes)}")
    # Stricter on purpose: the quote rule also holds for CF, short quotes must be exact, and a
    # grade that also gives a reason to abstain is a schema failure.
    contradictory = [(r, res) for r, _, res in accepted if _contradicts_itself(r["response"])]
    for _, result in contradictory:
        assert result.failure is not None and result.failure.stage == "schema"
        assert result.failure.detail.startswith("abstain_reason: must be null or empty")
    rest = [outcome for r, outcome, _ in accepted if not _contradicts_itself(r["response"])]
    assert rest.count("valid") / len(rest) >= 0.95


def test_valid_results_carry_spans_into_the_original_cot() -> None:
    items = {item["item_id"]: item for item in _read_jsonl(READER_STUDY)}
    checked = 0
    for record, outcome, result in _replayed():
        if outcome != "valid":
            continue
        cot = items[record["item_id"]]["modified_cot"]
        for quote in result.quotes:
            start, end = quote.span
            assert 0 <= start <= end <= len(cot)
            assert end > start
            checked += 1
    assert checked > 0
