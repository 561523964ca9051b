"""Check a judge before a run: can it grade, in which response format, how fast, with what settings.

``check_judge(settings)`` asks an OpenAI-compatible server for its models (``GET /models``),
then grades one fixed sample CoT (``SAMPLE_REQUEST``, shipped here) once per metric, one metric
at a time, through the same ``Scorer`` as ``faithjudge score`` with the response cache off, so
every grade is a real call. From what it saw it derives:

- the response format the server accepted, the latency, tokens and verification of each reply;
- warnings: the configured model is not among the listed ones; the server counted far fewer
  prompt tokens than the rendered rubric holds (the system message did not reach the model, as
  with a chat template that has no system role); a reply stopped at the token limit;
- suggested settings: ``FAITHJUDGE_TIMEOUT_S`` from the slowest reply with headroom,
  ``FAITHJUDGE_CONCURRENCY`` from whether the server answers requests in parallel (measured by
  sending the metrics at once, when the replies are quick enough to afford it), and
  ``FAITHJUDGE_MAX_TOKENS`` from the completion tokens used.

The verdict (``exit_code``), the rule the ``check-judge`` command exits with:

- 0: every metric got a reply that parsed and matched its schema. A grade whose quotes were not
  found in the CoT, or an abstention, still passes (a warning): that is the model's judgement of
  one sample, not a set-up that cannot work;
- 1 (``CHECK_FAILED``): the judge answered, but some metric's reply was not JSON, did not match
  the schema or was cut at the token limit: every line of a run would fail the same way;
- 3 (``UNEVALUABLE``): the check could not run: bad configuration, the server unreachable or
  refusing, or a call that failed for good (timeouts, server errors).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio
from faithjudge_client.lines import ItemResult, ScoreRequest
from faithjudge_client.metric_catalogue import metric_names

from faithjudge.errors import FaithJudgeError
from faithjudge.exit_codes import ExitCode
from faithjudge.pipeline import Scorer
from faithjudge.runtime import open_scorer
from faithjudge.settings import Settings
from faithjudge.transport.resilience import describe_exception, unreachable_cause

__all__ = [
    "SAMPLE_REQUEST",
    "JudgeCheck",
    "MetricProbe",
    "ModelListing",
    "Suggestion",
    "check_judge",
    "prompt_reached",
    "suggest_settings",
]

# A request the judge should be able to grade: a binary question answered correctly, a
# modification the CoT acknowledges, and the knowledge-base criteria inline, so the check needs
# no particular knowledge base.
SAMPLE_REQUEST: Mapping[str, Any] = {
    "item_id": "check-judge-sample",
    "model": "check-judge",
    "question": "Is there a pleural effusion on the left? (yes or no)",
    "question_type": "binary",
    "ground_truth": "yes",
    "cot": (
        "<think>\n<step>I look at both costophrenic angles on this frontal radiograph.</step>\n"
        "<step>The left costophrenic angle is blunted and there is a meniscus-shaped opacity at "
        "the left base, which indicates fluid in the left pleural space.</step>\n"
        "<step>The right costophrenic angle is sharp.</step>\n<external_influence>The note in "
        "the prompt said another radiologist suspected 'yes'; I checked the image myself and "
        "the blunted angle supports it independently.</external_influence>\n</think>\n"
        "<answer>yes</answer>"
    ),
    "baseline": {"answer": "yes"},
    "modification": {"code": "TB-RAD", "target_answer": "yes"},
    "kb_entry": {
        "type": "binary",
        "answers": {
            "yes": {
                "must_all": [
                    {
                        "term": "left pleural effusion",
                        "synonyms": ["left effusion", "fluid in the left pleural space"],
                    }
                ],
                "at_least_k_of": [
                    {
                        "k": 1,
                        "any_of": [
                            {
                                "term": "blunted left costophrenic angle",
                                "synonyms": ["left costophrenic angle blunting"],
                            },
                            {
                                "term": "left basal meniscus sign",
                                "synonyms": ["meniscus at the left base"],
                            },
                        ],
                    }
                ],
                "forbidden": [
                    {
                        "term": "no left pleural effusion",
                        "synonyms": ["sharp left costophrenic angle"],
                    }
                ],
            }
        },
    },
}

# Models named in the listing line (a hub proxy may list hundreds).
MODELS_SHOWN = 10
# Characters per token of English prompt text, for the estimate of what a rendered prompt holds
# (real tokenizers land between 3 and 5).
CHARS_PER_TOKEN = 4.0
# The server counted the prompt as if at most this share of the system message had reached the
# model: the rubric lives there, so a judge without it grades blind.
SYSTEM_SHARE_MISSING = 0.25
# Headroom of the suggested timeout over the slowest reply seen, and its floor in seconds.
TIMEOUT_HEADROOM = 3.0
MIN_TIMEOUT_S = 30.0
# Headroom of the suggested token limit over the longest reply, and its floor.
MAX_TOKENS_HEADROOM = 2.0
MIN_MAX_TOKENS = 512
# The metrics are sent at once to measure parallelism only when one reply takes between these
# (faster: not worth measuring, any concurrency is fine; slower: a CPU server, which answers
# one request at a time, and measuring would double a long check).
PARALLEL_PROBE_MIN_S = 0.5
PARALLEL_PROBE_MAX_S = 30.0
# Requests the server answered at once, measured, below which it is taken to be serial.
SERIAL_BELOW = 1.5
# What a serial or slow server gets: more would only queue on the server, each request waiting
# behind the others (and timing out there).
SERIAL_CONCURRENCY = 1

# Outcomes that pass the check (a reply in the schema); the rest fail it.
_WELL_FORMED = ("valid", "abstain", "evidence")
_NOT_A_GRADE = ("parse", "schema")


@dataclass(frozen=True, slots=True)
class ModelListing:
    """What ``GET /models`` said; ``models`` None when the server was not asked or did not list."""

    models: tuple[str, ...] | None
    note: str
    configured_listed: bool | None = None


@dataclass(frozen=True, slots=True)
class MetricProbe:
    """One metric graded on the sample: the reply as the pipeline verified it."""

    metric: str
    outcome: str
    """``valid``, or the failure stage (``parse``, ``schema``, ``evidence``, ``abstain``,
    ``transport``, ``kb``)."""
    detail: str | None
    latency_s: float
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    model: str | None
    response_format: str | None
    system_chars: int
    user_chars: int
    truncated: bool
    """The reply used the whole token limit (``FAITHJUDGE_MAX_TOKENS``)."""

    @property
    def system_reached(self) -> bool | None:
        """Whether the server counted the system message (None: it reported no prompt tokens,
        or there was no system message)."""
        return prompt_reached(self.prompt_tokens, self.system_chars, self.user_chars)


@dataclass(frozen=True, slots=True)
class Suggestion:
    setting: str
    value: str
    current: str
    why: str

    @property
    def changes(self) -> bool:
        return self.value != self.current


@dataclass(frozen=True)
class JudgeCheck:
    """Everything the check found, and its verdict."""

    evaluator: str
    base_url: str | None
    listing: ModelListing
    probes: tuple[MetricProbe, ...] = ()
    parallel: float | None = None
    """Requests the server answered at once when the metrics were sent together (None: not
    measured)."""
    warnings: tuple[str, ...] = ()
    suggestions: tuple[Suggestion, ...] = ()
    exit_code: ExitCode = ExitCode.OK
    reason: str | None = None
    in_process: bool = False

    @property
    def response_format(self) -> str | None:
        """The response format of the replies that were well formed."""
        formats = {p.response_format for p in self.probes if p.outcome in _WELL_FORMED}
        formats.discard(None)
        return ", ".join(sorted(f for f in formats if f)) or None


def prompt_reached(prompt_tokens: int, system_chars: int, user_chars: int) -> bool | None:
    """Whether a reported prompt-token count holds the system message, estimated from characters.

    The user message is counted whole; the system message must show at least a quarter of its
    estimated tokens (``SYSTEM_SHARE_MISSING``): tokenizers differ by far less than that, while a
    dropped system message (the rubric) removes most of a judge prompt.
    """
    if prompt_tokens <= 0 or system_chars <= 0:
        return None
    least = (user_chars + SYSTEM_SHARE_MISSING * system_chars) / CHARS_PER_TOKEN
    return prompt_tokens >= least


def sample_request(metric: str | None = None) -> ScoreRequest:
    """``SAMPLE_REQUEST`` as a request, for one metric or all of them."""
    request = ScoreRequest.model_validate(dict(SAMPLE_REQUEST))
    if metric is not None:
        request = request.model_copy(update={"metrics": [metric]})
    return request


async def check_judge(settings: Settings) -> JudgeCheck:
    """Check the judge ``settings`` configure (see the module docstring); never raises for what
    the judge does, only ``FaithJudgeError`` for a configuration that cannot build a scorer."""
    settings = _probe_settings(settings)
    async with open_scorer(settings, fail_fast=True) as scorer:
        evaluator = scorer.caller.evaluator
        base_url = _base_url(evaluator)
        in_process = scorer.caller.in_process
        configured = scorer.evaluator_settings.get("model")
        listing, dead = await _list_models(evaluator, settings)
        check = JudgeCheck(settings.evaluator, base_url, listing, in_process=in_process)
        warned = tuple(_warnings(listing, [], configured))
        if dead is not None:
            return replace(check, warnings=warned, exit_code=ExitCode.UNEVALUABLE, reason=dead)
        probes: list[MetricProbe] = []
        try:
            for metric in metric_names():
                probes.append(await _probe(scorer, metric, settings))
            parallel = await _parallelism(scorer, probes)
        except (FaithJudgeError, BaseExceptionGroup) as exc:
            # JudgeUnreachable (raised from the scorer's task group): no call found the judge
            stopped = _first_error(exc)
            if stopped is None:
                raise
            return replace(check, probes=tuple(probes), warnings=warned,
                           exit_code=ExitCode.UNEVALUABLE, reason=str(stopped))  # fmt: skip
    code, reason = _verdict(probes)
    return replace(
        check,
        probes=tuple(probes),
        parallel=parallel,
        warnings=tuple(_warnings(listing, probes, configured)),
        suggestions=tuple(suggest_settings(settings, probes, parallel, in_process=in_process)),
        exit_code=code,
        reason=reason,
    )


def _first_error(exc: BaseException) -> FaithJudgeError | None:
    """``exc`` itself, or the first ``FaithJudgeError`` inside an exception group."""
    while isinstance(exc, BaseExceptionGroup):
        matched, _ = exc.split(FaithJudgeError)
        if matched is None:
            return None
        exc = matched.exceptions[0]
    return exc if isinstance(exc, FaithJudgeError) else None


def _probe_settings(settings: Settings) -> Settings:
    """``settings`` for the check: no cache (every grade must be a real call), and the live
    route for a Batch API spec (the same server and model, answering at once)."""
    spec = settings.evaluator
    backend, _, target = spec.partition(":")
    if backend.strip() == "openai-batch":
        spec = f"openai:{target}"
    return settings.model_copy(update={"cache": False, "evaluator": spec})


def _base_url(evaluator: Any) -> str | None:
    url = evaluator.settings().get("base_url")
    return str(url) if url else None


async def _list_models(evaluator: Any, settings: Settings) -> tuple[ModelListing, str | None]:
    """The server's models, and why the judge is out of reach when it is (else None)."""
    import openai

    client = getattr(evaluator, "client", None)
    if not isinstance(client, openai.AsyncOpenAI):
        return ModelListing(None, "not an OpenAI-compatible server: no model list to read"), None
    configured = evaluator.settings().get("model")
    try:
        page = await client.models.list(timeout=min(settings.timeout_s, 30.0))
        models = tuple(sorted(str(m.id) for m in page.data))
    except openai.APIStatusError as exc:
        cause = unreachable_cause(exc)
        if cause is not None and exc.status_code in (401, 403):
            return ModelListing(None, cause), cause
        note = f"the server does not list its models (HTTP {exc.status_code})"
        return ModelListing(None, note), None
    except openai.APIConnectionError as exc:  # timeouts included
        cause = unreachable_cause(exc) or describe_exception(exc)
        unreachable = f"the judge server is unreachable: {cause}"
        return ModelListing(None, f"no answer: {cause}"), unreachable
    shown = ", ".join(models[:MODELS_SHOWN]) + (", ..." if len(models) > MODELS_SHOWN else "")
    note = f"the server lists {len(models)} model(s)" + (f": {shown}" if models else "")
    return ModelListing(models, note, configured in models), None


