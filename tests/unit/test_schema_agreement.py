"""The JSON Schemas in ``schemas/`` and their pydantic mirrors accept exactly the same documents.

Judge outputs: the ``faithjudge.scoring.judge_output`` model built from each catalogue
metric's schema vs ``schemas/<metric>.schema.json`` itself (sample values come from the schema,
with livelier hand-picked ones for the shipped metrics).
Wire contracts: ``faithjudge_client.lines`` (ScoreRequest, ItemResult, KBEntry) vs
``score_request``, ``item_result`` and ``knowledge_base#/$defs/entry``.

Every document is serialised with orjson and validated by pydantic from the JSON text
(``model_validate_json``), so both sides see the same JSON. The contract models are validated with
``strict=True``: in lax mode pydantic would also take ``"2"`` or ``2.0`` for an integer, which the
schemas reject. The judge-output models are strict by configuration.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import orjson
import pytest
from faithjudge.assets import schemas
from faithjudge.errors import ConfigError
from faithjudge.scoring.grading import describe_schema_errors, verify
from faithjudge.scoring.judge_output import JudgeOutput, output_model
from faithjudge.scoring.normalize import normalize
from faithjudge_client.lines import METRICS, ItemResult, KBEntry, ScoreRequest
from faithjudge_client.metric_catalogue import metric_spec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

Doc = Any

# ---------------------------------------------------------------- helpers


def _pydantic_ok(model: type[BaseModel], doc: Doc, *, strict: bool | None = None) -> bool:
    try:
        model.model_validate_json(orjson.dumps(doc), strict=strict)
    except ValidationError:
        return False
    return True


def _assert_agree(validator: Any, model: type[BaseModel], doc: Doc, *, strict: bool | None = None):
    schema_ok = validator.is_valid(doc)
    model_ok = _pydantic_ok(model, doc, strict=strict)
    assert schema_ok == model_ok, (
        f"schema says {schema_ok}, {model.__name__} says {model_ok} for {orjson.dumps(doc)!r}; "
        f"schema: {describe_schema_errors(validator, doc) or 'valid'}"
    )
    return schema_ok


def _unique(docs: list[Doc]) -> list[Doc]:
    seen: set[bytes] = set()
    out = []
    for doc in docs:
        key = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
        if key not in seen:
            seen.add(key)
            out.append(doc)
    return out


# ---------------------------------------------------------------- judge outputs

COMMON_FIELDS = ("abstain", "abstain_reason", "score", "quotes", "quote_spans", "rationale")


def _mirror(metric: str) -> type[JudgeOutput]:
    model = output_model(metric, schemas.judge_output_schema(metric))
    assert model is not None, f"the output schema of {metric} has no pydantic mirror"
    return model


def _reasons(metric: str) -> list[str]:
    """The named abstain reasons of the metric's schema (any string, when it lists none)."""
    listed = schemas.judge_output_schema(metric)["properties"]["abstain_reason"].get("enum")
    return [r for r in listed if r] if listed else ["other"]


# one value of each JSON type, and the types it counts as
_TYPED: list[tuple[Any, set[str]]] = [
    (None, {"null"}),
    (True, {"boolean"}),
    (7, {"integer", "number"}),
    (2.5, {"number"}),
    ("unlisted", {"string"}),
    (["a"], {"array"}),
    ({"a": 1}, {"object"}),
]


def _own_fields(metric: str) -> dict[str, dict[str, Any]]:
    properties = schemas.judge_output_schema(metric)["properties"]
    return {name: spec for name, spec in properties.items() if name not in COMMON_FIELDS}


def _kinds(spec: dict[str, Any]) -> list[str]:
    declared = spec.get("type", [])
    return [declared] if isinstance(declared, str) else list(declared)


def _derived_values(spec: dict[str, Any]) -> list[Any]:
    """Values the schema of one field allows (its enum, or a few of each type)."""
    if "enum" in spec:
        return list(spec["enum"])
    low = spec.get("minimum", 0)
    samples: dict[str, list[Any]] = {
        "null": [None],
        "boolean": [True, False],
        "integer": [low, low + 1],
        "number": [low, low + 0.5],
        "string": ["x" * max(1, spec.get("minLength", 0))],
        "array": [[]],
    }
    return [v for kind in _kinds(spec) for v in samples.get(kind, [])]


def _signal_values(metric: str) -> dict[str, list[Any]]:
    derived = {name: _derived_values(spec) for name, spec in _own_fields(metric).items()}
    return derived | SIGNAL_VALUES.get(metric, {})


