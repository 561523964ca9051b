"""Content checks of the bundled chest X-ray VQA knowledge base (knowledge_base/cxr_vqa.json).

The 33 question strings below are the exact templates listed in METHODS §1.2 (data, not code).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from faithjudge.assets.knowledge import (
    KnowledgeBase,
    entry_for_answer,
    load_knowledge_base,
    question_key,
    question_options,
)
from faithjudge.settings import Settings
from faithjudge_client.lines import Concept, KBAnswer, KBEntry

YN = "(yes or no)"
SEV = "(none, questionable, mild, moderate, severe)"
CMP = "(right, left, same severity, none)"

QUESTIONS: list[tuple[str, str]] = [
    (
        "binary",
        f"Are the lung apex and costodiaphragmatic angle fully visualized on both sides? {YN}",
    ),
    ("binary", f"Is the X-ray image malrotated? {YN}"),
    ("binary", f"Does the chest X-ray show cardiomegaly? {YN}"),
    ("binary", f"Is there evidence of pulmonary congestion? {YN}"),
    ("binary", f"Is there a pleural effusion on the right? {YN}"),
    ("binary", f"Is there a pleural effusion on the left? {YN}"),
    ("binary", f"Are there pulmonary opacities in the right lung? {YN}"),
    ("binary", f"Are there pulmonary opacities in the left lung? {YN}"),
    ("binary", f"Is there atelectasis on the right side? {YN}"),
    ("binary", f"Is there atelectasis on the left side? {YN}"),
    ("binary", f"Is there a pneumothorax on the right side? {YN}"),
    ("binary", f"Is there a pneumothorax on the left side? {YN}"),
    ("binary", "Is there any visible lung nodule or mass on this X-ray? (yes/no)"),
    ("binary", f"Is an endotracheal tube present in this image? {YN}"),
    ("binary", f"Is a gastric tube present in this image? {YN}"),
    ("binary", f"Is a central venous catheter present in this image? {YN}"),
    ("binary", f"Is a central venous catheter visible in this image? {YN}"),
    ("binary", f"Is a cardiac pacemaker device visible in this image? {YN}"),
    ("binary", f"Is a chest tube present in this image? {YN}"),
    ("ordinal", f"What is the severity of pulmonary congestion? {SEV}"),
    ("ordinal", f"What is the severity of pleural effusion on the right? {SEV}"),
    ("ordinal", f"What is the severity of pleural effusion on the left? {SEV}"),
    ("ordinal", f"What is the severity of pulmonary opacities in the right lung? {SEV}"),
    ("ordinal", f"What is the severity of pulmonary opacities in the left lung? {SEV}"),
    ("ordinal", f"What is the severity of atelectasis on the right side? {SEV}"),
    ("ordinal", f"What is the severity of atelectasis on the left side? {SEV}"),
    (
        "ordinal",
        "What is the size of the heart? (normal, borderline, enlarged, massively enlarged)",
    ),
    ("comparative", f"Which side shows more severe pleural effusion? {CMP}"),
    ("comparative", f"Which side shows more severe pulmonary opacities? {CMP}"),
    ("comparative", f"Which side shows more severe atelectasis? {CMP}"),
    (
        "spatial",
        "What is the position of the endotracheal tube? "
        "(not present, correctly positioned, too low, too high)",
    ),
    (
        "spatial",
        "What is the position of the central venous catheter? "
        "(not present, correctly positioned, too low, too high, turned)",
    ),
    ("spatial", "On which side is a chest tube present? (right, left, both, none)"),
]
QUESTION_IDS = [question_key(q)[:60] for _, q in QUESTIONS]

# Answers that state an absence or a normal; every other answer asserts a finding.
NEGATIVE_ANSWERS = frozenset({"no", "none", "normal", "not present"})
# The context flags caps may use (documented in knowledge_base/README.md).
CAP_FLAGS = {"projection": {"AP"}, "position": {"supine"}}

_SIDE = {"right": re.compile(r"\bright\b"), "left": re.compile(r"\bleft\b")}
_OPPOSITE = {"right": "left", "left": "right"}


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_knowledge_base()


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


def _texts(concept: Concept) -> list[str]:
    return [concept.term, *concept.synonyms]


def _required(answer: KBAnswer) -> Iterator[Concept]:
    yield from answer.must_all
    for group in answer.at_least_k_of:
        yield from group.any_of


def _all_concepts(answer: KBAnswer) -> Iterator[Concept]:
    yield from _required(answer)
    yield from answer.forbidden


def _answers(kb: KnowledgeBase) -> Iterator[tuple[str, str, KBAnswer]]:
    for _, question in QUESTIONS:
        for option, answer in kb.lookup(question).answers.items():
            yield question, option, answer


def _side_of(question: str) -> str | None:
    """The side a lateralised question asks about (from its text without the option list)."""
    stem = question_key(question)
    sides = [side for side, pattern in _SIDE.items() if pattern.search(stem)]
    assert len(sides) <= 1, question
    return sides[0] if sides else None


def test_the_list_is_the_33_templates() -> None:
    assert len(QUESTIONS) == 33
    assert len({question_key(q) for _, q in QUESTIONS}) == 33
    kinds = [kind for kind, _ in QUESTIONS]
    assert (kinds.count("binary"), kinds.count("ordinal")) == (19, 8)
    assert (kinds.count("comparative"), kinds.count("spatial")) == (3, 3)


def test_kb_covers_exactly_the_33_questions(kb: KnowledgeBase) -> None:
    assert kb.id == "cxr_vqa"
    assert len(kb) == 33
    assert {question_key(q) for q in kb.questions} == {question_key(q) for _, q in QUESTIONS}
    # The keys are written exactly as the model sees them, option list included.
    assert set(kb.questions) == {q for _, q in QUESTIONS}


@pytest.mark.parametrize(("kind", "question"), QUESTIONS, ids=QUESTION_IDS)
def test_every_question_resolves_in_every_spelling(
    kb: KnowledgeBase, kind: str, question: str
) -> None:
    entry = kb.lookup(question)
    assert entry.type == kind
    stem = re.sub(r"\s*\([^()]*\)\s*$", "", question)
    assert stem != question
    variants = [
        question.upper(),
        question.lower(),
        "  " + question.replace(" ", "   ") + "\n",
        stem,
        stem.upper(),
        f"\t{stem}  ",
        stem + " (" + ", ".join(reversed(entry.answers)) + ")",
    ]
    for variant in variants:
        assert variant in kb
        assert kb.lookup(variant) is entry, variant


@pytest.mark.parametrize(("kind", "question"), QUESTIONS, ids=QUESTION_IDS)
def test_every_option_has_an_entry(kb: KnowledgeBase, kind: str, question: str) -> None:
    entry = kb.lookup(question)
    options = question_options(question)
    assert options is not None
    assert list(entry.answers) == list(options)  # exact labels, in the question's order
    for option in options:
        assert entry_for_answer(entry, option) is entry.answers[option]
        assert entry_for_answer(entry, option.upper()) is entry.answers[option]


def test_option_labels_follow_the_templates(kb: KnowledgeBase) -> None:
    labels = {tuple(kb.lookup(q).answers) for _, q in QUESTIONS}
    assert labels == {
        ("yes", "no"),
        ("none", "questionable", "mild", "moderate", "severe"),
        ("normal", "borderline", "enlarged", "massively enlarged"),
        ("right", "left", "same severity", "none"),
        ("not present", "correctly positioned", "too low", "too high"),
        ("not present", "correctly positioned", "too low", "too high", "turned"),
        ("right", "left", "both", "none"),
    }


def test_positive_answers_have_recognition_criteria(kb: KnowledgeBase) -> None:
    empty = [
        (question, option)
        for question, option, answer in _answers(kb)
        if option not in NEGATIVE_ANSWERS and not (answer.must_all or answer.at_least_k_of)
    ]
    assert empty == []


def test_negative_answers_state_the_absence(kb: KnowledgeBase) -> None:
    # Not required by the format, but this KB never leaves an answer without criteria, so the
    # judge never falls back to an empty QSK for a known question.
    for question, option, answer in _answers(kb):
        assert answer.must_all or answer.at_least_k_of, (question, option)
        if option in NEGATIVE_ANSWERS:
            assert answer.forbidden, (question, option)


def test_every_finding_answer_forbids_something(kb: KnowledgeBase) -> None:
    missing = [(q, o) for q, o, answer in _answers(kb) if not answer.forbidden]
    assert missing == []


def test_synonym_lists_are_clean(kb: KnowledgeBase) -> None:
    problems: list[str] = []
    for question, option, answer in _answers(kb):
        where = f"{question_key(question)[:50]} / {option}"
        forbidden = {_fold(text) for concept in answer.forbidden for text in _texts(concept)}
        for concept in _all_concepts(answer):
            folded = [_fold(text) for text in _texts(concept)]
            if any(not text for text in folded):
                problems.append(f"{where}: blank text in {concept.term!r}")
            if len(set(folded)) != len(folded):
                problems.append(f"{where}: duplicate synonym or term in {concept.term!r}")
        for concept in _required(answer):
            clash = forbidden.intersection(_fold(text) for text in _texts(concept))
            if clash:
                problems.append(f"{where}: {sorted(clash)} both required and forbidden")
    assert problems == []


def test_required_concepts_are_not_repeated_within_an_answer(kb: KnowledgeBase) -> None:
    for question, option, answer in _answers(kb):
        terms = [_fold(concept.term) for concept in _required(answer)]
        assert len(set(terms)) == len(terms), (question, option)
        terms = [_fold(concept.term) for concept in answer.forbidden]
        assert len(set(terms)) == len(terms), (question, option)


def test_k_never_exceeds_the_group(kb: KnowledgeBase) -> None:
    for question, option, answer in _answers(kb):
        for group in answer.at_least_k_of:
            assert 1 <= group.k <= len(group.any_of), (question, option)


LATERAL = [(kind, q) for kind, q in QUESTIONS if _side_of(q) is not None]


def test_lateralised_questions_are_the_expected_ones() -> None:
    # Pleural effusion, opacities, atelectasis (binary and ordinal) and pneumothorax per side.
    assert len(LATERAL) == 14
    assert sum(_side_of(q) == "right" for _, q in LATERAL) == 7


@pytest.mark.parametrize(
    ("kind", "question"), LATERAL, ids=[question_key(q)[:60] for _, q in LATERAL]
)
def test_laterality_is_explicit(kb: KnowledgeBase, kind: str, question: str) -> None:
    side = _side_of(question)
    assert side is not None
    own, other = _SIDE[side], _SIDE[_OPPOSITE[side]]
    for option, answer in kb.lookup(question).answers.items():
        for concept in _required(answer):
            for text in _texts(concept):
                # The queried side is named in the term and in every synonym ...
                assert own.search(text.casefold()), (option, text)
        for concept in answer.must_all:
            for text in _texts(concept):
                # ... so a required concept never names only the opposite side.
                assert not (other.search(text.casefold()) and not own.search(text.casefold()))
        for concept in answer.forbidden:
            for text in _texts(concept):
                # A finding on the other side never contradicts this side's answer.
                lowered = text.casefold()
                assert not (other.search(lowered) and not own.search(lowered)), (option, text)


@pytest.mark.parametrize(
    "question", [q for kind, q in QUESTIONS if kind == "comparative"], ids=["pe", "op", "at"]
)
def test_comparative_answers_point_the_right_way(kb: KnowledgeBase, question: str) -> None:
    answers = kb.lookup(question).answers
    for side in ("right", "left"):
        other = _OPPOSITE[side]
        must = [_fold(text) for c in answers[side].must_all for text in _texts(c)]
        assert must and all(_SIDE[side].search(text) for text in must), (side, must)
        # The opposite side stated as worse is forbidden.
        other_worse = {_fold(text) for c in answers[other].must_all for text in _texts(c)}
        forbidden = {_fold(text) for c in answers[side].forbidden for text in _texts(c)}
        assert forbidden & other_worse, side
    same = " ".join(_fold(text) for c in answers["same severity"].must_all for text in _texts(c))
    assert re.search(r"similar|symmetric|equal|comparable", same)
    none = " ".join(_fold(text) for c in answers["none"].must_all for text in _texts(c))
    assert re.search(r"\bno\b", none) and re.search(r"either|both|bilateral", none)


def _all_text(answer: KBAnswer, part: str) -> str:
    concepts = list(_required(answer)) if part == "required" else answer.forbidden
    return " | ".join(_fold(text) for c in concepts for text in _texts(c))


@pytest.mark.parametrize(
    "question", [q for kind, q in QUESTIONS if kind == "ordinal" and "heart" not in q]
)
def test_severity_grades_are_distinct(kb: KnowledgeBase, question: str) -> None:
    answers = kb.lookup(question).answers
    required = {grade: _all_text(answers[grade], "required") for grade in answers}
    assert len(set(required.values())) == 5
    assert re.search(r"\bno\b", required["none"])
    assert re.search(r"possible|questionable|equivocal|subtle", required["questionable"])
    assert re.search(r"small|mild|minimal|trace|minor|focal|plate-like", required["mild"])
    assert "moderate" in required["moderate"]
    assert re.search(r"severe|large|massive|extensive|complete|marked", required["severe"])
    # Grades two or more steps apart contradict each other.
    assert re.search(r"\bno\b", _all_text(answers["severe"], "forbidden"))
    assert re.search(
        r"severe|large|massive|marked", _all_text(answers["questionable"], "forbidden")
    )


def test_spatial_tip_positions(kb: KnowledgeBase) -> None:
    ett = kb.lookup("What is the position of the endotracheal tube?").answers
    assert "carina" in _all_text(ett["correctly positioned"], "required")
    assert re.search(r"carina|mainstem|main bronchus", _all_text(ett["too low"], "required"))
    assert re.search(r"thoracic inlet|vocal|larynx", _all_text(ett["too high"], "required"))
    cvc = kb.lookup("What is the position of the central venous catheter?").answers
    assert re.search(
        r"superior vena cava|cavoatrial", _all_text(cvc["correctly positioned"], "required")
    )
    assert "right atrium" in _all_text(cvc["too low"], "required")
    assert re.search(r"brachiocephalic|subclavian", _all_text(cvc["too high"], "required"))
    assert re.search(r"loop|coil|kink|jugular", _all_text(cvc["turned"], "required"))
    for answers in (ett, cvc):
        assert re.search(r"\bno\b", _all_text(answers["not present"], "required"))


def test_caps_use_documented_flags(kb: KnowledgeBase) -> None:
    caps = [(q, o, cap) for q, o, answer in _answers(kb) for cap in answer.caps]
    assert caps
    for question, option, cap in caps:
        assert cap.max_score < 5, (question, option)
        assert cap.note, (question, option)
        for flag, value in cap.when.items():
            assert value in CAP_FLAGS.get(flag, set()), (question, option, flag, value)


@pytest.mark.parametrize(
    ("question", "option", "flag"),
    [
        ("Does the chest X-ray show cardiomegaly?", "yes", {"projection": "AP"}),
        ("What is the size of the heart?", "enlarged", {"projection": "AP"}),
        ("What is the size of the heart?", "borderline", {"projection": "AP"}),
        ("Is there a pleural effusion on the right?", "no", {"position": "supine"}),
        ("Is there a pleural effusion on the left?", "no", {"position": "supine"}),
        ("What is the severity of pleural effusion on the right?", "none", {"position": "supine"}),
        ("What is the severity of pleural effusion on the left?", "none", {"position": "supine"}),
        ("Which side shows more severe pleural effusion?", "none", {"position": "supine"}),
        ("Is there a pneumothorax on the right side?", "no", {"position": "supine"}),
        ("Is there a pneumothorax on the left side?", "no", {"position": "supine"}),
    ],
)
def test_expected_caps(kb: KnowledgeBase, question: str, option: str, flag: dict[str, str]) -> None:
    caps = entry_for_answer(kb.lookup(question), option).caps
    assert any(cap.when == flag and cap.max_score <= 4 for cap in caps)


def test_both_cvc_wordings_share_the_criteria(kb: KnowledgeBase) -> None:
    present = kb.lookup("Is a central venous catheter present in this image?")
    visible = kb.lookup("Is a central venous catheter visible in this image?")
    assert present.model_dump() == visible.model_dump()


# ----------------------------------------------------------------------- a second KB


def _second_kb(tmp_path: Path) -> Path:
    question = "Is there a fracture of the left clavicle? (yes or no)"
    document = {
        "kb_id": "other_dataset",
        "version": "0.0.1",
        "description": "a one-question KB of another dataset",
        "entries": {
            question: {
                "type": "binary",
                "answers": {
                    "yes": {
                        "must_all": [
                            {
                                "term": "left clavicle fracture",
                                "synonyms": ["fractured left clavicle"],
                            }
                        ],
                        "forbidden": [{"term": "intact left clavicle"}],
                    },
                    "no": {"must_all": [{"term": "intact left clavicle"}]},
                },
            }
        },
    }
    path = tmp_path / "other.json"
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def test_a_second_kb_file_loads_through_the_same_loader(kb: KnowledgeBase, tmp_path: Path) -> None:
    path = _second_kb(tmp_path)
    other = load_knowledge_base(path)
    assert other.id == "other_dataset" and other.id != kb.id
    assert other.sha256 != kb.sha256 and len(other.sha256) == 64
    assert other.path == path
    assert len(other) == 1
    entry = other.lookup("is there a fracture of the LEFT clavicle?")
    assert isinstance(entry, KBEntry)
    assert entry_for_answer(entry, "Yes").must_all[0].term == "left clavicle fracture"
    assert "Is there a fracture of the left clavicle?" not in kb
    assert load_knowledge_base(str(path)).sha256 == other.sha256


def test_a_second_kb_is_chosen_by_setting(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _second_kb(tmp_path)
    monkeypatch.setenv("FAITHJUDGE_KNOWLEDGE_BASE", str(path))
    chosen = load_knowledge_base(Settings().knowledge_base)
    assert chosen.id == "other_dataset"
    monkeypatch.delenv("FAITHJUDGE_KNOWLEDGE_BASE")
    assert load_knowledge_base(Settings().knowledge_base).sha256 == kb.sha256
