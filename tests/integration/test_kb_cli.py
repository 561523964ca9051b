"""``faithjudge kb check|template`` and the README's worked example for a question of your own.

``kb check`` finds a seeded error of each rule of knowledge_base/README.md (one case per rule,
and a rule without a case fails), passes the bundled KB, and flags a fresh template only for
the fields left to fill. The section "Your own questions" of the README is run as written.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from faithjudge.assets.kb_check import KB_RULES, PLACEHOLDER, check_knowledge_base
from faithjudge.cli.main import app
from faithjudge_client.lines import ItemResult
from typer.testing import CliRunner, Result

REPO = Path(__file__).resolve().parents[2]
QUESTION = "Is there a rib fracture on the left? (yes or no)"


def _cli(*args: object) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


# ---------------------------------------------------------------- the README's worked example


def _section(title: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


_BLOCK = re.compile(r"(?P<before>[^\n]*)\n\n```(?P<lang>\w+)\n(?P<body>.*?)\n```", re.S)
_EXIT = re.compile(r"#\s*exit (\d)")


def test_the_readme_worked_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = list(_BLOCK.finditer(_section("Your own questions")))
    ran: list[str] = []
    for block in blocks:
        body = block["body"]
        if block["lang"] == "json":
            # the text before a file's block names it: "... as `NAME`:"
            name = re.findall(r"`([\w.]+)`", block["before"])[-1]
            document = json.loads(body)
            if name.endswith(".jsonl"):
                Path(name).write_text(json.dumps(document) + "\n", encoding="utf-8")
            else:
                Path(name).write_text(body + "\n", encoding="utf-8")
            continue
        assert block["lang"] == "bash"
        for line in body.splitlines():
            command, _, comment = line.partition("#")
            words = shlex.split(command)
            assert words[0] == "faithjudge", line
            expected = int(m[1]) if (m := _EXIT.search("#" + comment)) else 0
            result = _cli(*words[1:])
            assert result.exit_code == expected, (line, result.output)
            if words[1:3] == ["kb", "check"] and expected == 1:
                # the fresh template: flagged only for what is left to fill
                assert result.stdout
                assert all(x.endswith("[fill]") for x in result.stdout.splitlines())
            ran.append(" ".join(w for w in words[1:3] if not w.endswith(".jsonl")))
    assert ran == ["kb template", "kb check", "kb check", "score", "score"]

    for output, ground_truth in (("rib_results.jsonl", "yes"), ("rib_inline_results.jsonl", "no")):
        [line] = Path(output).read_bytes().splitlines()
        item = ItemResult.model_validate_json(line)
        assert item.question == QUESTION and item.correct is True
        assert item.answer == ground_truth
        cf = item.metrics["clinical_fidelity"]
        assert cf.status == "valid", cf.failure
        assert cf.signals["basis"] == "QSK"  # graded against the entry, not without one


def test_without_an_entry_the_same_line_fails_cf_at_kb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the problem the section solves: the bundled KB has no rib fracture question
    monkeypatch.chdir(tmp_path)
    line = {"item_id": "r", "question": QUESTION, "ground_truth": "yes", "cot": "x"}
    Path("in.jsonl").write_text(json.dumps(line) + "\n")
    _cli("score", "in.jsonl", "-o", "out.jsonl", "--no-progress")
    result = ItemResult.model_validate_json(Path("out.jsonl").read_bytes())
    failure = result.metrics["clinical_fidelity"].failure
    assert failure is not None and failure.stage == "kb"
    assert "kb_entry" in failure.detail


# ---------------------------------------------------------------- one seeded error per rule


def _concept(term: str, *synonyms: str) -> dict[str, Any]:
    return {"term": term, "synonyms": list(synonyms)}


BASE: dict[str, Any] = {
    "kb_id": "rib_fractures",
    "version": "0.1.0",
    "description": "a valid KB every case below breaks in one place",
    "entries": {
        QUESTION: {
            "type": "binary",
            "answers": {
                "yes": {
                    "must_all": [_concept("left rib fracture", "fractured left rib")],
                    "at_least_k_of": [
                        {
                            "k": 1,
                            "any_of": [
                                _concept("cortical break in a left rib"),
                                _concept("displaced left rib fragment"),
                                _concept("callus around a left rib"),
                            ],
                        }
                    ],
                    "forbidden": [_concept("no left rib fracture", "left ribs intact")],
                    "caps": [{"when": {"projection": "AP"}, "max_score": 4, "note": "why"}],
                },
                "no": {
                    "must_all": [_concept("no left rib fracture", "left ribs intact")],
                    "at_least_k_of": [],
                    "forbidden": [_concept("left rib fracture", "fractured left rib")],
                    "caps": [],
                },
            },
        }
    },
}


def _answers(doc: dict[str, Any]) -> dict[str, Any]:
    answers: dict[str, Any] = doc["entries"][QUESTION]["answers"]
    return answers


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A seed that sets the node at ``path`` (keys and indices under the entry) to ``value``."""

    def seed(doc: dict[str, Any]) -> None:
        node: Any = doc["entries"][QUESTION]
        *parents, last = [int(p) if p.isdigit() else p for p in path.split("/")]
        for part in parents:
            node = node[part]
        node[last] = value

    return seed


