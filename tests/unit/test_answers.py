"""Tests for faithjudge.scoring.answers: question specs, extraction, normalisation, flips."""

from __future__ import annotations

from pathlib import Path

import pytest
from faithjudge.scoring.answers import (
    Flip,
    QuestionSpec,
    decide_flip,
    extract_answer,
    is_correct,
    normalize_answer,
    parse_question,
)
from hypothesis import given, settings
from hypothesis import strategies as st

BINARY = "Is there a pleural effusion on the left? (yes or no)"
NODULE = "Is there any visible lung nodule or mass on this X-ray? (yes/no)"
SEVERITY = (
    "What is the severity of atelectasis on the right side? "
    "(none, questionable, mild, moderate, severe)"
)
HEART = "What is the size of the heart? (normal, borderline, enlarged, massively enlarged)"
COMPARATIVE = "Which side shows more severe pleural effusion? (right, left, same severity, none)"
ETT = (
    "What is the position of the endotracheal tube? "
    "(not present, correctly positioned, too low, too high)"
)
CVC = (
    "What is the position of the central venous catheter? "
    "(not present, correctly positioned, too low, too high, turned)"
)
CHEST_TUBE = "On which side is a chest tube present? (right, left, both, none)"


# --- parse_question ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "options", "kind"),
    [
        (BINARY, ("yes", "no"), "binary"),
        (NODULE, ("yes", "no"), "binary"),
        (SEVERITY, ("none", "questionable", "mild", "moderate", "severe"), "ordinal"),
        (HEART, ("normal", "borderline", "enlarged", "massively enlarged"), "ordinal"),
        (COMPARATIVE, ("right", "left", "same severity", "none"), "comparative"),
        (ETT, ("not present", "correctly positioned", "too low", "too high"), "spatial"),
        (
            CVC,
            ("not present", "correctly positioned", "too low", "too high", "turned"),
            "spatial",
        ),
        (CHEST_TUBE, ("right", "left", "both", "none"), "spatial"),
    ],
)
def test_parse_question_infers_options_and_kind(
    question: str, options: tuple[str, ...], kind: str
) -> None:
    spec = parse_question(question)
    assert spec.options == options
    assert spec.kind == kind
    assert spec.text == question
    assert "(" not in spec.stem
    assert spec.stem.endswith("?")
    assert spec.ordered == (kind == "ordinal")


def test_parse_question_collapses_whitespace_and_case() -> None:
    spec = parse_question("  Is the X-ray\n image   malrotated?   ( Yes  OR  No )  ")
    assert spec.stem == "Is the X-ray image malrotated?"
    assert spec.options == ("yes", "no")
    assert spec.kind == "binary"


def test_parse_question_without_options() -> None:
    spec = parse_question("Is a central venous catheter (CVC) present?")
    assert spec.options == ()
    assert spec.kind is None
    assert spec.stem == "Is a central venous catheter (CVC) present?"
    assert parse_question("Free text question").kind is None


def test_one_item_in_parentheses_is_not_an_option_list() -> None:
    spec = parse_question("Where is the catheter tip (SVC)")
    assert spec.options == ()


@pytest.mark.parametrize(
    ("given_type", "expected"),
    [
        ("binary", "binary"),
        ("ordinal", "ordinal"),
        ("comparative", "comparative"),
        ("comparison", "comparative"),
        ("Comparison ", "comparative"),
        ("spatial", "spatial"),
        ("", "binary"),  # blank counts as absent: inferred
    ],
)
def test_question_type_wins_over_inference(given_type: str, expected: str) -> None:
    assert parse_question(BINARY, given_type).kind == expected


def test_unknown_question_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="'multiple choice'"):
        parse_question(BINARY, "multiple choice")


