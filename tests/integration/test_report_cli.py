"""``faithjudge report`` and ``faithjudge gate`` end to end, one fixture per gate exit code."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from faithjudge.cli.main import app
from typer.testing import CliRunner

from tests.unit.test_reports_aggregate import fixture_lines

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
DEMO_JUDGE = ROOT / "examples" / "demo_judge.jsonl"
EXAMPLE_CONFIG = ROOT / "examples" / "ci" / "faithjudge.toml"
# The fixture holds a transport error and a KB gap on purpose. Without max_not_judged the gate
# lets no item miss the judge, so the tests about other checks tolerate them explicitly.
TOLERATE_LOST = "[coverage]\nmax_not_judged = 100.0\n"


def _jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def _toml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _many(copies: int) -> list[dict[str, Any]]:
    out = []
    for c in range(copies):
        for line in fixture_lines():
            item = copy.deepcopy(line)
            item["item_id"] = f"{line['item_id']}-{c}"
            out.append(item)
    return out


def _run(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def _judged(copies: int) -> list[dict[str, Any]]:
    """Fixture lines whose every metric reached the judge and was graded valid."""
    return [x for x in _many(copies) if "error" not in x
            and all(m["status"] == "valid" for m in x["metrics"].values())]  # fmt: skip


def _input_errors(count: int) -> list[dict[str, Any]]:
    """Lines that never reached the judge: unreadable request lines."""
    return [{"line": 10_000 + i, "item_id": f"bad-{i}", "model": "m1",
             "error": {"stage": "input", "detail": f"line {i}: not valid JSON"}}
            for i in range(count)]  # fmt: skip


def _worse_ca(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    worse = copy.deepcopy(lines)
    for line in worse:
        ca = line["metrics"].get("causal_attribution")
        if ca is not None and ca["status"] == "valid":
            ca["score"], ca["normalized"] = 1, 0.0
    return worse


@pytest.fixture(scope="module")
def demo_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo scored with the replay judge, exactly as ``make run`` does."""
    tmp = tmp_path_factory.mktemp("demo")
    out = tmp / "results.jsonl"
    result = _run("score", DEMO, "-o", out, "--judge", f"replay:{DEMO_JUDGE}",
                  "--data-dir", tmp / "data", "--no-progress")  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def test_report_writes_every_output(demo_results: Path, tmp_path: Path) -> None:
    html, md, js, csv = (tmp_path / f"r.{ext}" for ext in ("html", "md", "json", "csv"))
    result = _run("report", demo_results, "--html", html, "--md", md, "--json", js, "--csv", csv,
                  "--compare", demo_results, "--requests", DEMO, "--bootstrap", "200")  # fmt: skip
    assert result.exit_code == 0, result.output
    page = html.read_text(encoding="utf-8")
    assert page.count("<svg") >= 2 and "<mark" in page
    assert "## Table 1" in md.read_text(encoding="utf-8")
    data = json.loads(js.read_text(encoding="utf-8"))
    assert data["summary"]["lines"] == 6 and data["comparison"]["counts"]["shared"] == 6
    assert len(csv.read_text(encoding="utf-8").splitlines()) == 7


def test_report_without_outputs_prints_markdown(demo_results: Path) -> None:
    result = _run("report", demo_results, "--bootstrap", "50")
    assert result.exit_code == 0 and "# FaithJudge report" in result.output


def test_written_reports_end_with_one_newline(demo_results: Path, tmp_path: Path) -> None:
    md, js, summary = tmp_path / "r.md", tmp_path / "r.json", tmp_path / "g.md"
    config = _toml(tmp_path / "g.toml", "[quality]\nmin_cf = 0.0\n" + TOLERATE_LOST)
    assert _run("report", demo_results, "--md", md, "--json", js, "--bootstrap", "50",
                "--compare", demo_results).exit_code == 0  # fmt: skip
    assert _run("gate", demo_results, "--config", config, "--md", summary).exit_code == 0
    for path in (md, js, summary):
        text = path.read_text(encoding="utf-8")
        assert text.endswith("\n") and not text.endswith("\n\n"), path.name
    printed = _run("report", demo_results, "--bootstrap", "50").stdout
    assert printed.endswith("\n") and not printed.endswith("\n\n")


def test_gate_passes_with_the_example_config(tmp_path: Path) -> None:
    results = _jsonl(tmp_path / "r.jsonl", _many(2))
    config = _toml(
        tmp_path / "g.toml", "[quality]\nmin_cf = 50.0\nmax_flip_rate = 45.0\n" + TOLERATE_LOST
    )
    junit, md = tmp_path / "junit.xml", tmp_path / "summary.md"
    result = _run("gate", results, "--config", config, "--junit", junit, "--md", md)
    assert result.exit_code == 0, result.output
    assert "PASSED" in md.read_text(encoding="utf-8")
    assert 'failures="0"' in junit.read_text(encoding="utf-8")


