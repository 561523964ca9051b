"""No line can crash a run: what Python's or orjson's JSON reader raises besides a decode error
(an integer past 4,300 digits, nesting past the recursion limit, bytes that are not UTF-8) and
numbers that are not JSON numbers are input errors, in the same words on every route:
``faithjudge score`` (an error line), ``POST /v1/jobs`` (a rejected line, 202) and
``POST /v1/score`` (a 422 problem)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from faithjudge.cli.main import app
from faithjudge.pipeline.request_lines import Unreadable, read_request
from faithjudge.settings import Settings
from faithjudge_client.lines import ItemResult
from typer.testing import CliRunner

from tests.fixtures_service import running_app

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.jsonl"
GOOD = DEMO.read_bytes().splitlines()[0]


def _with_context(value: bytes) -> bytes:
    return GOOD[:-1] + b', "context": {"x": ' + value + b"}}"


CASES = {
    "huge-integer": _with_context(b"1" * 4301),
    "huge-integer-alone": b"9" * 4301,
    "nan": _with_context(b"NaN"),
    "beyond-double": _with_context(b"1e999"),
    "deep": b"[" * 50_000 + b"]" * 50_000,
    "deep-in-a-field": _with_context(b"[" * 300 + b"]" * 300),
    "not-utf8": GOOD[:30] + b"\xc3\x28" + GOOD[30:],
}


def _expected(bad: bytes) -> Unreadable:
    parsed = read_request(bad)
    assert isinstance(parsed, Unreadable)
    return parsed


@pytest.mark.parametrize("case", sorted(CASES))
def test_score_writes_one_line_per_input_line_and_exits_0(case: str, tmp_path: Path) -> None:
    bad = CASES[case]
    source = tmp_path / "in.jsonl"
    source.write_bytes(GOOD + b"\n" + bad + b"\n" + GOOD.replace(b"demo-001", b"demo-x") + b"\n")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app, ["score", str(source), "-o", str(out), "--no-progress", "--no-cache"]
    )
    assert result.exit_code == 0, result.output
    assert result.exception is None
    assert "Traceback" not in result.output
    lines = [ItemResult.model_validate_json(x) for x in out.read_bytes().splitlines()]
    assert [line.line for line in lines] == [1, 2, 3]
    assert [line.error is None for line in lines] == [True, False, True]
    error = lines[1].error
    assert error is not None and error.stage == "input"
    assert error.detail == f"line 2: {_expected(bad).detail}"


def test_the_service_rejects_the_line_or_answers_422_in_the_same_words(tmp_path: Path) -> None:
    async def over_http() -> list[tuple[str, Any, Any]]:
        seen = []
        async with running_app(Settings(data_dir=tmp_path / "data", cache=False)) as (_, client):
            for case, bad in sorted(CASES.items()):
                upload = await client.post(
                    "/v1/jobs",
                    content=GOOD + b"\n" + bad + b"\n" + GOOD + b"\n",
                    headers={"content-type": "application/x-ndjson"},
                )
                assert upload.status_code == 202, (case, upload.text)
                scored = await client.post(
                    "/v1/score", content=bad, headers={"content-type": "application/json"}
                )
                assert scored.status_code == 422, (case, scored.text)
                assert scored.headers["content-type"].startswith("application/problem+json")
                seen.append((case, upload.json(), scored.json()))
        return seen

    for case, accepted, problem in anyio.run(over_http):
        expected = _expected(CASES[case])
        assert accepted["accepted"] == 2, case
        [rejected] = accepted["rejected"]
        assert rejected["line"] == 2
        assert rejected["reason"] == expected.detail
        assert rejected["field"] == expected.problems[0][0]
        assert problem["detail"] == expected.detail
        assert [(item.get("field"), item["reason"]) for item in problem["errors"]] == list(
            expected.problems
        )


def test_the_openapi_document_declares_the_422_of_v1_score(tmp_path: Path) -> None:
    from faithjudge.api.app import create_app

    document = create_app(Settings(data_dir=tmp_path / "data")).openapi()
    responses = document["paths"]["/v1/score"]["post"]["responses"]
    assert "400" not in responses
    problem = responses["422"]["content"]["application/problem+json"]
    assert problem["schema"] == {"$ref": "#/components/schemas/Problem"}
    assert "NaN" in problem["example"]["detail"]
