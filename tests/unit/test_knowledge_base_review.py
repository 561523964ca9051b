"""The review rules of knowledge_base/README.md, checked on every entry of cxr_vqa.json.

1. Evidence groups (``at_least_k_of``) name radiographic signs, never the answer label: no
   group concept is made only of the question's words and the words that name the option
   (its grade, position or side), and a CoT that only restates an option meets none of that
   option's groups, as the offline judge reads the KB.
2. Every answer that asserts a finding has at least one evidence group beyond its label.
3. ``forbidden`` lists are consistent across the options of a question: an option forbids
   exactly the options that contradict it (ordinal grades two or more steps apart, the other
   answer of a binary question, the other sides and positions), read the same way.
4. Synonyms say the same thing: each shares a content word with its term, or differs only by
   words listed as equivalent here (abbreviations, plain-language forms of one finding).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from faithjudge.assets.knowledge import KnowledgeBase, load_knowledge_base, question_key
from faithjudge.judges.lexicon import DEFAULT_LEXICON_DIR, load_lexicon
from faithjudge.scoring.lexicon import Lexicon, concept_credits, tokenize
from faithjudge_client.lines import Concept, KBAnswer

from tests.restatements import statement

LEX: Lexicon = load_lexicon(DEFAULT_LEXICON_DIR)[0]
REPO = Path(__file__).resolve().parents[2]

_NEGATION = {"no", "not", "without", "absent", "absence", "negative", "free", "neither", "none"}
_UNCERTAIN = {
    "possible",
    "possibly",
    "questionable",
    "equivocal",
    "suspected",
    "suspect",
    "suspicious",
    "probable",
    "likely",
    "cannot",
    "exclude",
    "excluded",
    "rule",
    "ruled",
    "out",
    "uncertain",
}
_SMALL = {"mild", "mildly", "small", "minimal", "minor", "trace", "slight", "slightly", "tiny"}
_LARGE = {
    "severe",
    "severely",
    "large",
    "massive",
    "massively",
    "extensive",
    "marked",
    "markedly",
    "significant",
    "pronounced",
    "substantial",
    "big",
    "huge",
    "greatly",
}
_COMPARE = {
    "more",
    "greater",
    "larger",
    "worse",
    "predominant",
    "predominantly",
    "predominance",
    "only",
    "isolated",
    "than",
    "compared",
    "severe",
    "severity",
    "extensive",
    "less",
    "fewer",
    "milder",
    "smaller",
    "relatively",
    "affected",
}
_SYMMETRIC = {"same", "similar", "similarly", "symmetric", "symmetrical", "equal", "comparable"}
_BOTH = {"both", "bilateral", "bilaterally", "each", "right", "left"}

# Words that only name an option: its grade, position or side (README, "Review rules").
LABEL_WORDS: dict[str, set[str]] = {
    "yes": _UNCERTAIN,  # a binary "yes" includes questionable findings
    "no": _NEGATION,
    "none": _NEGATION | {"either", "both", "bilateral", "clear"},
    "not present": _NEGATION,
    "questionable": _UNCERTAIN | {"subtle", "faint", "borderline", "slight", "slightly"},
    "mild": _SMALL,
    "moderate": {"moderate", "moderately", "medium", "intermediate", "sized"},
    "severe": _LARGE,
    "normal": {"normal", "within", "limits"} | _NEGATION,
    "borderline": {"borderline", "upper", "limit", "normal", "mildly", "slightly", "prominent"},
    "enlarged": {"enlarged", "enlargement", "cardiomegaly", "increased", "large"},
    "massively enlarged": {"enlarged", "enlargement", "cardiomegaly"} | _LARGE,
    "right": _COMPARE | {"right", "left"},
    "left": _COMPARE | {"right", "left"},
    "same severity": _SYMMETRIC | _BOTH | {"severity", "extent"},
    "both": _BOTH,
    "correctly positioned": {
        "correctly",
        "correct",
        "positioned",
        "position",
        "satisfactory",
        "appropriate",
        "appropriately",
        "good",
        "standard",
        "proper",
        "properly",
        "adequate",
        "adequately",
        "expected",
    },
    "too low": {"too", "low", "deep", "advanced", "far", "lying", "distal"},
    "too high": {"too", "high", "shallow", "proximal", "advanced", "far", "enough", "lying"},
    "turned": {"turned", "malpositioned", "malposition", "abnormal"},
}
# Words any restatement may carry besides the question's own: they add no finding.
FILLER = {
    "lung",
    "lungs",
    "pulmonary",
    "chest",
    "x",
    "ray",
    "image",
    "radiograph",
    "film",
    "finding",
    "findings",
    "sign",
    "signs",
    "evidence",
    "present",
    "seen",
    "visible",
    "side",
    "sided",
    "there",
    "show",
    "shows",
    "is",
    "are",
    "visualized",
    "identified",
}
_QUESTION_WORDS = {"what", "which", "where", "how", "is", "are", "does", "do", "the"}

# Word-level equivalences a synonym may use instead of its term's words (rule 4).
EQUIVALENT_WORDS: list[set[str]] = [
    {"cardiomegaly", "heart", "cardiac", "enlarged", "enlargement"},
    {"cardiothoracic", "ctr"},
    {"effusion", "fluid"},
    {"opacity", "infiltrate", "consolidation", "haziness", "hazy", "density", "opaque"},
    {"atelectasis", "collapse", "dystelectasis", "atelectatic"},
    {"endotracheal", "ett", "et", "tracheal", "intubated", "intubation", "breathing"},
    {"gastric", "nasogastric", "ng", "orogastric", "og", "feeding", "enteric"},
    {"central", "cvc", "picc", "venous", "line", "catheter"},
    {"pacemaker", "icd", "cardioverter", "defibrillator", "device", "generator"},
    {"chest", "thoracostomy", "intercostal", "pleural", "drain", "tube"},
    {"pneumothorax", "air", "pleural"},
    {"nodule", "mass", "lesion", "nodular", "coin"},
    {"congestion", "congested", "vascular", "vasculature", "vessels", "venous"},
    {"rotation", "rotated", "malrotation", "malrotated", "oblique"},
    {"costophrenic", "costodiaphragmatic"},
    {"apex", "apices", "apical"},
    {"visualized", "included", "coverage", "seen", "visible", "inclusion", "cut", "excluded"},
    {"collimation", "field", "view"},
    {"rotation", "centered"},
    {"clavicle", "clavicular", "sternoclavicular", "equidistant", "symmetric", "asymmetric"},
    {"redistribution", "cephalization"},
    {"kerley", "septal", "septa", "interlobular"},
    {"perihilar", "hilar", "haziness", "haze", "indistinct", "blurred"},
    {"perihilar", "bat", "wing", "butterfly"},
    {"nodule", "round", "rounded"},
    {"margin", "margins", "contour"},
    {"jugular", "neck", "cephalad", "upward", "cranially"},
]


def _stems(text: str) -> set[str]:
    canonical = (LEX.equivalents.get(s, s) for s in tokenize(text))
    return {s for s in canonical if s not in LEX.stopwords}


def _stem_set(words: set[str]) -> set[str]:
    return {s for w in words for s in _stems(w)} | {
        LEX.equivalents.get(s, s) for w in words for s in tokenize(w)
    }


_FILLER = _stem_set(FILLER)
_EQUIVALENT = [_stem_set(group) for group in EQUIVALENT_WORDS]


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_knowledge_base()


def _texts(concept: Concept) -> list[str]:
    return [concept.term, *concept.synonyms]


def _options(kb: KnowledgeBase) -> Iterator[tuple[str, str, str, KBAnswer]]:
    for question in kb.questions:
        entry = kb.lookup(question)
        for option, answer in entry.answers.items():
            yield question, entry.type, option, answer


def _question_words(question: str) -> set[str]:
    stem = re.sub(r"\s*\([^()]*\)\s*$", "", question)
    return {s for s in _stems(stem) if s not in _stem_set(_QUESTION_WORDS)}


def label_only(text: str, question: str, option: str) -> bool:
    """Is ``text`` made only of the question's words and the words that name ``option``?"""
    allowed = _question_words(question) | _stem_set(LABEL_WORDS[option]) | _FILLER
    allowed |= {LEX.equivalents.get(s, s) for s in LEX.side_stems}
    return _stems(text) <= allowed


