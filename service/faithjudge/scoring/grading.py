"""Grading: one raw judge reply in, one checked grade (:class:`MetricResult`) out.

Every response is classified exactly once, in this order (METHODS §1.11 [REC]), so that the
coverage rates add up:

1. ``parse``    the text (after removing one surrounding Markdown code fence and surrounding
                whitespace, and nothing else) is not a JSON object;
2. ``schema``   the object breaks the metric's JSON Schema (``schemas/<metric>.schema.json``)
                or contradicts itself: the cross-field rules of
                ``faithjudge.scoring.output_rules`` (``abstain_reason`` only when abstaining, a
                score only when not, a quote above the catalogue's ``quotes_above``) hold for
                every metric, whether its schema states them or not;
3. ``abstain``  the judge abstained (status ``abstained``, not ``invalid``);
4. ``evidence`` a quote is empty or cannot be located in the CoT within the edit budget
                (``floor(tolerance * len(quote))`` edits, METHODS §1.10);
5. ``valid``    the grade counts: score, normalised score, quotes with their verified spans in
                the ORIGINAL CoT, and the metric-specific signals.

Pure: the caller passes the compiled schema validator (``faithjudge.assets.schemas``) and the
CoT already normalised once per item (``faithjudge.scoring.normalize.normalize``). The caller
also fills ``attempts`` and ``cache_hit`` (``result.model_copy(update=...)``).

Quote spans returned by the judge are advisory and ignored here; the reported spans are the
ones the service located. The rationale's 25-word limit is not enforced.

Speed: ``jsonschema`` takes ~300 µs per output, so acceptance is decided by the pydantic mirror
of the same schema (``faithjudge.scoring.judge_output``, ~8 µs) whenever the validator holds the
metric's schema file; ``jsonschema`` runs only to confirm and explain a rejection. Both paths
reach the same outcome and detail: the mirror checks the same cross-field rules, and a
rejection is always worded from ``jsonschema``'s errors.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from faithjudge_client.lines import Failure, FailureStage, Metric, MetricResult, QuoteResult
from faithjudge_client.metric_catalogue import metric_spec
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from pydantic import ValidationError as PydanticValidationError

from faithjudge.errors import JudgeOutputInvalid
from faithjudge.scoring.evidence import locate_quote
from faithjudge.scoring.judge_output import output_model
from faithjudge.scoring.normalize import NormalizedText, normalize_text
from faithjudge.scoring.output_rules import BrokenRule, broken_rules, json_preview, rule_problem

__all__ = [
    "MAX_DETAIL_CHARS",
    "describe_schema_errors",
    "parse_response",
    "strip_code_fence",
    "verify",
]

MAX_DETAIL_CHARS = 200
_QUOTE_PREVIEW_CHARS = 60

# One fence around the whole text: ```json ... ``` (any info string, or none).
_FENCE = re.compile(r"\A```[\w+.-]*[ \t]*(?P<body>.*?)```\Z", re.DOTALL)

_JSON_KIND = {
    list: "JSON array",
    str: "JSON string",
    int: "JSON number",
    float: "JSON number",
    bool: "JSON boolean",
    type(None): "JSON null",
}


# ---------------------------------------------------------------- entry point


def verify(
    raw: str,
    *,
    metric: Metric,
    cot: NormalizedText,
    validator: Validator,
    tolerance: float = 0.02,
) -> MetricResult:
    """Classify one judge response for ``metric`` and build its :class:`MetricResult`.

    Args:
        raw: the judge's text exactly as received ("" when none was kept).
        metric: the metric the response grades.
        cot: the scored CoT, normalised; spans are reported in ``cot.original``.
        validator: the compiled validator of the metric's schema
            (``faithjudge.assets.schemas.judge_output_validator(metric)``); a custom one must
            enforce at least the stock schema's fields and types.
        tolerance: the edit budget of the evidence check, as a fraction of the quote length.
    """
    try:
        doc = parse_response(raw)
    except JudgeOutputInvalid as exc:
        return _invalid("parse", exc.detail)

    spec = metric_spec(metric)
    if not _schema_valid(doc, metric, validator):
        rationale = doc.get("rationale")
        return _invalid(
            "schema",
            describe_schema_errors(validator, doc),
            rationale if isinstance(rationale, str) else None,
        )

    rationale = doc.get("rationale")
    # the shipped schemas state the cross-field rules themselves; a registered metric's may not
    broken = broken_rules(doc, spec.quotes_above)
    if broken:
        return _invalid("schema", _describe_broken_rules(broken, doc), rationale)
    if doc.get("abstain") is True:
        return MetricResult(
            status="abstained",
            rationale=rationale,
            failure=Failure(stage="abstain", detail=str(doc.get("abstain_reason"))),
        )

    quotes: list[QuoteResult] = []
    for index, quote in enumerate(doc.get("quotes", ())):
        if not quote.strip() or (not quote.isascii() and not normalize_text(quote)):
            return _invalid("evidence", f"quotes[{index}] is empty", rationale)
        match = locate_quote(quote, cot, tolerance=tolerance)
        if match is None:
            return _invalid(
                "evidence",
                f"quotes[{index}] not found in the CoT: {_preview(quote)}",
                rationale,
            )
        quotes.append(QuoteResult(text=quote, span=(match.start, match.end), edits=match.edits))

    score: int = doc["score"]
    return MetricResult(
        status="valid",
        score=score,
        normalized=(score - 1) / 4,
        quotes=quotes,
        omissions=doc.get("omissions", []),
        hallucinations=doc.get("hallucinations", []),
        rationale=rationale,
        signals={name: doc.get(name) for name in spec.signals},
    )


def _schema_valid(doc: dict[str, Any], metric: Metric, validator: Validator) -> bool:
    """Whether ``doc`` satisfies the validator's schema.

    Fast path: when the validator's schema is the metric's schema file (its ``$id`` names it)
    and :mod:`faithjudge.scoring.judge_output` mirrors it, the model's acceptance settles it
    (~5 µs instead of ~300 µs for ``jsonschema``); ``jsonschema`` still decides every
    rejection, so a document is never failed on the model's word alone.
    """
    schema = getattr(validator, "schema", None)
    model = output_model(metric, schema) if isinstance(schema, dict) else None
    if model is not None:
        try:
            model.model_validate(doc)
        except PydanticValidationError:
            pass
        else:
            return True
    return bool(validator.is_valid(doc))


def _invalid(stage: FailureStage, detail: str, rationale: str | None = None) -> MetricResult:
    return MetricResult(
        status="invalid",
        rationale=rationale,
        failure=Failure(stage=stage, detail=_clip(detail)),
    )


def _clip(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _preview(text: str, limit: int = _QUOTE_PREVIEW_CHARS) -> str:
    head = " ".join(text[:limit].split())
    return f"'{head}…'" if len(text) > limit else f"'{head}'"


# ---------------------------------------------------------------- parse


def strip_code_fence(text: str) -> str:
    """``text`` without surrounding whitespace and one surrounding Markdown code fence."""
    stripped = text.strip()
    if stripped.startswith("```"):
        match = _FENCE.match(stripped)
        if match is not None:
            return match.group("body").strip()
    return stripped


def parse_response(raw: str) -> dict[str, Any]:
    """The JSON object of a judge response.

    Only a surrounding code fence and surrounding whitespace are removed; nothing is repaired.

    Raises:
        JudgeOutputInvalid: stage ``parse``, with a detail saying what is wrong.
    """
    text = strip_code_fence(raw)
    if not text:
        raise JudgeOutputInvalid("parse", "empty response", raw=raw)
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise JudgeOutputInvalid("parse", _json_problem(text, exc), raw=raw) from None
    if not isinstance(doc, dict):
        kind = _JSON_KIND.get(type(doc), "JSON value")
        raise JudgeOutputInvalid("parse", f"{kind}, expected an object", raw=raw)
    return doc


def _json_problem(text: str, exc: orjson.JSONDecodeError) -> str:
    if text.startswith("```"):
        return "code fence not closed (truncated response?)"
    message = exc.msg
    if message.startswith("unexpected end of data") and text[0] in "{[":
        return f"truncated JSON (unterminated at char {len(text)})"
    if message.startswith("unexpected content after document"):
        return f"not JSON: extra text after the JSON value at char {exc.pos}"
    near = " ".join(text[exc.pos : exc.pos + 20].split())
    return f"not JSON: {message} at char {exc.pos} near '{near}'"


# ---------------------------------------------------------------- schema


def describe_schema_errors(validator: Validator, instance: Any) -> str:
    """One short line about the first schema error by field path, plus how many more there are.

    Returns ``""`` when ``instance`` is valid. Examples: ``score: 7 is greater than the maximum
    of 5``, ``quotes: score 3 requires at least one quote``, ``abstain: required field is
    missing (+2 more)``.
    """
    problems: list[tuple[tuple[Any, ...], int, str, str]] = []
    for error in validator.iter_errors(instance):
        problems.extend(_problems(error, instance))
    return _first_problem(problems)


def _describe_broken_rules(broken: list[BrokenRule], doc: dict[str, Any]) -> str:
    """The detail of cross-field rules a schema-valid output breaks, worded as
    :func:`describe_schema_errors` words the same rules from a schema that states them."""
    problems = [
        (
            _sort_key((rule.field,)),
            1,
            rule.field,
            rule_problem(rule.field, rule.keyword, rule.value, doc)
            or f"breaks {rule.keyword} when abstain is {json_preview(doc.get('abstain'))}",
        )
        for rule in broken
    ]
    return _first_problem(problems)


def _first_problem(problems: list[tuple[tuple[Any, ...], int, str, str]]) -> str:
    if not problems:
        return ""
    problems.sort()
    _, _, field, problem = problems[0]
    others = len({p[2] for p in problems}) - 1  # count fields, not errors
    more = f" (+{others} more)" if others else ""
    head = f"{field}: "
    return head + _clip(problem, MAX_DETAIL_CHARS - len(head) - len(more)) + more


def _problems(error: ValidationError, root: Any) -> list[tuple[tuple[Any, ...], int, str, str]]:
    """(sort key, rank, field path, problem) for one jsonschema error."""
    while error.context:  # anyOf / oneOf: report the branch that got furthest into the value
        error = max(error.context, key=lambda e: (len(e.absolute_path), e.validator != "type"))
    path = tuple(error.absolute_path)
    conditional = "then" in error.absolute_schema_path or "else" in error.absolute_schema_path
    rank = 1 if conditional else 0
    keyword = error.validator
    instance = error.instance

    if keyword == "required":
        return _required(error, path, rank)
    if keyword in ("additionalProperties", "unevaluatedProperties") and isinstance(instance, dict):
        allowed = error.schema.get("properties", {})
        extras = [name for name in instance if name not in allowed]
        return [
            (_sort_key((*path, name)), rank, _field((*path, name)), "field not allowed")
            for name in extras
        ]
    problem = None
    if conditional and len(path) == 1 and isinstance(path[0], str):
        problem = rule_problem(path[0], keyword, instance, root)
    if problem is None:
        problem = _plain_problem(error)
    return [(_sort_key(path), rank, _field(path), problem)]


def _required(
    error: ValidationError, path: tuple[Any, ...], rank: int
) -> list[tuple[tuple[Any, ...], int, str, str]]:
    # jsonschema yields one "required" error per missing name, with the name in its message.
    match = re.match(r"\A'(.*)' is a required property\Z", error.message, re.DOTALL)
    name = match.group(1) if match else "?"
    return [(_sort_key((*path, name)), rank, _field((*path, name)), "required field is missing")]


def _plain_problem(error: ValidationError) -> str:
    keyword = error.validator
    instance = error.instance
    value = error.validator_value
    if keyword == "type":
        expected = " or ".join(value) if isinstance(value, list) else str(value)
        return f"{json_preview(instance)} is not of type {expected}"
    if keyword == "enum":
        options = ", ".join(json_preview(option) for option in value)
        return f"{json_preview(instance)} is not one of {options}"
    if keyword == "const":
        return f"{json_preview(instance)} is not {json_preview(value)}"
    if keyword == "items" and value is False and isinstance(instance, list):
        keyword, value = "maxItems", len(error.schema.get("prefixItems", ()))
    if keyword == "minItems" and isinstance(instance, list):
        return f"expected at least {value} item(s), got {len(instance)}"
    if keyword == "maxItems" and isinstance(instance, list):
        return f"expected at most {value} item(s), got {len(instance)}"
    if keyword in ("minLength", "maxLength") and isinstance(instance, str):
        bound = "at least" if keyword == "minLength" else "at most"
        return f"expected {bound} {value} character(s), got {len(instance)}"
    return str(error.message)


def _sort_key(path: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((0, part, "") if isinstance(part, int) else (1, 0, str(part)) for part in path)


def _field(path: tuple[Any, ...]) -> str:
    if not path:
        return "(root)"
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