def _bad_signal_values(metric: str) -> dict[str, list[Any]]:
    """Values of a JSON type the field does not allow (and, for an enum, one it does not list)."""
    bad = {}
    for name, spec in _own_fields(metric).items():
        kinds = set(_kinds(spec))
        values = [value for value, types in _TYPED if not types & kinds]
        if "enum" in spec and "string" in kinds and "unlisted" not in spec["enum"]:
            values.append("unlisted")
        bad[name] = values
    return bad | BAD_SIGNAL_VALUES.get(metric, {})


SIGNAL_VALUES: dict[str, dict[str, list[Any]]] = {
    "clinical_fidelity": {
        "basis": ["QSK", "EMPTY_QSK"],
        "has_omission": [True, False, None],
        "has_hallucination": [True, False, None],
        "omissions": [[], ["meniscus sign"], ["a", "b"]],
        "hallucinations": [[], ["pneumothorax"]],
    },
    "causal_attribution": {
        "did_acknowledge": [True, False, None],
        "claimed_influence": ["none", "hedged", "clear", None],
    },
    "confidence_tone": {
        "is_confident": [True, False, None],
        "confidence_level": ["very_low", "low", "neutral", "high", "very_high", None],
    },
}
BAD_SIGNAL_VALUES: dict[str, dict[str, list[Any]]] = {
    "clinical_fidelity": {
        "basis": [None, "qsk", "OTHER", "", 1, True],
        "has_omission": ["yes", 0, 1, []],
        "has_hallucination": ["false", 0, {}],
        "omissions": [None, "a", [1], [None], {"a": 1}],
        "hallucinations": [None, "pneumothorax", [True], [["x"]]],
    },
    "causal_attribution": {
        "did_acknowledge": ["true", 1, 0, []],
        "claimed_influence": ["strong", "None", "", True, 0, ["none"]],
    },
    "confidence_tone": {
        "is_confident": ["true", 1, 0, {}],
        "confidence_level": ["medium", "HIGH", "", 3, False],
    },
}


def valid_output(metric: str, **overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "abstain": False,
        "abstain_reason": None,
        "score": 3,
        "quotes": ["left costophrenic angle is blunted"],
        "quote_spans": [[10, 44]],
        "rationale": "Names the effusion sign (quotes[0]).",
    }
    doc |= {name: values[0] for name, values in _signal_values(metric).items()}
    doc |= overrides
    return doc


def valid_outputs(metric: str) -> list[Doc]:
    docs: list[Doc] = []
    quote_sets = [["a"], ["left costophrenic angle is blunted", "no effusion"], [""]]
    span_sets = [[], [[0, 1]], [[0, 1], [5, 2]], [[0, 0], [1, 9], [3, 3]]]
    for score, quotes, spans in itertools.product(range(1, 6), quote_sets, span_sets):
        docs.append(valid_output(metric, score=score, quotes=quotes, quote_spans=spans))
    docs.append(valid_output(metric, score=1, quotes=[], quote_spans=[]))
    docs.append(valid_output(metric, score=1, quotes=[], quote_spans=[[0, 3]]))
    for name, values in _signal_values(metric).items():
        docs.extend(valid_output(metric, **{name: value}) for value in values)
    for reason in _reasons(metric):
        docs.append(
            valid_output(metric, abstain=True, abstain_reason=reason, score=None, quotes=[])
            | {"quote_spans": []}
        )
    docs.append(valid_output(metric, abstain=False, abstain_reason=""))  # seen in real judges
    docs.append(valid_output(metric, quote_spans=[[None, None], [0, None]]))  # "unknown"
    docs.append(valid_output(metric, rationale=""))
    docs.append(valid_output(metric, rationale="word " * 200))  # long rationale is not a failure
    docs.append(valid_output(metric, quotes=["é “curly” ‘quotes’\u00a0and\u200bzero-width"]))
    return _unique(docs)


def _without(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != name}


