"""read_request: whatever bytes a line or a body holds, a request or a named problem, never a
crash."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from faithjudge.jsonl import describe_json_error
from faithjudge.pipeline.request_lines import Unreadable, parse_line, read_request
from faithjudge_client.lines import ItemResult, ScoreRequest
from hypothesis import given, settings
from hypothesis import strategies as st

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.jsonl"
GOOD = DEMO.read_bytes().splitlines()[0]
HUGE = b"1" * 4301  # past Python's 4,300-digit limit of int() on text


def _with_context(value: bytes) -> bytes:
    return GOOD[:-1] + b', "context": {"x": ' + value + b"}}"


OUT_OF_RANGE = (
    "x: NaN or infinity is not a JSON number (the number is beyond the range of a double)"
)


@pytest.mark.parametrize(
    ("raw", "detail", "field"),
    [
        (_with_context(HUGE), "context." + OUT_OF_RANGE, "context.x"),
        (_with_context(b"-" + HUGE), "context." + OUT_OF_RANGE, "context.x"),
        (_with_context(b"1e999"), "context." + OUT_OF_RANGE, "context.x"),
        (_with_context(b"NaN"), "context.x: NaN or infinity is not a JSON number", "context.x"),
        (
            _with_context(b"-Infinity"),
            "context.x: NaN or infinity is not a JSON number",
            "context.x",
        ),
        (HUGE, "not valid JSON: number is infinity when parsed as double", None),
        (b"[" * 100_000, "not valid JSON: nested too deeply", None),
        (b'{"a":' * 100_000, "not valid JSON: nested too deeply", None),
        (_with_context(b"[" * 250 + b"1" + b"]" * 250), "not valid JSON: nested too deeply", None),
        (GOOD[:20] + b"\xff" + GOOD[20:], "not valid JSON: not UTF-8 text (byte 21)", None),
        (b"[1, 2]", "expected a JSON object", None),
    ],
)
def test_hostile_input_is_a_named_problem(raw: bytes, detail: str, field: str | None) -> None:
    parsed = read_request(raw)
    assert isinstance(parsed, Unreadable)
    assert parsed.detail == detail
    assert parsed.problems[0][0] == field
    line = parse_line(raw, 2)
    assert isinstance(line, ItemResult) and line.error is not None
    assert (line.error.stage, line.error.detail) == ("input", f"line 2: {detail}")


def test_what_could_be_read_of_a_line_with_a_huge_number_is_kept() -> None:
    line = parse_line(_with_context(HUGE), 3)
    assert isinstance(line, ItemResult)
    record = orjson.loads(GOOD)
    assert (line.item_id, line.model) == (record["item_id"], record["model"])


def test_a_good_line_reads_the_same_as_before() -> None:
    parsed = read_request(GOOD)
    assert isinstance(parsed, ScoreRequest)
    assert read_request(b"\xef\xbb\xbf" + GOOD) == parsed


def test_describe_json_error_never_raises_on_huge_integers() -> None:
    assert describe_json_error(HUGE).startswith("not valid JSON")
    assert describe_json_error(b"[" + HUGE + b",").startswith("not valid JSON: it ends after")


_TOKENS = [b"{", b"}", b"[", b"]", b",", b":", b'"a"', b'"item_id"', HUGE, b"NaN", b"1e999",
           b"-", b"\xff", b"\\ud800", b'"', b"0", b"true", b" "]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(_TOKENS), max_size=40))
def test_no_bytes_make_read_request_raise(parts: list[bytes]) -> None:
    raw = b"".join(parts)
    parsed = read_request(raw)
    if isinstance(parsed, Unreadable):
        assert parsed.detail and parsed.problems
    assert isinstance(parse_line(raw, 1), ScoreRequest | ItemResult)
