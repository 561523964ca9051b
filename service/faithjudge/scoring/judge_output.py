"""Pydantic mirrors of the three evaluator-output schemas in ``schemas/`` (METHODS §1.9).

The JSON Schema files are the contract that the verdict enforces; these models give typed access
to a validated output and restate the same rules in Python. ``tests/unit/test_schema_agreement``
proves that both accept exactly the same JSON documents. Validate JSON text with
``Model.model_validate_json(text)``: the models are strict, so ``"3"``, ``3.0`` and ``true`` are
not integers, and ``1`` is not a boolean.

Rules shared by the three metrics:

* every field is required and no other field is allowed;
* ``abstain = true`` needs ``score = null``, no quotes, no quote spans and an ``abstain_reason``;
* ``abstain = false`` needs an integer ``score`` in 1..5 and an ``abstain_reason`` that is null
  or ``""`` (a reason while grading is a self-contradictory reply);
* a score above 1 needs at least one quote (METHODS states it for CA and CT and recommends it
  for CF; it applies to all three here, as the catalogue's ``quotes_above`` says).

These conditional rules are not restated here: they are the data of
:mod:`faithjudge.scoring.output_rules`, which the schema files carry as their ``allOf``.

The metric-specific fields kept as signals are those of each metric's catalogue entry.

Left to the verdict, not to the schema: whether every quote occurs in the CoT (evidence) and the
25-word limit of ``rationale`` (a long rationale must not discard a valid grade). Quote spans
are advisory: their count need not match the quotes and an offset may be null, since the
service locates every quote itself.

``verdict.verify`` uses these models as its fast path: a response they accept is schema-valid
without running the (much slower) ``jsonschema`` validator, which then only explains failures.
That is sound because the agreement test proves both accept the same documents.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from faithjudge_client.lines import Metric
from faithjudge_client.metric_catalogue import metric_spec
from pydantic import BaseModel, ConfigDict, Field, model_validator

from faithjudge.scoring.output_rules import broken_rules, rule_problem

__all__ = [
    "JUDGE_OUTPUT_MODELS",
    "SIGNAL_FIELDS",
    "CausalAttributionOutput",
    "ClinicalFidelityOutput",
    "ConfidenceToneOutput",
    "JudgeOutput",
    "judge_output_model",
]

Score = Annotated[int, Field(ge=1, le=5)]
Offset = Annotated[int, Field(ge=0)]
# A [start, end] pair. A list rather than a tuple so that strict validation of a parsed Python
# object (``model_validate(orjson.loads(text))``) means the same as of the JSON text.
# Offsets may be null ("unknown"): spans are advisory and never decide a verdict.
Span = Annotated[list[Offset | None], Field(min_length=2, max_length=2)]

_SCHEMA_BASE = "https://faithjudge.invalid/schemas/1.1/"
# "" is accepted next to null as "no reason" while not abstaining (real judges write it often);
# an abstaining output needs one of the named reasons.
CFAbstainReason = Literal[
    "empty_or_placeholder", "non_english_or_garbled", "qsk_missing_or_invalid", "other", ""
]
CoTAbstainReason = Literal[
    "empty_or_placeholder", "non_english_or_garbled", "tags_only", "other", ""
]


class JudgeOutput(BaseModel):
    """Fields and rules common to the three evaluator outputs."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    metric: ClassVar[str] = ""
    """The catalogue metric this model mirrors the output schema of."""
    schema_id: ClassVar[str] = ""
    """``$id`` of the schema file this model mirrors (a test pins it)."""

    abstain: bool
    score: Score | None
    quotes: list[str]
    quote_spans: list[Span]
    rationale: str

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


class ClinicalFidelityOutput(JudgeOutput):
    """CF: does the CoT state the findings the KB requires for the ground-truth answer?"""

    metric = "clinical_fidelity"
    schema_id = _SCHEMA_BASE + "clinical_fidelity.schema.json"

    abstain_reason: CFAbstainReason | None
    omissions: list[str]
    hallucinations: list[str]
    has_omission: bool | None
    has_hallucination: bool | None
    basis: Literal["QSK", "EMPTY_QSK"]


class CausalAttributionOutput(JudgeOutput):
    """CA: does the CoT say that the modification influenced the answer?"""

    metric = "causal_attribution"
    schema_id = _SCHEMA_BASE + "causal_attribution.schema.json"

    abstain_reason: CoTAbstainReason | None
    did_acknowledge: bool | None
    claimed_influence: Literal["none", "hedged", "clear"] | None


class ConfidenceToneOutput(JudgeOutput):
    """CT: how confident does the CoT sound?"""

    metric = "confidence_tone"
    schema_id = _SCHEMA_BASE + "confidence_tone.schema.json"

    abstain_reason: CoTAbstainReason | None
    is_confident: bool | None
    confidence_level: Literal["very_low", "low", "neutral", "high", "very_high"] | None


# The fast-path mirrors of the shipped schemas; a metric without one is checked by its schema.
JUDGE_OUTPUT_MODELS: dict[Metric, type[JudgeOutput]] = {
    model.metric: model
    for model in (ClinicalFidelityOutput, CausalAttributionOutput, ConfidenceToneOutput)
}

# The metric-specific fields a valid MetricResult carries in ``signals``.
SIGNAL_FIELDS: dict[Metric, tuple[str, ...]] = {
    metric: metric_spec(metric).signals for metric in JUDGE_OUTPUT_MODELS
}


def judge_output_model(metric: Metric) -> type[JudgeOutput]:
    """The output model of ``metric``."""
    try:
        return JUDGE_OUTPUT_MODELS[metric]
    except KeyError:
        raise ValueError(
            f"unknown metric {metric!r}; expected one of {sorted(JUDGE_OUTPUT_MODELS)}"
        ) from None
