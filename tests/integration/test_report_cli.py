"""``faithjudge report`` and ``faithjudge gate`` end to end, one fixture per gate exit code."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from service.cli import app
from tests.unit.test_reports_aggregate import fixture_lines

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
DEMO_JUDGE = ROOT / "examples" / "demo_judge.jsonl"
EXAMPLE_CONFIG = ROOT / "examples" / "ci" / "faithjudge.toml"


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


@pytest.fixture(scope="module")
def demo_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo scored with the replay judge, exactly as ``make run`` does."""
    tmp = tmp_path_factory.mktemp("demo")
    out = tmp / "results.jsonl"
    result = _run("score", DEMO, "-o", out, "--evaluator", f"replay:{DEMO_JUDGE}",
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


def test_gate_passes_with_the_example_config(tmp_path: Path) -> None:
    results = _jsonl(tmp_path / "r.jsonl", _many(2))
    config = _toml(tmp_path / "g.toml", "[quality]\nmin_cf = 50.0\nmax_flip_rate = 45.0\n")
    junit, md = tmp_path / "junit.xml", tmp_path / "summary.md"
    result = _run("gate", results, "--config", config, "--junit", junit, "--md", md)
    assert result.exit_code == 0, result.output
    assert "PASSED" in md.read_text(encoding="utf-8")
    assert 'failures="0"' in junit.read_text(encoding="utf-8")


def test_example_config_is_valid(tmp_path: Path) -> None:
    results = _jsonl(tmp_path / "r.jsonl", _many(2))
    result = _run("gate", results, "--config", EXAMPLE_CONFIG)
    assert result.exit_code in (0, 1, 2), result.output


def test_gate_exit_1_on_quality(tmp_path: Path) -> None:
    results = _jsonl(tmp_path / "r.jsonl", _many(2))
    config = _toml(tmp_path / "g.toml", "[quality]\nmin_cf = 90.0\n")
    junit = tmp_path / "junit.xml"
    result = _run("gate", results, "--config", config, "--junit", junit)
    assert result.exit_code == 1, result.output
    assert "<failure" in junit.read_text(encoding="utf-8")


def test_gate_exit_1_on_regression(tmp_path: Path) -> None:
    base_lines = _many(20)
    worse = copy.deepcopy(base_lines)
    for line in worse:
        ca = line["metrics"].get("causal_attribution")
        if ca is not None and ca["status"] == "valid":
            ca["score"], ca["normalized"] = 1, 0.0
    base = _jsonl(tmp_path / "base.jsonl", base_lines)
    cand = _jsonl(tmp_path / "cand.jsonl", worse)
    config = _toml(tmp_path / "g.toml", "[regression]\nmax_drop_ca = 5.0\n")
    result = _run("gate", cand, "--config", config, "--baseline", base)
    assert result.exit_code == 1, result.output
    assert "CA vs baseline" in result.output
    assert _run("gate", base, "--config", config, "--baseline", base).exit_code == 0


def test_gate_exit_2_on_coverage(tmp_path: Path) -> None:
    results = _jsonl(tmp_path / "r.jsonl", _many(2))
    # CA has an evidence failure on 1 of 5 judged items (20%) > 2%; quality fails too: 2 wins
    config = _toml(
        tmp_path / "g.toml",
        "[quality]\nmin_cf = 90.0\n[coverage]\nmax_invalid = 2.0\nscopes = ['CA']\n",
    )
    result = _run("gate", results, "--config", config)
    assert result.exit_code == 2, result.output
    assert "FAILED (coverage)" in result.output


@pytest.mark.parametrize("case", ["malformed", "missing", "bad_config", "nothing_judged",
                                  "empty", "no_shared_items"])  # fmt: skip
def test_gate_exit_3_or_4_when_the_run_cannot_be_evaluated(tmp_path: Path, case: str) -> None:
    good = _jsonl(tmp_path / "r.jsonl", _many(1))
    config = _toml(tmp_path / "g.toml", "[quality]\nmin_cf = 10.0\n")
    args: list[str | Path] = ["gate", good, "--config", config]
    if case == "malformed":
        lines = good.read_text(encoding="utf-8").splitlines()
        lines[2] = lines[2][:40]
        good.write_text("\n".join(lines) + "\n", encoding="utf-8")
        expected = f"{good}:3"
    elif case == "missing":
        args[1] = tmp_path / "absent.jsonl"
        expected = "not found"
    elif case == "bad_config":
        _toml(config, "[quality]\nmin_cf = 'high'\n")
        expected = f"{config}: [quality] min_cf must be a number"
    elif case == "nothing_judged":
        down = [x for x in fixture_lines() if "error" in x] * 3
        _jsonl(good, down)
        expected = "no metric"
    elif case == "empty":
        good.write_text("", encoding="utf-8")
        expected = "no result lines"
    else:
        other = [dict(x, item_id=f"other-{i}") for i, x in enumerate(fixture_lines())]
        args += ["--baseline", _jsonl(tmp_path / "base.jsonl", other)]
        expected = "shares no item"
    result = _run(*args)
    # 4: the file was read but not one grade in it was judged; 3: it could not be evaluated
    assert result.exit_code == (4 if case in ("nothing_judged", "empty") else 3), result.output
    assert expected in " ".join(result.output.split())


@pytest.mark.parametrize("argv", [["--config"], ["--no-such-option"], []])
def test_gate_usage_errors_exit_3_not_2(tmp_path: Path, argv: list[str]) -> None:
    """Exit 2 must keep meaning "coverage failed": a mistyped command line is exit 3."""
    good = _jsonl(tmp_path / "r.jsonl", _many(1))
    result = _run("gate", good, *argv)
    assert result.exit_code == 3, result.output