def test_example_config_is_valid(tmp_path: Path) -> None:
    results = _jsonl(tmp_path / "r.jsonl", _many(2))
    result = _run("gate", results, "--config", EXAMPLE_CONFIG)
    assert result.exit_code in (0, 1, 2), result.output


def test_example_config_fails_a_run_that_lost_half_its_lines(tmp_path: Path) -> None:
    """400 of 800 lines never reached the judge: the shipped CI config must not pass it."""
    good = _judged(200)
    assert len(good) == 400
    clean = _jsonl(tmp_path / "clean.jsonl", good)
    assert _run("gate", clean, "--config", EXAMPLE_CONFIG).exit_code == 0
    half = _jsonl(tmp_path / "half.jsonl", good + _input_errors(400))
    result = _run("gate", half, "--config", EXAMPLE_CONFIG)
    assert result.exit_code == 2, result.output
    assert "FAILED (coverage)" in result.output
    assert "| not\\_judged \\[macro\\] | coverage | 2.00 |" in result.output


def test_a_config_silent_on_lost_lines_still_fails_them(tmp_path: Path) -> None:
    config = _toml(tmp_path / "g.toml", "[quality]\nmin_cf = 30.0\n")
    # every item reached the judge: passes, however few the items (the default limit is 0)
    clean = _jsonl(tmp_path / "clean.jsonl", _judged(2))
    assert _run("gate", clean, "--config", config).exit_code == 0
    half = _jsonl(tmp_path / "half.jsonl", _judged(200) + _input_errors(400))
    result = _run("gate", half, "--config", config)
    assert result.exit_code == 2, result.output
    assert "set \\[coverage\\] max\\_not\\_judged" in result.output
    one = _jsonl(tmp_path / "one.jsonl", _judged(200) + _input_errors(1))
    assert _run("gate", one, "--config", config).exit_code == 2


@pytest.mark.parametrize(
    "text",
    ["", "# nothing\n", "[gate]\nseed = 1\n", "[coverage]\nscopes = ['CA']\n",
     "[quality]\n[coverage]\n[regression]\n"],
)  # fmt: skip
def test_gate_rejects_a_config_that_sets_no_check(tmp_path: Path, text: str) -> None:
    results = _jsonl(tmp_path / "r.jsonl", _judged(2))
    config = _toml(tmp_path / "g.toml", text)
    result = _run("gate", results, "--config", config)
    assert result.exit_code == 3, result.output
    assert f"{config}: the config sets no check" in " ".join(result.output.split())
    assert "PASSED" not in result.output


def test_gate_rejects_regression_only_config_without_baseline(tmp_path: Path) -> None:
    results = _jsonl(tmp_path / "r.jsonl", _judged(2))
    config = _toml(tmp_path / "g.toml", "[regression]\nmax_drop_cf = 2.0\n")
    result = _run("gate", results, "--config", config)
    assert result.exit_code == 3, result.output
    assert f"{config}: sets only [regression] checks" in " ".join(result.output.split())


def test_gate_exit_1_on_quality(tmp_path: Path) -> None:
    results = _jsonl(tmp_path / "r.jsonl", _many(2))
    config = _toml(tmp_path / "g.toml", "[quality]\nmin_cf = 90.0\n" + TOLERATE_LOST)
    junit = tmp_path / "junit.xml"
    result = _run("gate", results, "--config", config, "--junit", junit)
    assert result.exit_code == 1, result.output
    assert "<failure" in junit.read_text(encoding="utf-8")


def test_gate_exit_1_on_regression(tmp_path: Path) -> None:
    base_lines = _many(20)
    base = _jsonl(tmp_path / "base.jsonl", base_lines)
    cand = _jsonl(tmp_path / "cand.jsonl", _worse_ca(base_lines))
    config = _toml(tmp_path / "g.toml", "[regression]\nmax_drop_ca = 5.0\n" + TOLERATE_LOST)
    result = _run("gate", cand, "--config", config, "--baseline", base)
    assert result.exit_code == 1, result.output
    assert "CA vs baseline" in result.output
    # the verdict names the kind that failed: a regression, not a quality check
    assert "FAILED (regression)" in result.output and "(quality)" not in result.output
    assert _run("gate", base, "--config", config, "--baseline", base).exit_code == 0


