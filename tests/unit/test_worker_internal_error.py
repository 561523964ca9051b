"""A bug while scoring one batch line is recorded on that line, which keeps what it names."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import orjson
from faithjudge.jobs.interface import ClaimedLine
from faithjudge.jobs.worker import Worker
from faithjudge.settings import Settings


class _BrokenScorer:
    caller = SimpleNamespace(judge=object(), cache=None)
    judge_id = "lexicon:v1"

    def items_at_once(self, concurrency: int) -> int:
        return 1

    async def score(self, request: Any, *, line: int) -> Any:
        raise RuntimeError("a bug")


def test_a_scoring_bug_is_an_unjudged_line_with_its_model_and_question() -> None:
    request = {
        "item_id": "i1",
        "model": "vlm-a",
        "question": "Is there a pleural effusion on the left? (yes or no)",
        "ground_truth": "yes",
        "cot": "The left costophrenic angle is blunted.",
        "answer": "yes",
    }
    worker = Worker(store=None, scorer=_BrokenScorer(), settings=Settings())  # type: ignore[arg-type]
    claimed = ClaimedLine(job_id="b_1", seq=0, line=7, request=orjson.dumps(request).decode())

    result = anyio.run(worker._score, claimed)

    assert result.line == 7 and result.item_id == "i1"
    assert result.model == "vlm-a" and result.question == request["question"]
    assert result.error is not None and result.error.stage == "transport"
    assert result.error.detail == "internal error: RuntimeError"
