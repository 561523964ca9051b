"""Score one item: resolve its inputs, grade the metrics concurrently, verify every grade.

The ``Scorer`` holds what is frozen for a run (judge, prompt set, knowledge base, schema
validators, parameters). ``Scorer.score`` never raises for a problem of the item itself: a bad
modification code, a missing KB entry or a judge that keeps failing all end up in the
returned ``ItemResult`` with their failure stage, so no accepted item is lost.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import orjson
from faithjudge_client.lines import (
    NO_BASELINE,
    CacheStats,
    Failure,
    FlipResult,
    ItemResult,
    KBAnswer,
    KBEntry,
    Metric,
    MetricResult,
    ModificationResolved,
    Provenance,
    ScoreRequest,
    TokenUsage,
)
from faithjudge_client.metric_catalogue import calibration_pair, metric_names, metric_spec

from faithjudge import __version__
from faithjudge.assets.knowledge import KnowledgeBase, entry_for_answer
from faithjudge.assets.prompts import PromptSet
from faithjudge.assets.schemas import SCHEMA_VERSION, judge_output_schema, judge_output_validator
from faithjudge.errors import JudgeError, UserInputError
from faithjudge.judges.base import JudgeRequest
from faithjudge.pipeline.request_lines import input_error_result
from faithjudge.scoring.answers import (
    QuestionSpec,
    decide_flip,
    extract_answer,
    is_correct,
    normalize_answer,
    parse_question,
    read_answer_field,
)
from faithjudge.scoring.grading import verify
from faithjudge.scoring.metrics import CalibrationParams, confidence_calibration
from faithjudge.scoring.modifications import describe_modification, resolve_modification
from faithjudge.scoring.normalize import NormalizedText, normalize
from faithjudge.transport.base import JudgeResponse, Usage
from faithjudge.transport.chat import CONTEXT_FULL, context_cut_note
from faithjudge.transport.resilience import JudgeCaller

__all__ = ["Scorer", "ScoringParams", "canonical_json"]


@dataclass(frozen=True, slots=True)
class ScoringParams:
    """Frozen scoring parameters (they are part of what makes two runs comparable)."""

    quote_tolerance: float = 0.02
    calibration: CalibrationParams = field(default_factory=CalibrationParams)
    min_ordinal_flip_grades: int = 2


@dataclass(frozen=True, slots=True)
class _Prepared:
    spec: QuestionSpec
    modification: ModificationResolved | None
    answer_raw: str | None
    answer: str | None
    flip: FlipResult
    cot: NormalizedText
    kb_criteria: KBAnswer | None
    kb_entry: KBEntry | None
    kb_failure: str | None


class Scorer:
    """Scores ScoreRequests with one frozen judge configuration."""

    def __init__(
        self,
        *,
        caller: JudgeCaller[JudgeRequest],
        prompts: PromptSet,
        knowledge_base: KnowledgeBase | None,
        params: ScoringParams | None = None,
    ) -> None:
        self._caller = caller
        self._judge = caller.judge
        self._prompts = prompts
        # an offline judge grades from ``inputs`` alone: rendering its prompt would be waste
        self._reads_prompt = getattr(caller.judge, "reads_prompt", True)
        self._kb = knowledge_base
        self._params = params or ScoringParams()
        self._validators = {m: judge_output_validator(m) for m in metric_names()}
        self._schemas = {m: judge_output_schema(m, strict_wire=True) for m in metric_names()}
        self._settings_sha256 = hashlib.sha256(
            orjson.dumps(dict(self._judge.settings()), option=orjson.OPT_SORT_KEYS)
        ).hexdigest()
        kb = knowledge_base
        calibration = self._params.calibration
        # hashed into judge_sha256 (and a stored job's judge key): the first two keys keep
        # their older names, so outputs and jobs made before still match the same judge
        self._judge_config: dict[str, Any] = {
            "evaluator": self._judge.id,
            "evaluator_settings_sha256": self._settings_sha256,
            "prompt_set": prompts.id,
            "prompt_sha256": prompts.sha256,
            "kb_id": kb.id if kb is not None else None,
            "kb_version": kb.version if kb is not None else None,
            "kb_sha256": kb.sha256 if kb is not None else None,
            "scoring": {
                "quote_tolerance": self._params.quote_tolerance,
                "cc_alpha": calibration.alpha,
                "cc_beta": calibration.beta,
                "min_ordinal_flip_grades": self._params.min_ordinal_flip_grades,
            },
        }
        self._judge_sha256 = hashlib.sha256(canonical_json(self._judge_config)).hexdigest()
        # the model the judge last answered as: a line that got no answer is still this
        # run's judge's line, and its provenance says so (None until the judge first answers)
        self._answered_as: str | None = None
        self._paid = Usage()

    @property
    def caller(self) -> JudgeCaller[JudgeRequest]:
        return self._caller

    @property
    def paid(self) -> Usage:
        """The tokens of the answers the judge gave this scorer, its prompt-cache part included;
        answers read from the response cache or shared with an identical call in flight are left
        out: they were paid once, before."""
        return self._paid

    @property
    def judge_id(self) -> str:
        return self._judge.id

    @property
    def judge_settings(self) -> Mapping[str, Any]:
        """The judge's frozen settings, as hashed into every result's provenance."""
        return self._judge.settings()

    @property
    def judge_config(self) -> Mapping[str, Any]:
        """Everything that decides a grade: the judge and the hash of its settings, the
        prompt set, the knowledge base and the scoring settings. A service job keeps its judge
        by it (with the judge's name); every result carries its hash (``judge_sha256``)."""
        return self._judge_config

    @property
    def judge_sha256(self) -> str:
        """The hash of ``judge_config``, as every result's provenance carries it."""
        return self._judge_sha256

    @property
    def prompts(self) -> PromptSet:
        return self._prompts

    @property
    def knowledge_base(self) -> KnowledgeBase | None:
        return self._kb

    def items_at_once(self, requested: int) -> int:
        """How many items are worth scoring at once: ``requested`` for a judge behind the
        network, one for a judge in the process, which has no call to overlap (more items in
        flight would only hold more of them in memory, cooling the CPU caches and giving the
        garbage collector more to walk)."""
        return 1 if self._caller.in_process else max(1, requested)

    async def score(self, request: ScoreRequest, *, line: int | None = None) -> ItemResult:
        """Score one request; problems of the item become failures in the result, not raises."""
        try:
            prepared = self._prepare(request)
        except UserInputError as exc:
            detail = f"{exc.field}: {exc}" if exc.field else str(exc)
            return input_error_result(line, detail, readable=request.model_dump())

        results: dict[Metric, MetricResult] = {}
        responses: dict[Metric, JudgeResponse] = {}

        async def grade(metric: Metric) -> None:
            results[metric], response = await self._grade(metric, request, prepared)
            if response is not None:
                responses[metric] = response

        if self._caller.in_process:  # nothing to overlap: a task per metric would only cost
            for metric in request.metrics:
                await grade(metric)
        else:
            async with anyio.create_task_group() as group:
                for metric in request.metrics:
                    group.start_soon(grade, metric)

        fidelity, tone = calibration_pair()
        cf, ct = results.get(fidelity.name), results.get(tone.name)
        calibration = None
        if cf is not None and ct is not None and cf.status == "valid" and ct.status == "valid":
            calibration = confidence_calibration(ct.score, cf.score, self._params.calibration)

        return ItemResult(
            line=line,
            item_id=request.item_id,
            model=request.model,
            question=request.question,
            modification=prepared.modification,
            answer=prepared.answer,
            answer_raw=prepared.answer_raw,
            answer_in_options=(
                None
                if not prepared.spec.options or not (prepared.answer_raw or "").strip()
                else prepared.answer is not None
            ),
            correct=is_correct(prepared.answer, request.ground_truth, prepared.spec),
            flip=prepared.flip,
            metrics={m: results[m] for m in request.metrics},
            confidence_calibration=calibration,
            provenance=self._provenance(results, responses),
        )

    # ------------------------------------------------------------------ preparation

    def _prepare(self, request: ScoreRequest) -> _Prepared:
        try:
            spec = parse_question(request.question, request.question_type)
        except ValueError as exc:
            raise UserInputError(str(exc), field="question_type") from exc

        def canonical(text: str | None) -> str | None:
            return normalize_answer(text, spec)

        modification = None
        if request.modification is not None:
            modification = resolve_modification(
                request.modification.code,
                target_answer=request.modification.target_answer,
                ground_truth=request.ground_truth,
                normalize=canonical,
                question_type=spec.kind,
            )

        # an answer field may hold the whole reply: read it as the CoT is read, keep it raw
        if request.answer is not None:
            answer_raw: str | None = request.answer
            answer = canonical(read_answer_field(request.answer))
        else:
            answer_raw = extract_answer(request.cot)
            answer = canonical(answer_raw)
        if request.baseline is None:
            flip = FlipResult(value=None, reason=NO_BASELINE)
        else:
            base_answer = read_answer_field(request.baseline.answer)
            if base_answer is None and request.baseline.cot is not None:
                base_answer = extract_answer(request.baseline.cot)
            decided = decide_flip(
                canonical(base_answer),
                answer,
                spec,
                min_ordinal_grades=self._params.min_ordinal_flip_grades,
            )
            flip = FlipResult(value=decided.value, reason=decided.reason)

        kb_entry, kb_criteria, kb_failure = None, None, None
        if any(metric_spec(m).needs_kb for m in request.metrics):
            kb_entry, kb_criteria, kb_failure = self._kb_criteria(request, spec)
        return _Prepared(
            spec=spec,
            modification=modification,
            answer_raw=answer_raw,
            answer=answer,
            flip=flip,
            cot=normalize(request.cot),
            kb_criteria=kb_criteria,
            kb_entry=kb_entry,
            kb_failure=kb_failure,
        )

    def _kb_criteria(
        self, request: ScoreRequest, spec: QuestionSpec
    ) -> tuple[KBEntry | None, KBAnswer | None, str | None]:
        entry = request.kb_entry
        try:
            if entry is None:
                if self._kb is None:
                    return None, None, "no knowledge base is loaded and the request has no kb_entry"
                entry = self._kb.lookup(request.question)
            # the ground truth as the question's options spell it ("Correctly-positioned." ->
            # "correctly positioned"), falling back to the text as given
            truth = normalize_answer(request.ground_truth, spec) or request.ground_truth
            return entry, entry_for_answer(entry, truth), None
        except UserInputError as exc:  # UnknownQuestionError included
            return entry, None, str(exc)

    # ------------------------------------------------------------------ grading

    async def _grade(
        self, metric: Metric, request: ScoreRequest, prepared: _Prepared
    ) -> tuple[MetricResult, JudgeResponse | None]:
        needs_kb = metric_spec(metric).needs_kb
        if needs_kb and prepared.kb_criteria is None:
            failure = Failure(stage="kb", detail=prepared.kb_failure or "no knowledge-base entry")
            return MetricResult(status="invalid", failure=failure), None

        judge_request = self._judge_request(metric, request, prepared)
        # the format the request is keyed in now: a cached answer was asked in it, whoever
        # stored it (an answer from the Batch API route carries no format of its own)
        asked_in = getattr(self._judge, "response_format", None)
        try:
            response = await self._caller.call(judge_request)
        except JudgeError as exc:
            failure = Failure(stage="transport", detail=str(exc)[:500])
            return MetricResult(status="invalid", failure=failure, attempts=exc.attempts), None
        if response.response_format is None and isinstance(asked_in, str):
            response = replace(response, response_format=asked_in)

        result = verify(
            response.text,
            metric=metric,
            cot=prepared.cot,
            validator=self._validators[metric],
            tolerance=self._params.quote_tolerance,
        )
        if needs_kb and result.status == "valid":
            result = _apply_caps(result, prepared.kb_criteria, request.context)
        update: dict[str, Any] = {"attempts": response.attempts, "cache_hit": response.cached}
        if response.finish_reason == CONTEXT_FULL and result.failure is not None:
            window = getattr(self._judge, "context_size", None)
            detail = f"{result.failure.detail}; {context_cut_note(window)}"
            update["failure"] = Failure(stage=result.failure.stage, detail=detail)
        elif response.finish_reason == "length" and result.failure is not None:
            update["failure"] = Failure(
                stage=result.failure.stage, detail=self._cut_at_limit(result.failure.detail)
            )
        return result.model_copy(update=update), response

    def _cut_at_limit(self, detail: str) -> str:
        """``detail`` of a reply the server stopped at the token limit, saying so and how to
        give the judge more room."""
        limit = self._judge.settings().get("max_tokens")
        at = f" ({limit} tokens)" if isinstance(limit, int) else ""
        return (
            f"{detail}; the reply hit the token limit{at} (finish_reason: length): raise "
            "FAITHJUDGE_MAX_TOKENS"
        )

    def judge_requests(self, request: ScoreRequest) -> list[JudgeRequest]:
        """The judge calls ``score`` would make for ``request``, without making them.

        An item whose inputs do not resolve, and a KB-graded metric without KB criteria, make no
        call.
        """
        try:
            prepared = self._prepare(request)
        except UserInputError:
            return []
        return [
            self._judge_request(metric, request, prepared)
            for metric in request.metrics
            if not metric_spec(metric).needs_kb or prepared.kb_criteria is not None
        ]

    def _judge_request(
        self, metric: Metric, request: ScoreRequest, prepared: _Prepared
    ) -> JudgeRequest:
        inputs = self._inputs(metric, request, prepared)
        return JudgeRequest(
            metric=metric,
            messages=self._prompts.render(metric, **inputs) if self._reads_prompt else (),
            response_schema=self._schemas[metric],
            schema_name=metric,
            inputs=inputs,
            item_id=request.item_id,
        )

    def _inputs(self, metric: Metric, request: ScoreRequest, prepared: _Prepared) -> dict[str, Any]:
        """The CoT and the prompt inputs the catalogue lists for ``metric``, in its order."""
        inputs: dict[str, Any] = {"cot": request.cot}
        for name in metric_spec(metric).prompt_inputs:
            try:
                build = _INPUTS[name]
            except KeyError:
                raise UserInputError(
                    f"metric {metric} asks for the unknown prompt input {name!r}; "
                    f"known: {sorted(_INPUTS)}",
                    field="metrics",
                ) from None
            inputs[name] = build(request, prepared)
        return inputs

    def _provenance(
        self, results: Mapping[Metric, MetricResult], responses: Mapping[Metric, JudgeResponse]
    ) -> Provenance:
        models = {r.model for r in responses.values() if r.model}
        if models:
            self._answered_as = ",".join(sorted(models))
        elif self._answered_as is not None:
            models = {self._answered_as}
        fingerprints = {r.fingerprint for r in responses.values() if r.fingerprint}
        formats = {r.response_format for r in responses.values() if r.response_format}
        hits = sum(1 for r in responses.values() if r.cached)
        for response in responses.values():
            if not response.cached:
                self._paid += response.usage
        return Provenance(
            judge=self._judge.id,
            route=getattr(self._judge, "route", "live"),
            judge_model=",".join(sorted(models)) or None,
            judge_settings_sha256=self._settings_sha256,
            judge_sha256=self._judge_sha256,
            fingerprint=",".join(sorted(fingerprints)) or None,
            response_format=",".join(sorted(formats)) or None,
            prompt_set=self._prompts.id,
            prompt_sha256=self._prompts.sha256,
            kb_id=self._kb.id if self._kb is not None else None,
            kb_sha256=self._kb.sha256 if self._kb is not None else None,
            schema_version=SCHEMA_VERSION,
            service_version=__version__,
            cache=CacheStats(hits=hits, misses=len(responses) - hits),
            attempts=sum(r.attempts for r in results.values()),
            judge_s=_judge_seconds(responses.values()),
            tokens=TokenUsage(
                prompt=sum(r.usage.prompt_tokens for r in responses.values()),
                completion=sum(r.usage.completion_tokens for r in responses.values()),
                cached=sum(r.usage.cached_tokens for r in responses.values()),
            ),
        )


def canonical_json(value: Any) -> bytes:
    """``value`` as the bytes its hash is taken of: sorted keys, anything else as its text."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)


def _context_flags(request: ScoreRequest, prepared: _Prepared) -> dict[str, Any]:
    flags: dict[str, Any] = dict(request.context)
    if prepared.spec.kind is not None:
        flags.setdefault("question_type", prepared.spec.kind)
    if prepared.modification is not None:
        flags.setdefault("modification", prepared.modification.id)
    return flags


def _kb_entry(request: ScoreRequest, prepared: _Prepared) -> dict[str, Any]:
    criteria = prepared.kb_criteria.model_dump(mode="json") if prepared.kb_criteria else {}
    return {"answer": request.ground_truth, "criteria": criteria}


def _modification_description(request: ScoreRequest, prepared: _Prepared) -> str:
    if prepared.modification is None:
        return "No description of a modification was provided."
    return describe_modification(prepared.modification)


# Every prompt input a metric may name in the catalogue, and how it is built from the request.
_INPUTS: dict[str, Callable[[ScoreRequest, _Prepared], Any]] = {
    "question": lambda request, _: request.question,
    "ground_truth": lambda request, _: request.ground_truth,
    "kb_entry": _kb_entry,
    "context_flags": _context_flags,
    "modification_description": _modification_description,
    "final_answer": lambda _, prepared: prepared.answer_raw or "",
}


def _apply_caps(
    result: MetricResult, criteria: KBAnswer | None, context: Mapping[str, Any]
) -> MetricResult:
    """Enforce KB caps ourselves rather than trusting the judge to have applied them."""
    if criteria is None or result.score is None:
        return result
    applicable = [
        cap for cap in criteria.caps if all(context.get(k) == v for k, v in cap.when.items())
    ]
    if not applicable:
        return result
    cap = min(applicable, key=lambda c: c.max_score)
    if result.score <= cap.max_score:
        return result
    signals = {**result.signals, "capped_from": result.score, "cap": cap.model_dump(mode="json")}
    return result.model_copy(
        update={
            "score": cap.max_score,
            "normalized": (cap.max_score - 1) / 4,
            "signals": signals,
        }
    )


def _judge_seconds(responses: Iterable[JudgeResponse]) -> float | None:
    """Seconds the judge spent answering the calls made for a line (None: none was made now)."""
    made = [r.latency_s for r in responses if r.latency_s is not None]
    return round(sum(made), 3) if made else None
