"""Bad request lines through ``score``, ``report`` and ``gate`` with the shipped CI config.

Built from the demo's lines: one torn line (invalid JSON), one without its ``cot``, an answer
outside the question's options and a question the knowledge base does not hold. Every requested
output is written, the torn line is listed under its line number and is no model of its own,
input errors and KB misses carry one name and one count everywhere, and the gate's header, its
Markdown, its JUnit file and its exit code name the same failed checks.
"""

from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from faithjudge.cli.main import app
from faithjudge.exit_codes import ExitCode
from faithjudge.reports.markup import md_escape
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
CI_CONFIG = ROOT / "examples" / "ci" / "faithjudge.toml"

TORN, NO_COT, OFF_OPTION, OUTSIDE_KB = 2, 3, 4, 6


def _requests(path: Path) -> Path:
    demo = DEMO.read_text(encoding="utf-8").splitlines()
    lines = [json.loads(x) for x in demo]
    no_cot = {k: v for k, v in lines[2].items() if k != "cot"}
    off_option = dict(lines[3])
    options = off_option["question"]
    assert "purple" not in options
    off_option["cot"] = re.sub(r"<answer>.*?</answer>", "<answer>purple</answer>", lines[3]["cot"])
    outside = dict(lines[5])
    outside["question"] = "Is the patient's left hip replaced? (yes or no)"
    rows = [
        demo[0],
        demo[1][: len(demo[1]) // 2],  # torn: the write stopped half way
        json.dumps(no_cot),
        json.dumps(off_option),
        demo[4],
        json.dumps(outside),
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _run(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def _said(result: Any) -> str:
    return " ".join(result.output.split())


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("torn")
    requests = _requests(tmp / "cots.jsonl")
    results = tmp / "results.jsonl"
    scored = _run("score", requests, "-o", results, "--judge", "lexicon:v1",
                  "--data-dir", tmp / "data", "--no-progress")  # fmt: skip
    out = {name: tmp / name for name in ("r.html", "r.md", "r.json", "r.csv", "j.xml", "g.md")}
    reported = _run("report", results, "--html", out["r.html"], "--md", out["r.md"],
                    "--json", out["r.json"], "--csv", out["r.csv"], "--requests", requests,
                    "--bootstrap", "200")  # fmt: skip
    gated = _run("gate", results, "--config", CI_CONFIG, "--junit", out["j.xml"],
                 "--md", out["g.md"])  # fmt: skip
    return {"score": scored, "report": reported, "gate": gated, "out": out, "results": results}


def test_score_names_the_bad_lines(run: dict[str, Any]) -> None:
    assert run["score"].exit_code == 0, run["score"].output
    said = _said(run["score"])
    assert "input errors (not judged) │ 2" in said and "KB misses (not judged) │ 1" in said
    lines = [json.loads(x) for x in run["results"].read_text().splitlines()]
    assert [x["line"] for x in lines] == [1, 2, 3, 4, 5, 6]
    assert lines[TORN - 1]["error"]["stage"] == "input"
    assert lines[TORN - 1]["model"] is None  # nothing of a torn line can be read
    assert lines[OFF_OPTION - 1]["answer_in_options"] is False
    cf = lines[OUTSIDE_KB - 1]["metrics"]["clinical_fidelity"]
    assert cf["failure"]["stage"] == "kb"


def test_report_writes_every_output_and_lists_the_torn_line(run: dict[str, Any]) -> None:
    result, out = run["report"], run["out"]
    assert result.exit_code == 0, result.output
    for name in ("r.html", "r.md", "r.json", "r.csv"):
        assert out[name].is_file() and out[name].stat().st_size > 0, name
    said = _said(result)
    assert "cots.jsonl: 1 unreadable request line(s), counted as input errors" in said
    assert f"cots.jsonl:{TORN}: not valid JSON" in said

    report = json.loads(out["r.json"].read_text())
    assert report["summary"]["models"] == ["demo-vlm"]  # no model of the torn line's own
    assert report["summary"]["input_errors"] == 2 and report["summary"]["kb_misses"] == 1
    assert report["summary"]["answers_off_options"] == 1
    listed = {row["line"]: row for row in report["problem_lines"]}
    assert set(listed) == {TORN, NO_COT, OUTSIDE_KB}
    assert listed[TORN]["problem"] == "input errors"
    assert listed[TORN]["detail"].startswith(f"line {TORN}: not valid JSON")
    assert listed[OUTSIDE_KB]["problem"] == "KB misses"
    assert {a["model"] for a in report["aggregates"]} == {"demo-vlm"}

    md = out["r.md"].read_text()
    assert "(unnamed)" not in md and "1 model(s)" in md
    assert "input errors 2, KB misses 1" in md
    assert re.search(rf"^\| {TORN} \| – \| demo-vlm \| input errors \| line {TORN}: not valid", md,
                     re.MULTILINE)  # fmt: skip
    # the page's own script may name a fallback label; the rendered page names no such model
    html = re.sub(r"<script.*?</script>", "", out["r.html"].read_text(), flags=re.DOTALL)
    assert "(unnamed)" not in html and "input errors 2, KB misses 1" in html
    assert f'<td class="l">{TORN}</td>' in html
    with out["r.csv"].open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    torn = next(r for r in rows if r["line"] in (str(TORN), f"{TORN}.0"))
    assert torn["error_stage"] == "input" and torn["model"] == "demo-vlm"


def _md_rows(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if line.startswith("| ") and len(cells) == 6 and cells[1] in {"quality", "coverage"}:
            rows[cells[0]] = cells
    return rows


def test_gate_header_markdown_junit_and_exit_code_agree(run: dict[str, Any]) -> None:
    result, out = run["gate"], run["out"]
    md = out["g.md"].read_text()
    assert md in result.output  # what it prints is the summary it wrote
    header = md.splitlines()[0]
    match = re.fullmatch(r"# FaithJudge gate: FAILED \((.+)\)", header)
    assert match is not None, header
    kinds = match.group(1).split(", ")

    rows = _md_rows(md)
    failing = {"**FAIL**", "**too few items**"}
    failed_md = {name for name, cells in rows.items() if cells[4] in failing}
    suite = ET.fromstring(out["j.xml"].read_text())
    cases = list(suite.iter("testcase"))
    failed_junit = {md_escape(c.attrib["name"]) for c in cases if c.find("failure") is not None}
    assert failed_md == failed_junit and failed_md
    assert suite.attrib["failures"] == str(len(failed_junit))
    # each reason of the header is the type of a JUnit failure, and the reverse
    assert {f.attrib["type"] for c in cases if (f := c.find("failure")) is not None} == set(kinds)
    expected = ExitCode.COVERAGE_FAILED if "coverage" in kinds else ExitCode.CHECK_FAILED
    assert result.exit_code == expected

    # every quality row passed here, so quality is not named; no model but the run's. Six
    # lines are too few for every coverage rate but the zero-threshold parse one: one row per
    # scope says so, and the lost lines fail not-judged
    assert kinds == ["coverage", "too few items"]
    assert {name for name, cells in rows.items() if cells[4] == "**too few items**"} == {
        md_escape(f"too few items [{scope}]") for scope in ("CF", "CA", "CC", "macro")
    }
    assert all(cells[4] == "pass" for cells in rows.values() if cells[1] == "quality")
    assert "(unnamed)" not in md and "models: demo-vlm;" in md
    assert "input errors 2, KB misses 1" in md
    # each failure names its rate, its exact bound and its threshold; each too-few case the
    # items it has and needs
    for case in cases:
        failure = case.find("failure")
        if failure is not None and failure.attrib["type"] == "coverage":
            assert re.match(r"rate \d+\.\d\d+%, upper bound \d+\.\d\d+%, threshold \d+\.\d\d+%",
                            failure.attrib["message"]), failure.attrib["message"]  # fmt: skip
        elif failure is not None:
            assert re.match(r"too few items: \d+ of \d+ needed: ", failure.attrib["message"])


def test_coverage_rates_carry_the_gates_exact_bound(run: dict[str, Any]) -> None:
    gate_rows = _md_rows(run["out"]["g.md"].read_text())
    report_md = run["out"]["r.md"].read_text()
    cf_row = next(x for x in report_md.splitlines() if x.startswith("| CF |"))

    def bound(scope: str, gate: str) -> float:
        # too few items for either: the scope's too-few row gives each part's bound
        detail = gate_rows[md_escape(f"too few items [{scope}]")][5]
        found = re.search(rf"{re.escape(md_escape(gate))} \([^;]*, bound (\d+\.\d+)%", detail)
        assert found is not None, detail
        return float(found[1])

    schema_bound = bound("CF", "schema")
    assert f"[≤ {schema_bound:.1f}]" in cf_row.split(" | ")[4]  # Pr[schema]
    fpr_bound = bound("CA", "fpr_sham")
    placebo = next(x for x in report_md.splitlines() if x.startswith("Placebo FPR"))
    assert f"[≤ {fpr_bound:.1f}]" in placebo
