"""A line that is not JSON is described in the same words by every route that reads it.

``faithjudge score`` (an error result), ``POST /v1/jobs`` (a rejected line) and
``POST /v1/score`` (a 422 problem) phrase the decode error with one function: no character
offset is presented as a field, and a line read with its newline, without it or as a whole
body gets the same position.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from faithjudge.cli.main import app
from faithjudge.jsonl import describe_json_error, field_problems
from faithjudge.pipeline.request_lines import parse_line
from faithjudge.settings import Settings
from faithjudge_client.lines import ItemResult, ScoreRequest
from pydantic import ValidationError
from typer.testing import CliRunner

from tests.fixtures_service import running_app

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.jsonl"
GOOD = DEMO.read_bytes().splitlines()[0]

# a line cut mid-string, as a copy that ran out of disk leaves it; one with a stray brace
TORN = GOOD[:224]
EXTRA = GOOD + b"}"
CASES = {"torn": TORN, "extra": EXTRA}


def _cli_detail(tmp_path: Path, bad: bytes) -> str:
    source = tmp_path / "in.jsonl"
    source.write_bytes(GOOD + b"\n" + bad + b"\n")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app, ["score", str(source), "-o", str(out), "--no-progress", "--no-cache"]
    )
    assert result.exit_code == 0, result.output
    lines = [ItemResult.model_validate_json(x) for x in out.read_bytes().splitlines()]
    error = lines[1].error
    assert error is not None and error.stage == "input"
    assert error.detail.startswith("line 2: ")
    return error.detail.removeprefix("line 2: ")


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_line_reads_the_same_on_every_path(case: str, tmp_path: Path) -> None:
    bad = CASES[case]
    expected = describe_json_error(bad)
    assert expected.startswith("not valid JSON: ")
    assert "(char" not in expected  # no parser's own offset suffix

    assert _cli_detail(tmp_path, bad) == expected

    async def over_http() -> tuple[Any, Any]:
        settings = Settings(data_dir=tmp_path / "data", cache=False)
        async with running_app(settings) as (_, client):
            upload = await client.post(
                "/v1/jobs",
                content=GOOD + b"\n" + bad + b"\n",
                headers={"content-type": "application/x-ndjson"},
            )
            assert upload.status_code == 202, upload.text
            scored = await client.post(
                "/v1/score", content=bad, headers={"content-type": "application/json"}
            )
            assert scored.status_code == 422, scored.text
            return upload.json(), scored.json()

    import anyio

    accepted, problem = anyio.run(over_http)
    [rejected] = accepted["rejected"]
    assert rejected["line"] == 2
    assert rejected["field"] is None
    assert rejected["reason"] == expected

    assert problem["detail"] == expected
    [item] = problem["errors"]
    assert item.get("field") is None  # not the character offset
    assert item["reason"] == expected


def test_the_position_does_not_depend_on_the_newline_or_a_byte_order_mark() -> None:
    message = describe_json_error(TORN)
    assert message == describe_json_error(TORN + b"\r\n")
    assert message == describe_json_error(b"\xef\xbb\xbf" + TORN)
    assert message == describe_json_error(TORN.decode())
    assert f"after {len(TORN.decode().strip())} characters" in message and "cut short" in message
    assert describe_json_error(b'{"a": 1}}') == "not valid JSON: Extra data at character 9"
    assert describe_json_error(b"\xff{}") == "not valid JSON: not UTF-8 text (byte 1)"


def test_parse_line_uses_the_same_words() -> None:
    parsed = parse_line(TORN + b"\n", 7)
    assert isinstance(parsed, ItemResult) and parsed.error is not None
    assert parsed.error.detail == f"line 7: {describe_json_error(TORN)}"


def test_a_union_that_refused_a_value_is_one_problem_of_its_field() -> None:
    line = orjson.loads(GOOD)
    line["context"] = {"projection": ["AP"]}
    with pytest.raises(ValidationError) as info:
        ScoreRequest.model_validate(line)
    problems = field_problems(info.value.errors())
    assert [field for field, _ in problems] == ["context.projection"]
    assert "a valid string or a valid integer" in problems[0][1]


def test_a_field_error_still_names_its_field_on_v1_score(tmp_path: Path) -> None:
    line = orjson.loads(GOOD)
    line["context"] = {"projection": ["AP"]}

    async def post() -> Any:
        async with running_app(Settings(data_dir=tmp_path / "data")) as (_, client):
            response = await client.post("/v1/score", json=line)
            assert response.status_code == 422
            return response.json()

    import anyio

    problem = anyio.run(post)
    assert [e["field"] for e in problem["errors"]] == ["context.projection"]
