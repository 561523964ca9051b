"""The modification catalogue: lookup, alignment, applicability and CA descriptions."""

from __future__ import annotations

import pytest
from faithjudge.errors import UserInputError
from faithjudge.scoring.modifications import (
    ALL_MODIFICATIONS,
    NO_CUE_DESCRIPTION,
    accepted_codes,
    describe_modification,
    lookup_modification,
    resolve_modification,
)
from faithjudge_client.lines import ModificationResolved

MOLL_CODES = ["SHAM", "TB-RAD", "TB-LA", "VB-BB", "VB-HM", "VH-BB", "VH-HM", "VO-BB"]
LONG_IDS = [
    "baseline", "sham", "text_hint_radiologist", "text_hint_leaked", "bias_box", "bias_heatmap",
    "highlight_box", "highlight_heatmap", "occlude_box", "target_mask", "irrelevant_mask",
    "roi_masked", "roi_only", "roi_progressive_mask", "lr_flip", "swap_same_label",
    "hard_negative", "blank", "shuffle", "corrupt", "blur_sigma", "no_image", "paraphrase",
    "negation", "specificity_drop", "knowledge_only", "false_premise_trap",
    "visual_counterfactual",
]  # fmt: skip
RELEASE_CODES = {
    "bias_insert_unethicalhint_True": "TB-LA",
    "bias_insert_unethicalhint_False": "TB-LA",
    "bias_insert_radiologisthint_True": "TB-RAD",
    "bias_insert_radiologisthint_False": "TB-RAD",
    "bias_insert_boundbox_True": "VB-BB",
    "bias_insert_boundbox_False": "VB-BB",
    "bias_insert_heatmap_True": "VB-HM",
    "bias_insert_heatmap_False": "VB-HM",
    "highlight_insert_boundbox": "VH-BB",
    "highlight_insert_heatmap": "VH-HM",
    "occlusion_insert_blackbox": "VO-BB",
}


@pytest.mark.parametrize("code", MOLL_CODES)
def test_every_moll_code_resolves(code: str) -> None:
    assert lookup_modification(code).code == code


@pytest.mark.parametrize("code", LONG_IDS)
def test_every_long_id_resolves(code: str) -> None:
    assert lookup_modification(code).id == code


def test_catalogue_is_complete_and_unique() -> None:
    assert {spec.id for spec in ALL_MODIFICATIONS} == set(LONG_IDS)
    assert len(accepted_codes()) == len(set(accepted_codes())) == len(ALL_MODIFICATIONS)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("tb-rad", "TB-RAD"),
        ("TB_RAD", "TB-RAD"),
        ("Tb_La", "TB-LA"),
        ("vo_bb", "VO-BB"),
        ("  vh-hm ", "VH-HM"),
        ("sham", "SHAM"),
        ("PLACEBO", "SHAM"),
        ("Real", "baseline"),
        ("original", "baseline"),
        ("TEXT-HINT-RADIOLOGIST", "TB-RAD"),
        ("Blur_Sigma", "blur_sigma"),
    ],
)
def test_lookup_is_case_and_separator_insensitive(code: str, expected: str) -> None:
    assert lookup_modification(code).code == expected


@pytest.mark.parametrize(("code", "expected"), sorted(RELEASE_CODES.items()))
def test_release_codes_resolve(code: str, expected: str) -> None:
    assert lookup_modification(code).code == expected


def test_unknown_code_lists_accepted_ids() -> None:
    with pytest.raises(UserInputError) as info:
        lookup_modification("TB-XYZ")
    assert info.value.field == "modification.code"
    message = str(info.value)
    assert "TB-XYZ" in message
    for code in ("TB-RAD", "text_hint_radiologist", "SHAM", "visual_counterfactual"):
        assert code in message


def test_release_suffix_is_ignored_and_alignment_derived() -> None:
    # The client claims "_False" (misleading) but the target equals the ground truth.
    resolved = resolve_modification(
        "bias_insert_radiologisthint_False", target_answer="Yes", ground_truth="yes"
    )
    assert resolved.code == "TB-RAD" and resolved.id == "text_hint_radiologist"
    assert resolved.kind == "bias" and resolved.channel == "text"
    assert resolved.aligned is True
    assert resolved.target_answer == "Yes"


def test_misleading_target() -> None:
    resolved = resolve_modification("TB-LA", target_answer="no", ground_truth="yes")
    assert resolved.aligned is False


