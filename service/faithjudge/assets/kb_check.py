"""Checking a user's knowledge base, and writing an entry to fill in.

``check_knowledge_base`` reads a KB the way the loader does but does not stop at the first
fault: it names every problem, by entry and field, under the rules of knowledge_base/README.md.
The rules that read wording (labels, synonyms, sides) use plain word matching, without the
offline judge's lexicon, so they hold for questions the lexicon was never written for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from faithjudge_client.lines import Concept, KBAnswer, KBCap, KBEntry
from pydantic import ValidationError

from faithjudge.assets.knowledge import (
    OPTIONS_SUFFIX,
    fold,
    no_duplicate_keys,
    question_key,
    question_options,
    resolve_kb,
)
from faithjudge.assets.schemas import kb_validator
from faithjudge.errors import ConfigError

__all__ = ["KB_RULES", "PLACEHOLDER", "KBProblem", "check_knowledge_base", "entry_template"]

PLACEHOLDER = "TODO"
"""How ``entry_template`` marks a field left to fill (its text starts with this)."""

KB_RULES: Mapping[str, str] = MappingProxyType(
    {
        "json": "the file is UTF-8 JSON without duplicate keys",
        "top-level": "kb_id and version are non-empty strings, description a string, entries a "
        "non-empty object, and nothing else at the top",
        "format": "every entry has the format of knowledge_base/README.md (type, answers, "
        "concepts, groups, caps) and the JSON Schema",
        "k": "every k satisfies 1 <= k <= len(any_of)",
        "duplicate-question": "no two questions are the same once case, whitespace and the "
        "option list are ignored",
        "options": "the answer keys are exactly the options in the question's parentheses",
        "type": "the type fits the options: a question answered yes or no is binary, and a "
        "binary question has two options",
        "fill": "no field of a template is left to fill",
        "must-all": "every answer states itself in must_all (a positive answer the finding, an "
        "absence answer the absence)",
        "evidence": "every answer that asserts a finding has at least one at_least_k_of group",
        "forbids": "every answer forbids at least one concept that contradicts it",
        "contradictions": "a binary option forbids what the other states in must_all, in the "
        "same wording; an ordinal grade never forbids what an adjacent grade states there",
        "label-in-evidence": "no evidence concept is made only of the question's words and the "
        "option's label",
        "synonym-drift": "a synonym shares a word with its term (or is its abbreviation)",
        "synonym-hygiene": "no blank or duplicate synonym, and the term is not among its synonyms",
        "required-and-forbidden": "no required term or synonym is also forbidden in the same "
        "answer",
        "laterality": "for a question about one side, every required concept names that side "
        "and no concept names only the other side",
        "caps": "caps are objects {when: {flag: value}, max_score, note} that use the "
        "documented context flags (projection AP, position supine), cap below 5 and say why in "
        "a note",
    }
)

ABSENCE_OPTIONS = frozenset({"no", "none", "normal", "not present"})
# The context flags a cap may read (the table in knowledge_base/README.md).
CAP_FLAGS: Mapping[str, frozenset[str]] = MappingProxyType(
    {"projection": frozenset({"AP"}), "position": frozenset({"supine"})}
)
_GRADES = ("none", "questionable", "mild", "moderate", "severe")
_WORD = re.compile(r"[a-z0-9]+")
_SIDES = {"right": re.compile(r"\bright\b"), "left": re.compile(r"\bleft\b")}


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STOP = _wordset(
    "a an the of in on at to and or with is are be there this that its it as by for from any "
    "what which where how does do"
)
# Words any statement of a finding may carry besides the question's own: they add nothing.
_FILLER = _wordset(
    "both side sided seen visible present evidence finding findings sign signs image x ray "
    "chest radiograph film lung lungs pulmonary show shows"
)
_NEGATION = _wordset("no not without absent absence negative free none neither clear")
_UNCERTAIN = _wordset(
    "possible possibly questionable equivocal suspected suspicious probable likely cannot "
    "exclude excluded rule ruled out uncertain subtle faint"
)
_SMALL = _wordset("mild mildly small minimal minor trace slight slightly tiny")
_LARGE = _wordset(
    "severe severely large massive massively extensive marked markedly significant "
    "pronounced substantial big huge greatly"
)
# Words that only name an option (its grade, side or position) besides the option's own words.
_LABEL_WORDS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "yes": _UNCERTAIN,
        "no": _NEGATION,
        "none": _NEGATION | {"either", "bilateral"},
        "not present": _NEGATION,
        "questionable": _UNCERTAIN | {"borderline"},
        "mild": _SMALL,
        "moderate": frozenset({"moderate", "moderately", "medium", "intermediate", "sized"}),
        "severe": _LARGE,
        "normal": _NEGATION | {"within", "limits"},
        "massively enlarged": _LARGE | {"enlarged", "enlargement"},
        "right": frozenset({"more", "worse", "larger", "greater", "only", "predominant"}),
        "left": frozenset({"more", "worse", "larger", "greater", "only", "predominant"}),
        "same severity": frozenset({"same", "similar", "symmetric", "equal", "bilateral"}),
        "correctly positioned": frozenset({"correct", "correctly", "appropriate", "good"}),
        "too low": frozenset({"deep", "far", "distal"}),
        "too high": frozenset({"shallow", "proximal", "far"}),
    }
)
# Words a synonym may use for its term's (an abbreviation or plain-language form).
_EQUIVALENT: tuple[frozenset[str], ...] = tuple(
    frozenset(group.split())
    for group in (
        "cardiomegaly heart cardiac enlarged enlargement",
        "cardiothoracic ctr",
        "effusion fluid",
        "opacity infiltrate consolidation haziness hazy density opaque",
        "atelectasis collapse dystelectasis atelectatic",
        "endotracheal ett et tracheal intubated intubation breathing",
        "gastric nasogastric ng orogastric og feeding enteric",
        "central cvc picc venous line catheter",
        "pacemaker icd cardioverter defibrillator device generator",
        "chest thoracostomy intercostal pleural drain tube",
        "pneumothorax air pleural",
        "nodule mass lesion nodular coin round rounded",
        "congestion congested vascular vasculature vessels venous",
        "rotation rotated malrotation malrotated oblique centered",
        "costophrenic costodiaphragmatic",
        "apex apices apical",
        "visualized included coverage seen visible inclusion cut excluded",
        "collimation field view",
        "clavicle clavicular sternoclavicular equidistant symmetric asymmetric",
        "redistribution cephalization",
        "kerley septal septa interlobular",
        "perihilar hilar haziness haze indistinct blurred bat wing butterfly",
        "margin margins contour",
        "jugular neck cephalad upward cranially",
        "fracture fractured broken break",
        "lung pulmonary",
        "opacity opacities opacified clear",
        "similar similarly equal symmetric comparable",
        "atelectasis expanded",
        "cut clipped outside",
        "hemithorax hemithoraces",
    )
)


@dataclass(frozen=True, slots=True)
class KBProblem:
    """One problem of a KB file: the rule it breaks, where, and why."""

    rule: str
    entry: str
    field: str
    why: str

    def render(self, path: str | Path) -> str:
        """``file:entry:field: why`` (``-`` for a problem of the whole file or entry)."""
        return f"{path}:{self.entry}:{self.field}: {self.why} [{self.rule}]"


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _words(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text.casefold())}


def _content(text: str, *, filler: bool = False) -> set[str]:
    """The words of ``text`` that carry meaning (without the filler words too if asked)."""
    dropped = _STOP | _FILLER if filler else _STOP
    return _words(text) - {_stem(w) for w in dropped}


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, str) and value.lstrip().startswith(PLACEHOLDER)


def _dotted(parts: Sequence[int | str]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "-"


def _placeholders(
    node: Any, at: tuple[int | str, ...] = ()
) -> Iterator[tuple[tuple[int | str, ...], str]]:
    """The path and text of each placeholder string under ``node``."""
    if _is_placeholder(node):
        yield at, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _placeholders(value, (*at, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _placeholders(value, (*at, i))


def _neutral_type(node: Any) -> Any:
    # a type left to fill is read as the type with no rule of its own; "fill" names it
    if isinstance(node, dict) and _is_placeholder(node.get("type")):
        return {**node, "type": "spatial"}
    return node


# The rules that read wording skip what is left to fill: "fill" names it once.
def _texts(concept: Concept) -> list[str]:
    return [t for t in (concept.term, *concept.synonyms) if not _is_placeholder(t)]


def _required(answer: KBAnswer) -> Iterator[tuple[str, Concept]]:
    for i, concept in enumerate(answer.must_all):
        if not _is_placeholder(concept.term):
            yield f"must_all[{i}]", concept
    for g, group in enumerate(answer.at_least_k_of):
        for i, concept in enumerate(group.any_of):
            if not _is_placeholder(concept.term):
                yield f"at_least_k_of[{g}].any_of[{i}]", concept


def _stated(answer: KBAnswer) -> Iterator[tuple[str, Concept]]:
    """The concepts that name the answer itself (a grade's signs may be shared)."""
    return ((w, c) for w, c in _required(answer) if w.startswith("must_all"))


def _forbidden(answer: KBAnswer) -> Iterator[tuple[str, Concept]]:
    for i, concept in enumerate(answer.forbidden):
        if not _is_placeholder(concept.term):
            yield f"forbidden[{i}]", concept


class _Checker:
    def __init__(self) -> None:
        self.problems: list[KBProblem] = []

    def add(self, rule: str, entry: str, field: str, why: str) -> None:
        self.problems.append(KBProblem(rule, entry, field, why))

    # -- the file ------------------------------------------------------------------------
    def document(self, raw: bytes) -> None:
        try:
            document = json.loads(raw, object_pairs_hook=no_duplicate_keys)
        except ValueError as exc:  # includes UnicodeDecodeError and duplicate keys
            self.add("json", "-", "-", f"not a valid JSON knowledge base: {exc}")
            return
        except RecursionError:
            self.add("json", "-", "-", "not a valid JSON knowledge base: nested too deeply")
            return
        if not isinstance(document, dict):
            self.add("top-level", "-", "-", "a knowledge base must be a JSON object")
            return
        for key in ("kb_id", "version", "description"):
            if _is_placeholder(document.get(key)):
                self.add("fill", "-", key, f"left to fill ({document[key]})")
        for key in ("kb_id", "version"):
            value = document.get(key)
            if not isinstance(value, str) or not value.strip() or len(value) > 200:
                self.add("top-level", "-", key, "must be a non-empty string (at most 200 chars)")
        if not isinstance(document.get("description", ""), str):
            self.add("top-level", "-", "description", "must be a string")
        for key in sorted(
            set(document) - {"$schema", "kb_id", "version", "description", "entries"}
        ):
            self.add("top-level", "-", key, "unknown top-level key")
        entries = document.get("entries")
        if not isinstance(entries, dict) or not entries:
            self.add("top-level", "-", "entries", "must be a non-empty object of question -> entry")
            return
        index: dict[str, str] = {}
        for question, node in entries.items():
            key = question_key(question)
            if not key:
                self.add("format", question or "-", "-", "empty question text")
                continue
            if key in index:
                self.add(
                    "duplicate-question",
                    question,
                    "-",
                    f"the same question as {index[key]!r} once case, whitespace and the option "
                    "list are ignored",
                )
                continue
            index[key] = question
            self.entry(question, node)
        if not self.problems:
            # the independent second check; its findings are new only when nothing above fired
            for error in kb_validator().iter_errors(document):
                where = list(error.absolute_path)
                if len(where) >= 2 and where[0] == "entries":
                    self.add("format", str(where[1]), _dotted(where[2:]), error.message)
                else:
                    self.add("top-level", "-", _dotted(where), error.message)

    # -- one entry -----------------------------------------------------------------------
    def entry(self, question: str, node: Any) -> None:
        for path, text in _placeholders(node):
            self.add("fill", question, _dotted(path), f"left to fill ({text})")
        try:
            entry = KBEntry.model_validate(_neutral_type(node))
        except ValidationError as exc:
            for error in exc.errors(include_url=False):
                loc = tuple(error["loc"])
                msg = str(error["msg"]).removeprefix("Value error, ")
                if "caps" in loc:
                    self.add("caps", question, _dotted(loc), _cap_format(loc, error["input"], msg))
                    continue
                rule = "k" if (loc and loc[-1] == "k") or "exceeds the" in msg else "format"
                self.add(rule, question, _dotted(loc), msg)
            return
        self.options(question, entry)
        typed = self.question_type(question, entry, node)
        for option, answer in entry.answers.items():
            self.answer(question, entry, option, answer)
        if typed:
            # a wrong type would read the options' contradictions under the wrong rule, and
            # name the one mistake again as each of them
            self.contradictions(question, entry)

    def question_type(self, question: str, entry: KBEntry, node: Any) -> bool:
        """Whether the entry's type fits its options (a type left to fill is "fill"'s)."""
        options = question_options(question)
        if options is None or (isinstance(node, dict) and _is_placeholder(node.get("type"))):
            return True
        if sorted(options) == ["no", "yes"] and entry.type != "binary":
            self.add(
                "type",
                question,
                "type",
                f"{entry.type!r} on a question answered yes or no: it is 'binary' (its two "
                "answers contradict each other, which an ordinal grade and the next never do)",
            )
            return False
        if entry.type == "binary" and len(options) != 2:
            self.add(
                "type",
                question,
                "type",
                f"'binary' on a question of {len(options)} options {list(options)}: a binary "
                "question has two (yes or no); graded options are 'ordinal'",
            )
            return False
        return True

    def options(self, question: str, entry: KBEntry) -> None:
        options = question_options(question)
        if options is None:
            return
        answers = {fold(a) for a in entry.answers}
        missing = [o for o in options if o not in answers]
        extra = sorted(a for a in entry.answers if fold(a) not in options)
        if missing:
            self.add("options", question, "answers", f"no answer for the options {missing}")
        for option in extra:
            self.add(
                "options",
                question,
                f"answers.{option}",
                f"not an option of the question {list(options)}",
            )

    def answer(self, question: str, entry: KBEntry, option: str, answer: KBAnswer) -> None:
        at = f"answers.{option}"
        label = fold(option)
        absence = label in ABSENCE_OPTIONS
        if not answer.must_all:
            what = "the absence" if absence else "the finding it asserts"
            self.add("must-all", question, f"{at}.must_all", f"empty: state {what} here")
        if not absence and not answer.at_least_k_of:
            self.add(
                "evidence",
                question,
                f"{at}.at_least_k_of",
                "an answer that asserts a finding needs at least one group of signs that "
                "support it",
            )
        if not answer.forbidden:
            self.add("forbids", question, f"{at}.forbidden", "empty: list what contradicts it")
        self.hygiene(question, at, answer)
        self.label_in_evidence(question, at, label, answer)
        self.laterality(question, at, answer)
        for c, cap in enumerate(answer.caps):
            self.cap(question, f"{at}.caps[{c}]", cap)

    def hygiene(self, question: str, at: str, answer: KBAnswer) -> None:
        forbidden = {fold(t): where for where, c in _forbidden(answer) for t in _texts(c)}
        for where, concept in [*_required(answer), *_forbidden(answer)]:
            seen: set[str] = set()
            for i, text in enumerate(_texts(concept)):
                folded = fold(text)
                field = f"{at}.{where}" + ("" if i == 0 else f".synonyms[{i - 1}]")
                if not folded:
                    self.add("synonym-hygiene", question, field, "blank text")
                elif folded in seen:
                    self.add(
                        "synonym-hygiene",
                        question,
                        field,
                        f"{text!r} repeats the term or a synonym",
                    )
                seen.add(folded)
                if i and _synonym_drifts(concept.term, text):
                    self.add(
                        "synonym-drift",
                        question,
                        field,
                        f"{text!r} shares no word with its term {concept.term!r}: a sign, cause "
                        "or grade is a concept of its own",
                    )
        for where, concept in _required(answer):
            for text in _texts(concept):
                if fold(text) in forbidden:
                    self.add(
                        "required-and-forbidden",
                        question,
                        f"{at}.{where}",
                        f"{text!r} is also forbidden ({at}.{forbidden[fold(text)]})",
                    )

    def label_in_evidence(self, question: str, at: str, label: str, answer: KBAnswer) -> None:
        allowed = (
            _content(OPTIONS_SUFFIX.sub("", question), filler=True) | _words(label) | set(_SIDES)
        )
        allowed |= {_stem(w) for w in _LABEL_WORDS.get(label, frozenset())}
        for where, concept in _required(answer):
            if not where.startswith("at_least_k_of"):
                continue
            for text in _texts(concept):
                if _content(text, filler=True) <= allowed:
                    self.add(
                        "label-in-evidence",
                        question,
                        f"{at}.{where}",
                        f"{text!r} only restates the question and the answer {label!r}: "
                        "name a sign that supports it (the label belongs in must_all)",
                    )
                    break

    def laterality(self, question: str, at: str, answer: KBAnswer) -> None:
        stem = question_key(question)
        sides = [side for side, pattern in _SIDES.items() if pattern.search(stem)]
        if len(sides) != 1:
            return
        own = _SIDES[sides[0]]
        other = _SIDES["left" if sides[0] == "right" else "right"]
        for where, concept in _required(answer):
            for text in _texts(concept):
                if not own.search(text.casefold()):
                    self.add(
                        "laterality",
                        question,
                        f"{at}.{where}",
                        f"{text!r} does not name the {sides[0]} side the question asks about",
                    )
        for where, concept in _forbidden(answer):
            for text in _texts(concept):
                lowered = text.casefold()
                if other.search(lowered) and not own.search(lowered):
                    self.add(
                        "laterality",
                        question,
                        f"{at}.{where}",
                        f"{text!r} names only the other side, which says nothing about the "
                        f"{sides[0]}",
                    )

    def cap(self, question: str, at: str, cap: KBCap) -> None:
        for flag, value in cap.when.items():
            if value not in CAP_FLAGS.get(flag, frozenset()):
                self.add(
                    "caps",
                    question,
                    f"{at}.when.{flag}",
                    f"{flag}={value!r} is not a documented context flag ({_documented_flags()}); "
                    "document a new one in knowledge_base/README.md first",
                )
        if cap.max_score >= 5:
            self.add("caps", question, f"{at}.max_score", "a cap of 5 caps nothing")
        if not cap.note:
            self.add("caps", question, f"{at}.note", "say why the technique limits the finding")

    def contradictions(self, question: str, entry: KBEntry) -> None:
        answers = list(entry.answers.items())
        if entry.type == "binary" and len(answers) == 2:
            for (option, answer), (other, theirs) in (answers, answers[::-1]):
                stated = {fold(c.term) for _, c in _stated(theirs)}
                forbidden = {fold(t) for _, c in _forbidden(answer) for t in _texts(c)}
                if stated and forbidden and not stated & forbidden:
                    self.add(
                        "contradictions",
                        question,
                        f"answers.{option}.forbidden",
                        f"forbids none of what {other!r} states ({sorted(stated)}), in the "
                        "same wording",
                    )
        options = question_options(question)
        if entry.type == "ordinal" and options is not None:
            self.adjacent_grades(question, entry, options)

    def adjacent_grades(self, question: str, entry: KBEntry, options: Sequence[str]) -> None:
        written = {fold(option): option for option in entry.answers}
        for i, grade in enumerate(options):
            if grade not in written:
                continue
            where_forbidden = {
                fold(t): where
                for where, c in _forbidden(entry.answers[written[grade]])
                for t in _texts(c)
            }
            for j in (i - 1, i + 1):
                if not 0 <= j < len(options) or options[j] not in written:
                    continue
                for _, concept in _stated(entry.answers[written[options[j]]]):
                    for text in _texts(concept):
                        if fold(text) not in where_forbidden:
                            continue
                        self.add(
                            "contradictions",
                            question,
                            f"answers.{written[grade]}.{where_forbidden[fold(text)]}",
                            f"forbids {text!r}, which the adjacent grade {options[j]!r} "
                            "states: adjacent grades never contradict each other",
                        )


def _documented_flags() -> str:
    return ", ".join(f"{flag}={value}" for flag, values in CAP_FLAGS.items() for value in values)


def _cap_format(loc: tuple[int | str, ...], value: Any, msg: str) -> str:
    """The ``caps`` rule in place of pydantic's wording: what a cap is, and the flags it may
    read, since a wrong cap is most often a flag written as a bare name."""
    shape = '{"when": {FLAG: VALUE}, "max_score": 1 to 4, "note": "why"}'
    flags = f"the documented context flags: {_documented_flags()}"
    if loc[-1] == "caps":
        return f"caps is a list of caps, each {shape}, with {flags}; got {value!r}"
    if isinstance(loc[-1], int) and loc[-2] == "caps":
        return f"{value!r} is not a cap: a cap is {shape}, with {flags}"
    return f"{msg} (a cap is {shape}, with {flags})"


def _synonym_drifts(term: str, synonym: str) -> bool:
    """True when no word of ``synonym`` is a word of ``term``, an equivalent of one, or part of
    the term's abbreviation."""
    own, other = _content(term), _content(synonym)
    if not other or own & other:
        return False
    initials = "".join(w[0] for w in _WORD.findall(term.casefold()) if w not in _STOP)
    if any(len(w) >= 2 and w in initials for w in _WORD.findall(synonym.casefold())):
        return False  # an abbreviation of the term
    linked = {_stem(w) for group in _EQUIVALENT if own & {_stem(x) for x in group} for w in group}
    return not other & linked


def check_knowledge_base(path_or_name: str | Path) -> list[KBProblem]:
    """Every problem of a KB file under the rules of knowledge_base/README.md (``KB_RULES``).

    An empty list means the file loads and follows the rules. Raises ConfigError only when the
    file cannot be found or read.
    """
    path = resolve_kb(path_or_name)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    checker = _Checker()
    checker.document(raw)
    return checker.problems


def entry_template(
    question: str, options: Sequence[str] | None = None, question_type: str | None = None
) -> dict[str, Any]:
    """A KB file of one entry to fill in: every field to fill says TODO, so ``kb check`` flags
    exactly those until they are written.

    ``options`` default to the question's parenthesised list; given both, they must agree.
    Raises UserInputError naming the option at fault.
    """
    from faithjudge.errors import UserInputError

    listed = question_options(question)
    if options is None:
        if listed is None:
            raise UserInputError(
                "the question has no option list in parentheses: give --options", field="options"
            )
        chosen = list(listed)
    else:
        chosen = [" ".join(o.split()) for o in options if o.strip()]
        if not chosen:
            raise UserInputError("--options names no option", field="options")
        if listed is not None and [fold(o) for o in chosen] != list(listed):
            raise UserInputError(
                f"--options {chosen} differ from the question's options {list(listed)}",
                field="options",
            )
        if len({fold(o) for o in chosen}) != len(chosen):
            raise UserInputError("--options repeats an option", field="options")
    kind: str
    if question_type is not None:
        if question_type not in ("binary", "ordinal", "comparative", "spatial"):
            raise UserInputError(
                f"--type {question_type!r}: one of binary, ordinal, comparative, spatial",
                field="type",
            )
        kind = question_type
    elif sorted(fold(o) for o in chosen) == ["no", "yes"]:
        kind = "binary"
    elif [fold(o) for o in chosen] == list(_GRADES):
        kind = "ordinal"
    else:
        kind = f"{PLACEHOLDER}: binary, ordinal, comparative or spatial"

    def concept(what: str) -> dict[str, Any]:
        return {"term": f"{PLACEHOLDER}: {what}", "synonyms": []}

    answers: dict[str, Any] = {}
    for option in chosen:
        absence = fold(option) in ABSENCE_OPTIONS
        states = "the absence, as a report says it" if absence else "the finding, in words"
        answers[option] = {
            "must_all": [concept(f"what a sound explanation of {option!r} states: {states}")],
            "at_least_k_of": []
            if absence
            else [{"k": 1, "any_of": [concept(f"a radiographic sign that supports {option!r}")]}],
            "forbidden": [concept(f"a statement that contradicts {option!r}")],
            "caps": [],
        }
    return {
        "kb_id": f"{PLACEHOLDER}: a name for this knowledge base",
        "version": "0.1.0",
        "description": f"{PLACEHOLDER}: what this knowledge base covers and where it comes from",
        "entries": {question: {"type": kind, "answers": answers}},
    }