def test_the_checks_visit_every_entry_and_option(kb: KnowledgeBase) -> None:
    # Every check below iterates ``_options``: an entry it skipped would pass unchecked.
    raw = orjson.loads((REPO / "knowledge_base" / "cxr_vqa.json").read_bytes())["entries"]
    expected = {
        (question_key(q), option) for q, entry in raw.items() for option in entry["answers"]
    }
    visited = [(question_key(q), option) for q, _, option, _ in _options(kb)]
    assert len(visited) == len(set(visited))
    assert set(visited) == expected


def test_every_option_label_has_its_words() -> None:
    kb = load_knowledge_base()
    assert {option for _, _, option, _ in _options(kb)} <= set(LABEL_WORDS)


def test_label_only_recognises_restatements() -> None:
    q = "What is the severity of pleural effusion on the right? (none, questionable, mild, ...)"
    assert label_only("moderate right pleural effusion", q, "moderate")
    assert label_only("moderate-sized right-sided effusion", q, "moderate")
    assert not label_only("right meniscus reaching the mid hemithorax", q, "moderate")
    congestion = "What is the severity of pulmonary congestion? (none, ...)"
    assert label_only("mild pulmonary congestion", congestion, "mild")
    assert not label_only("upper lobe vascular redistribution", congestion, "mild")


