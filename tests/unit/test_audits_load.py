"""Answer records: per-line validation, the fast path's equivalence with pydantic, and the
cross-record consistency checks (each named by line and field)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest
from faithjudge.audits import AnswerRecord, AuditInputError, load_records, parse_lines, prepare
from faithjudge.audits.synthetic import synthetic_records
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _lines(records: list[Any]) -> list[tuple[int, bytes]]:
    return [(i, r if isinstance(r, bytes) else orjson.dumps(r)) for i, r in enumerate(records, 1)]


def _rec(**kw: Any) -> dict[str, Any]:
    base = {"model": "m", "item_id": "i1", "condition": "original", "answer": "Yes", "gold": "Yes"}
    base.update(kw)
    return {k: v for k, v in base.items() if v is not ...}


def _problems(records: list[Any]) -> list[tuple[int, str | None, str]]:
    with pytest.raises(AuditInputError) as info:
        prepare(parse_lines(_lines(records)))
    return [(p.line, p.field, p.message) for p in info.value.problems]


def test_valid_records_load_with_canonical_conditions() -> None:
    table = parse_lines(_lines([_rec(), _rec(condition="swap-same-label", answer=None)]))
    assert table["condition"].tolist() == ["baseline", "swap_same_label"]
    assert table["answer"].tolist() == ["Yes", None]
    assert table["line"].tolist() == [1, 2]


def test_unknown_condition_names_line_and_field() -> None:
    with pytest.raises(AuditInputError) as info:
        parse_lines(_lines([_rec(), _rec(condition="occlude_everything")]))
    (problem,) = info.value.problems
    assert (problem.line, problem.field) == (2, "condition")
    assert "unknown modification code 'occlude_everything'" in problem.message
    assert ":2: condition: unknown" in str(info.value)


@pytest.mark.parametrize(
    ("line", "field", "needle"),
    [
        (b"{not json", None, "not valid JSON"),
        (b"[1, 2]", None, "should be an object"),
        (orjson.dumps(_rec(p_yes=1.5)), "p_yes", "less than or equal to 1"),
        (orjson.dumps(_rec(p_yes=True)), "p_yes", "valid number"),
        (orjson.dumps(_rec(answer=3)), "answer", "valid string"),
        (orjson.dumps(_rec(model="")), "model", "at least 1 character"),
        (orjson.dumps(_rec(extra=1)), "extra", "Extra inputs"),
        (orjson.dumps(_rec(metadata={"sex": "X"})), "metadata.sex", "'M' or 'F'"),
        (orjson.dumps(_rec(metadata={"risk_tier": "L9"})), "metadata.risk_tier", "L1"),
        (orjson.dumps(_rec(metadata=None)), "metadata", "should be an object"),
        (orjson.dumps({"model": "m", "condition": "original"}), "item_id", "Field required"),
    ],
)
def test_bad_lines_are_named(line: bytes, field: str | None, needle: str) -> None:
    with pytest.raises(AuditInputError) as info:
        parse_lines([(1, orjson.dumps(_rec())), (7, line)], source="f.jsonl")
    (problem,) = info.value.problems
    assert problem.line == 7
    assert problem.field == field
    assert needle in problem.message, problem.message


def test_all_bad_lines_are_collected_and_the_message_is_capped() -> None:
    records = [_rec(item_id=f"i{n}", p_yes=2.0) for n in range(30)]
    with pytest.raises(AuditInputError) as info:
        parse_lines(_lines(records), source="x.jsonl")
    assert info.value.total == 30
    assert "... and 10 more" in str(info.value)


def test_blank_lines_are_skipped_and_numbers_kept(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(orjson.dumps(_rec()) + b"\n\n" + orjson.dumps(_rec(condition="blank")) + b"\n")
    table = load_records(path)
    assert table["line"].tolist() == [1, 3]


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(AuditInputError, match="no answer record"):
        load_records(empty)
    with pytest.raises(Exception, match="not found"):
        load_records(tmp_path / "missing.jsonl")


# ---------------------------------------------------------------- fast path == pydantic

_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False),
    st.text(max_size=6),
    st.sampled_from(["original", "swap", "blank", "M", "L3", "yes"]),
    st.just(""),
    st.just("x" * 513),
    st.lists(st.integers(-5, 5), max_size=2),
    st.dictionaries(
        st.sampled_from(["sex", "risk_tier", "view", "junk", "laterality_dependent"]),
        st.one_of(
            st.none(), st.booleans(), st.sampled_from(["M", "L2", "AP", "Z"]), st.integers(0, 2)
        ),
        max_size=3,
    ),
)
_keys = st.sampled_from(
    [
        "model",
        "item_id",
        "condition",
        "variant",
        "raw_output",
        "answer",
        "gold",
        "p_yes",
        "question",
        "rationale",
        "metadata",
        "bogus",
    ]
)


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    base = dict(draw(st.sampled_from(_SAMPLES)))
    for _ in range(draw(st.integers(0, 3))):
        key = draw(_keys)
        if draw(st.booleans()):
            base[key] = draw(_values)
        else:
            base.pop(key, None)
    return orjson.dumps(base)


_SAMPLES = [{k: v for k, v in r.items() if v is not None} for r in list(synthetic_records(1))[::97]]


def _outcome(lines: list[tuple[int, bytes]], fast: bool) -> Any:
    try:
        return parse_lines(lines, fast=fast)
    except AuditInputError as exc:
        return [(p.line, p.field, p.message) for p in exc.problems]


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_mutated(), min_size=1, max_size=12))
def test_fast_path_accepts_exactly_what_pydantic_accepts(lines: list[bytes]) -> None:
    numbered = list(enumerate(lines, 1))
    fast, slow = _outcome(numbered, True), _outcome(numbered, False)
    if isinstance(slow, pd.DataFrame):
        assert isinstance(fast, pd.DataFrame), fast
        pd.testing.assert_frame_equal(fast, slow)
    else:
        assert fast == slow


def test_fast_path_matches_pydantic_on_the_synthetic_corpus() -> None:
    lines = _lines(list(synthetic_records(1)))
    pd.testing.assert_frame_equal(parse_lines(lines), parse_lines(lines, fast=False))
    one = AnswerRecord.model_validate_json(lines[0][1])
    row = parse_lines(lines[:1]).iloc[0]
    assert row["condition"] == one.condition == "baseline"
    assert row["p_yes"] == one.p_yes
    assert row["sex"] == one.metadata.sex


# ---------------------------------------------------------------- consistency


def test_swap_without_its_original_is_rejected() -> None:
    problems = _problems([_rec(), _rec(item_id="i2", condition="swap_same_label")])
    assert problems == [(2, "condition", problems[0][2])]
    assert "needs the original record" in problems[0][2] and "'i2'" in problems[0][2]


def test_medvigil_probe_without_gold_letter_is_rejected() -> None:
    records = [
        _rec(answer="A", gold="A"),
        _rec(condition="paraphrase", answer="A", gold=...),
        _rec(condition="false_premise_trap", variant="1", answer="E", gold="B"),
        _rec(condition="roi_masked", answer="E", gold="maybe"),
    ]
    problems = _problems(records)
    assert [(p[0], p[1]) for p in problems] == [(2, "gold"), (3, "gold"), (4, "gold")]
    assert "needs a gold letter A–E, got None" in problems[0][2]
    assert "is E (the safe action)" in problems[1][2]
    assert "got 'maybe'" in problems[2][2]


def test_duplicates_need_distinct_variants() -> None:
    trap = {"condition": "false_premise_trap", "answer": "E", "gold": "E"}
    ok = [_rec(answer="A", gold="A"), _rec(**trap, variant="1"), _rec(**trap, variant="2")]
    prepare(parse_lines(_lines(ok)))
    problems = _problems([*ok, _rec(**trap, variant="2"), _rec(answer="A", gold="A")])
    assert [(p[0], p[1]) for p in problems] == [(4, "condition"), (5, "condition")]
    assert "first at line 3" in problems[0][2]


def test_lotfinia_records_must_be_yes_no_and_keep_the_label() -> None:
    records = [
        _rec(gold="maybe"),
        _rec(condition="target_mask", answer="Perhaps", gold=...),
        _rec(item_id="i2"),
        _rec(item_id="i2", condition="swap_same_label", gold="No"),
    ]
    problems = _problems(records)
    assert [(p[0], p[1]) for p in problems] == [(1, "gold"), (2, "answer"), (4, "gold")]


def test_zafar_original_needs_gold_and_blur_needs_sigma() -> None:
    problems = _problems([_rec(gold=...), _rec(condition="shuffle", gold=...)])
    assert [(p[0], p[1]) for p in problems] == [(1, "gold")]
    blur = [_rec(answer="A", gold="A"), _rec(condition="blur_sigma", variant="soft", gold="A")]
    problems = _problems(blur)
    assert [(p[0], p[1]) for p in problems] == [(2, "variant")]


def test_prepare_scopes_records_to_audits() -> None:
    records = [
        _rec(),
        _rec(condition="swap_same_label"),
        _rec(item_id="z", answer="A", gold="A"),
        _rec(item_id="z", condition="shuffle", answer="B"),
        _rec(item_id="moll"),
        _rec(item_id="moll", condition="TB-RAD"),
    ]
    table = prepare(parse_lines(_lines(records)))
    frame = table.frame
    assert frame["in_lotfinia"].tolist() == [True, True, False, False, False, False]
    assert frame["in_zafar"].tolist() == [False, False, True, True, False, False]
    assert table.unused() == 2


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model":"m","item_id":"i","condition":"original","p_yes":1e400}',
        b'{"model":"m","item_id":"i","condition":"original","p_yes":NaN}',
        b'{"model":"m","item_id":"i","condition":"original","p_yes":123456789012345678901234}',
        b'{"model":"m","item_id":"i","condition":"original","condition":"blank"}',
        b'{"model":"m","item_id":"\\ud800","condition":"original"}',
        b'{"model":"m","item_id":"i","condition":"original","p_yes":0}',
        b'{"model":"m","item_id":"i","condition":"original","metadata":{"sex":null}}',
        b'{"model":"m","item_id":"i","condition":"original","metadata":{"laterality_dependent":1}}',
    ],
)
def test_edge_lines_get_the_same_outcome_on_both_paths(raw: bytes) -> None:
    lines = [(1, raw)]
    fast, slow = _outcome(lines, True), _outcome(lines, False)
    if isinstance(slow, pd.DataFrame):
        pd.testing.assert_frame_equal(fast, slow)
    else:
        assert fast == slow


# ---------------------------------------------------------------- the shipped JSON Schema

_SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "answer_record.schema.json"


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_json_schema_agrees_with_the_model(raw: bytes) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(orjson.loads(_SCHEMA.read_bytes()))
    doc = orjson.loads(raw)
    by_model = _outcome([(1, raw)], fast=False)
    model_ok = isinstance(by_model, pd.DataFrame)
    condition_known = not (
        isinstance(by_model, list)
        and any(field == "condition" for _, field, _ in by_model)
        and isinstance(doc, dict)
        and isinstance(doc.get("condition"), str)
        and 1 <= len(doc["condition"]) <= 512
    )
    if condition_known:  # the schema cannot check catalogue membership
        assert validator.is_valid(doc) == model_ok, (doc, by_model)