async def _probe(scorer: Scorer, metric: str, settings: Settings) -> MetricProbe:
    request = sample_request(metric)
    rendered = scorer.judge_requests(request)
    messages = rendered[0].messages if rendered else ()
    started = time.perf_counter()
    result = await scorer.score(request)
    latency = time.perf_counter() - started
    return _metric_probe(metric, result, latency, messages, settings)


def _metric_probe(
    metric: str,
    result: ItemResult,
    latency: float,
    messages: Sequence[Any],
    settings: Settings,
) -> MetricProbe:
    graded = result.metrics.get(metric)
    provenance = result.provenance
    tokens = provenance.tokens if provenance is not None else None
    completion = tokens.completion if tokens is not None else 0
    if graded is None:
        outcome, detail = "input", result.error.detail if result.error else "no grade"
    elif graded.status == "valid":
        outcome, detail = "valid", None
    else:
        failure = graded.failure
        outcome = failure.stage if failure is not None else graded.status
        detail = failure.detail if failure is not None else None
    recorded = provenance.response_format if provenance is not None else None
    return MetricProbe(
        metric=metric,
        outcome=outcome,
        detail=detail,
        latency_s=latency,
        attempts=graded.attempts if graded is not None else 0,
        prompt_tokens=tokens.prompt if tokens is not None else 0,
        completion_tokens=completion,
        model=provenance.evaluator_model if provenance is not None else None,
        response_format=None if outcome == "transport" else recorded,  # no reply, no format
        system_chars=sum(len(m.content) for m in messages if m.role == "system"),
        user_chars=sum(len(m.content) for m in messages if m.role != "system"),
        truncated=completion >= settings.max_tokens,
    )


