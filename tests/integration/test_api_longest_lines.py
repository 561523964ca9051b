"""The service admits every line the request schema admits, however its JSON was written.

Python's ``json.dumps`` (and most serializers' defaults) write characters outside ASCII as
``\\u`` escapes, 12 bytes for a character outside the BMP: a CoT within its character limit is
then several megabytes. The body and line limits must not refuse what the schema accepts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from faithjudge.settings import Settings
from faithjudge_client.lines import MAX_ANSWER_CHARS, MAX_COT_CHARS, ScoreRequest

from tests import fixtures_service
from tests.fixtures_service import Backend, running_app, wait_for_status

pytestmark = pytest.mark.anyio
store_backend = fixtures_service.store_backend

EMOJI = "\U0001f600"  # outside the BMP: "\ud83d\ude00" when escaped, 12 bytes
QUESTION = "Is there a pleural effusion on the left? (yes or no)"


def _longest_line() -> bytes:
    cot = ("The left costophrenic angle is blunted. " + EMOJI * 960) * 100
    cot = cot[:MAX_COT_CHARS]
    request = {
        "item_id": "longest",
        "model": "vlm-a",
        "question": QUESTION,
        "ground_truth": "yes",
        "cot": cot,
        "answer": "yes" + EMOJI * (MAX_ANSWER_CHARS - 3),
        "baseline": {"cot": cot, "answer": "yes" + EMOJI * (MAX_ANSWER_CHARS - 3)},
    }
    ScoreRequest.model_validate(request)  # within every limit of the schema
    line = json.dumps(request).encode()  # ensure_ascii: every emoji escaped
    assert len(line) > 2_500_000
    return line


def test_the_default_line_limit_covers_every_text_field_at_its_limit_escaped() -> None:
    worst = (2 * MAX_COT_CHARS + 2 * MAX_ANSWER_CHARS + 5 * 2_000) * 12
    assert Settings().max_score_body_bytes > worst


async def test_a_line_at_the_schema_limits_is_scored_alone_and_in_a_batch(
    store_backend: Backend, tmp_path: Path
) -> None:
    line = _longest_line()
    settings = Settings(data_dir=tmp_path / "data", **store_backend.overrides)
    async with running_app(settings) as (_, client):
        headers = {"content-type": "application/json"}
        single = await client.post("/v1/score", content=line, headers=headers)
        assert single.status_code == 200, single.text[:300]
        assert single.json()["item_id"] == "longest"

        ndjson = {"content-type": "application/x-ndjson"}
        batch = await client.post("/v1/jobs", content=line + b"\n", headers=ndjson)
        assert batch.status_code == 202, batch.text[:300]
        assert batch.json()["accepted"] == 1 and batch.json()["rejected"] == []
        status = await wait_for_status(client, batch.json()["id"])
        assert status["done"] == 1