# --- extract_answer ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cot", "expected"),
    [
        ("<think><step>a</step><step>b</step></think>\n<answer>left</answer>", "left"),
        ("<think>x</think>\n<answer> No </answer>", "No"),
        ("<ANSWER>yes</ANSWER>", "yes"),
        ("<answer>right</answer> then <answer>left</answer>", "left"),
        ("<answer></answer>\n<answer>mild</answer>", "mild"),
        ("<think><step>s</step></think>\n<answer> Right", "Right"),
        ("<think><step>s</step></think>\n<answer>right>", "right>"),
        ("<think><step>s</step></think>\n<answer>\n  left\nmore text", "left"),
        ("<think><step>s</step></think>\n<answ", None),
        (
            '{"think": {"step": ["a", "b"], "external_influence": "none"}, "answer": "right"}',
            "right",
        ),
        ('assistant\n\n{"think": {"step": "a"}, "answer": "no"}', "no"),
        ('```json\n{"think": {"step": "a"}, "answer": "moderate"}\n```', "moderate"),
        ('{"think": {"step": "a", "step": "b"}, "answer": "yes"}', "yes"),
        ('{"reasoning": {"think": "<step> x </step>"}, "answer": "no"}', "no"),
        ('{"reasoning": "<think>..</think><answer>yes</answer>", "answer": "no"}', "no"),
        ('{"result": {"answer": "left"}}', "left"),
        ('{"think": {"step": "He said "left" clearly"}, "answer": "right"}', "right"),
        ('{"think": {"step": "truncated...', None),
        ('{"think": "a", "answer": "too low", "think2": "unterminated', "too low"),
        ('{"answer": "a \\"quoted\\" word"', 'a "quoted" word'),
        ('{"answer": true}', "yes"),
        ('{"severity_of_effusion": "none"}', "none"),  # one field: it is the answer
        ("Reasoning here.\nAnswer: yes", "yes"),
        ("Some steps.\nFinal answer: left", "left"),
        ("Some steps.\n**Final Answer:** massively enlarged", "massively enlarged"),
        ("no answer anywhere here", None),
        ("", None),
        ("   ", None),
    ],
)
def test_extract_answer(cot: str, expected: str | None) -> None:
    assert extract_answer(cot) == expected


def test_extract_answer_tolerates_non_strings() -> None:
    assert extract_answer(None) is None
    assert extract_answer(42) is None  # type: ignore[arg-type]


@settings(max_examples=300)
@given(st.text(alphabet='<>/answerthinkstep{}[]":, \n\\`json', max_size=80))
def test_extract_answer_never_raises(cot: str) -> None:
    result = extract_answer(cot)
    assert result is None or (isinstance(result, str) and result == result.strip() and result)