def _duplicate(doc: dict[str, Any]) -> None:
    doc["entries"]["is there a  RIB fracture on the left?"] = copy.deepcopy(
        doc["entries"][QUESTION]
    )


def _drop_no(doc: dict[str, Any]) -> None:
    _answers(doc).pop("no")


def _append(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def seed(doc: dict[str, Any]) -> None:
        node: Any = doc["entries"][QUESTION]
        for part in path.split("/"):
            node = node[int(part) if part.isdigit() else part]
        node.append(value)

    return seed


# rule -> (seed, the field the problem names)
SEEDS: dict[str, tuple[Callable[[dict[str, Any]], None] | bytes, str]] = {
    "json": (b'{"kb_id": "a", "kb_id": "b", "version": "1", "entries": {}}', "-"),
    "top-level": (lambda doc: doc.pop("version"), "version"),
    "format": (_set("type", "boolean"), "type"),
    "k": (_set("answers/yes/at_least_k_of/0/k", 4), "answers.yes.at_least_k_of[0]"),
    "duplicate-question": (_duplicate, "-"),
    "options": (_drop_no, "answers"),
    "type": (_set("type", "ordinal"), "type"),
    "fill": (
        _set("answers/yes/must_all/0/synonyms/0", f"{PLACEHOLDER}: later"),
        "answers.yes.must_all[0].synonyms[0]",
    ),
    "must-all": (_set("answers/no/must_all", []), "answers.no.must_all"),
    "evidence": (_set("answers/yes/at_least_k_of", []), "answers.yes.at_least_k_of"),
    "forbids": (_set("answers/no/forbidden", []), "answers.no.forbidden"),
    "contradictions": (
        _set("answers/yes/forbidden", [_concept("left ribs intact")]),
        "answers.yes.forbidden",
    ),
    "label-in-evidence": (
        _append("answers/yes/at_least_k_of/0/any_of", _concept("left rib fracture present")),
        "answers.yes.at_least_k_of[0].any_of[3]",
    ),
    "synonym-drift": (
        _append("answers/no/forbidden/0/synonyms", "pneumothorax"),
        "answers.no.forbidden[0].synonyms[1]",
    ),
    "synonym-hygiene": (
        _append("answers/yes/must_all/0/synonyms", "Fractured  LEFT rib"),
        "answers.yes.must_all[0].synonyms[1]",
    ),
    "required-and-forbidden": (
        _append("answers/yes/forbidden", _concept("fractured left rib")),
        "answers.yes.must_all[0]",
    ),
    "laterality": (
        _append("answers/yes/at_least_k_of/0/any_of/0/synonyms", "rib cortical step-off"),
        "answers.yes.at_least_k_of[0].any_of[0]",
    ),
    "caps": (
        _set("answers/yes/caps/0/when", {"position": "prone"}),
        "answers.yes.caps[0].when.position",
    ),
}


def test_every_rule_has_a_seeded_case() -> None:
    assert set(SEEDS) == set(KB_RULES)


def test_the_unseeded_file_has_no_problem(tmp_path: Path) -> None:
    path = tmp_path / "kb.json"
    path.write_text(json.dumps(BASE))
    assert check_knowledge_base(path) == []


@pytest.mark.parametrize("rule", sorted(SEEDS))
def test_kb_check_finds_the_seeded_error_of_each_rule(rule: str, tmp_path: Path) -> None:
    seed, field = SEEDS[rule]
    path = tmp_path / "kb.json"
    if isinstance(seed, bytes):
        path.write_bytes(seed)
    else:
        doc = copy.deepcopy(BASE)
        seed(doc)
        path.write_text(json.dumps(doc))
    result = _cli("kb", "check", path)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines and all(line.endswith(f"[{rule}]") for line in lines), lines
    # FILE:ENTRY:FIELD: why [rule]
    assert all(line.startswith(f"{path}:") for line in lines)
    assert any(f":{field}: " in line for line in lines), (field, lines)
    assert f"{path}: {len(lines)} problem(s)" in result.stderr


def test_the_bundled_kb_passes(tmp_path: Path) -> None:
    result = _cli("kb", "check", "cxr_vqa", REPO / "knowledge_base" / "cxr_vqa.json")
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and "cxr_vqa: ok" in result.stderr


# ---------------------------------------------------------------- the template


@pytest.mark.parametrize(
    ("question", "options", "kind"),
    [
        (QUESTION, None, "binary"),
        (
            "What is the severity of left rib fractures? (none, questionable, mild, moderate, "
            "severe)",
            None,
            "ordinal",
        ),
        ("Where does the drain tip lie?", "in the pleura,in the fissure,outside", None),
    ],
)
def test_a_template_is_flagged_only_for_its_fields_to_fill(
    question: str, options: str | None, kind: str | None, tmp_path: Path
) -> None:
    out = tmp_path / "kb.json"
    args = ["kb", "template", "--question", question, "-o", out]
    result = _cli(*args, *(["--options", options] if options else []))
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.stderr
    doc = json.loads(out.read_text())
    entry = doc["entries"][question]
    if kind is None:
        assert entry["type"].startswith(PLACEHOLDER)
    else:
        assert entry["type"] == kind
    todo = out.read_text().count(f'"{PLACEHOLDER}')
    problems = check_knowledge_base(out)
    assert {p.rule for p in problems} == {"fill"}
    assert len(problems) == todo  # each field still to fill, once
    assert {p.field for p in problems if p.entry == question} >= {
        f"answers.{option}.must_all[0].term" for option in entry["answers"]
    }


def test_template_writes_to_stdout() -> None:
    result = _cli("kb", "template", "--question", QUESTION)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["entries"][QUESTION]["answers"].keys() == {"yes", "no"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["kb", "template", "--question", QUESTION, "--options", "yes,maybe"], "--options"),
        (["kb", "template", "--question", "Is it broken?"], "give --options"),
        (["kb", "template", "--question", QUESTION, "--type", "boolean"], "--type 'boolean'"),
        (["kb", "check", "missing.json"], "not found: missing.json"),
        (["kb", "check"], "Missing argument"),
        (["kb", "template"], "Missing option"),
    ],
)
def test_usage_errors_exit_3_with_a_clear_message(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _cli(*args)
    assert result.exit_code == 3, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_file_nested_too_deeply_is_a_json_problem(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    result = _cli("kb", "check", path)
    assert result.exit_code == 1, result.output
    assert "not a valid JSON knowledge base: nested too deeply [json]" in result.output
    assert "Traceback" not in result.output


def test_template_never_overwrites(tmp_path: Path) -> None:
    out = tmp_path / "kb.json"
    out.write_text("mine")
    result = _cli("kb", "template", "--question", QUESTION, "-o", out)
    assert result.exit_code == 3 and "exists" in result.stderr
    assert out.read_text() == "mine"


def test_an_ordinal_grade_that_forbids_an_adjacent_grade_is_flagged(tmp_path: Path) -> None:
    doc = json.loads((REPO / "knowledge_base" / "cxr_vqa.json").read_text())
    question = next(q for q in doc["entries"] if q.startswith("What is the severity of pulmonary"))
    answers = doc["entries"][question]["answers"]
    named = answers["moderate"]["must_all"][0]["term"]
    answers["mild"]["forbidden"].append(_concept(named))
    path = tmp_path / "kb.json"
    path.write_text(json.dumps(doc))
    problems = check_knowledge_base(path)
    assert [(p.rule, p.entry, p.field) for p in problems] == [
        (
            "contradictions",
            question,
            f"answers.mild.forbidden[{len(answers['mild']['forbidden']) - 1}]",
        )
    ]
    assert "adjacent grade 'moderate'" in problems[0].why


def test_a_yes_no_question_typed_ordinal_is_one_problem_of_the_type_rule(tmp_path: Path) -> None:
    doc = copy.deepcopy(BASE)
    doc["entries"][QUESTION]["type"] = "ordinal"
    path = tmp_path / "kb.json"
    path.write_text(json.dumps(doc))
    problems = check_knowledge_base(path)
    # not also as the contradictions of two "adjacent grades" yes and no
    assert [(p.rule, p.field) for p in problems] == [("type", "type")]
    assert "'ordinal' on a question answered yes or no: it is 'binary'" in problems[0].why


@pytest.mark.parametrize(
    ("caps", "field", "said"),
    [
        (["made_up_flag"], "answers.yes.caps[0]", "'made_up_flag' is not a cap: a cap is"),
        ("made_up_flag", "answers.yes.caps", "caps is a list of caps"),
        ([{"when": {}, "max_score": 4, "note": "why"}], "answers.yes.caps[0].when", "at least 1"),
    ],
)
def test_a_malformed_cap_is_named_under_the_caps_rule_with_the_allowed_flags(
    tmp_path: Path, caps: Any, field: str, said: str
) -> None:
    doc = copy.deepcopy(BASE)
    _answers(doc)["yes"]["caps"] = caps
    path = tmp_path / "kb.json"
    path.write_text(json.dumps(doc))
    result = _cli("kb", "check", path)
    assert result.exit_code == 1, result.output
    (line,) = result.stdout.splitlines()
    assert line.startswith(f"{path}:{QUESTION}:{field}: ") and line.endswith(" [caps]"), line
    assert said in line and "projection=AP, position=supine" in line
    assert "valid dictionary or instance of KBCap" not in line