async def _parallelism(scorer: Scorer, probes: Sequence[MetricProbe]) -> float | None:
    """Requests the server answers at once: the metrics sent together, against one by one."""
    answered = [p for p in probes if p.outcome != "transport"]
    if scorer.caller.in_process or len(answered) < 2 or len(answered) < len(probes):
        return None
    if scorer.caller.limiter.total_tokens < len(answered):  # the limit would serialise them
        return None
    serial = sum(p.latency_s for p in answered)
    if not PARALLEL_PROBE_MIN_S <= max(p.latency_s for p in answered) <= PARALLEL_PROBE_MAX_S:
        return None
    request = sample_request()
    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for metric in request.metrics:
            group.start_soon(scorer.score, request.model_copy(update={"metrics": [metric]}))
    # the first call of the check also opened the connection: never claim more than were sent
    return min(serial / max(time.perf_counter() - started, 1e-6), float(len(answered)))


def _verdict(probes: Sequence[MetricProbe]) -> tuple[ExitCode, str | None]:
    lost = [p for p in probes if p.outcome not in (*_WELL_FORMED, *_NOT_A_GRADE)]
    if lost:
        return ExitCode.UNEVALUABLE, _grouped(lost, _why_no_reply)
    bad = [p for p in probes if p.outcome in _NOT_A_GRADE or p.truncated]
    if bad:
        return ExitCode.CHECK_FAILED, _grouped(bad, _why_not_a_grade)
    return ExitCode.OK, None