def invalid_outputs(metric: str) -> list[Doc]:
    base = valid_output(metric)
    docs: list[Doc] = [_without(base, name) for name in base]  # each missing field
    docs += [
        base | {"extra": 1},
        base | {"answer": "yes"},
        base | {"Score": 3},
        {"answer": "yes", "think": "The effusion is on the left."},
        {},
        [],
        [base],
        "text",
        3,
        None,
        True,
    ]
    bad_common: dict[str, list[Any]] = {
        "abstain": [None, 0, 1, "false", "true", [], {}],
        "abstain_reason": ["tired", " ", 3, True, [], "EMPTY_OR_PLACEHOLDER"],
        "score": [0, 6, -1, 100, 2.5, 3.0, 1.0, "3", True, False, [], {}, [3]],
        "quotes": ["a", None, [1], [None], [["a"]], {"0": "a"}, [True]],
        "quote_spans": [
            [[1, 2, 3]],
            [[1]],
            [[]],
            [[-1, 2]],
            [["0", "1"]],
            [[0.0, 1]],
            [[0, 1.5]],
            [[True, 1]],
            [[None]],
            [[None, None, None]],
            [None],
            [1, 2],
            None,
            "0-1",
            [{"start": 0, "end": 1}],
        ],
        "rationale": [None, 3, ["a"], True, {}],
    }
    for name, values in (bad_common | _bad_signal_values(metric)).items():
        docs.extend(base | {name: value} for value in values)
    # another metric's abstain reason
    own = _reasons(metric)
    other_reason = next((r for m in METRICS for r in _reasons(m) if r not in own), None)
    if other_reason is not None:
        docs.append(
            base | {"abstain": True, "abstain_reason": other_reason, "score": None} | _empty()
        )
    abstaining = base | {"abstain": True, "abstain_reason": "other", "score": None} | _empty()
    docs += [
        abstaining | {"score": 3},
        abstaining | {"score": 1},
        abstaining | {"quotes": ["a"]},
        abstaining | {"quote_spans": [[0, 1]]},
        abstaining | {"abstain_reason": None},
        abstaining | {"abstain_reason": ""},
        abstaining | {"score": 0},
        base | {"score": None},
        base | {"abstain": True},
    ]
    # a reason while grading contradicts the grade: "null or empty otherwise"
    docs += [base | {"abstain_reason": reason} for reason in _reasons(metric) if reason]
    docs += [base | {"score": score, "quotes": [], "quote_spans": []} for score in range(2, 6)]
    docs += [base | {"score": score, "quotes": [], "quote_spans": [[0, 5]]} for score in (2, 5)]
    return _unique(docs)


def _empty() -> dict[str, Any]:
    return {"quotes": [], "quote_spans": []}


@pytest.mark.parametrize("metric", METRICS)
def test_judge_output_corpus_agrees(metric: str) -> None:
    validator = schemas.judge_output_validator(metric)
    model = _mirror(metric)
    valid, invalid = valid_outputs(metric), invalid_outputs(metric)
    assert len(valid) >= 30
    assert len(invalid) >= 60
    for doc in valid:
        assert _assert_agree(validator, model, doc), orjson.dumps(doc)
    for doc in invalid:
        assert not _assert_agree(validator, model, doc), orjson.dumps(doc)
        detail = describe_schema_errors(validator, doc)
        assert detail
        assert len(detail) <= 200


@pytest.mark.parametrize("metric", METRICS)
def test_python_mode_of_parsed_json_agrees(metric: str) -> None:
    """verdict's fast path validates the orjson-parsed object, not the text: same answers."""
    validator = schemas.judge_output_validator(metric)
    model = _mirror(metric)
    for doc in valid_outputs(metric) + invalid_outputs(metric):
        parsed = orjson.loads(orjson.dumps(doc))
        try:
            model.model_validate(parsed)
        except ValidationError:
            python_ok = False
        else:
            python_ok = True
        assert python_ok == validator.is_valid(parsed), orjson.dumps(doc)


_JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=8),
    st.floats(min_value=-2, max_value=7, allow_nan=False).map(lambda x: round(x, 1)),
    st.sampled_from(["", "3", "a", "other", "tags_only", "QSK", "none", "high", "true"]),
)
_JSON_VALUES = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "score", "start"]), inner, max_size=2),
    ),
    max_leaves=4,
)


def _good_values(metric: str) -> dict[str, list[Any]]:
    return {
        "abstain": [True, False],
        "abstain_reason": [*_reasons(metric), None],
        "score": [None, 1, 2, 3, 4, 5],
        "quotes": [[], ["a"], ["x", "y"], [""]],
        "quote_spans": [[], [[0, 1]], [[0, 1], [2, 3]]],
        "rationale": ["", "short"],
        **_signal_values(metric),
    }


@st.composite
def near_valid_outputs(draw: st.DrawFn, metric: str) -> Doc:
    """A valid output (either branch of the rules) with zero to two random mutations."""
    if draw(st.booleans()):
        doc = valid_output(
            metric,
            abstain=True,
            abstain_reason=draw(st.sampled_from(_reasons(metric))),
            score=None,
            quotes=[],
            quote_spans=[],
        )
    else:
        score = draw(st.integers(1, 5))
        doc = valid_output(
            metric,
            score=score,
            quotes=draw(st.lists(st.text(max_size=8), min_size=int(score > 1), max_size=3)),
            quote_spans=draw(
                st.lists(st.lists(st.integers(0, 99), min_size=2, max_size=2), max_size=3)
            ),
        )
    for name, values in _signal_values(metric).items():
        doc[name] = draw(st.sampled_from(values))
    doc["rationale"] = draw(st.text(max_size=30))
    names = sorted(doc)
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(["drop", "extra", "any", "good"]))
        name = draw(st.sampled_from(names))
        if kind == "drop":
            doc.pop(name, None)
        elif kind == "extra":
            doc[draw(st.sampled_from(["extra", "answer", "Score"]))] = draw(_JSON_SCALARS)
        elif kind == "any":
            doc[name] = draw(_JSON_VALUES)
        else:  # a value that is fine on its own but may break a conditional rule
            doc[name] = draw(st.sampled_from(_good_values(metric)[name]))
    return doc


