"""Knowledge-base loading, validation and lookup."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from faithjudge.assets import asset_dir
from faithjudge.assets.knowledge import (
    entry_for_answer,
    load_knowledge_base,
    question_key,
    question_options,
)
from faithjudge.errors import ConfigError, UnknownQuestionError, UserInputError
from faithjudge_client.lines import KBEntry

LEFT = "Is there a pleural effusion on the left? (yes or no)"
STARTER = [
    LEFT,
    "Is there a pleural effusion on the right? (yes or no)",
    "Does the chest X-ray show cardiomegaly? (yes or no)",
    "Which side shows more severe pleural effusion? (right, left, same severity, none)",
    "What is the severity of pulmonary congestion? (none, questionable, mild, moderate, severe)",
    "What is the size of the heart? (normal, borderline, enlarged, massively enlarged)",
    "Is a central venous catheter visible in this image? (yes or no)",
]


def _minimal_kb() -> dict[str, Any]:
    return {
        "kb_id": "tiny",
        "version": "1",
        "description": "test KB",
        "entries": {
            LEFT: {
                "type": "binary",
                "answers": {
                    "yes": {
                        "must_all": [{"term": "left pleural effusion", "synonyms": []}],
                        "at_least_k_of": [
                            {
                                "k": 1,
                                "any_of": [
                                    {"term": "blunted left costophrenic angle"},
                                    {"term": "left meniscus sign"},
                                ],
                            }
                        ],
                    },
                    "no": {"must_all": [{"term": "no left pleural effusion"}]},
                },
            }
        },
    }


def _write(tmp_path: Path, document: Any, name: str = "kb.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_bundled_kb_holds_the_reference_questions() -> None:
    kb = load_knowledge_base()
    assert kb.id == "cxr_vqa"
    assert kb.version
    assert set(STARTER) <= set(kb.questions)
    for question in STARTER:
        entry = kb.lookup(question)
        options = question_options(question)
        assert options is not None
        assert {a.casefold() for a in entry.answers} == set(options)


def test_sha256_is_of_the_file_bytes() -> None:
    kb = load_knowledge_base("cxr_vqa")
    path = asset_dir("knowledge_base") / "cxr_vqa.json"
    assert kb.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert load_knowledge_base(path).sha256 == kb.sha256
    assert load_knowledge_base(str(path)).sha256 == kb.sha256


def test_bundled_kb_has_an_ap_cap_on_cardiomegaly() -> None:
    kb = load_knowledge_base()
    caps = entry_for_answer(kb.lookup("Does the chest X-ray show cardiomegaly?"), "yes").caps
    assert any(cap.when == {"projection": "AP"} and cap.max_score < 5 for cap in caps)


@pytest.mark.parametrize(
    "variant",
    [
        LEFT,
        LEFT.upper(),
        "  is there a   pleural effusion on the LEFT?  (yes or no) ",
        "Is there a pleural effusion on the left?",
        "is there a pleural effusion on the left?\t",
        "Is there a pleural effusion on the left? (yes/no)",
    ],
)
def test_lookup_tolerates_case_whitespace_and_option_list(variant: str) -> None:
    kb = load_knowledge_base()
    assert kb.lookup(variant) == kb.lookup(LEFT)
    assert variant in kb


@pytest.mark.parametrize(
    "question",
    [
        "Is there a pleural effusion on the left",  # the question mark matters
        "Is there pleural effusion on the left? (yes or no)",
        "Is there a pleural effusion on the middle? (yes or no)",
        "Is there a pneumothorax in the left apex? (yes or no)",
        "",
    ],
)
def test_lookup_is_exact_about_everything_else(question: str) -> None:
    kb = load_knowledge_base()
    with pytest.raises(UnknownQuestionError) as info:
        kb.lookup(question)
    assert info.value.field == "question"
    assert "no knowledge-base entry" in str(info.value)
    assert question not in kb


def test_unknown_question_message_suggests_the_closest() -> None:
    kb = load_knowledge_base()
    with pytest.raises(UnknownQuestionError) as info:
        kb.lookup("Is there a pleural effusion on the lefft?")
    assert LEFT in str(info.value)


def test_entry_for_answer_is_case_insensitive() -> None:
    kb = load_knowledge_base()
    entry = kb.lookup("What is the size of the heart?")
    assert entry_for_answer(entry, "Massively Enlarged") is entry.answers["massively enlarged"]
    assert entry_for_answer(entry, " normal ") is entry.answers["normal"]


def test_entry_for_answer_rejects_other_answers() -> None:
    entry = load_knowledge_base().lookup(LEFT)
    with pytest.raises(UserInputError) as info:
        entry_for_answer(entry, "maybe")
    assert info.value.field == "ground_truth"
    assert "yes" in str(info.value) and "no" in str(info.value)


def test_question_helpers() -> None:
    assert question_key("  What IS  it? (a, b) ") == "what is it?"
    assert question_options("Q? (yes or no)") == ("yes", "no")
    assert question_options("Q? (yes/no)") == ("yes", "no")
    assert question_options("Q? (right, left, same severity, none)") == (
        "right",
        "left",
        "same severity",
        "none",
    )
    assert question_options("Q?") is None


def test_minimal_kb_loads(tmp_path: Path) -> None:
    kb = load_knowledge_base(_write(tmp_path, _minimal_kb()))
    assert kb.id == "tiny" and kb.questions == (LEFT,)
    assert isinstance(kb.lookup(LEFT), KBEntry)


def _broken(mutate: Any) -> dict[str, Any]:
    document = copy.deepcopy(_minimal_kb())
    mutate(document)
    return document


def _yes(document: dict[str, Any]) -> dict[str, Any]:
    return document["entries"][LEFT]["answers"]["yes"]


@pytest.mark.parametrize(
    ("mutate", "node"),
    [
        (
            lambda d: _yes(d)["at_least_k_of"][0].update(k=3),
            f"entries[{LEFT!r}].answers.yes.at_least_k_of[0]",
        ),
        (
            lambda d: _yes(d)["at_least_k_of"][0].update(k=0),
            f"entries[{LEFT!r}].answers.yes.at_least_k_of[0].k",
        ),
        (
            lambda d: _yes(d)["at_least_k_of"][0].update(k="1"),
            f"entries[{LEFT!r}].answers.yes.at_least_k_of[0].k",
        ),
        (
            lambda d: _yes(d)["must_all"][0].pop("term"),
            f"entries[{LEFT!r}].answers.yes.must_all[0].term",
        ),
        (
            lambda d: _yes(d)["must_all"][0].update(term=""),
            f"entries[{LEFT!r}].answers.yes.must_all[0].term",
        ),
        (
            lambda d: _yes(d).update(caps=[{"when": {}, "max_score": 3}]),
            f"entries[{LEFT!r}].answers.yes.caps[0].when",
        ),
        (
            lambda d: _yes(d).update(caps=[{"when": {"projection": "AP"}, "max_score": 6}]),
            f"entries[{LEFT!r}].answers.yes.caps[0].max_score",
        ),
        (lambda d: _yes(d).update(extra=[]), f"entries[{LEFT!r}].answers.yes.extra"),
        (lambda d: d["entries"][LEFT].update(type="multiple"), f"entries[{LEFT!r}].type"),
        (lambda d: d["entries"][LEFT].update(answers={}), f"entries[{LEFT!r}].answers"),
        (
            lambda d: d["entries"][LEFT]["answers"].pop("no"),
            f"entries[{LEFT!r}].answers",
        ),
    ],
)
def test_malformed_entries_fail_with_the_node_path(tmp_path: Path, mutate: Any, node: str) -> None:
    path = _write(tmp_path, _broken(mutate))
    with pytest.raises(ConfigError) as info:
        load_knowledge_base(path)
    message = str(info.value)
    assert str(path) in message
    assert node in message


def test_k_larger_than_any_of_is_explained(tmp_path: Path) -> None:
    path = _write(tmp_path, _broken(lambda d: _yes(d)["at_least_k_of"][0].update(k=5)))
    with pytest.raises(ConfigError, match=r"k=5 exceeds the 2 concepts"):
        load_knowledge_base(path)


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"kb_id": "", "version": "1", "entries": {}},
        {"kb_id": "x", "version": "1", "entries": {}},
        {"kb_id": "x", "version": "1", "entries": []},
        {"kb_id": "x", "entries": {}},
        {**_minimal_kb(), "surprise": 1},
    ],
)
def test_malformed_top_level_fails(tmp_path: Path, document: Any) -> None:
    with pytest.raises(ConfigError) as info:
        load_knowledge_base(_write(tmp_path, document))
    assert "kb.json" in str(info.value)


def test_not_json_fails(tmp_path: Path) -> None:
    path = tmp_path / "kb.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a valid JSON"):
        load_knowledge_base(path)


def test_json_nested_too_deeply_fails_with_a_message(tmp_path: Path) -> None:
    path = tmp_path / "kb.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"kb\.json: not a valid JSON knowledge base: nested"):
        load_knowledge_base(path)


def test_duplicate_json_keys_fail(tmp_path: Path) -> None:
    text = json.dumps(_minimal_kb())
    text = text.replace('"version": "1"', '"version": "1", "version": "2"')
    path = tmp_path / "kb.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="duplicate key 'version'"):
        load_knowledge_base(path)


def test_questions_equal_after_normalisation_fail(tmp_path: Path) -> None:
    document = _minimal_kb()
    entry = document["entries"][LEFT]
    document["entries"]["is there a pleural effusion on the LEFT?"] = entry
    with pytest.raises(ConfigError, match="same question"):
        load_knowledge_base(_write(tmp_path, document))


def test_missing_file_and_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_knowledge_base(tmp_path / "absent.json")
    with pytest.raises(ConfigError, match="not found"):
        load_knowledge_base("no_such_kb")
    with pytest.raises(ConfigError, match="invalid knowledge-base name"):
        load_knowledge_base("..")