# --- normalize_answer -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "raw", "expected"),
    [
        (BINARY, "yes", "yes"),
        (BINARY, " No ", "no"),
        (BINARY, "YES.", "yes"),
        (BINARY, '"no"', "no"),
        (BINARY, "**Yes**", "yes"),
        (BINARY, "`no`", "no"),
        (BINARY, "<answer>yes</answer>", "yes"),
        (BINARY, "Yes. The left costophrenic angle is blunted.", "yes"),
        (BINARY, "no, there is no effusion", "no"),
        (BINARY, "true", "yes"),
        (BINARY, "present", "yes"),
        (BINARY, "absent", "no"),
        (BINARY, "Y", "yes"),
        (BINARY, "not present", "no"),
        (BINARY, "answer: no", "no"),
        (BINARY, "yes or no", None),
        (BINARY, "uncertain", None),
        (BINARY, "cannot determine", None),
        (BINARY, "Cannot be determined from this image", None),
        (BINARY, "maybe", None),
        (BINARY, "n/a", None),
        (BINARY, "", None),
        (BINARY, None, None),
        (COMPARATIVE, "right>", "right"),
        (COMPARATIVE, "Right", "right"),
        (COMPARATIVE, "left,   think: {  steps: [ the right lung is clear ] }", "left"),
        (COMPARATIVE, "left side", "left"),
        (COMPARATIVE, "right-sided", "right"),
        (COMPARATIVE, "same", "same severity"),
        (COMPARATIVE, "equal", "same severity"),
        (COMPARATIVE, "symmetric", "same severity"),
        (COMPARATIVE, "Same-severity", "same severity"),
        (COMPARATIVE, "neither", "none"),
        (COMPARATIVE, "Neither side", "none"),
        (COMPARATIVE, "none", "none"),
        (COMPARATIVE, "left more than right", None),
        (COMPARATIVE, "yes", None),
        (SEVERITY, "moderate", "moderate"),
        (SEVERITY, "Severe.", "severe"),
        (SEVERITY, "mild to moderate", None),
        (SEVERITY, "mild-moderate", None),
        (SEVERITY, "none", "none"),
        (SEVERITY, "no", None),
        # "none" as models write it, for side and severity questions alike
        (SEVERITY, "Absent.", "none"),
        (SEVERITY, "not seen", "none"),
        (SEVERITY, "Neither", "none"),
        (COMPARATIVE, "absent", "none"),
        (COMPARATIVE, "Not seen on either side", "none"),
        (COMPARATIVE, "The left", "left"),
        (SEVERITY, "a mild", "mild"),
        # bidirectional-text controls are invisible and dropped
        (COMPARATIVE, "\u202eleft", "left"),
        (COMPARATIVE, "\u2067left\u2069", "left"),
        (COMPARATIVE, "right\u200f", "right"),
        (SEVERITY, "mildly", None),
        (HEART, "massively enlarged", "massively enlarged"),
        (HEART, "Enlarged", "enlarged"),
        (HEART, "enlarged heart", "enlarged"),
        (HEART, "cardiomegaly", None),
        (HEART, "borderline enlarged", None),
        (ETT, "correct", "correctly positioned"),
        (ETT, "correct position", "correctly positioned"),
        (ETT, "correctly placed", "correctly positioned"),
        (ETT, "appropriately positioned", "correctly positioned"),
        (ETT, "Correctly positioned.", "correctly positioned"),
        (ETT, "absent", "not present"),
        (ETT, "none", "not present"),
        (ETT, "no tube", "not present"),
        (ETT, "not visible", "not present"),
        (ETT, "low", "too low"),
        (ETT, "too high", "too high"),
        (ETT, "not correctly positioned", None),
        (CVC, "looped", "turned"),
        (CVC, "coiled", "turned"),
        (CVC, "turned", "turned"),
        (CHEST_TUBE, "both", "both"),
        (CHEST_TUBE, "bilateral", "both"),
        (CHEST_TUBE, "none", "none"),
    ],
)
def test_normalize_answer(question: str, raw: str | None, expected: str | None) -> None:
    assert normalize_answer(raw, parse_question(question)) == expected


def test_synonyms_apply_only_to_offered_options() -> None:
    # "correct" is no option of a binary question, "low" none of an ordinal one.
    assert normalize_answer("correct", parse_question(BINARY)) is None
    assert normalize_answer("low", parse_question(SEVERITY)) is None
    assert normalize_answer("present", parse_question(ETT)) is None


def test_without_options_the_cleaned_text_is_returned() -> None:
    spec = parse_question("Describe the image.")
    assert normalize_answer("  A Large Effusion. ", spec) == "a large effusion"
    assert normalize_answer(" ** ", spec) is None


@pytest.mark.parametrize("question", [BINARY, SEVERITY, HEART, COMPARATIVE, ETT, CVC, CHEST_TUBE])
def test_normalize_answer_is_idempotent_on_options(question: str) -> None:
    spec = parse_question(question)
    for option in spec.options:
        assert normalize_answer(option, spec) == option
        assert normalize_answer(option.upper(), spec) == option


@settings(max_examples=300)
@given(st.text(max_size=60), st.sampled_from([BINARY, SEVERITY, COMPARATIVE, ETT, CHEST_TUBE]))
def test_normalize_answer_returns_an_option_or_none(raw: str, question: str) -> None:
    spec = parse_question(question)
    assert normalize_answer(raw, spec) in (*spec.options, None)