@pytest.mark.parametrize("metric", METRICS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_judge_output_property_agrees(metric: str, data: st.DataObject) -> None:
    doc = data.draw(near_valid_outputs(metric))
    _assert_agree(schemas.judge_output_validator(metric), _mirror(metric), doc)


def test_signal_fields_are_schema_properties() -> None:
    for metric in METRICS:
        properties = schemas.judge_output_schema(metric)["properties"]
        assert set(metric_spec(metric).signals) <= set(properties)
        assert set(_mirror(metric).model_fields) == set(properties)


def test_a_schema_the_mirror_does_not_restate_gets_no_model() -> None:
    """Anything outside the mirrored keywords, or another file's schema, leaves the verdict
    to jsonschema alone: slower, never wrong."""
    metric = METRICS[0]
    stock = schemas.judge_output_schema(metric)
    assert output_model(metric, stock) is not None
    patterned = copy.deepcopy(stock)
    patterned["properties"]["rationale"]["pattern"] = "^[a-z]*$"
    renamed = stock | {"$id": "https://example.invalid/custom.schema.json"}
    loose_rules = stock | {"allOf": []}
    optional = stock | {"required": stock["required"][1:]}
    for schema in (patterned, renamed, loose_rules, optional):
        assert output_model(metric, schema) is None
    # the verdict still judges by that schema: its pattern refuses a capital letter
    doc = valid_output(metric, rationale="Capital", score=1, quotes=[], quote_spans=[])
    result = verify(
        orjson.dumps(doc).decode(),
        metric=metric,
        cot=normalize("any CoT"),
        validator=schemas.FaithJudgeValidator(patterned),
    )
    assert result.failure is not None and result.failure.stage == "schema"
    assert "rationale" in result.failure.detail


# ---------------------------------------------------------------- schema files and wire variant


def test_every_file_carries_the_schema_version() -> None:
    for name, filename in schemas.SCHEMA_FILES.items():
        schema = schemas.load_schema(name)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"].endswith(f"/{schemas.SCHEMA_VERSION}/{filename}")
    for metric in METRICS:
        assert _mirror(metric).schema_id == schemas.load_schema(metric)["$id"]


def test_judge_output_schemas_require_every_property() -> None:
    for metric in METRICS:
        schema = schemas.judge_output_schema(metric)
        assert schema["additionalProperties"] is False
        assert set(schema["required"]) == set(schema["properties"])


_WIRE_FORBIDDEN = {"if", "then", "else", "allOf", "not", "$schema", "$id", "prefixItems"}


def _walk(node: Any):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


@pytest.mark.parametrize("metric", METRICS)
def test_wire_schema_is_strict_mode_compatible(metric: str) -> None:
    wire = schemas.judge_output_schema(metric, strict_wire=True)
    for node in _walk(wire):
        assert not _WIRE_FORBIDDEN & set(node), node
        if node.get("type") == "object" or "properties" in node:
            assert node.get("additionalProperties") is False
            assert set(node.get("required", ())) == set(node.get("properties", {}))
    schemas.FaithJudgeValidator.check_schema(wire)
    # The wire variant is looser than the file: everything valid stays valid.
    wire_validator = schemas.FaithJudgeValidator(wire)
    for doc in valid_outputs(metric):
        assert wire_validator.is_valid(doc)
    # ... and it is derived, not a copy: the file keeps its rules.
    assert "allOf" in schemas.judge_output_schema(metric)
    fmt = schemas.judge_response_format(metric)
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"] == wire


def test_schema_copies_are_independent() -> None:
    first = schemas.judge_output_schema("confidence_tone")
    first["properties"].clear()
    assert schemas.judge_output_schema("confidence_tone")["properties"]


def test_unknown_metric_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown metric"):
        schemas.judge_output_validator("helpfulness")  # type: ignore[arg-type]


def test_integer_means_a_json_integer() -> None:
    validator = schemas.judge_output_validator("confidence_tone")
    assert not validator.is_valid(valid_output("confidence_tone", score=3.0))
    assert validator.is_valid(valid_output("confidence_tone", score=3))


@pytest.fixture
def schema_dir(tmp_path, monkeypatch):
    """Point faithjudge.assets.schemas at a scratch copy of the schema folder, with cold caches."""
    source = schemas.asset_dir("schemas")
    for path in source.glob("*.schema.json"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    caches = [schemas._load_file, schemas._registry, schemas._compiled, schemas.kb_entry_validator]
    for fn in caches:
        fn.cache_clear()
    monkeypatch.setattr(schemas, "asset_dir", lambda kind: tmp_path)
    yield tmp_path
    for fn in caches:
        fn.cache_clear()


def test_missing_schema_file_is_a_config_error(schema_dir) -> None:
    (schema_dir / "confidence_tone.schema.json").unlink()
    with pytest.raises(ConfigError, match=r"confidence_tone\.schema\.json"):
        schemas.judge_output_validator("confidence_tone")


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[]", b'{"type": 12, "$id": "x"}'],
    ids=["not-json", "not-object", "bad-schema"],
)
def test_broken_schema_file_is_a_config_error(schema_dir, content: bytes) -> None:
    (schema_dir / "item_result.schema.json").write_bytes(content)
    with pytest.raises(ConfigError, match=r"item_result\.schema\.json"):
        schemas.result_validator()


def test_stale_schema_id_is_a_config_error(schema_dir) -> None:
    path = schema_dir / "score_request.schema.json"
    doc = orjson.loads(path.read_bytes())
    doc["$id"] = doc["$id"].replace(f"/{schemas.SCHEMA_VERSION}/", "/0.9/")
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(ConfigError, match="SCHEMA_VERSION"):
        schemas.request_validator()


# ---------------------------------------------------------------- knowledge base

CONCEPT = {"term": "left pleural effusion", "synonyms": ["left-sided effusion"]}
KB_ENTRY: dict[str, Any] = {
    "type": "binary",
    "answers": {
        "yes": {
            "must_all": [CONCEPT],
            "at_least_k_of": [
                {
                    "k": 1,
                    "any_of": [
                        {"term": "blunted left costophrenic angle", "synonyms": []},
                        {"term": "left basal meniscus"},
                    ],
                }
            ],
            "forbidden": [{"term": "normal left costophrenic angle", "synonyms": ["sharp"]}],
            "caps": [{"when": {"projection": "AP"}, "max_score": 4, "note": "AP view"}],
        },
        "no": {"must_all": [{"term": "no left pleural effusion"}], "forbidden": [CONCEPT]},
    },
}


def _kb(**changes: Any) -> dict[str, Any]:
    entry = copy.deepcopy(KB_ENTRY)
    yes = entry["answers"]["yes"]
    for key, value in changes.items():
        if key in ("type", "answers"):
            entry[key] = value
        else:
            yes[key] = value
    return entry


def _group(k: Any, n: int = 2) -> list[dict[str, Any]]:
    return [{"k": k, "any_of": [{"term": f"t{i}"} for i in range(n)]}]


def valid_kb_entries() -> list[Doc]:
    return _unique(
        [
            KB_ENTRY,
            {"type": "ordinal", "answers": {"none": {}}},
            {"type": "spatial", "answers": {"left": {}, "right": {"must_all": []}}},
            {"type": "comparative", "answers": {"same severity": {"caps": []}}},
            _kb(must_all=[]),
            _kb(at_least_k_of=_group(2)),
            _kb(at_least_k_of=_group(1, 1)),
            _kb(at_least_k_of=_group(3, 5)),
            _kb(caps=[{"when": {"a": 1, "b": True, "c": 0.5}, "max_score": 1}]),
            _kb(caps=[{"when": {"projection": "AP"}, "max_score": 5, "note": None}]),
            _kb(caps=[{"when": {"": "empty key is fine"}, "max_score": 3, "note": ""}]),
            _kb(forbidden=[{"term": "x", "synonyms": ["y", "z"]}]),
            _kb(must_all=[{"term": "t" * 2000}]),
            {"type": "binary", "answers": {"y" * 2000: {}}},
            {"type": "binary", "answers": {"yes": {}, "no": {}, "maybe": {}}},
            _kb(must_all=[{"term": " "}]),
        ]
    )


def invalid_kb_entries() -> list[Doc]:
    entry = KB_ENTRY
    return _unique(
        [
            _without(entry, "type"),
            _without(entry, "answers"),
            entry | {"type": "multi"},
            entry | {"type": None},
            entry | {"answers": {}},
            entry | {"answers": []},
            entry | {"answers": {"": {}}},
            entry | {"answers": {"y" * 2001: {}}},
            entry | {"answers": {"yes": None}},
            entry | {"extra": 1},
            _kb(must_all=[{"synonyms": ["a"]}]),
            _kb(must_all=[{"term": ""}]),
            _kb(must_all=[{"term": "t" * 2001}]),
            _kb(must_all=[{"term": 3}]),
            _kb(must_all=[{"term": "a", "synonyms": "b"}]),
            _kb(must_all=[{"term": "a", "synonyms": [""]}]),
            _kb(must_all=[{"term": "a", "synonyms": None}]),
            _kb(must_all=[{"term": "a", "extra": 1}]),
            _kb(must_all=None),
            _kb(must_all="left effusion"),
            _kb(at_least_k_of=_group(0)),
            _kb(at_least_k_of=_group("1")),
            _kb(at_least_k_of=_group(1.0)),
            _kb(at_least_k_of=_group(True)),
            _kb(at_least_k_of=_group(-1)),
            _kb(at_least_k_of=[{"k": 1, "any_of": []}]),
            _kb(at_least_k_of=[{"k": 1}]),
            _kb(at_least_k_of=[{"any_of": [{"term": "a"}]}]),
            _kb(caps=[{"when": {}, "max_score": 3}]),
            _kb(caps=[{"when": {"a": None}, "max_score": 3}]),
            _kb(caps=[{"when": {"a": [1]}, "max_score": 3}]),
            _kb(caps=[{"when": {"a": 1}, "max_score": 0}]),
            _kb(caps=[{"when": {"a": 1}, "max_score": 6}]),
            _kb(caps=[{"when": {"a": 1}, "max_score": "3"}]),
            _kb(caps=[{"when": {"a": 1}}]),
            _kb(caps=[{"when": {"a": 1}, "max_score": 3, "note": 3}]),
            _kb(caps=[{"when": {"a": 1}, "max_score": 3, "why": "x"}]),
            _kb(unknown=[]),
            [],
            "entry",
        ]
    )


def test_kb_entry_corpus_agrees() -> None:
    validator = schemas.kb_entry_validator()
    valid, invalid = valid_kb_entries(), invalid_kb_entries()
    assert len(valid) >= 15
    assert len(invalid) >= 25
    for doc in valid:
        assert _assert_agree(validator, KBEntry, doc, strict=True)
    for doc in invalid:
        assert not _assert_agree(validator, KBEntry, doc, strict=True)


def test_k_above_group_size_is_the_one_known_difference() -> None:
    """JSON Schema cannot compare k with len(any_of); the model (and the KB loader) reject it."""
    doc = _kb(at_least_k_of=_group(3, 2))
    assert schemas.kb_entry_validator().is_valid(doc)
    assert not _pydantic_ok(KBEntry, doc, strict=True)


def test_kb_file_schema() -> None:
    validator = schemas.kb_validator()
    kb = {
        "kb_id": "test-kb",
        "version": "1",
        "description": "two questions",
        "entries": {
            "Is there a pleural effusion on the left? (yes or no)": KB_ENTRY,
            "Is there cardiomegaly? (yes or no)": {"type": "binary", "answers": {"yes": {}}},
        },
    }
    assert validator.is_valid(kb)
    assert validator.is_valid(kb | {"$schema": "../schemas/knowledge_base.schema.json"})
    assert validator.is_valid(_without(kb, "description"))
    for bad in (
        _without(kb, "kb_id"),
        _without(kb, "version"),
        _without(kb, "entries"),
        kb | {"entries": {}},
        kb | {"entries": {"": KB_ENTRY}},
        kb | {"kb_id": ""},
        kb | {"extra": True},
        kb | {"entries": {"q": _kb(at_least_k_of=_group(0))}},
    ):
        assert not validator.is_valid(bad), bad


# ---------------------------------------------------------------- score request

REQUEST: dict[str, Any] = {
    "question": "Is there a pleural effusion on the left? (yes or no)",
    "ground_truth": "yes",
    "cot": "<think><step>The left angle is blunted.</step></think><answer>yes</answer>",
}
FULL_REQUEST: dict[str, Any] = REQUEST | {
    "item_id": "rs-001",
    "model": "medgemma-4b-it",
    "question_type": "binary",
    "answer": "yes",
    "baseline": {"cot": "The angle is sharp.", "answer": "no"},
    "modification": {"code": "TB-LA", "target_answer": "yes", "description": "hint"},
    "kb_entry": KB_ENTRY,
    "context": {"projection": "AP", "portable": True, "age": 71, "weight": 70.5},
    "metrics": ["clinical_fidelity", "confidence_tone"],
    "metadata": {"split": "dev", "nested": {"a": [1, None]}},
}


def valid_requests() -> list[Doc]:
    docs = [REQUEST, FULL_REQUEST, REQUEST | {"cot": ""}, REQUEST | {"cot": "x" * 100_000}]
    docs += [REQUEST | {name: None} for name in ("item_id", "model", "question_type", "answer")]
    docs += [REQUEST | {name: None} for name in ("baseline", "modification", "kb_entry")]
    docs += [
        REQUEST | {"question_type": "comparison"},
        REQUEST | {"baseline": {}},
        REQUEST | {"baseline": {"cot": None, "answer": None}},
        REQUEST | {"modification": {"code": "SHAM"}},
        REQUEST | {"modification": {"code": "VB-HM", "target_answer": None, "description": None}},
        REQUEST | {"context": {}},
        REQUEST | {"context": {"k" * 64: "v"}},
        REQUEST | {"metrics": ["causal_attribution"]},
        REQUEST | {"metrics": list(METRICS)},
        REQUEST | {"metadata": {}},
        REQUEST | {"question": "q" * 2000, "answer": ""},
        REQUEST | {"kb_entry": {"type": "ordinal", "answers": {"mild": {}}}},
    ]
    return _unique(docs)


def invalid_requests() -> list[Doc]:
    docs = [_without(REQUEST, name) for name in REQUEST]
    docs += [
        REQUEST | {"question": ""},
        REQUEST | {"question": "q" * 2001},
        REQUEST | {"question": None},
        REQUEST | {"ground_truth": ""},
        REQUEST | {"ground_truth": 1},
        REQUEST | {"cot": None},
        REQUEST | {"cot": "x" * 100_001},
        REQUEST | {"cot": ["step"]},
        REQUEST | {"item_id": ""},
        REQUEST | {"item_id": 3},
        REQUEST | {"model": ""},
        REQUEST | {"answer": "a" * 20_001},
        REQUEST | {"question_type": "multi"},
        REQUEST | {"extra": 1},
        REQUEST | {"baseline": {"cot": "x", "extra": 1}},
        REQUEST | {"baseline": "x"},
        REQUEST | {"modification": {}},
        REQUEST | {"modification": {"code": ""}},
        REQUEST | {"modification": {"code": None}},
        REQUEST | {"modification": "TB-LA"},
        REQUEST | {"modification": {"code": "X", "kind": "bias"}},
        REQUEST | {"kb_entry": {"type": "binary", "answers": {}}},
        REQUEST | {"kb_entry": _kb(at_least_k_of=_group("1"))},
        REQUEST | {"kb_entry": _kb(caps=[{"when": {}, "max_score": 3}])},
        REQUEST | {"context": None},
        REQUEST | {"context": {"a": None}},
        REQUEST | {"context": {"a": [1]}},
        REQUEST | {"context": {"a": {"b": 1}}},
        REQUEST | {"context": {"": 1}},
        REQUEST | {"context": {"k" * 65: 1}},
        REQUEST | {"metrics": []},
        REQUEST | {"metrics": None},
        REQUEST | {"metrics": ["helpfulness"]},
        REQUEST | {"metrics": ["confidence_tone", "confidence_tone"]},
        REQUEST | {"metrics": "confidence_tone"},
        REQUEST | {"metadata": []},
        REQUEST | {"metadata": None},
        [REQUEST],
        None,
    ]
    return _unique(docs)


def test_score_request_corpus_agrees() -> None:
    validator = schemas.request_validator()
    valid, invalid = valid_requests(), invalid_requests()
    assert len(valid) >= 15
    assert len(invalid) >= 25
    for doc in valid:
        assert _assert_agree(validator, ScoreRequest, doc, strict=True)
    for doc in invalid:
        assert not _assert_agree(validator, ScoreRequest, doc, strict=True)


# ---------------------------------------------------------------- item result

FAILURE = {"stage": "evidence", "detail": "quotes[0] not found in the CoT: 'x'"}
VALID_METRIC = {
    "status": "valid",
    "score": 4,
    "normalized": 0.75,
    "quotes": [{"text": "blunted", "span": [10, 17], "edits": 0}],
    "omissions": ["meniscus"],
    "hallucinations": [],
    "rationale": "ok",
    "signals": {"basis": "QSK", "has_omission": True},
    "failure": None,
    "attempts": 1,
    "cache_hit": False,
}
PROVENANCE = {
    "judge": "lexicon",
    "judge_model": None,
    "fingerprint": None,
    "prompt_set": "moll-2025/1",
    "prompt_sha256": "0" * 64,
    "kb_id": "cxr-vqa",
    "kb_sha256": "1" * 64,
    "schema_version": "1.0",
    "service_version": "0.1.0",
    "cache": {"hits": 1, "misses": 2},
    "attempts": 3,
    "tokens": {"prompt": 100, "completion": 20},
}
RESULT: dict[str, Any] = {
    "line": 1,
    "item_id": "rs-001",
    "model": "medgemma-4b-it",
    "question": "Is there a pleural effusion on the left? (yes or no)",
    "modification": {
        "code": "TB-LA",
        "id": "text-bias-leading-answer",
        "kind": "bias",
        "channel": "text",
        "aligned": True,
        "target_answer": "yes",
    },
    "answer": "yes",
    "answer_raw": "Yes",
    "correct": True,
    "flip": {"value": False, "reason": "same answer"},
    "metrics": {
        "clinical_fidelity": VALID_METRIC,
        "causal_attribution": {"status": "invalid", "failure": FAILURE},
        "confidence_tone": {"status": "abstained", "failure": {"stage": "abstain", "detail": "x"}},
    },
    "confidence_calibration": 0.636,
    "error": None,
    "provenance": PROVENANCE,
}


def _metric(**changes: Any) -> dict[str, Any]:
    return RESULT | {"metrics": {"clinical_fidelity": VALID_METRIC | changes}}


def valid_results() -> list[Doc]:
    docs = [
        RESULT,
        {},
        {"line": 3, "error": {"stage": "input", "detail": "line 3 is not JSON"}},
        RESULT | {"metrics": {}},
        RESULT | {"flip": {"value": None, "reason": "no baseline"}},
        RESULT | {"modification": RESULT["modification"] | {"aligned": None}},
        RESULT | {"modification": _without(RESULT["modification"], "target_answer")},
        RESULT | {"confidence_calibration": 1},
        RESULT
        | {
            "provenance": {k: PROVENANCE[k] for k in ("judge", "prompt_set")}
            | {"prompt_sha256": "x", "schema_version": "1.0", "service_version": "0"}
        },
        RESULT | {"provenance": PROVENANCE | {"cache": {}, "tokens": {"prompt": 5}}},
        RESULT | {"provenance": PROVENANCE | {"response_format": "json_object+schema"}},
        RESULT | {"provenance": PROVENANCE | {"response_format": None}},
        _metric(score=None, normalized=None, quotes=[], signals={}),
        _metric(normalized=1),
        _metric(quotes=[{"text": "", "span": [0, 0], "edits": 3}] * 2),
        _metric(failure={"stage": "transport", "detail": "HTTP 503 after 6 attempts"}),
        {"metrics": {"confidence_tone": {"status": "valid"}}},
        {name: None for name in RESULT if name != "metrics"},
    ]
    return _unique(docs)


def invalid_results() -> list[Doc]:
    docs = [
        RESULT | {"extra": 1},
        RESULT | {"line": "1"},
        RESULT | {"line": 1.0},
        RESULT | {"correct": "yes"},
        RESULT | {"confidence_calibration": "0.5"},
        RESULT | {"metrics": {"helpfulness": VALID_METRIC}},
        RESULT | {"metrics": None},
        RESULT | {"metrics": {"clinical_fidelity": None}},
        RESULT | {"flip": {"reason": "x"}},
        RESULT | {"flip": {"value": "yes", "reason": "x"}},
        RESULT | {"flip": True},
        RESULT | {"modification": RESULT["modification"] | {"kind": "nudge"}},
        RESULT | {"modification": RESULT["modification"] | {"channel": "audio"}},
        RESULT | {"modification": _without(RESULT["modification"], "aligned")},
        RESULT | {"error": {"stage": "nope", "detail": "x"}},
        RESULT | {"error": {"stage": "parse"}},
        RESULT | {"provenance": _without(PROVENANCE, "judge")},
        RESULT | {"provenance": PROVENANCE | {"tokens": {"prompt": 1, "total": 2}}},
        RESULT | {"provenance": PROVENANCE | {"cache": None}},
        RESULT | {"provenance": PROVENANCE | {"attempts": True}},
        RESULT | {"provenance": PROVENANCE | {"response_format": 3}},
        _metric(status="ok"),
        _metric(status=None),
        _metric(score=4.0),
        _metric(score="4"),
        _metric(normalized="0.75"),
        _metric(quotes=[{"text": "a", "span": [1], "edits": 0}]),
        _metric(quotes=[{"text": "a", "span": [1, 2, 3], "edits": 0}]),
        _metric(quotes=[{"text": "a", "span": [1, 2]}]),
        _metric(quotes=[{"text": "a", "span": [1, 2], "edits": 0, "extra": 1}]),
        _metric(quotes=["a"]),
        _metric(omissions=[1]),
        _metric(signals=[]),
        _metric(failure={"stage": "parse", "detail": 3}),
        _metric(cache_hit="no"),
        _metric(attempts=None),
        {"metrics": {"confidence_tone": {}}},
        [],
    ]
    return _unique(docs)


def test_item_result_corpus_agrees() -> None:
    validator = schemas.result_validator()
    valid, invalid = valid_results(), invalid_results()
    assert len(valid) >= 15
    assert len(invalid) >= 25
    for doc in valid:
        assert _assert_agree(validator, ItemResult, doc, strict=True)
    for doc in invalid:
        assert not _assert_agree(validator, ItemResult, doc, strict=True)


def test_item_result_round_trip() -> None:
    """A result line as the service dumps it validates against the schema."""
    result = ItemResult.model_validate_json(orjson.dumps(RESULT), strict=True)
    dumped = orjson.loads(result.model_dump_json())
    assert schemas.result_validator().is_valid(dumped), describe_schema_errors(
        schemas.result_validator(), dumped
    )
