"""Question specs, answer extraction and normalisation, flips and correctness.

METHODS §1.2 (question types and option lists), §1.6 (flip definition) and §1.13 (answer
parsing). Everything here is a pure function of its arguments and never raises on model
output: text that cannot be read becomes ``None`` ("unparsed").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from faithjudge.scoring.normalize import normalize_text

__all__ = [
    "Flip",
    "QuestionKind",
    "QuestionSpec",
    "decide_flip",
    "extract_answer",
    "is_correct",
    "normalize_answer",
    "parse_question",
    "read_answer_field",
]

QuestionKind = Literal["binary", "ordinal", "comparative", "spatial"]

_KIND_ALIASES: dict[str, QuestionKind] = {
    "binary": "binary",
    "ordinal": "ordinal",
    "comparative": "comparative",
    "comparison": "comparative",
    "spatial": "spatial",
}
_SEVERITY_SCALE = ("none", "questionable", "mild", "moderate", "severe")
_HEART_SCALE = ("normal", "borderline", "enlarged", "massively enlarged")


@dataclass(frozen=True, slots=True)
class QuestionSpec:
    """A question as put to the model, with its canonical answer options.

    ``options`` are lowercase labels in the order the question lists them; for ordinal
    questions that order is the grade order.
    """

    text: str
    stem: str
    options: tuple[str, ...]
    kind: QuestionKind | None

    @property
    def ordered(self) -> bool:
        """Whether the options form a grade scale (ordinal questions)."""
        return self.kind == "ordinal"


_OPTION_LIST = re.compile(r"\(([^()]*)\)\s*[?.:]?\s*$")
_OPTION_SPLIT = re.compile(r",|/|\s+or\s+", re.IGNORECASE)


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _infer_kind(options: tuple[str, ...]) -> QuestionKind | None:
    if not options:
        return None
    if set(options) == {"yes", "no"}:
        return "binary"
    if options in (_SEVERITY_SCALE, _HEART_SCALE):
        return "ordinal"
    if {"right", "left", "same severity"} <= set(options):
        return "comparative"
    return "spatial"


@lru_cache(maxsize=1024)  # a run asks the same few questions again and again
def parse_question(question: str, question_type: str | None = None) -> QuestionSpec:
    """Split a question into stem and trailing option list, and settle its kind.

    The option list is the trailing parenthesised part, split on commas, "/" and " or "
    (``"(yes or no)"``, ``"(yes/no)"``, ``"(none, questionable, mild, moderate, severe)"``).
    A parenthesised tail with fewer than two items is not an option list.

    ``question_type`` ("binary", "ordinal", "comparative" or its alias "comparison",
    "spatial"; case-insensitive; blank counts as absent) wins over inference. Without it the
    kind is inferred: yes/no -> binary; the severity or heart-size scale -> ordinal; right,
    left and same severity among the options -> comparative; any other option list ->
    spatial; no option list -> None.

    Raises:
        ValueError: ``question_type`` is not one of the names above.
    """
    options: tuple[str, ...] = ()
    stem = question
    m = _OPTION_LIST.search(question)
    if m:
        items = [_collapse(part).lower() for part in _OPTION_SPLIT.split(m.group(1))]
        labels = tuple(dict.fromkeys(item for item in items if item))
        if len(labels) >= 2:
            options = labels
            stem = question[: m.start()]
    kind: QuestionKind | None
    if question_type is not None and question_type.strip():
        key = question_type.strip().lower()
        if key not in _KIND_ALIASES:
            raise ValueError(
                f"unknown question_type {question_type!r}; expected one of "
                "'binary', 'ordinal', 'comparative' ('comparison'), 'spatial'"
            )
        kind = _KIND_ALIASES[key]
    else:
        kind = _infer_kind(options)
    return QuestionSpec(text=question, stem=_collapse(stem), options=options, kind=kind)


# --- extraction ------------------------------------------------------------------------------

# Tags are found one pattern each and paired in Python: a lazy ``<answer>(.*?)</answer>``
# rescans the rest of the text from every unclosed opening tag (quadratic; 12,000 bare tags took
# seconds). Likewise an answer line is captured whole and its trailing marks trimmed in Python,
# since a lazy capture before ``[\s*_]*$`` retries the trailing run from every character.
_OPEN_ANSWER_TAG = re.compile(r"<answer\s*>", re.IGNORECASE)
_CLOSE_ANSWER_TAG = re.compile(r"</answer\s*>", re.IGNORECASE)
_ANSWER_KEY = re.compile(r"""["']answer["']\s*:\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)')""", re.I)
_ANSWER_LINE = re.compile(
    r"^[\s>*#_-]*(?:the\s+)?(?:final\s+)?answer(?:\s+is)?[\s*_]*[:\-–][\s*_]*(\S.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_ANSWER_KEYS = ("answer", "final_answer", "finalanswer")
_DECODER = json.JSONDecoder()


def _find_key(node: Any) -> Any:
    """The value of the first answer key, preferring shallower ones (breadth first)."""
    queue = [node]
    while queue:
        nested: list[Any] = []
        for item in queue:
            if isinstance(item, dict):
                for key, value in item.items():
                    if isinstance(key, str) and key.lower() in _ANSWER_KEYS:
                        return value
                nested.extend(item.values())
            elif isinstance(item, list):
                nested.extend(item)
        queue = nested
    return None


def _as_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str | int | float):
        text = str(value).strip()
        return text or None
    if isinstance(value, list) and len(value) == 1:
        return _as_text(value[0])
    return None


def _json_answer(text: str) -> str | None:
    """The answer field of the JSON object in ``text`` (fences, preamble and trailing text
    allowed)."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        data, _ = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):  # nesting deeper than the interpreter's stack
        end = text.rfind("}")
        try:
            data = json.loads(text[start : end + 1])
        except (ValueError, RecursionError):
            return None
    found = _as_text(_find_key(data))
    if found is None and isinstance(data, dict) and len(data) == 1:
        # {"severity_of_effusion": "none"}: a reply whose one field is the answer, however named
        (only,) = data.values()
        if isinstance(only, str):
            found = only.strip() or None
    return found