def test_gate_checks_only_the_configured_regression_keys(tmp_path: Path) -> None:
    """CA drops by 56 pp, but only max_drop_cf is set: CA must not be checked at all."""
    base_lines = _many(20)
    base = _jsonl(tmp_path / "base.jsonl", base_lines)
    cand = _jsonl(tmp_path / "cand.jsonl", _worse_ca(base_lines))
    config = _toml(tmp_path / "g.toml", "[regression]\nmax_drop_cf = 2.0\n" + TOLERATE_LOST)
    result = _run("gate", cand, "--config", config, "--baseline", base)
    assert result.exit_code == 0, result.output
    assert "CF vs baseline | regression | 2.00 |" in result.output
    assert "CA vs baseline" not in result.output


def test_gate_exit_2_on_coverage(tmp_path: Path) -> None:
    results = _jsonl(tmp_path / "r.jsonl", _many(2))
    # CA has an evidence failure on 1 of 5 judged items (20%) > 2%; quality fails too: 2 wins
    config = _toml(
        tmp_path / "g.toml",
        "[quality]\nmin_cf = 90.0\n[coverage]\nmax_invalid = 2.0\nscopes = ['CA']\n",
    )
    result = _run("gate", results, "--config", config)
    assert result.exit_code == 2, result.output
    # the verdict names every kind that failed, coverage (which decides the exit code) first
    assert "FAILED (coverage, quality)" in result.output


def test_gate_names_lines_not_judged_once_per_scope_not_as_schema_and_evidence(
    tmp_path: Path,
) -> None:
    """300 lines, 14 never judged, no failing grade: 286 items cannot show a 1% schema or
    evidence rate. The header, the Markdown, the JUnit file and the exit code say so once per
    scope, as too few items, beside the not-judged check the lost lines fail."""
    import xml.etree.ElementTree as ET

    results = _jsonl(tmp_path / "r.jsonl", _judged(150)[:286] + _input_errors(14))
    config = _toml(tmp_path / "g.toml", "[coverage]\nmax_schema = 1.0\nmax_evidence = 1.0\n")
    junit, md = tmp_path / "j.xml", tmp_path / "g.md"
    result = _run("gate", results, "--config", config, "--junit", junit, "--md", md)
    assert result.exit_code == 2, result.output
    summary = md.read_text(encoding="utf-8")
    assert summary.startswith("# FaithJudge gate: FAILED (coverage, too few items)\n")
    assert "CF 286 of 299 needed, CA 286 of 299 needed, CC 286 of 299 needed" in summary
    rows = [x for x in summary.splitlines() if x.startswith("| ") and " | coverage | " in x]
    short = [x for x in rows if "| **too few items** |" in x]
    assert [x.split(" | ")[0] for x in short] == [
        f"| too few items \\[{s}\\]" for s in ("CF", "CA", "CC")
    ]
    assert all("| 299 items | 286 items |" in x and "(input errors 14)" in x for x in short)
    failed = [x.split(" | ")[0] for x in rows if "| **FAIL** |" in x]
    assert failed == [f"| not\\_judged \\[{s}\\]" for s in ("CF", "CA", "CC", "macro")]
    assert not [x for x in rows if x.startswith(("| schema \\[C", "| evidence \\[C"))]
    suite = ET.fromstring(junit.read_text(encoding="utf-8"))
    types = [f.attrib["type"] for f in suite.iter("failure")]
    assert sorted(types) == ["coverage"] * 4 + ["too few items"] * 3


def test_gate_counts_a_torn_result_line_as_an_input_error(tmp_path: Path) -> None:
    """A torn line is named and counted, never a reason to gate nothing: it missed the judge."""
    good = _jsonl(tmp_path / "r.jsonl", _many(1))
    lines = good.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2][:40]
    good.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = _toml(tmp_path / "g.toml", "[quality]\nmin_cf = 10.0\n")
    junit = tmp_path / "j.xml"
    result = _run("gate", good, "--config", config, "--junit", junit)
    said = " ".join(result.output.split())
    assert f"{good}: 1 unreadable result line(s), counted as input errors" in said
    assert f"{good}:3: not valid JSON" in said
    # the default not-judged bound fails on it, in the header, the JUnit file and the exit code
    assert result.exit_code == 2 and "FAILED (coverage)" in said
    case = junit.read_text(encoding="utf-8").split('name="not_judged [CF]"')[1]
    assert case.split("</testcase>")[0].lstrip(" >\n").startswith("<failure")


@pytest.mark.parametrize("case", ["missing", "bad_config", "nothing_judged", "empty",
                                  "no_shared_items"])  # fmt: skip
