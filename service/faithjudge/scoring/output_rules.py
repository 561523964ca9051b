"""The cross-field rules of a judge output, declared once as data.

Each judge-output schema states in its field descriptions how the fields depend on one
another: ``abstain_reason`` is "required when abstain is true; null or empty otherwise",
``score`` is "null only when abstaining", ``quotes`` holds "at least one when score > 1" (the
catalogue's ``quotes_above``), and an abstaining output has no quotes or spans. Those rules are
the JSON Schema ``if``/``then`` conditionals of :func:`conditional_rules`, and nothing else
restates them:

* every shipped schema file carries exactly these conditionals as its ``allOf``
  (``tests/unit/test_output_rules.py`` compares them), so any JSON Schema validator enforces them;
* the pydantic mirrors of :mod:`faithjudge.scoring.judge_output` (grading's fast path) check
  them through :func:`broken_rules`;
* grading checks them again after the schema, so that a registered metric whose schema omits
  them gets them too, with the same detail.

:func:`rule_problem` words a broken rule for the failure detail, for a ``jsonschema`` error and
for :func:`broken_rules` alike, so both paths name the field and the rule the same way.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import orjson

__all__ = ["BrokenRule", "broken_rules", "conditional_rules", "json_preview", "rule_problem"]

# The keywords the conditionals may use: the checker below implements exactly these.
_KEYWORDS = frozenset(
    {"const", "type", "minimum", "minLength", "maxLength", "minItems", "maxItems"}
)


def conditional_rules(quotes_above: int = 1) -> list[dict[str, Any]]:
    """The ``allOf`` conditionals of a judge-output schema whose metric needs a quote above
    score ``quotes_above``."""
    return [
        {
            "$comment": "Abstaining: no score, no quotes, no spans, and a reason.",
            "if": {"properties": {"abstain": {"const": True}}, "required": ["abstain"]},
            "then": {
                "properties": {
                    "abstain_reason": {"type": "string", "minLength": 1},
                    "score": {"type": "null"},
                    "quotes": {"maxItems": 0},
                    "quote_spans": {"maxItems": 0},
                }
            },
        },
        {
            "$comment": "Not abstaining: an integer score 1-5 and no reason (null or empty).",
            "if": {"properties": {"abstain": {"const": False}}, "required": ["abstain"]},
            "then": {
                "properties": {
                    "score": {"type": "integer"},
                    "abstain_reason": {"maxLength": 0},
                }
            },
        },
        {
            "$comment": "A score above the floor needs at least one quote.",
            "if": {
                "properties": {
                    "abstain": {"const": False},
                    "score": {"type": "integer", "minimum": quotes_above + 1},
                },
                "required": ["abstain", "score"],
            },
            "then": {"properties": {"quotes": {"minItems": 1}}},
        },
    ]


@dataclass(frozen=True, slots=True)
class BrokenRule:
    """One constraint of a conditional that an output breaks."""

    field: str
    keyword: str
    """The JSON Schema keyword of the broken constraint (``maxLength``, ``type`` ...)."""
    value: Any
    """The field's value in the output."""


def broken_rules(doc: Mapping[str, Any], quotes_above: int = 1) -> list[BrokenRule]:
    """Every constraint of :func:`conditional_rules` that ``doc`` breaks, in declaration order.

    JSON Schema semantics: a condition on an absent field holds unless the field is
    ``required``; a constraint on an absent field holds; a length bound ignores a value that
    is no string, an item bound one that is no array, ``minimum`` one that is no number.
    """
    broken: list[BrokenRule] = []
    for rule in _compiled(quotes_above):
        condition, consequence = rule["if"], rule["then"]
        if not all(name in doc for name in condition.get("required", ())):
            continue
        if not _satisfies(doc, condition["properties"]):
            continue
        for field, constraint in consequence["properties"].items():
            if field not in doc:
                continue
            value = doc[field]
            broken.extend(
                BrokenRule(field, keyword, value)
                for keyword, argument in constraint.items()
                if not _holds(value, keyword, argument)
            )
    return broken


def rule_problem(field: str, keyword: str, value: Any, doc: Any) -> str | None:
    """The failure wording of a broken conditional constraint (None: not one of the rules)."""
    if field == "score" and keyword == "type":
        if isinstance(doc, dict) and doc.get("abstain") is True:
            return f"must be null when abstain is true (got {json_preview(value)})"
        return "must be an integer 1-5 when abstain is false"
    if field in ("quotes", "quote_spans") and keyword == "maxItems":
        return "must be empty when abstain is true"
    if field == "abstain_reason" and keyword in ("type", "minLength"):
        return "must be given when abstain is true"
    if field == "abstain_reason" and keyword == "maxLength":
        return f"must be null or empty when abstain is false (got {json_preview(value)})"
    if field == "quotes" and keyword == "minItems" and isinstance(doc, dict):
        return f"score {json_preview(doc.get('score'))} requires at least one quote"
    return None


@cache
def _compiled(quotes_above: int) -> tuple[dict[str, Any], ...]:
    rules = tuple(conditional_rules(quotes_above))
    for rule in rules:
        for part in (rule["if"], rule["then"]):
            for constraint in part["properties"].values():
                unknown = set(constraint) - _KEYWORDS
                if unknown:
                    raise ValueError(f"conditional rule uses unsupported keywords {unknown}")
    return rules


def _satisfies(doc: Mapping[str, Any], properties: Mapping[str, Any]) -> bool:
    return all(
        _holds(doc[field], keyword, argument)
        for field, constraint in properties.items()
        if field in doc
        for keyword, argument in constraint.items()
    )


def _holds(value: Any, keyword: str, argument: Any) -> bool:
    if keyword == "const":
        # JSON keeps booleans and numbers apart: 1 is not true, 0 is not false
        return type(value) is type(argument) and value == argument
    if keyword == "type":
        kinds = argument if isinstance(argument, list) else [argument]
        return any(_is_type(value, kind) for kind in kinds)
    if keyword == "minimum":
        return not _is_type(value, "number") or bool(value >= argument)
    if keyword in ("minLength", "maxLength"):
        if not isinstance(value, str):
            return True
        bound = int(argument)
        return len(value) >= bound if keyword == "minLength" else len(value) <= bound
    if keyword in ("minItems", "maxItems"):
        if not isinstance(value, list):
            return True
        bound = int(argument)
        return len(value) >= bound if keyword == "minItems" else len(value) <= bound
    raise ValueError(f"unsupported keyword {keyword!r}")


def _is_type(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":  # a JSON integer: 3.0 is not one (as the service's validators hold)
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    raise ValueError(f"unknown JSON type {kind!r}")


def json_preview(value: Any, limit: int = 40) -> str:
    """``value`` as compact JSON, cut to ``limit`` characters (for failure details)."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
