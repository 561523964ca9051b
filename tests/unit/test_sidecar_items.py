"""ITEMS.jsonl lines and the --modifications list."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from faithjudge.errors import UserInputError
from faithjudge.sidecar.generate import parse_modifications
from faithjudge.sidecar.items import ItemLineError, SidecarItem, parse_item_line, read_items

Q = "Is there a pleural effusion on the right? (yes or no)"


def _item(**kw: object) -> dict[str, object]:
    return {"item_id": "i1", "image": "a.png", "question": Q, "ground_truth": "Yes", **kw}


def test_item_options_come_from_the_question_and_truth_is_canonical() -> None:
    item = SidecarItem.model_validate(_item())
    assert item.spec.options == ("yes", "no")
    assert item.spec.kind == "binary"
    assert item.canonical_truth == "yes"
    perturb_item = item.to_perturb_item("no")
    assert perturb_item.options == ("yes", "no")
    assert perturb_item.ground_truth == "yes"
    assert perturb_item.target_answer == "no"


def test_explicit_options_serve_questions_without_an_option_list() -> None:
    item = SidecarItem.model_validate(
        _item(question="Which side is worse?", options=["Right", "Left"], ground_truth="left")
    )
    assert item.spec.options == ("right", "left")


@pytest.mark.parametrize(
    ("change", "field_hint"),
    [
        ({"ground_truth": "maybe"}, "ground_truth 'maybe' is not one of the options"),
        ({"question": "Is it bad?"}, "no option list"),
        ({"item_id": ""}, "item_id"),
        ({"unknown": 1}, "unknown"),
        ({"mask_box": [0.5, 0.5, 0.2, 0.9]}, "mask_box"),
        ({"question_type": "essay"}, "question_type"),
    ],
)
def test_bad_lines_name_the_line_and_the_problem(
    change: dict[str, object], field_hint: str
) -> None:
    result = parse_item_line(orjson.dumps(_item(**change)), 7)
    assert isinstance(result, ItemLineError)
    assert result.line == 7
    assert result.reason.startswith("line 7:")
    assert field_hint in result.reason


def test_not_json_and_not_an_object_are_line_errors() -> None:
    assert "not valid JSON" in parse_item_line(b"{oops", 2).reason  # type: ignore[union-attr]
    assert "JSON object" in parse_item_line(b"[1, 2]", 3).reason  # type: ignore[union-attr]


def test_read_items_skips_blank_lines_and_keeps_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_bytes(orjson.dumps(_item()) + b"\n\n" + b"nope\n" + orjson.dumps(_item()) + b"\n")
    entries = list(read_items(path))
    assert [n for n, _ in entries] == [1, 3, 4]
    assert isinstance(entries[1][1], ItemLineError)
    assert isinstance(entries[2][1], SidecarItem)


def test_bias_cues_without_polarity_run_both_and_order_is_kept() -> None:
    runs = parse_modifications("TB-RAD, VH-BB,SHAM")
    assert [r.label for r in runs] == ["TB-RAD:aligned", "TB-RAD:misleading", "VH-BB", "SHAM"]


def test_modifications_accept_catalogue_ids_aliases_and_repeats() -> None:
    runs = parse_modifications(["text_hint_leaked:misleading", "placebo", "SHAM", "baseline"])
    assert [r.label for r in runs] == ["TB-LA:misleading", "SHAM"]
    assert parse_modifications([]) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("TB-XX", "unknown modification code"),
        ("VH-BB:aligned", "points at no answer"),
        ("TB-RAD:sideways", "'aligned' or 'misleading'"),
        ("baseline:aligned", "baseline takes no polarity"),
    ],
)
def test_bad_modifications_are_user_errors(text: str, message: str) -> None:
    with pytest.raises(UserInputError, match=message) as info:
        parse_modifications(text)
    assert info.value.field == "modifications"


def test_params_are_keyed_by_canonical_code() -> None:
    from faithjudge.sidecar.generate import parse_params

    assert parse_params('{"occlude_box": {"x": 1}, "blur-sigma": {"sigma": 4}}') == {
        "VO-BB": {"x": 1},
        "blur_sigma": {"sigma": 4},
    }
    assert parse_params(None) == {} and parse_params(" ") == {}
    for bad, message in (("{", "not valid JSON"), ('{"VO-BB": 3}', "map codes to objects"),
                         ('{"NOPE": {}}', "unknown modification code")):  # fmt: skip
        with pytest.raises(UserInputError, match=message) as info:
            parse_params(bad)
        assert info.value.field == "params"
