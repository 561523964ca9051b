"""Every report of a run names its judge: ``report`` (Markdown, HTML, JSON) and ``gate``
(Markdown, JUnit properties); a file that mixes judges says so and counts each one's lines."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from faithjudge.cli.main import app
from faithjudge.reports.judges import summarise_judges
from faithjudge_client.lines import ItemResult
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
DEMO_JUDGE = ROOT / "examples" / "demo_judge.jsonl"
GATE = "[coverage]\nmax_not_judged = 100.0\nmax_parse = 100.0\n"


def _run(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("judged")
    out = tmp / "results.jsonl"
    scored = _run("score", DEMO, "-o", out, "--judge", f"replay:{DEMO_JUDGE}",
                  "--data-dir", tmp / "data", "--no-progress")  # fmt: skip
    assert scored.exit_code == 0, scored.output
    return out


@pytest.fixture(scope="module")
def mixed(results: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo results with their last two lines graded by another judge."""
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    for line in lines[-2:]:
        line["provenance"].update(judge="openai:other-judge", judge_model="other-judge-v2")
    path = tmp_path_factory.mktemp("mixed") / "mixed.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _judge(results: Path) -> tuple[str, str, str]:
    first = ItemResult.model_validate_json(results.read_text().splitlines()[0])
    assert first.provenance is not None
    p = first.provenance
    return p.judge, p.prompt_sha256[:12], str(p.kb_sha256)[:12]


def test_the_report_names_its_judge_in_markdown_html_and_json(
    results: Path, tmp_path: Path
) -> None:
    md, page, data = tmp_path / "r.md", tmp_path / "r.html", tmp_path / "r.json"
    done = _run("report", results, "--md", md, "--html", page, "--json", data)
    assert done.exit_code == 0, done.output
    judge, prompt_sha, kb_sha = _judge(results)
    text = md.read_text()
    assert "## Judge" in text and "demo-judge" in text  # the model the judge answered as
    assert "Judge: replay:" in text and prompt_sha in text and kb_sha in text
    html_text = page.read_text()
    assert "<h2>Judge</h2>" in html_text and judge in html_text and prompt_sha in html_text
    judges = json.loads(data.read_text())["judges"]
    assert judges["mixed"] is False
    assert judges["judges"] == [
        {
            "judge": judge,
            "model": "demo-judge",
            "prompt_set": "v2",
            "prompt_sha256": judges["judges"][0]["prompt_sha256"],
            "kb_id": "cxr_vqa",
            "kb_sha256": judges["judges"][0]["kb_sha256"],
            "response_format": None,
            "settings_sha256": judges["judges"][0]["settings_sha256"],
            "lines": 6,
        }
    ]
    assert judges["judges"][0]["prompt_sha256"].startswith(prompt_sha)


def test_the_gate_names_its_judge_in_markdown_and_junit(results: Path, tmp_path: Path) -> None:
    config = tmp_path / "gate.toml"
    config.write_text(GATE)
    md, junit = tmp_path / "gate.md", tmp_path / "gate.xml"
    done = _run("gate", results, "--config", config, "--md", md, "--junit", junit)
    assert done.exit_code in (0, 1, 2), done.output
    judge, prompt_sha, _ = _judge(results)
    assert "## Judge" in md.read_text() and prompt_sha in md.read_text()
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["judge.judge"] == judge
    assert properties["judge.model"] == "demo-judge"
    assert properties["judge.prompt_set"] == "v2"
    assert properties["judge.kb_id"] == "cxr_vqa"
    assert properties["judge.mixed"] == "false"
    assert properties["judge.lines"] == "6"


def test_a_file_of_two_judges_says_so_and_counts_each(mixed: Path, tmp_path: Path) -> None:
    md, data = tmp_path / "r.md", tmp_path / "r.json"
    done = _run("report", mixed, "--md", md, "--json", data)
    assert done.exit_code == 0, done.output
    text = md.read_text()
    assert "Mixed judges" in text and "2 different judges" in text
    rows = [line for line in text.splitlines() if line.startswith("| 4 |") or
            line.startswith("| 2 |")]  # fmt: skip
    assert len(rows) == 2 and "other-judge-v2" in rows[1]
    judges = json.loads(data.read_text())["judges"]
    assert judges["mixed"] is True
    assert [(j["model"], j["lines"]) for j in judges["judges"]] == [
        ("demo-judge", 4),
        ("other-judge-v2", 2),
    ]
    config = tmp_path / "gate.toml"
    config.write_text(GATE)
    junit = tmp_path / "gate.xml"
    _run("gate", mixed, "--config", config, "--junit", junit)
    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert properties["judge.mixed"] == "true"
    assert properties["judge.2.model"] == "other-judge-v2" and properties["judge.2.lines"] == "2"


