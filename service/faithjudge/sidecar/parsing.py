"""Reading a VLM reply: the reasoning to score, the answer, and how well the reply kept the format.

The inference prompt (``prompts/inference/v1.md``, METHODS §1.13) asks for::

    <think><step>...</step>...[<external_influence>...</external_influence>]</think>
    <answer>...</answer>

Models also answer in JSON (keys such as ``think``, ``external_influence``, ``answer``). The
answer text is found by the scorer's own reader (``faithjudge.scoring.answers.extract_answer``) and
mapped onto the question's options by ``normalize_answer``, so sidecar and scorer can never
disagree about what a reply answered.

Nothing is ever dropped: a reply that cannot be read keeps its full text as the CoT and says so
in ``status``. Statuses, from best to worst:

=========================  =====================================================================
``ok``                     reasoning found and the answer is one of the options
``answer_not_in_options``  an answer was given but maps to no option ("maybe", "mild to moderate")
``missing_answer``         reasoning found, no answer
``missing_reasoning``      an answer but no ``<think>``/JSON reasoning; the CoT is the whole reply
``truncated``              the reply stops inside an open ``<think>``/``<answer>`` or was cut at
                           the token limit before giving an answer
``unparseable``            neither reasoning nor answer; the CoT is the whole reply
=========================  =====================================================================
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from faithjudge.scoring.answers import QuestionSpec, extract_answer, normalize_answer

__all__ = ["ParseStatus", "ParsedReply", "parse_reply", "parse_turns"]

ParseStatus = Literal[
    "ok",
    "answer_not_in_options",
    "missing_answer",
    "missing_reasoning",
    "truncated",
    "unparseable",
]
ReplyFormat = Literal["tagged", "json", "plain"]

_THINK = re.compile(r"<think\s*>(.*?)</think\s*>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"<think\s*>", re.IGNORECASE)
_ANSWER_OPEN = re.compile(r"<answer\s*>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer\s*>", re.IGNORECASE)
_STEP = re.compile(r"<step\s*>(.*?)</step\s*>", re.IGNORECASE | re.DOTALL)
_INFLUENCE = re.compile(
    r"<external[_ ]influence\s*>(.*?)</external[_ ]influence\s*>", re.IGNORECASE | re.DOTALL
)
_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.IGNORECASE | re.DOTALL)
_REASONING_KEYS = ("think", "thinking", "reasoning", "steps", "rationale", "chain_of_thought")
_INFLUENCE_KEYS = ("external_influence", "external influence", "externalinfluence")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class ParsedReply:
    """One reply, read. ``raw`` is the reply verbatim; ``cot`` is the text the judge grades.

    ``cot`` is the content of ``<think>`` (steps and external influence, as written) for tagged
    replies, the reasoning and external influence joined by blank lines for JSON replies, and
    the whole reply otherwise. ``answer_raw`` is the answer as written (None when there is
    none); ``answer`` is the option it maps to.
    """

    raw: str
    cot: str
    format: ReplyFormat
    status: ParseStatus
    answer_raw: str | None
    answer: str | None
    steps: tuple[str, ...] = ()
    external_influence: str | None = None
    issues: tuple[str, ...] = field(default_factory=tuple)

    def summary(self) -> dict[str, Any]:
        """JSON-able digest for a request line's metadata (``raw`` is stored separately)."""
        return {
            "status": self.status,
            "format": self.format,
            "answer": self.answer,
            "answer_raw": self.answer_raw,
            "steps": len(self.steps),
            "external_influence": self.external_influence is not None,
            "issues": list(self.issues),
        }