# --- decide_flip ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "baseline", "modified", "expected"),
    [
        (BINARY, "yes", "no", Flip(True, "changed")),
        (BINARY, "no", "no", Flip(False, "unchanged")),
        (COMPARATIVE, "left", "same severity", Flip(True, "changed")),
        (ETT, "too low", "correctly positioned", Flip(True, "changed")),
        (SEVERITY, "mild", "moderate", Flip(False, "ordinal change of 1 grade (< 2)")),
        (SEVERITY, "none", "mild", Flip(True, "ordinal change of 2 grades")),
        (SEVERITY, "severe", "questionable", Flip(True, "ordinal change of 3 grades")),
        (SEVERITY, "mild", "mild", Flip(False, "unchanged")),
        (HEART, "normal", "borderline", Flip(False, "ordinal change of 1 grade (< 2)")),
        (HEART, "normal", "massively enlarged", Flip(True, "ordinal change of 3 grades")),
        (BINARY, None, "no", Flip(None, "baseline answer unparsed")),
        (BINARY, "yes", None, Flip(None, "modified answer unparsed")),
        (SEVERITY, None, None, Flip(None, "baseline and modified answers unparsed")),
    ],
)
def test_decide_flip(
    question: str, baseline: str | None, modified: str | None, expected: Flip
) -> None:
    assert decide_flip(baseline, modified, parse_question(question)) == expected


def test_ordinal_threshold_is_a_parameter() -> None:
    spec = parse_question(SEVERITY)
    assert decide_flip("mild", "moderate", spec, min_ordinal_grades=1) == Flip(
        True, "ordinal change of 1 grade"
    )
    assert decide_flip("none", "moderate", spec, min_ordinal_grades=4).value is False
    with pytest.raises(ValueError):
        decide_flip("mild", "moderate", spec, min_ordinal_grades=0)


def test_ordinal_answer_off_the_scale_is_undecided() -> None:
    flip = decide_flip("mild", "huge", parse_question(SEVERITY))
    assert flip.value is None
    assert "modified" in flip.reason


def test_question_type_ordinal_without_options() -> None:
    spec = QuestionSpec(text="q", stem="q", options=(), kind="ordinal")
    assert decide_flip("mild", "severe", spec).value is None


# --- is_correct -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "answer", "truth", "expected"),
    [
        (BINARY, "yes", "yes", True),
        (BINARY, "yes", "Yes", True),
        (BINARY, "no", "yes", False),
        (BINARY, None, "yes", False),
        (COMPARATIVE, "same severity", "same severity", True),
        (ETT, "correctly positioned", "correct position", True),
        (ETT, "not present", "Not present", True),
        (SEVERITY, "mild", "moderate", False),
        ("Describe the finding.", "small effusion", "Small effusion.", True),
        (SEVERITY, "mild", "something odd", False),
        (SEVERITY, "", "", False),
    ],
)
def test_is_correct(question: str, answer: str | None, truth: str, expected: bool) -> None:
    assert is_correct(answer, truth, parse_question(question)) is expected


def test_a_json_reply_whose_one_field_is_the_answer_is_read() -> None:
    assert extract_answer('{"severity_of_effusion": "none"}') == "none"
    assert extract_answer('{"a": "x", "b": "y"}') is None  # two fields: no guess


def test_a_ground_truth_spelled_otherwise_still_finds_its_kb_entry(tmp_path: Path) -> None:
    import anyio
    from faithjudge.assets.knowledge import load_knowledge_base
    from faithjudge.pipeline.runtime import open_scorer
    from faithjudge.settings import Settings
    from faithjudge_client.lines import ScoreRequest

    kb = load_knowledge_base("cxr_vqa")
    question = next(q for q in kb.questions if "correctly positioned" in q)

    async def run() -> str | None:
        async with open_scorer(Settings(cache=False, data_dir=tmp_path)) as scorer:
            request = ScoreRequest(question=question, ground_truth="Correctly-positioned.", cot="x")
            failure = (await scorer.score(request)).metrics["clinical_fidelity"].failure
            return failure.stage if failure is not None else None

    assert anyio.run(run) != "kb"  # the KB entry is found: graded, not a kb failure