def test_lines_that_never_reached_a_judge_are_counted_apart(results: Path) -> None:
    lines = [ItemResult.model_validate_json(x) for x in results.read_text().splitlines()]
    unread = ItemResult.model_validate({"line": 99, "error": {"stage": "input", "detail": "x"}})
    summary = summarise_judges([*lines, unread])
    assert not summary.mixed and summary.without_judge == 1
    assert "1 line(s) never reached a judge" in summary.headline()
    assert summarise_judges([unread]).headline().startswith("No line names its judge")


def test_a_judge_name_from_the_lines_is_escaped(results: Path, tmp_path: Path) -> None:
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    for line in lines:
        line["provenance"]["judge_model"] = "<script>x</script>|**"
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text("".join(json.dumps(x) + "\n" for x in lines))
    md, page = tmp_path / "r.md", tmp_path / "r.html"
    assert _run("report", hostile, "--md", md, "--html", page).exit_code == 0
    assert "<script>" not in page.read_text() and "&lt;script&gt;x" in page.read_text()
    assert "\\<script\\>x\\</script\\>\\|\\*\\*" in md.read_text()


def _unanswered(line: dict[str, Any], **provenance: Any) -> dict[str, Any]:
    """``line`` as if the judge never answered it: every grade failed at transport, and the
    provenance names no model and no response format."""
    failed = {"stage": "transport", "detail": "the judge did not answer"}
    metrics = {
        name: {**graded, "status": "invalid", "score": None, "normalized": None,
               "signals": {}, "quotes": [], "rationale": None, "failure": failed}
        for name, graded in line["metrics"].items()
    }  # fmt: skip
    prov = line["provenance"] | {"judge_model": None, "response_format": None} | provenance
    return line | {"metrics": metrics, "confidence_calibration": None, "provenance": prov}


def test_lines_no_judge_answered_are_no_second_judge(results: Path, tmp_path: Path) -> None:
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    lines[-2:] = [_unanswered(line) for line in lines[-2:]]
    parsed = [ItemResult.model_validate_json(json.dumps(line)) for line in lines]
    summary = summarise_judges(parsed)
    assert not summary.mixed and summary.answered and summary.without_answer == 0
    assert [(judge.model, count) for judge, count in summary.judges] == [("demo-judge", 6)]
    assert summary.headline().startswith("Judge: replay:")
    path = tmp_path / "half.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    config, junit = tmp_path / "gate.toml", tmp_path / "gate.xml"
    config.write_text(GATE)
    _run("gate", path, "--config", config, "--junit", junit)
    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert properties["judge.mixed"] == "false" and properties["judge.lines"] == "6"


def test_unanswered_lines_of_another_configuration_are_counted_apart(results: Path) -> None:
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    lines[-1] = _unanswered(lines[-1], judge="openai:never-answered")
    summary = summarise_judges(ItemResult.model_validate_json(json.dumps(line)) for line in lines)
    assert not summary.mixed and summary.without_answer == 1
    assert [count for _, count in summary.judges] == [5]
    assert "1 line(s) hold no answer of any judge" in summary.headline()
    assert summary.to_json()["lines_without_answer"] == 1


def test_a_file_no_judge_answered_names_where_its_lines_were_sent(results: Path) -> None:
    lines = [_unanswered(json.loads(x)) for x in results.read_text().splitlines()]
    summary = summarise_judges(ItemResult.model_validate_json(json.dumps(line)) for line in lines)
    assert not summary.mixed and not summary.answered
    assert summary.headline().startswith("No judge answered any line (they were sent to replay:")
    assert ("judge.answered", "false") in summary.properties()