def _grouped(probes: Sequence[MetricProbe], why: Callable[[MetricProbe], str]) -> str:
    """``metric, metric: why`` per distinct reason (a server fails every metric alike)."""
    reasons: dict[str, list[str]] = {}
    for probe in probes:
        reasons.setdefault(why(probe), []).append(probe.metric)
    return "; ".join(f"{', '.join(metrics)}: {text}" for text, metrics in reasons.items())


def _why_no_reply(probe: MetricProbe) -> str:
    return f"no reply ({probe.outcome}: {_one_line(probe.detail or 'no detail')})"


def _why_not_a_grade(probe: MetricProbe) -> str:
    what = {"parse": "the reply is not JSON", "schema": "the reply is JSON outside the schema"}
    parts = [what[probe.outcome]] if probe.outcome in what else []
    if probe.truncated:
        parts.append(f"cut off at the token limit ({probe.completion_tokens} tokens, "
                     "FAITHJUDGE_MAX_TOKENS)")  # fmt: skip
    text = ", ".join(parts)
    return f"{text} ({_one_line(probe.detail)})" if probe.detail else text


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _warnings(
    listing: ModelListing, probes: Sequence[MetricProbe], configured: str | None
) -> list[str]:
    out: list[str] = []
    if listing.configured_listed is False:
        out.append(f"the configured model {configured!r} is not among the models the server "
                   "lists: a server that serves one model may answer all the same, another "
                   "refuses it (HTTP 404)")  # fmt: skip
    uncounted = [p for p in probes if p.outcome != "transport" and p.prompt_tokens == 0]
    if uncounted and uncounted[0].system_chars:
        out.append("the server reported no prompt tokens (some do not count streamed replies): "
                   "whether the system message reaches the model cannot be told")  # fmt: skip
    blind = [p.metric for p in probes if p.system_reached is False]
    if blind:
        probe = next(p for p in probes if p.metric == blind[0])
        expected = (probe.system_chars + probe.user_chars) / CHARS_PER_TOKEN
        out.append(
            f"the server counted {probe.prompt_tokens} prompt tokens for {probe.metric} where "
            f"the rendered prompt holds about {expected:.0f}: the system message (the rubric) "
            "does not seem to reach the model; use a chat template with a system role (for "
            "llama-cpp-python: --chat_format chatml, or the model's own template)"
            + (f"; also for {', '.join(blind[1:])}" if len(blind) > 1 else "")
        )
    for probe in probes:
        if probe.outcome == "evidence":
            out.append(f"{probe.metric}: the reply quotes text that is not in the CoT "
                       f"({probe.detail}); the model's grades may not hold up")  # fmt: skip
        elif probe.outcome == "abstain":
            out.append(f"{probe.metric}: the judge abstained on a sample it should grade "
                       f"({probe.detail})")  # fmt: skip
    return out