def test_evidence_groups_name_signs_not_the_label(kb: KnowledgeBase) -> None:
    restated = [
        f"{question_key(question)[:50]} / {option}: {text!r}"
        for question, _, option, answer in _options(kb)
        for group in answer.at_least_k_of
        for concept in group.any_of
        for text in _texts(concept)
        if label_only(text, question, option)
    ]
    assert restated == []


def test_a_restated_option_meets_none_of_its_evidence_groups(kb: KnowledgeBase) -> None:
    met = []
    for question, _, option, answer in _options(kb):
        said = statement(question, option)
        for group in answer.at_least_k_of:
            credits = concept_credits(LEX, said, [c.model_dump() for c in group.any_of])
            met += [
                f"{question_key(question)[:50]} / {option}: {said!r} meets {c.term!r}"
                for c, credit in zip(group.any_of, credits, strict=True)
                if credit
            ]
    assert met == []


def test_every_asserted_finding_has_evidence_beyond_its_label(kb: KnowledgeBase) -> None:
    absent = {"no", "none", "normal", "not present"}
    bare = [
        f"{question_key(q)[:50]} / {o}"
        for q, _, o, answer in _options(kb)
        if o not in absent and not answer.at_least_k_of
    ]
    assert bare == []


_ORDER = {
    "ordinal": ["none", "questionable", "mild", "moderate", "severe"],
    "heart": ["normal", "borderline", "enlarged", "massively enlarged"],
}
# Spatial and side options that a statement of the other does not contradict.
_COMPATIBLE = {
    frozenset({"turned", "too low"}),
    frozenset({"turned", "too high"}),
}


def contradicts(kind: str, question: str, option: str, other: str) -> bool:
    """Does a statement of ``other`` contradict the answer ``option``?"""
    if option == other:
        return False
    if kind == "ordinal":
        order = _ORDER["heart" if "heart" in question else "ordinal"]
        return abs(order.index(option) - order.index(other)) >= 2
    if "chest tube present? (right" in question and option == "both":
        return other == "none"  # "a chest tube on the right" does not deny one on the left
    return frozenset({option, other}) not in _COMPATIBLE


def test_forbidden_lists_are_consistent_across_options(kb: KnowledgeBase) -> None:
    problems = []
    for question in kb.questions:
        entry = kb.lookup(question)
        for option, answer in entry.answers.items():
            forbidden = [c.model_dump() for c in answer.forbidden]
            for other in entry.answers:
                if other == option:
                    continue
                said = statement(question, other)
                credits = concept_credits(LEX, said, forbidden)
                pairs = zip(answer.forbidden, credits, strict=True)
                hits = [concept.term for concept, credit in pairs if credit]
                expected = contradicts(entry.type, question, option, other)
                if bool(hits) != expected:
                    why = f"forbids {hits}" if hits else "forbids nothing of it"
                    problems.append(
                        f"{question_key(question)[:45]} / {option} vs {other!r} ({said}): "
                        f"{'should' if expected else 'should not'} be forbidden; {why}"
                    )
    assert problems == []


def _synonym_drift(term: str, synonym: str) -> set[str]:
    """Content words of ``synonym`` that neither occur in ``term`` nor are equivalent to one
    of its words; empty when the synonym shares no content word with the term."""
    own, other = _stems(term), _stems(synonym)
    if own & other:
        return set()
    linked = {w for group in _EQUIVALENT if own & group for w in group}
    return other - linked


def test_synonyms_say_the_same_thing(kb: KnowledgeBase) -> None:
    drift = sorted(
        {
            f"{concept.term!r} ~ {synonym!r}"
            for _, _, _, answer in _options(kb)
            for concept in [
                *answer.must_all,
                *answer.forbidden,
                *(c for g in answer.at_least_k_of for c in g.any_of),
            ]
            for synonym in concept.synonyms
            if _synonym_drift(concept.term, synonym) == _stems(synonym) - _FILLER
            and _stems(synonym) - _FILLER
        }
    )
    assert drift == []