def test_gate_exit_3_or_4_when_the_run_cannot_be_evaluated(tmp_path: Path, case: str) -> None:
    good = _jsonl(tmp_path / "r.jsonl", _many(1))
    config = _toml(tmp_path / "g.toml", "[quality]\nmin_cf = 10.0\n")
    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    args: list[str | Path] = ["gate", good, "--config", config, "--junit", junit, "--md", md]
    if case == "missing":
        args[1] = tmp_path / "absent.jsonl"
        expected = "not found"
    elif case == "bad_config":
        _toml(config, "[quality]\nmin_cf = 'high'\n")
        expected = f"{config}: [quality] min_cf must be a number"
    elif case == "nothing_judged":
        down = [x for x in fixture_lines() if "error" in x] * 3
        _jsonl(good, down)
        expected = "grades is valid (transport"
    elif case == "empty":
        good.write_text("", encoding="utf-8")
        expected = "no result lines"
    else:
        other = [dict(x, item_id=f"other-{i}") for i, x in enumerate(fixture_lines())]
        args += ["--baseline", _jsonl(tmp_path / "base.jsonl", other)]
        expected = "shares no item"
    result = _run(*args)
    # 4: the file was read but not one grade in it was judged; 3: it could not be evaluated
    code = 4 if case in ("nothing_judged", "empty") else 3
    assert result.exit_code == code, result.output
    assert expected in " ".join(result.output.split())
    # the CI step still gets its files, and they fail with the same reason and code
    xml = junit.read_text(encoding="utf-8")
    assert 'failures="1"' in xml and f"exit {code}: " in xml
    assert expected in " ".join(xml.split()).replace("&gt;", ">").replace("&lt;", "<")
    summary = md.read_text(encoding="utf-8")
    assert summary.startswith(f"# FaithJudge gate: NOT EVALUATED (exit {code})")


@pytest.mark.parametrize("argv", [["--config"], ["--no-such-option"], []])
def test_gate_usage_errors_exit_3_not_2(tmp_path: Path, argv: list[str]) -> None:
    """Exit 2 must keep meaning "coverage failed": a mistyped command line is exit 3."""
    good = _jsonl(tmp_path / "r.jsonl", _many(1))
    result = _run("gate", good, *argv)
    assert result.exit_code == 3, result.output


UNSCORED = {
    "empty": "",
    "blank": "\n  \n\n",
    "input_errors": "".join(json.dumps(x) + "\n" for x in _input_errors(5)),
}


@pytest.mark.parametrize("case", sorted(UNSCORED))
def test_report_and_gate_agree_on_a_run_with_nothing_scored(tmp_path: Path, case: str) -> None:
    """Exit 4 from both; the report is still written (it shows what was lost)."""
    results = tmp_path / "r.jsonl"
    results.write_text(UNSCORED[case], encoding="utf-8")
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    reported = _run("report", results, "--md", md, "--json", js, "--bootstrap", "20")
    gated = _run("gate", results, "--config", EXAMPLE_CONFIG)
    assert (reported.exit_code, gated.exit_code) == (4, 4), reported.output + gated.output
    reason = "no result lines" if case != "input_errors" else "not one of the 15 grades is valid"
    for result in (reported, gated):
        assert f"{results}: " in result.output and reason in " ".join(result.output.split())
    assert "# FaithJudge report" in md.read_text(encoding="utf-8")
    assert json.loads(js.read_text(encoding="utf-8"))["summary"]["lines"] == (
        5 if case == "input_errors" else 0
    )
    printed = _run("report", results, "--bootstrap", "20")
    assert printed.exit_code == 4 and "# FaithJudge report" in printed.stdout


def test_report_and_gate_agree_on_a_baseline_that_shares_nothing(tmp_path: Path) -> None:
    results = _jsonl(tmp_path / "r.jsonl", _judged(2))
    config = _toml(tmp_path / "g.toml", "[quality]\nmin_cf = 10.0\n")
    other = [dict(x, item_id=f"other-{i}") for i, x in enumerate(_judged(2))]
    for name, lines in (("empty", []), ("other", other)):
        baseline = _jsonl(tmp_path / f"{name}.jsonl", lines)
        md = tmp_path / f"{name}.md"
        reported = _run("report", results, "--compare", baseline, "--md", md, "--bootstrap", "20")
        gated = _run("gate", results, "--config", config, "--baseline", baseline)
        assert (reported.exit_code, gated.exit_code) == (3, 3), reported.output + gated.output
        for result in (reported, gated):
            assert f"{baseline}: shares no item" in " ".join(result.output.split())
        assert "0 shared items" in md.read_text(encoding="utf-8")
    # nothing scored (4) wins over nothing shared (3), in both commands
    empty = _jsonl(tmp_path / "none.jsonl", [])
    baseline = tmp_path / "empty.jsonl"
    assert _run("report", empty, "--compare", baseline, "--bootstrap", "20").exit_code == 4
    assert _run("gate", empty, "--config", config, "--baseline", baseline).exit_code == 4