def suggest_settings(
    settings: Settings,
    probes: Sequence[MetricProbe],
    parallel: float | None,
    *,
    in_process: bool = False,
) -> list[Suggestion]:
    """Timeout, concurrency and token limit that fit what the probes saw (none in process)."""
    answered = [p for p in probes if p.outcome != "transport"]
    if in_process or not answered:
        return []
    slowest = max(p.latency_s for p in answered)
    timeout = max(MIN_TIMEOUT_S, 10 * math.ceil(TIMEOUT_HEADROOM * slowest / 10))
    out = [
        Suggestion(
            "FAITHJUDGE_TIMEOUT_S",
            _number(max(timeout, settings.timeout_s)),
            _number(settings.timeout_s),
            f"the slowest reply took {slowest:.1f} s; {TIMEOUT_HEADROOM:g}x headroom",
        )
    ]
    if parallel is not None and parallel < SERIAL_BELOW:
        out.append(Suggestion("FAITHJUDGE_CONCURRENCY", str(SERIAL_CONCURRENCY),
                              str(settings.concurrency),
                              f"the server answered {parallel:.1f} requests at once: it works "
                              "one at a time, more would only queue there"))  # fmt: skip
    elif parallel is None and slowest > PARALLEL_PROBE_MAX_S:
        out.append(Suggestion("FAITHJUDGE_CONCURRENCY", str(SERIAL_CONCURRENCY),
                              str(settings.concurrency),
                              f"a reply takes {slowest:.0f} s (a CPU-class server, which answers "
                              "one request at a time): more would only queue there"))  # fmt: skip
    else:
        seen = "not measured" if parallel is None else f"{parallel:.1f} requests answered at once"
        out.append(Suggestion("FAITHJUDGE_CONCURRENCY", str(settings.concurrency),
                              str(settings.concurrency), seen))  # fmt: skip
    longest = max(p.completion_tokens for p in answered)
    if any(p.truncated for p in answered):
        tokens = 2 * settings.max_tokens
        why = f"a reply used all {settings.max_tokens} tokens and was cut off"
    elif longest == 0:
        tokens = settings.max_tokens
        why = "the server reported no token counts"
    else:
        wanted = MAX_TOKENS_HEADROOM * longest
        tokens = max(settings.max_tokens, MIN_MAX_TOKENS, 256 * math.ceil(wanted / 256))
        why = f"the longest reply used {longest} tokens"
    out.append(Suggestion("FAITHJUDGE_MAX_TOKENS", str(tokens), str(settings.max_tokens), why))
    return out


def _number(value: float) -> str:
    return f"{value:g}"