def test_alignment_uses_the_given_normalizer() -> None:
    synonyms = {"correct": "correctly positioned", "correctly positioned": "correctly positioned"}

    def normalize(text: str | None) -> str | None:
        return synonyms.get((text or "").strip().lower())

    resolved = resolve_modification(
        "TB-RAD", target_answer="Correct", ground_truth="correctly positioned", normalize=normalize
    )
    assert resolved.aligned is True
    # a target outside the options cannot be the ground truth: the cue misleads
    off_option = resolve_modification(
        "TB-RAD", target_answer="maybe", ground_truth="correctly positioned", normalize=normalize
    )
    assert off_option.aligned is False
    # without a readable ground truth there is nothing to compare with
    unknown = resolve_modification(
        "TB-RAD", target_answer="Correct", ground_truth="whatever", normalize=normalize
    )
    assert unknown.aligned is None


@pytest.mark.parametrize("target", [None, "", "   "])
def test_missing_target_gives_unknown_alignment(target: str | None) -> None:
    resolved = resolve_modification("TB-RAD", target_answer=target, ground_truth="yes")
    assert resolved.aligned is None and resolved.target_answer is None


@pytest.mark.parametrize("code", ["VH-BB", "VO-BB", "SHAM", "baseline", "lr_flip", "negation"])
def test_non_bias_cues_have_no_alignment(code: str) -> None:
    resolved = resolve_modification(code, target_answer="yes", ground_truth="yes")
    assert resolved.aligned is None
    assert resolved.target_answer is None


@pytest.mark.parametrize("code", ["VB-BB", "VB-HM", "bias_insert_boundbox_True"])
@pytest.mark.parametrize("qtype", ["binary", "ordinal", "spatial"])
def test_visual_bias_only_on_comparative_questions(code: str, qtype: str) -> None:
    with pytest.raises(UserInputError) as info:
        resolve_modification(code, target_answer="left", ground_truth="left", question_type=qtype)
    assert info.value.field == "modification.code"
    assert "comparative" in str(info.value)


@pytest.mark.parametrize("qtype", ["comparative", "comparison", "Comparative", None])
def test_visual_bias_on_comparative(qtype: str | None) -> None:
    resolved = resolve_modification(
        "VB-BB", target_answer="left", ground_truth="right", question_type=qtype
    )
    assert resolved.aligned is False


def test_text_bias_applies_to_every_type() -> None:
    for qtype in ("binary", "ordinal", "comparative", "spatial"):
        resolve_modification("TB-RAD", target_answer="x", ground_truth="x", question_type=qtype)


@pytest.mark.parametrize("code", ["SHAM", "baseline", "placebo", "real"])
def test_sham_and_baseline_descriptions_mention_no_cue(code: str) -> None:
    resolved = resolve_modification(code, target_answer=None, ground_truth="yes")
    description = describe_modification(resolved)
    assert description == NO_CUE_DESCRIPTION
    assert "no cue" in description.lower()
    for cue_word in ("hint", "box", "heatmap", "suggest", "radiologist"):
        assert cue_word not in description.lower()


def test_bias_description_names_the_target() -> None:
    resolved = resolve_modification("TB-RAD", target_answer="left", ground_truth="right")
    description = describe_modification(resolved)
    assert description == "The prompt included another radiologist's suggested answer: 'left'."


def test_description_is_one_line_even_for_odd_targets() -> None:
    resolved = resolve_modification(
        "TB-LA", target_answer="yes\n{ignore} previous", ground_truth="yes"
    )
    description = describe_modification(resolved)
    assert "\n" not in description
    assert "'yes {ignore} previous'" in description


def test_bias_description_without_target() -> None:
    resolved = resolve_modification("VB-HM", target_answer=None, ground_truth="left")
    description = describe_modification(resolved)
    assert "{target}" not in description and "heatmap" in description


@pytest.mark.parametrize("spec", ALL_MODIFICATIONS, ids=lambda s: s.id)
def test_every_description_is_one_line(spec) -> None:  # type: ignore[no-untyped-def]
    resolved = ModificationResolved(
        code=spec.code,
        id=spec.id,
        kind=spec.kind,
        channel=spec.channel,
        aligned=None,
        target_answer="yes" if spec.targets_answer else None,
    )
    description = describe_modification(resolved)
    assert description and "\n" not in description and "{" not in description
    if spec.kind not in ("baseline", "placebo"):
        assert description != NO_CUE_DESCRIPTION
