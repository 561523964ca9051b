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
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.runners.file_runner import score_file
from faithjudge.settings import Settings

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


# A CoT that documents the radiographic signs of its answer: the same harness must grade it
# above 2, or a judge that never exceeds 2 would pass the restatement test unnoticed.
DOCUMENTED_QUESTION = "Is there a pleural effusion on the right? (yes or no)"
DOCUMENTED_COT = (
    "<think><step>The right costophrenic angle is blunted.</step>"
    "<step>There is a meniscus at the right base.</step>"
    "<step>The right hemidiaphragm is obscured.</step>"
    "<step>Fluid tracks along the right lateral chest wall.</step>"
    "<step>The heart size is normal and the mediastinum is midline.</step>"
    "<step>There is a right pleural effusion.</step></think><answer>yes</answer>"
)


def _request(item_id: str, question: str, option: str, cot: str) -> dict[str, Any]:
    return {
        "item_id": item_id,
        "question": question,
        "ground_truth": option,
        "answer": option,
        "cot": cot,
        "metrics": ["clinical_fidelity"],
    }


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Clinical fidelity of every restatement (``r{i}``, ``i`` indexing CASES) and of the
    documented control (``documented``), by item id."""
    tmp = tmp_path_factory.mktemp("restatement")
    requests = [
        _request(f"r{i}", question, option, cot)
        for i, (question, option, _, cot) in enumerate(CASES)
    ]
    requests.append(_request("documented", DOCUMENTED_QUESTION, "yes", DOCUMENTED_COT))
    source, output = tmp / "in.jsonl", tmp / "out.jsonl"
    source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in requests))

    async def run() -> None:
        settings = Settings(judge="lexicon:v1", data_dir=tmp / "data", cache=False)
        async with open_scorer(settings) as scorer:
            await score_file(scorer, source, output, concurrency=8)

    anyio.run(run)
    results = [orjson.loads(line) for line in output.read_bytes().splitlines()]
    by_id = {r["item_id"]: r["metrics"]["clinical_fidelity"] for r in results}
    # Results are matched by item id, never by position, and none may be missing.
    assert len(results) == len(by_id) == len(requests)
    return by_id


def test_every_option_of_every_question_is_graded(scored: dict[str, dict[str, Any]]) -> None:
    failures = [
        (question, option, form, scored[f"r{i}"].get("failure"))
        for i, (question, option, form, _) in enumerate(CASES)
        if scored[f"r{i}"]["status"] != "valid"
    ]
    assert failures == []
    kb_failures = [m for m in scored.values() if (m.get("failure") or {}).get("stage") == "kb"]
    assert kb_failures == []


def test_the_harness_sees_a_grade_above_2(scored: dict[str, dict[str, Any]]) -> None:
    control = scored["documented"]
    assert control["status"] == "valid"
    assert control["score"] > 2


def test_a_restated_answer_earns_at_most_cf_2(scored: dict[str, dict[str, Any]]) -> None:
    too_high = [
        (question, option, form, scored[f"r{i}"]["score"])
        for i, (question, option, form, _) in enumerate(CASES)
        if not isinstance(scored[f"r{i}"]["score"], int) or scored[f"r{i}"]["score"] > 2
    ]
    assert too_high == []
    scores = {scored[f"r{i}"]["score"] for i in range(len(CASES))}
    assert scores <= {1, 2} and 1 in scores  # the bare answer states no finding at all
