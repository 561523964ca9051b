"""Pydantic mirrors of the judge-output schemas, built from the schemas themselves.

The JSON Schema file of a metric (``schemas/<metric>.schema.json``, or a registered metric's
own) is the contract that grading enforces. :func:`output_model` turns that schema into a
strict pydantic model accepting the same JSON documents, for every catalogue metric alike, so a
new metric needs no code here. ``tests/unit/test_schema_agreement`` proves, for every metric of
the catalogue, that model and schema accept exactly the same documents. The models are strict,
so ``"3"``, ``3.0`` and ``true`` are not integers, and ``1`` is not a boolean.

The schema keywords mirrored are those the judge outputs use: an object of required
properties without others, each with ``type`` (one or several), ``enum`` (strings and null),
``minimum``/``maximum``, ``minLength``/``maxLength``, ``items`` or identical ``prefixItems``,
``minItems``/``maxItems``, plus annotations. A schema using anything else (or whose ``$id`` does
not name the metric's schema file) gets no model: grading then checks it with ``jsonschema``
alone, slower and just as strict.

The conditional rules (``abstain`` needs ``score = null`` and a reason, a score above the
catalogue's ``quotes_above`` needs a quote, ...) are the data of
:mod:`faithjudge.scoring.output_rules`, which the schema files carry as their ``allOf`` and
every model checks through :func:`~faithjudge.scoring.output_rules.broken_rules`; a schema whose
``allOf`` says anything else is not mirrored.

Left to grading, not to the schema: whether every quote occurs in the CoT (evidence) and the
25-word limit of ``rationale`` (a long rationale must not discard a valid grade).

``grading.verify`` uses these models as its fast path: a response a model accepts is
schema-valid without running the (much slower) ``jsonschema`` validator, which then only
explains failures. That is sound because the agreement test proves both accept the same
documents.

Pure: no I/O (the caller hands over the loaded schema).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, Union

from faithjudge_client.metric_catalogue import metric_spec
from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from faithjudge.scoring.output_rules import broken_rules, conditional_rules, rule_problem

__all__ = ["JudgeOutput", "output_model"]

_ANNOTATIONS = frozenset({"title", "description", "$comment", "default", "examples"})
_ROOT_KEYWORDS = frozenset(
    {"$schema", "$id", "type", "additionalProperties", "required", "properties", "allOf"}
)
_FIELD_KEYWORDS = frozenset(
    {"type", "enum", "minimum", "maximum", "minLength", "maxLength"}
    | {"items", "prefixItems", "minItems", "maxItems"}
)
_KINDS = frozenset({"null", "boolean", "integer", "number", "string", "array"})


class JudgeOutput(BaseModel):
    """The base of every mirror: strict, closed, and checking the conditional rules."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    metric: ClassVar[str] = ""
    """The catalogue metric whose output schema this model mirrors."""
    schema_id: ClassVar[str] = ""
    """``$id`` of the schema this model mirrors."""

    @model_validator(mode="after")
    def _conditional_rules(self) -> JudgeOutput:
        fields = vars(self)
        broken = broken_rules(fields, metric_spec(self.metric).quotes_above)
        if broken:
            rule = broken[0]
            problem = rule_problem(rule.field, rule.keyword, rule.value, fields)
            raise ValueError(f"{rule.field}: {problem or rule.keyword}")
        return self

    def signals(self) -> dict[str, Any]:
        """The metric-specific fields (the catalogue's ``signals``) and their values."""
        return {name: getattr(self, name) for name in metric_spec(self.metric).signals}


class _NotMirrored(Exception):
    """The schema uses something the mirror does not restate."""


# metric -> (the schema object a model was built from, the model or None); a validator's
# schema is the same object call after call, so the lookup is an identity check
_MODELS: dict[str, tuple[Mapping[str, Any], type[JudgeOutput] | None]] = {}


def output_model(metric: str, schema: Mapping[str, Any]) -> type[JudgeOutput] | None:
    """The pydantic mirror of ``schema``, the judge-output schema of ``metric``, or None
    when the schema is not one the mirror restates (see the module docstring)."""
    cached = _MODELS.get(metric)
    if cached is not None and (cached[0] is schema or cached[0] == schema):
        return cached[1]
    try:
        model: type[JudgeOutput] | None = _build(metric, schema)
    except _NotMirrored:
        model = None
    _MODELS[metric] = (schema, model)
    return model