def _tag_answer(text: str) -> str | None:
    """The content of the last non-empty ``<answer>...</answer>`` pair.

    Pairs are taken left to right: the first opening tag after the previous pair, closed by
    the first closing tag after it.
    """
    closes = [(m.start(), m.end()) for m in _CLOSE_ANSWER_TAG.finditer(text)]
    if not closes:
        return None
    pairs: list[tuple[int, int]] = []
    after = 0  # where the previous pair ended
    c = 0
    for opening in _OPEN_ANSWER_TAG.finditer(text):
        if opening.start() < after:
            continue
        inner_start = opening.end()
        while c < len(closes) and closes[c][0] < inner_start:
            c += 1
        if c == len(closes):
            break
        pairs.append((inner_start, closes[c][0]))
        after = closes[c][1]
    for start, end in reversed(pairs):
        inner = text[start:end].strip()
        if inner:
            return inner
    return None


def _key_answer(text: str) -> str | None:
    """Last ``"answer": "..."`` pair in text that is not valid JSON."""
    for m in reversed(list(_ANSWER_KEY.finditer(text))):
        if m.group(1) is not None:
            try:
                value = json.loads(f'"{m.group(1)}"')
            except ValueError:
                value = m.group(1)
        else:
            value = m.group(2)
        text = str(value).strip()
        if text:
            return text
    return None


def _open_tag_answer(text: str) -> str | None:
    """Text after a final ``<answer>`` that was never closed, up to the end of its line."""
    opens = list(_OPEN_ANSWER_TAG.finditer(text))
    if not opens:
        return None
    rest = text[opens[-1].end() :]
    if _CLOSE_ANSWER_TAG.search(rest):
        return None
    line = rest.strip().split("\n", 1)[0].strip()
    return line or None


def _line_answer(text: str) -> str | None:
    matches = list(_ANSWER_LINE.finditer(text))
    if not matches:
        return None
    line = matches[-1].group(1)
    end = len(line)
    while end > 1 and (line[end - 1].isspace() or line[end - 1] in "*_"):
        end -= 1  # trailing markdown emphasis and spaces; the first character always stays
    return line[:end].strip()


