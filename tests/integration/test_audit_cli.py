"""``faithjudge audit`` end to end: the shipped example, every output, and bad input files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from faithjudge.cli.main import app
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "audit" / "records.jsonl"


def _run(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def _jsonl(path: Path, records: list[dict[str, Any] | bytes]) -> Path:
    path.write_bytes(
        b"".join((r if isinstance(r, bytes) else orjson.dumps(r)) + b"\n" for r in records)
    )
    return path


def test_audit_of_the_example_writes_every_output(tmp_path: Path) -> None:
    js, md, html = tmp_path / "a.json", tmp_path / "a.md", tmp_path / "a.html"
    result = _run(
        "audit",
        EXAMPLE,
        "--json",
        js,
        "--md",
        md,
        "--html",
        html,
        "--bootstrap",
        "100",
        "--seed",
        "3",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(js.read_text())
    assert set(report["audits"]) == {"lotfinia", "zafar", "medvigil"}
    assert report["summary"]["records_unused"] == 0
    assert report["audits"]["lotfinia"]["config"]["B"] == 100
    assert report["audits"]["medvigil"]["config"]["seed"] == 3
    for model in report["audits"]["medvigil"]["models"]:
        assert model["MCS"] is not None
    text = md.read_text()
    assert "## Lotfinia: image reliance" in text and "## MedVIGIL: composite" in text
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "<script" not in page
    again = tmp_path / "b.json"
    assert (
        _run("audit", EXAMPLE, "--json", again, "--bootstrap", "100", "--seed", "3").exit_code == 0
    )
    assert again.read_text() == js.read_text()


def test_one_framework_to_stdout() -> None:
    result = _run("audit", EXAMPLE, "--framework", "zafar", "--bootstrap", "50")
    assert result.exit_code == 0, result.output
    assert "## Zafar: macro mean over benchmarks" in result.stdout
    assert "## Lotfinia" not in result.stdout


def test_a_framework_without_records_is_reported_as_skipped(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "z.jsonl",
        [
            {"model": "m", "item_id": "1", "condition": "original", "answer": "A", "gold": "A"},
            {"model": "m", "item_id": "1", "condition": "shuffle", "answer": "B"},
        ],
    )
    out = tmp_path / "z.json"
    result = _run("audit", path, "--json", out, "--bootstrap", "20")
    assert result.exit_code == 0, result.output
    audits = json.loads(out.read_text())["audits"]
    assert audits["lotfinia"]["skipped"] and audits["zafar"]["models"]


@pytest.mark.parametrize(
    ("records", "needle", "code"),
    [
        (
            [{"model": "m", "item_id": "1", "condition": "warp", "answer": "Yes"}],
            ":1: condition: unknown modification code 'warp'",
            4,
        ),
        (
            [
                {
                    "model": "m",
                    "item_id": "1",
                    "condition": "original",
                    "answer": "Yes",
                    "gold": "Yes",
                },
                {"model": "m", "item_id": "2", "condition": "swap_same_label", "answer": "Yes"},
            ],
            ":2: condition: a 'swap_same_label' record needs the original record",
            3,
        ),
        (
            [
                {"model": "m", "item_id": "1", "condition": "original", "answer": "A", "gold": "A"},
                {"model": "m", "item_id": "1", "condition": "roi_masked", "answer": "E"},
            ],
            ":2: gold: MedVIGIL probe 'roi_masked' needs a gold letter A–E",
            3,
        ),
        ([b'{"model": "m", "item_id": 1}'], ":1: item_id: Input should be a valid string", 4),
        ([b"oops"], ":1: not valid JSON", 4),
    ],
)
def test_bad_records_are_named_by_line_and_field(
    tmp_path: Path, records: list[Any], needle: str, code: int
) -> None:
    """4: not one readable record, nothing audited; 3: records that contradict each other."""
    path = _jsonl(tmp_path / "bad.jsonl", records)
    out = tmp_path / "never.json"
    result = _run("audit", path, "--json", out)
    assert result.exit_code == code
    assert needle in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_a_torn_line_is_an_input_error_and_the_rest_is_audited(tmp_path: Path) -> None:
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(EXAMPLE.read_bytes() + b'{"model": "m", "item_id": "cut-o\n')
    torn_line = len(EXAMPLE.read_bytes().splitlines()) + 1
    js, md, html = tmp_path / "a.json", tmp_path / "a.md", tmp_path / "a.html"
    result = _run("audit", torn, "--json", js, "--md", md, "--html", html, "--bootstrap", "50")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"{torn}: 1 unreadable answer record line(s), counted as input errors" in said
    assert f"{torn}:{torn_line}: not valid JSON" in said
    report = json.loads(js.read_text())
    assert report["summary"]["input_errors"] == 1
    assert [e["line"] for e in report["input_errors"]] == [torn_line]
    assert set(report["audits"]) == {"lotfinia", "zafar", "medvigil"}
    assert f"- line {torn_line}: not valid JSON" in md.read_text()
    assert "Input errors (1 line(s) not audited)" in html.read_text()


def test_missing_file_and_bad_option(tmp_path: Path) -> None:
    result = _run("audit", tmp_path / "nope.jsonl")
    assert result.exit_code == 3 and "not found" in result.output
    assert _run("audit", EXAMPLE, "--framework", "moll").exit_code == 3  # a usage error


def _request(item: str, code: str, answer: str, truth: str = "yes") -> dict[str, Any]:
    """A ScoreRequest line shaped like the VLM sidecar's output."""
    return {
        "item_id": item, "model": "vlm", "question": "Is there a pleural effusion? (yes or no)",
        "question_type": "binary", "ground_truth": truth, "cot": f"I think {answer}.",
        "answer": answer, "modification": {"code": code},
        "metadata": {
            "sidecar": {"polarity": None, "question_shown": "Is there a pleural effusion?",
                        "output": {"raw": f"<think>I think {answer}.</think> {answer}"}},
            "item": {"finding": "pleural_effusion", "sex": "F", "hospital": "ignored"},
        },
    }  # fmt: skip


def test_sidecar_requests_are_audited_directly(tmp_path: Path) -> None:
    from faithjudge_client.lines import ScoreRequest

    lines = []
    for j in range(6):
        lines.append(_request(f"c{j}", "baseline", "yes"))
        lines.append(_request(f"c{j}", "swap_same_label", "yes" if j % 2 else "no"))
        lines.append(_request(f"c{j}", "target_mask", "" if j == 0 else "no"))
    for line in lines:
        ScoreRequest.model_validate(line)  # the sidecar's own contract
    path = _jsonl(tmp_path / "requests.jsonl", lines)
    out = tmp_path / "a.json"
    result = _run("audit", path, "--from-requests", "--json", out, "--bootstrap", "50")
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    (model,) = report["audits"]["lotfinia"]["models"]
    assert model["accuracy"]["value"] == 100.0
    assert model["UAR"] == {**model["UAR"], "k": 3, "n": 6}
    assert model["CGR"]["n"] == 5  # the unparsed target answer is left out
    assert report["summary"]["parse_failures"] == 1
    bad = _jsonl(tmp_path / "bad.jsonl", [{**lines[0], "model": None}])
    result = _run("audit", bad, "--from-requests")
    assert result.exit_code == 4 and ":1: model: Field required" in " ".join(result.output.split())
