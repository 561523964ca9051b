"""Real-shaped inputs end to end: every line scored or named, none refused, none lost.

What real VLMs write goes into the fields users fill: whole JSON replies and tagged replies in
``answer`` and ``baseline.answer`` (thousands of characters), answers outside the option list,
unicode lookalikes and invisible controls, non-finite numbers. The corpus is built here; where
the reader-study dev split is present (``../shared/data``), its real replies are run the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.runners.file_runner import score_file
from faithjudge.scoring.answers import parse_question
from faithjudge.settings import Settings
from faithjudge_client.lines import ItemResult, ScoreRequest

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
KB = json.loads((ROOT / "knowledge_base" / "cxr_vqa.json").read_text())["entries"]
DEV = ROOT.parent / "shared" / "data" / "reader_study" / "dev.jsonl"

SIDE = "Which side shows more severe pleural effusion? (right, left, same severity, none)"
BINARY = "Is there a pleural effusion on the left? (yes or no)"
SEVERITY = (
    "What is the severity of pulmonary congestion? (none, questionable, mild, moderate, severe)"
)
COT = (
    "<think><step>The left costophrenic angle is blunted with a meniscus.</step>"
    "<step>The right hemithorax is clear.</step></think><answer>left</answer>"
)


def _reply(answer: str, words: int = 10) -> str:
    thought = " ".join(["The left costophrenic angle is blunted with a meniscus."] * words)
    return json.dumps({"thought": thought, "answer": answer})


def corpus() -> list[tuple[dict[str, Any] | bytes, dict[str, Any]]]:
    """(line, what its result must show)."""
    base = {"question": SIDE, "ground_truth": "left", "cot": COT, "model": "vlm-a"}
    return [
        (base | {"item_id": "json-reply", "answer": _reply("Left"),
                 "baseline": {"answer": _reply("right")}},
         {"answer": "left", "flip": True}),
        (base | {"item_id": "long-reply", "answer": _reply("left", words=90)},
         {"answer": "left"}),  # 5,000+ characters in the answer field
        (base | {"item_id": "tagged-baseline",
                 "baseline": {"answer": "<think>the right is worse</think><answer>right</answer>"}},
         {"answer": "left", "flip": True}),
        (base | {"item_id": "head-of-reply", "answer": "left,   think: { steps: [ clear ] }"},
         {"answer": "left"}),
        (base | {"item_id": "off-option", "answer": "probably the left one, maybe"},
         {"answer": None, "answer_in_options": False, "cf": "graded"}),
        (base | {"item_id": "neither", "answer": "Neither", "ground_truth": "none"},
         {"answer": "none"}),
        (base | {"item_id": "absent-severity", "question": SEVERITY, "answer": "Absent.",
                 "ground_truth": "none"},
         {"answer": "none"}),
        (base | {"item_id": "bidi", "answer": "\u202eleft"}, {"answer": "left"}),
        (base | {"item_id": "fullwidth", "answer": "Ｌｅｆｔ"}, {"answer": "left"}),
        (base | {"item_id": "cyrillic-e", "answer": "l\u0435ft"},
         {"answer": None, "answer_in_options": False, "cf": "graded"}),
        (base | {"item_id": "binary-json", "question": BINARY, "ground_truth": "yes",
                 "answer": '```json\n{"answer": "Yes"}\n```'},
         {"answer": "yes"}),
        (base | {"item_id": "target-off", "modification": {"code": "TB-RAD",
                                                            "target_answer": "maybe"}},
         {"aligned": False}),
        (json.dumps(base | {"item_id": "nan", "context": {"age": float("nan")}}).encode(),
         {"error": "context.age: NaN or infinity is not a JSON number", "item_id": "nan"}),
        (json.dumps(base | {"item_id": "inf", "metadata": {"w": [1.0, float("inf")]}}).encode(),
         {"error": "metadata.w[1]: NaN or infinity", "item_id": "inf"}),
        (b'{"item_id": "big", "question": "q? (yes or no)", "ground_truth": "yes", "cot": "x", '
         b'"context": {"n": 1e999}}',
         {"error": "context.n: NaN or infinity", "item_id": "big"}),
        (b"not json at all", {"error": "not valid JSON"}),
    ]  # fmt: skip


def _as_line(entry: dict[str, Any] | bytes) -> bytes:
    return entry if isinstance(entry, bytes) else orjson.dumps(entry)


async def test_every_real_shaped_line_is_scored_or_named(tmp_path: Path) -> None:
    cases = corpus()
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(_as_line(line) for line, _ in cases) + b"\n")
    out = tmp_path / "out.jsonl"
    async with open_scorer(Settings(data_dir=tmp_path / "data", cache=False)) as scorer:
        summary = await score_file(scorer, source, out, concurrency=8)
    results = [ItemResult.model_validate_json(x) for x in out.read_bytes().splitlines()]
    assert [r.line for r in results] == list(range(1, len(cases) + 1))  # none lost
    assert summary.total_lines == len(cases)
    for result, (_, expected) in zip(results, cases, strict=True):
        where = (result.line, result.item_id)
        if "error" in expected:
            assert result.error is not None and expected["error"] in result.error.detail, where
            assert f"line {result.line}:" in result.error.detail
            assert result.item_id == expected.get("item_id"), where
            continue
        assert result.error is None, (where, result.error)
        assert set(result.metrics) == {"clinical_fidelity", "causal_attribution", "confidence_tone"}
        cf = result.metrics["clinical_fidelity"]
        assert cf.status == "valid", (where, cf.failure)  # never voided by the answer
        if "answer" in expected:
            assert result.answer == expected["answer"], where
        if "answer_in_options" in expected:
            assert result.answer_in_options is expected["answer_in_options"], where
        if "flip" in expected:
            assert result.flip is not None and result.flip.value is expected["flip"], where
        if "aligned" in expected:
            assert result.modification is not None
            assert result.modification.aligned is expected["aligned"], where
    raw = {r.item_id: r.answer_raw for r in results}
    assert raw["long-reply"] is not None and len(raw["long-reply"]) > 5_000  # kept raw


async def test_every_option_of_every_kb_question_is_graded_when_restated(tmp_path: Path) -> None:
    requests = []
    for question in KB:
        for option in parse_question(question).options:
            cot = f"<think><step>The answer is {option}.</step></think><answer>{option}</answer>"
            requests.append(ScoreRequest(question=question, ground_truth=option, cot=cot))
    assert len(requests) > 90
    async with open_scorer(Settings(data_dir=tmp_path / "data", cache=False)) as scorer:
        for request in requests:
            result = await scorer.score(request)
            cf = result.metrics["clinical_fidelity"]
            where = (request.question, request.ground_truth)
            assert cf.status == "valid", (where, cf.failure)  # graded: no kb failure
            assert result.answer == request.ground_truth, where
            assert cf.score is not None and cf.score <= 2, (where, cf.score)  # no finding


@pytest.mark.skipif(not DEV.is_file(), reason="../shared/data/reader_study/dev.jsonl is absent")
async def test_real_replies_in_answer_fields_read_as_the_cot_is(tmp_path: Path) -> None:
    rows = [json.loads(x) for x in DEV.read_text().splitlines() if x.strip()]
    lines = []
    for row in rows:
        # the whole modified reply where a label was expected, the baseline reply likewise
        lines.append(orjson.dumps({
            "item_id": row["item_id"], "model": row["model"], "question": row["question"],
            "ground_truth": row["ground_truth"], "cot": row["modified_cot"],
            "answer": row["modified_cot"],
            "baseline": {"answer": row["baseline_cot"]},
            "modification": {"code": row["modification"]},
        }))  # fmt: skip
    source = tmp_path / "dev_whole_replies.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out.jsonl"
    async with open_scorer(Settings(data_dir=tmp_path / "data", cache=False)) as scorer:
        await score_file(scorer, source, out, concurrency=8)
    results = [ItemResult.model_validate_json(x) for x in out.read_bytes().splitlines()]
    assert len(results) == len(rows)
    assert all(r.error is None for r in results), [r.error for r in results if r.error]
    for result in results:
        for metric in result.metrics.values():
            assert metric.status == "valid", (result.item_id, metric.failure)
    # the answer read from the whole reply is the one read from the CoT
    from faithjudge.scoring.answers import extract_answer, normalize_answer

    for row, result in zip(rows, results, strict=True):
        spec = parse_question(row["question"])
        assert result.answer == normalize_answer(extract_answer(row["modified_cot"]), spec)
