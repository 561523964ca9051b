"""verify() must classify any JSON a judge could send, never raise."""

from __future__ import annotations

import json

from faithjudge.assets.schemas import (
    FaithJudgeValidator,
    judge_output_schema,
    judge_output_validator,
)
from faithjudge.scoring.grading import verify
from faithjudge.scoring.normalize import normalize
from faithjudge_client.lines import METRICS
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes.judge_server import normal_reply

COT = normalize("<think><step>The left costophrenic angle is blunted.</step></think>")
# every output field of the catalogue's metrics
FIELDS = sorted({name for metric in METRICS for name in judge_output_schema(metric)["properties"]})

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=30),
    st.sampled_from(["blunted", "The left costophrenic angle is blunted.", "QSK", "none"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
judge_like = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=len(FIELDS))


@settings(max_examples=300, deadline=None)
@given(doc=st.one_of(judge_like, json_values), metric=st.sampled_from(METRICS))
def test_any_json_gets_exactly_one_outcome(doc: object, metric: str) -> None:
    raw = json.dumps(doc)
    result = verify(raw, metric=metric, cot=COT, validator=judge_output_validator(metric))
    if result.status == "valid":
        assert result.failure is None and 1 <= result.score <= 5
        for quote in result.quotes:
            start, end = quote.span
            assert 0 <= start <= end <= len(COT.original)
    else:
        assert result.failure is not None and result.score is None
        assert result.failure.stage in ("parse", "schema", "abstain", "evidence")


def _slow_path_validator(metric: str) -> FaithJudgeValidator:
    """The same schema under another ``$id``: verify then decides by jsonschema alone."""
    schema = judge_output_schema(metric)
    schema["$id"] = "https://example.invalid/custom.schema.json"
    return FaithJudgeValidator(schema)


SLOW = {metric: _slow_path_validator(metric) for metric in METRICS}
QUOTE = "The left costophrenic angle is blunted."
# values each fine for its field alone, so that mostly the cross-field rules decide
FIELD_VALUES: dict[str, list[object]] = {
    "abstain": [True, False],
    "abstain_reason": [None, "", "other", "empty_or_placeholder", "qsk_missing_or_invalid"],
    "score": [None, 1, 2, 5],
    "quotes": [[], [QUOTE], ["blunted", QUOTE]],
    "quote_spans": [[], [[0, 5]], [[None, None]]],
    "rationale": ["", "no"],
    "omissions": [[], ["left effusion"]],
    "hallucinations": [[]],
    "has_omission": [None, True, False],
    "has_hallucination": [None, False],
    "basis": ["QSK", "EMPTY_QSK"],
    "did_acknowledge": [None, True, False],
    "claimed_influence": [None, "none", "clear"],
    "is_confident": [None, True],
    "confidence_level": [None, "neutral", "very_high"],
}  # fmt: skip


@st.composite
def near_valid_grades(draw: st.DrawFn, metric: str) -> dict[str, object]:
    fields = judge_output_schema(metric)["properties"]
    # a field listed nowhere above (a newer metric's) keeps the simplest value it allows
    simplest = normal_reply(metric)
    return {
        name: draw(st.sampled_from(FIELD_VALUES.get(name, [simplest[name]]))) for name in fields
    }


@settings(max_examples=400, deadline=None)
@given(data=st.data(), metric=st.sampled_from(METRICS))
def test_fast_path_and_jsonschema_path_agree(data: st.DataObject, metric: str) -> None:
    doc = data.draw(st.one_of(near_valid_grades(metric), judge_like))
    raw = json.dumps(doc)
    fast = verify(raw, metric=metric, cot=COT, validator=judge_output_validator(metric))
    slow = verify(raw, metric=metric, cot=COT, validator=SLOW[metric])
    assert fast == slow