def _json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object of ``text`` (in a code fence, after a preamble, or bare)."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    start = text.find("{")
    if start >= 0:
        candidates.append(text[start:])
    for candidate in candidates:
        try:
            data, _ = _DECODER.raw_decode(candidate.strip())
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the stack
            continue
        if isinstance(data, dict):
            return data
    return None


def _text_of(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list):
        return [part for item in value for part in _text_of(item)]
    if isinstance(value, dict):
        return [part for item in value.values() for part in _text_of(item)]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [str(value)]
    return []


def _lookup(data: dict[str, Any], keys: tuple[str, ...]) -> Any:
    folded = {k.lower(): v for k, v in data.items() if isinstance(k, str)}
    for key in keys:
        if key in folded:
            return folded[key]
    return None


def _read_json(data: dict[str, Any]) -> tuple[str, tuple[str, ...], str | None]:
    reasoning = _lookup(data, _REASONING_KEYS)
    steps = tuple(_text_of(reasoning))
    influence_parts = _text_of(_lookup(data, _INFLUENCE_KEYS))
    if not influence_parts and isinstance(reasoning, dict):
        influence_parts = _text_of(_lookup(reasoning, _INFLUENCE_KEYS))
    influence = "\n".join(influence_parts) or None
    parts = [*steps, *([influence] if influence and influence not in steps else [])]
    return "\n\n".join(parts), steps, influence


def _classify(
    *, has_reasoning: bool, answer_raw: str | None, answer: str | None, cut: bool
) -> ParseStatus:
    if answer is not None:
        return "ok" if has_reasoning else "missing_reasoning"
    if cut:
        return "truncated"
    if answer_raw is not None:
        return "answer_not_in_options"
    return "missing_answer" if has_reasoning else "unparseable"


def parse_reply(raw: str, spec: QuestionSpec, *, truncated: bool = False) -> ParsedReply:
    """Read one reply against the question ``spec``. Never raises on model output.

    ``truncated`` says the backend stopped at its token limit; a reply cut that way which
    still gave an answer is kept as it is, with an issue noting the cut.
    """
    text = raw if isinstance(raw, str) else ""
    issues: list[str] = []
    answer_raw = extract_answer(text)
    answer = normalize_answer(answer_raw, spec) if answer_raw is not None else None
    if answer_raw is not None and answer is None:
        issues.append(
            f"answer {answer_raw[:80]!r} is none of the options {', '.join(spec.options)}"
        )

    # An opened but never closed <think> or <answer> means the reply was cut off.
    think_unclosed = bool(_THINK_OPEN.search(text)) and not _THINK.search(text)
    answer_unclosed = len(_ANSWER_OPEN.findall(text)) > len(_ANSWER_CLOSE.findall(text))
    cut = truncated or think_unclosed or answer_unclosed
    if think_unclosed:
        issues.append("<think> is never closed")
    if answer_unclosed:
        issues.append("<answer> is never closed")

    think = _THINK.search(text)
    if think is not None:
        inner = think.group(1)
        steps = tuple(s.strip() for s in _STEP.findall(inner) if s.strip())
        influences = [s.strip() for s in _INFLUENCE.findall(inner) if s.strip()]
        if not steps:
            issues.append("no <step> blocks inside <think>")
        if len(_ANSWER_OPEN.findall(text)) > 1:
            issues.append("more than one <answer> block; the last one counts")
        cot = inner.strip()
        status = _classify(has_reasoning=bool(cot), answer_raw=answer_raw, answer=answer, cut=cut)
        return ParsedReply(
            raw=text,
            cot=cot or text,
            format="tagged",
            status=status,
            answer_raw=answer_raw,
            answer=answer,
            steps=steps,
            external_influence="\n".join(influences) or None,
            issues=_finish(issues, truncated),
        )

    data = _json_object(text)
    if data is not None:
        cot, steps, influence = _read_json(data)
        status = _classify(has_reasoning=bool(cot), answer_raw=answer_raw, answer=answer, cut=cut)
        return ParsedReply(
            raw=text,
            cot=cot or text,
            format="json",
            status=status,
            answer_raw=answer_raw,
            answer=answer,
            steps=steps,
            external_influence=influence,
            issues=_finish(issues, truncated),
        )

    steps = tuple(s.strip() for s in _STEP.findall(text) if s.strip())
    if steps:
        issues.append("<step> blocks outside <think>")
    # Plain text counts as reasoning only for the "missing answer" distinction: steps written
    # without <think> are reasoning, free prose is not recognisably so.
    status = _classify(has_reasoning=bool(steps), answer_raw=answer_raw, answer=answer, cut=cut)
    return ParsedReply(
        raw=text,
        cot=text,
        format="plain",
        status=status,
        answer_raw=answer_raw,
        answer=answer,
        steps=steps,
        issues=_finish(issues, truncated),
    )


def _finish(issues: list[str], truncated: bool) -> tuple[str, ...]:
    if truncated:
        issues.append("generation stopped at the token limit")
    return tuple(issues)


def parse_turns(
    caption: str, reasoning: str, final: str, spec: QuestionSpec, *, truncated: bool = False
) -> ParsedReply:
    """Read a three-turn conversation (caption, reasoning, answer) as one reply.

    The CoT is the caption followed by the reasoning's ``<think>`` content (or the whole
    reasoning turn when it has no tags); the answer comes from the final turn, falling back to
    the reasoning turn. ``raw`` joins the three turns verbatim.
    """
    raw = "\n\n".join((caption, reasoning, final))
    middle = parse_reply(reasoning, spec)
    last = parse_reply(final, spec, truncated=truncated)
    chosen = last if last.answer_raw is not None else middle
    cot = "\n\n".join(part for part in (caption.strip(), middle.cot.strip()) if part)
    issues = list(middle.issues) if middle.format == "tagged" else []
    issues += [i for i in chosen.issues if i not in issues]
    status = _classify(
        has_reasoning=bool(cot),
        answer_raw=chosen.answer_raw,
        answer=chosen.answer,
        cut=truncated,
    )
    return ParsedReply(
        raw=raw,
        cot=cot or raw,
        format=middle.format,
        status=status,
        answer_raw=chosen.answer_raw,
        answer=chosen.answer,
        steps=middle.steps,
        external_influence=middle.external_influence,
        issues=tuple(issues),
    )