def _build(metric: str, schema: Mapping[str, Any]) -> type[JudgeOutput]:
    spec = metric_spec(metric)
    schema_id = schema.get("$id")
    if not isinstance(schema_id, str) or not schema_id.endswith("/" + spec.schema_file):
        raise _NotMirrored
    _known(schema, _ROOT_KEYWORDS)
    properties = schema.get("properties")
    required = schema.get("required")
    if (
        schema.get("type") != "object"
        or schema.get("additionalProperties") is not False
        or not isinstance(properties, Mapping)
        or not isinstance(required, list)
        or sorted(required) != sorted(properties)
        or schema.get("allOf", conditional_rules(spec.quotes_above))
        != conditional_rules(spec.quotes_above)
    ):
        raise _NotMirrored
    fields: dict[str, Any] = {}
    for name, field in properties.items():
        if not name.isidentifier() or name.startswith("_") or hasattr(JudgeOutput, name):
            raise _NotMirrored
        fields[name] = (_annotation(field), ...)
    title = "".join(part.title() for part in metric.split("_"))
    model = create_model(f"{title}Output", __base__=JudgeOutput, __module__=__name__, **fields)
    model.metric = metric
    model.schema_id = schema_id
    return model


def _known(node: Mapping[str, Any], keywords: frozenset[str]) -> None:
    if set(node) - keywords - _ANNOTATIONS:
        raise _NotMirrored


def _annotation(field: Any) -> Any:
    """The type of one property: a union of one member per JSON type it allows."""
    if not isinstance(field, Mapping):
        raise _NotMirrored
    _known(field, _FIELD_KEYWORDS)
    declared = field.get("type")
    kinds = [declared] if isinstance(declared, str) else declared
    if not isinstance(kinds, list) or not kinds or not set(kinds) <= _KINDS:
        raise _NotMirrored
    if "enum" in field:
        return _enum(field, kinds)
    members = [_member(kind, field) for kind in dict.fromkeys(kinds)]
    return members[0] if len(members) == 1 else Union[tuple(members)]  # noqa: UP007


def _enum(field: Mapping[str, Any], kinds: list[str]) -> Any:
    if set(field) - {"type", "enum"} - _ANNOTATIONS:
        raise _NotMirrored  # an enum beside other constraints is left to jsonschema
    values = field["enum"]
    if not isinstance(values, list) or not all(v is None or isinstance(v, str) for v in values):
        raise _NotMirrored
    # JSON Schema: a value must be listed and of one of the types
    allowed = tuple(
        dict.fromkeys(v for v in values if ("null" if v is None else "string") in kinds)
    )
    if not allowed:
        raise _NotMirrored
    return Literal[allowed]


def _member(kind: str, field: Mapping[str, Any]) -> Any:
    """The type of one JSON type of a property, with the constraints that apply to it."""
    if kind == "null":
        return type(None)
    if kind == "boolean":
        return bool
    if kind in ("integer", "number"):
        number: type = int if kind == "integer" else float
        return Annotated[number, Field(ge=field.get("minimum"), le=field.get("maximum"))]
    if kind == "string":
        return Annotated[str, Field(min_length=field.get("minLength"),
                                    max_length=field.get("maxLength"))]  # fmt: skip
    return _array(field)


def _array(field: Mapping[str, Any]) -> Any:
    items = field.get("items", True)
    longest = field.get("maxItems")
    prefix = field.get("prefixItems")
    if prefix is not None:
        # positions of one schema each, and nothing after them: a list of that schema
        if not isinstance(prefix, list) or not prefix or items is not False:
            raise _NotMirrored
        if any(part != prefix[0] for part in prefix):
            raise _NotMirrored
        items = prefix[0]
        longest = len(prefix) if longest is None else min(longest, len(prefix))
    if items is False:
        item: Any = Any
        longest = 0
    elif items is True:
        item = Any
    else:
        item = _annotation(items)
    return Annotated[list[item], Field(min_length=field.get("minItems"), max_length=longest)]
