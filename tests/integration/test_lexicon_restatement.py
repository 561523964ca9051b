"""A CoT that only restates the answer documents no evidence: the offline judge grades its
clinical fidelity at most 2, for every option of every knowledge-base question.

Each option is restated three ways (the answer alone; the question turned into a statement of
the option; the question quoted, that statement and the answer) and scored through the real
``faithjudge score`` path with ``lexicon:v1``, the option as ground truth and as answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from service.runtime import open_scorer
from service.scorefile import score_file
from service.settings import Settings
from tests.restatements import restatements, statement

REPO = Path(__file__).resolve().parents[2]
KB = orjson.loads((REPO / "knowledge_base" / "cxr_vqa.json").read_bytes())["entries"]
CASES = [
    (question, option, form, cot)
    for question, entry in KB.items()
    for option in entry["answers"]
    for form, cot in restatements(question, option).items()
]


def test_statements_read_as_plain_english() -> None:
    assert statement("Is there atelectasis on the left side? (yes or no)", "yes") == (
        "There is atelectasis on the left side."
    )
    assert statement("Is an endotracheal tube present in this image? (yes or no)", "no") == (
        "No endotracheal tube is present in this image."
    )
    assert statement(
        "Which side shows more severe pleural effusion? (right, left, same severity, none)", "left"
    ) == ("The left side shows more severe pleural effusion.")
    assert len(CASES) == 3 * sum(len(entry["answers"]) for entry in KB.values())


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("restatement")
    requests = [
        {
            "item_id": f"r{i}",
            "question": question,
            "ground_truth": option,
            "answer": option,
            "cot": cot,
            "metrics": ["clinical_fidelity"],
        }
        for i, (question, option, _, cot) in enumerate(CASES)
    ]
    source, output = tmp / "in.jsonl", tmp / "out.jsonl"
    source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in requests))

    async def run() -> None:
        settings = Settings(evaluator="lexicon:v1", data_dir=tmp / "data", cache=False)
        async with open_scorer(settings) as scorer:
            await score_file(scorer, source, output, concurrency=8)

    anyio.run(run)
    return [orjson.loads(line) for line in output.read_bytes().splitlines()]


def test_every_option_of_every_question_is_graded(graded: list[dict[str, Any]]) -> None:
    failures = [
        (CASES[i][0], CASES[i][1], CASES[i][2], r["metrics"]["clinical_fidelity"]["failure"])
        for i, r in enumerate(graded)
        if r["metrics"]["clinical_fidelity"]["status"] != "valid"
    ]
    assert failures == []


def test_a_restated_answer_earns_at_most_cf_2(graded: list[dict[str, Any]]) -> None:
    too_high = [
        (CASES[i][0], CASES[i][1], CASES[i][2], r["metrics"]["clinical_fidelity"]["score"])
        for i, r in enumerate(graded)
        if (r["metrics"]["clinical_fidelity"]["score"] or 0) > 2
    ]
    assert too_high == []
    scores = {r["metrics"]["clinical_fidelity"]["score"] for r in graded}
    assert scores <= {1, 2} and 1 in scores  # the bare answer states no finding at all