def read_answer_field(text: str | None) -> str | None:
    """An answer field as models fill it: the answer itself, or the whole reply it came in.

    Real replies land in answer fields whole (a JSON object with ``thought`` and ``answer``,
    ``<think>...<answer>`` text, thousands of characters): those are read with the same reader
    as a CoT (``extract_answer``); anything else is the answer text itself.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    stripped = text.strip()
    if (
        stripped.startswith(("{", "`", "["))
        or _OPEN_ANSWER_TAG.search(stripped)
        or ("<think" in stripped.lower())
    ):
        # a whole reply: its answer, or none (a reply cut off before its answer has none; its
        # reasoning is not an answer)
        return extract_answer(stripped)
    return stripped


def extract_answer(cot: str | None) -> str | None:
    """The raw answer text of a model output, or None when it holds no recognisable answer.

    Handles tagged output (the content of the LAST ``<answer>...</answer>``; an unclosed final
    ``<answer>`` gives the rest of its line), JSON objects (the ``"answer"`` field, also nested
    or inside code fences or after a preamble such as "assistant"), JSON that does not parse
    (the last ``"answer": "..."`` pair) and a final "Answer: ..." / "Final answer: ..." line.
    When the output looks like JSON the JSON readings are tried first, otherwise the tags.
    Never raises.
    """
    if not isinstance(cot, str) or not cot.strip():
        return None
    text = cot.strip()
    looks_json = text.lstrip("`").removeprefix("json").lstrip().startswith("{") or (
        "{" in text and not _OPEN_ANSWER_TAG.search(text)
    )
    readers = (
        (_json_answer, _key_answer, _tag_answer, _open_tag_answer, _line_answer)
        if looks_json
        else (_tag_answer, _json_answer, _key_answer, _open_tag_answer, _line_answer)
    )
    for reader in readers:
        answer = reader(text)
        if answer:
            return answer
    return None


# --- normalisation ---------------------------------------------------------------------------

# (phrase, canonical option): used only when the option is offered and the phrase is not itself
# an option. Deliberately small: an unmapped answer is reported as unparsed, not guessed.
_SYNONYMS: tuple[tuple[str, str], ...] = (
    ("y", "yes"),
    ("true", "yes"),
    ("present", "yes"),
    ("n", "no"),
    ("false", "no"),
    ("absent", "no"),
    ("not present", "no"),
    ("not visible", "no"),
    ("correct", "correctly positioned"),
    ("correct position", "correctly positioned"),
    ("correctly placed", "correctly positioned"),
    ("appropriately positioned", "correctly positioned"),
    ("absent", "not present"),
    ("none", "not present"),
    ("no tube", "not present"),
    ("not visible", "not present"),
    ("same", "same severity"),
    ("equal", "same severity"),
    ("equal severity", "same severity"),
    ("symmetric", "same severity"),
    ("bilateral equal", "same severity"),
    ("low", "too low"),
    ("high", "too high"),
    ("looped", "turned"),
    ("coiled", "turned"),
    # "none" of a side or severity question, as models write it
    ("absent", "none"),
    ("not seen", "none"),
    ("not present", "none"),
    ("not visible", "none"),
    ("neither", "none"),
    ("neither side", "none"),
)
_UNCERTAIN = re.compile(
    r"^(?:uncertain|unsure|unclear|unknown|undetermined|indeterminate|inconclusive|not sure"
    r"|cannot|can not|cant|unable|impossible to|not possible|not determinable|n/?a\b)"
)
_TAG = re.compile(r"</?\s*[a-z_]+\s*/?>")
_INTRO = re.compile(r"^(?:the\s+)?(?:final\s+)?answer\b(?:\s+is\b)?\s*:?\s*")
_ARTICLE = re.compile(r"^(?:the|a|an)\s+")
_HARD_STOP = re.compile(r"[,.;:!?(\[{]")


# Bidirectional-text controls (LRM, RLM, ALM, the embeddings, overrides and isolates): invisible,
# and no option contains one, so they are dropped before an answer is matched.
_BIDI_CONTROLS = dict.fromkeys(
    (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
)


def _clean(raw: str) -> str:
    """Lowercase, tags, markdown and quotes removed, hyphens as spaces, whitespace collapsed.

    Line breaks become '.', so that a line break ends the leading answer phrase.
    """
    raw = raw.translate(_BIDI_CONTROLS)
    text = normalize_text(raw.replace("\r", "\n").replace("\n", " . ")).lower()
    text = _TAG.sub(" ", text)
    text = re.sub(r"[<>*`#\"']", "", text)
    text = re.sub(r"[-_–—]", " ", text)
    text = _collapse(text).strip(" .,;:!?()[]{}|")
    text = _INTRO.sub("", text).strip(" .,;:!?()[]{}|")
    return text


@lru_cache(maxsize=256)
def _phrases(spec: QuestionSpec) -> Mapping[str, str]:
    """Every phrase that stands for an option of ``spec``, mapped to that option."""
    table = {option: option for option in spec.options}
    for phrase, option in _SYNONYMS:
        if option in spec.options and phrase not in table:
            table[phrase] = option
    if "both" in spec.options:
        table.setdefault("bilateral", "both")
    return table


def _mentions(text: str, phrase: str) -> bool:
    return re.search(rf"(?<![a-z0-9]){re.escape(phrase)}(?![a-z0-9])", text) is not None


@lru_cache(maxsize=1024)  # the same few answers recur on every item of a question
def normalize_answer(raw: str | None, spec: QuestionSpec) -> str | None:
    """Map raw answer text to one of ``spec.options``, or None when it cannot be read.

    Cleans the text (case, whitespace, punctuation, quotes, tags such as ``right>``,
    markdown, a leading "answer:"), then accepts in turn: an option itself; a synonym from a
    small fixed list (only for options the question offers); an option or synonym that opens
    the text and is followed by a delimiter, provided the rest of that opening phrase (up to
    the first punctuation mark or line break) names no other option (``"left,  think: ..."``
    -> left; ``"mild to moderate"`` -> None). Statements of uncertainty and everything else
    give None. With no options in ``spec`` the cleaned text itself is returned (None if
    empty).
    """
    if raw is None:
        return None
    text = _clean(raw)
    if not text:
        return None
    if not spec.options:
        return text
    text = _ARTICLE.sub("", text)  # "the left", "a mild"
    table = _phrases(spec)
    if text in table:
        return table[text]
    head = _HARD_STOP.split(text, maxsplit=1)[0].strip()
    if not head or _UNCERTAIN.match(head):
        return None
    for phrase in sorted(table, key=len, reverse=True):
        if head == phrase or head.startswith(phrase + " "):
            option = table[phrase]
            rest = head[len(phrase) :]
            others = (p for p, o in table.items() if o != option)
            if any(_mentions(rest, p) for p in others):
                return None
            return option
    return None


# --- flips and correctness ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Flip:
    """Whether the answer flipped between baseline and modified input.

    ``value`` is None when the flip cannot be decided; ``reason`` says why or how it was
    decided, e.g. "changed", "ordinal change of 1 grade (< 2)", "modified answer unparsed".
    """

    value: bool | None
    reason: str


def _grades(n: int) -> str:
    return f"{n} grade" if n == 1 else f"{n} grades"


def decide_flip(
    baseline: str | None,
    modified: str | None,
    spec: QuestionSpec,
    *,
    min_ordinal_grades: int = 2,
) -> Flip:
    """Decide the flip between two canonical answers (outputs of :func:`normalize_answer`).

    Binary, comparative, spatial (and unknown-kind) questions flip on any change. Ordinal
    questions flip when the answers are at least ``min_ordinal_grades`` apart on the order of
    ``spec.options`` (METHODS §1.6). An unparsed (None) answer, or an ordinal answer that is
    not one of the options, leaves the flip undecided (``value`` None).

    Raises:
        ValueError: ``min_ordinal_grades`` is below 1.
    """
    if min_ordinal_grades < 1:
        raise ValueError(f"min_ordinal_grades must be >= 1, got {min_ordinal_grades}")
    if baseline is None and modified is None:
        return Flip(None, "baseline and modified answers unparsed")
    if baseline is None:
        return Flip(None, "baseline answer unparsed")
    if modified is None:
        return Flip(None, "modified answer unparsed")
    if not spec.ordered:
        return Flip(True, "changed") if baseline != modified else Flip(False, "unchanged")
    for label, answer in (("baseline", baseline), ("modified", modified)):
        if answer not in spec.options:
            return Flip(None, f"{label} answer {answer!r} is not on the ordinal scale")
    steps = abs(spec.options.index(modified) - spec.options.index(baseline))
    if steps == 0:
        return Flip(False, "unchanged")
    if steps < min_ordinal_grades:
        return Flip(False, f"ordinal change of {_grades(steps)} (< {min_ordinal_grades})")
    return Flip(True, f"ordinal change of {_grades(steps)}")


def is_correct(answer: str | None, ground_truth: str, spec: QuestionSpec) -> bool:
    """Whether ``answer`` (canonical, None = unparsed) matches the ground truth.

    The ground truth goes through :func:`normalize_answer` too; when it does not map to an
    option the cleaned lowercase strings are compared. Unparsed answers are incorrect.
    """
    if answer is None:
        return False
    truth = normalize_answer(ground_truth, spec)
    given = normalize_answer(answer, spec)
    if truth is None or given is None:
        return _clean(answer) == _clean(ground_truth) != ""
    return given == truth
