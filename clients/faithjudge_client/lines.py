"""Wire contracts: the ScoreRequest line, the ItemResult line and the knowledge-base entry.

These models mirror the JSON Schemas in ``schemas/`` (a test proves the two agree on a corpus of
valid and invalid documents). They are plain data: resolving a modification code, looking up a
knowledge-base entry or scoring happens elsewhere.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from faithjudge_client.metric_catalogue import BUILT_IN_METRICS, is_metric, metric_names

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_COT_CHARS",
    "METRICS",
    "NO_BASELINE",
    "OLDER_PROVENANCE_KEYS",
    "Baseline",
    "CacheStats",
    "Concept",
    "ConceptGroup",
    "ContextValue",
    "Failure",
    "FailureStage",
    "FlipResult",
    "ItemResult",
    "KBAnswer",
    "KBCap",
    "KBEntry",
    "Metric",
    "MetricResult",
    "MetricStatus",
    "Modification",
    "ModificationKind",
    "ModificationResolved",
    "Provenance",
    "QuestionType",
    "QuoteResult",
    "ScoreRequest",
    "TokenUsage",
    "non_finite_path",
]


def _known_metric(name: str) -> str:
    if not is_metric(name):
        raise ValueError(f"unknown metric {name!r}; expected one of {list(metric_names())}")
    return name


# A metric name, checked against the catalogue when validated (a metric registered at run time
# is accepted); the published schema lists the shipped metrics, as schemas/ does.
Metric = Annotated[
    str,
    AfterValidator(_known_metric),
    WithJsonSchema({"enum": list(BUILT_IN_METRICS), "type": "string"}),
]
METRICS: tuple[str, ...] = BUILT_IN_METRICS
"""The shipped metrics (``faithjudge_client.metric_catalogue.metric_names()`` lists the live
catalogue)."""

QuestionType = Literal["binary", "ordinal", "comparative", "spatial"]
# Metric failures (the coverage taxonomy) plus ``input`` for a line that could not be read at all.
FailureStage = Literal["parse", "schema", "evidence", "abstain", "transport", "kb", "input"]
MetricStatus = Literal["valid", "abstained", "invalid"]
# bias: steers to a target answer; attention: highlights a region; removal: hides evidence;
# substitution: swaps the image; degradation: corrupts it; rewrite: changes the question text.
ModificationKind = Literal[
    "baseline", "placebo", "bias", "attention", "removal", "substitution", "degradation", "rewrite"
]

# Input limits, sized from real model output (schemas/README.md lists them with the sources):
# CoTs of the reader study run to 9,000 characters; answer fields often hold the whole reply
# (a JSON object with thought and answer, or tagged text): 1,046 characters in the dev split,
# past 4,000 in the public release, so 20,000 leaves room without admitting unbounded input.
MAX_COT_CHARS = 100_000
MAX_ANSWER_CHARS = 20_000
NonEmpty = Annotated[str, StringConstraints(min_length=1, max_length=2_000)]
ShortText = Annotated[str, StringConstraints(max_length=2_000)]
AnswerText = Annotated[str, StringConstraints(max_length=MAX_ANSWER_CHARS)]
ContextValue = str | int | float | bool


class _Strict(BaseModel):
    # strict: JSON "1" is not the integer 1, exactly as the JSON Schemas say; NaN and infinity
    # are not JSON numbers, whatever a lenient parser let through
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


# ---------------------------------------------------------------- knowledge base entries


class Concept(_Strict):
    """A finding the CoT may state: the term or any synonym counts as a mention."""

    term: NonEmpty
    synonyms: list[NonEmpty] = Field(default_factory=list)


class ConceptGroup(_Strict):
    """At least ``k`` of ``any_of`` must be stated."""

    k: Annotated[int, Field(ge=1)]
    any_of: Annotated[list[Concept], Field(min_length=1)]

    @field_validator("k", mode="before")
    @classmethod
    def _no_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("k must be an integer, not a boolean")
        return value

    def model_post_init(self, __context: Any) -> None:
        if self.k > len(self.any_of):
            raise ValueError(f"k={self.k} exceeds the {len(self.any_of)} concepts in any_of")


class KBCap(_Strict):
    """Caps the CF score when every ``when`` flag of the request context matches."""

    when: Annotated[dict[str, ContextValue], Field(min_length=1)]
    max_score: Annotated[int, Field(ge=1, le=5)]
    note: ShortText | None = None


class KBAnswer(_Strict):
    """Recognition criteria of one answer option."""

    must_all: list[Concept] = Field(default_factory=list)
    at_least_k_of: list[ConceptGroup] = Field(default_factory=list)
    forbidden: list[Concept] = Field(default_factory=list)
    caps: list[KBCap] = Field(default_factory=list)


class KBEntry(_Strict):
    """Knowledge-base entry of one question: criteria per answer option."""

    type: QuestionType
    answers: Annotated[dict[NonEmpty, KBAnswer], Field(min_length=1)]


# ---------------------------------------------------------------- request line


class Baseline(_Strict):
    """The unmodified-input run, used to decide flips."""

    cot: Annotated[str, StringConstraints(max_length=MAX_COT_CHARS)] | None = None
    answer: AnswerText | None = None


class Modification(_Strict):
    """The controlled modification the scored CoT was written under."""

    code: NonEmpty
    target_answer: ShortText | None = None
    description: ShortText | None = None


class ScoreRequest(_Strict):
    """One CoT to score (one JSONL line of a batch)."""

    item_id: NonEmpty | None = None
    model: NonEmpty | None = None
    question: NonEmpty
    question_type: Literal["binary", "ordinal", "comparative", "comparison", "spatial"] | None = (
        None
    )
    ground_truth: NonEmpty
    cot: Annotated[str, StringConstraints(max_length=MAX_COT_CHARS)]
    answer: AnswerText | None = None
    baseline: Baseline | None = None
    modification: Modification | None = None
    kb_entry: KBEntry | None = None
    context: dict[Annotated[str, StringConstraints(min_length=1, max_length=64)], ContextValue] = (
        Field(default_factory=dict)
    )
    metrics: Annotated[list[Metric], Field(min_length=1)] = Field(
        default_factory=lambda: list(metric_names())
    )
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metrics")
    @classmethod
    def _unique_metrics(cls, value: list[Metric]) -> list[Metric]:
        if len(set(value)) != len(value):
            raise ValueError("metrics must not repeat a metric")
        return value

    @field_validator("metadata")
    @classmethod
    def _finite_metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        where = non_finite_path(value, "metadata")
        if where is not None:
            raise ValueError(f"{where} is NaN or infinite: not a JSON number")
        return value


def non_finite_path(node: Any, where: str) -> str | None:
    """The path of the first NaN or infinite number in ``node`` (from ``where``), if any."""
    if isinstance(node, float) and not math.isfinite(node):
        return where
    if isinstance(node, dict):
        for key, value in node.items():
            found = non_finite_path(value, f"{where}.{key}")
            if found is not None:
                return found
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            found = non_finite_path(value, f"{where}[{i}]")
            if found is not None:
                return found
    return None


# ---------------------------------------------------------------- result line


class QuoteResult(_Strict):
    """A judge quote as the service located it: the span is in the ORIGINAL CoT."""

    text: str
    span: tuple[int, int]
    edits: int


class Failure(_Strict):
    stage: FailureStage
    detail: str


class MetricResult(_Strict):
    """The verified grade of one metric."""

    status: MetricStatus
    score: int | None = None
    normalized: float | None = None
    quotes: list[QuoteResult] = Field(default_factory=list)
    omissions: list[str] = Field(default_factory=list)
    hallucinations: list[str] = Field(default_factory=list)
    rationale: str | None = None
    signals: dict[str, Any] = Field(default_factory=dict)
    failure: Failure | None = None
    attempts: int = 0
    cache_hit: bool = False


class FlipResult(_Strict):
    value: bool | None
    reason: str


# ``FlipResult.reason`` of a line with no baseline answer: not a pair, so no flip to decide.
NO_BASELINE = "no baseline"


class ModificationResolved(_Strict):
    """The catalogue's view of the request's modification (derived, never trusted)."""

    code: str
    id: str
    kind: ModificationKind
    channel: Literal["none", "text", "image"]
    aligned: bool | None
    target_answer: str | None = None


def _nothing_cached(cached: int) -> bool:
    return cached == 0


def _unknown(value: object) -> bool:
    return value is None


class TokenUsage(_Strict):
    prompt: int = 0
    completion: int = 0
    cached: int = Field(default=0, ge=0, exclude_if=_nothing_cached)
    """The part of ``prompt`` the judge's provider served from its prompt cache (billed at its
    cached-input price). Written only when some were: a line without any reads as it did before
    the field existed, so an SDK that predates it (whose models refuse unknown fields) still
    reads it."""


class CacheStats(_Strict):
    hits: int = 0
    misses: int = 0


OLDER_PROVENANCE_KEYS = {
    "evaluator": "judge",
    "evaluator_model": "judge_model",
    "evaluator_settings_sha256": "judge_settings_sha256",
}
"""Provenance keys of lines written before the judge was called a judge: read, never written."""


class Provenance(_Strict):
    judge: str
    route: Literal["live", "batch"] = "live"
    judge_model: str | None = None
    judge_settings_sha256: str | None = None
    judge_sha256: str | None = None
    """Hash of everything that decides a grade: the judge and its settings, the prompt set,
    the knowledge base and the scoring settings (None in lines written before it was kept).
    Lines of one judge share it; a resumed run refuses an output of another judge by it."""
    fingerprint: str | None = None
    response_format: str | None = None
    """The response format(s) the judge was asked in for this line (``json_schema``,
    ``json_object+schema``, ``json_object``, ``none``; comma-separated when the metrics'
    differ)."""
    prompt_set: str
    prompt_sha256: str
    kb_id: str | None = None
    kb_sha256: str | None = None
    schema_version: str
    service_version: str
    cache: CacheStats = Field(default_factory=CacheStats)
    attempts: int = 0
    judge_s: float | None = Field(default=None, ge=0, exclude_if=_unknown)
    """Seconds the judge took to answer the calls made for this line, added up (each from
    sending the call that was answered to its answer). Absent when no call was made now (the
    answers came from the response cache), for a judge that runs in this process (``lexicon``,
    whose outputs stay byte for byte reproducible) and in lines written before it was kept, so
    an SDK that predates it still reads the line."""
    tokens: TokenUsage = Field(default_factory=TokenUsage)

    @model_validator(mode="before")
    @classmethod
    def _older_names(cls, data: Any) -> Any:
        # an output resumed, retried, reported or validated may predate the rename
        if not isinstance(data, dict) or not any(key in data for key in OLDER_PROVENANCE_KEYS):
            return data
        renamed = dict(data)
        for old, new in OLDER_PROVENANCE_KEYS.items():
            if old in renamed:
                if new in renamed:
                    raise ValueError(f"both {new!r} and its older name {old!r} are given")
                renamed[new] = renamed.pop(old)
        return renamed


class ItemResult(_Strict):
    """The result line of one request line."""

    line: int | None = None
    item_id: str | None = None
    model: str | None = None
    question: str | None = None
    modification: ModificationResolved | None = None
    answer: str | None = None
    answer_raw: str | None = None
    answer_in_options: bool | None = None
    """False when the model gave an answer that maps to no option (CF is still graded, against
    the ground truth's KB entry); None when it gave none or the question lists no options."""
    correct: bool | None = None
    flip: FlipResult | None = None
    metrics: dict[Metric, MetricResult] = Field(default_factory=dict)
    confidence_calibration: float | None = None
    error: Failure | None = None
    provenance: Provenance | None = None
