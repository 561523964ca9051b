"""What a user trips on: install hints, file modes, legends, rounded numbers, file names."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from faithjudge.cli.main import app
from typer.testing import CliRunner

from tests.unit.test_reports_aggregate import fixture_lines

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
DEMO_JUDGE = ROOT / "examples" / "demo_judge.jsonl"
runner = CliRunner()


def test_the_litellm_install_hint_keeps_its_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)  # as if the extra were not installed
    result = runner.invoke(
        app, ["score", str(DEMO), "-o", str(tmp_path / "o.jsonl"), "--judge", "litellm:x"]
    )
    assert result.exit_code == 3
    assert "pip install 'faithjudge[litellm]'" in result.output


def test_reports_get_the_same_mode_as_results(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        results = tmp_path / "results.jsonl"
        scored = runner.invoke(
            app,
            ["score", str(DEMO), "-o", str(results), "--judge", f"replay:{DEMO_JUDGE}",
             "--data-dir", str(tmp_path / "data"), "--no-progress"],
        )  # fmt: skip
        assert scored.exit_code == 0, scored.output
        html, md = tmp_path / "r.html", tmp_path / "r.md"
        reported = runner.invoke(
            app, ["report", str(results), "--html", str(html), "--md", str(md)]
        )
        assert reported.exit_code == 0, reported.output
    finally:
        os.umask(old)
    # results and reports hold the same grades and CoTs: private alike, whatever the umask
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (results, html, md)}
    assert set(modes.values()) == {0o600}, {k: oct(v) for k, v in modes.items()}


def test_the_html_report_explains_its_quote_colours(tmp_path: Path) -> None:
    from faithjudge.reports.render_html import report_html
    from faithjudge.reports.report import build_report
    from faithjudge.reports.table import item_table

    from tests.unit.test_reports_aggregate import fixture_results

    page = report_html(build_report(item_table(fixture_results(), quote_rows=10), B=20))
    assert "Verified quotes:" in page
    for css, words in (("CF", "clinical fidelity"), ("CA", "causal attribution"),
                       ("CT", "confidence tone"), ("multi", "more than one metric")):  # fmt: skip
        assert f'<mark class="{css}">' in page and words in page


def test_csv_cells_are_rounded(tmp_path: Path) -> None:
    import json

    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(line) + "\n" for line in fixture_lines()))
    csv = tmp_path / "items.csv"
    assert runner.invoke(app, ["report", str(results), "--csv", str(csv)]).exit_code == 0
    text = csv.read_text()
    assert "0.8180" not in text and "0.6666666" not in text
    assert "0.818" in text  # CC of the first line, as given


def test_regression_details_print_rounded_differences(tmp_path: Path) -> None:
    from faithjudge.reports import gate as gating
    from faithjudge.reports.report import build_report
    from faithjudge.reports.table import item_table

    from tests.unit.test_reports_aggregate import fixture_results

    items = item_table(fixture_results())
    report = build_report(items, baseline=items, B=50, tolerance={"CF": 2.0})
    config = gating.parse_config({"regression": {"max_drop_cf": 2.0}})
    details = [c.detail for c in gating.evaluate(report, config) if c.kind == "regression"]
    assert details and all("pp [" in d for d in details)
    for detail in details:
        diff = detail.split("diff ", 1)[1].split(" pp")[0]
        assert diff == "n/a" or len(diff.split(".")[1]) == 2, detail


def test_gate_configuration_errors_name_the_file(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(__import__("json").dumps(x) for x in fixture_lines()) + "\n")
    config = tmp_path / "gate.toml"
    config.write_text("[coverage]\nmax_parse = 'none'\n")
    result = runner.invoke(app, ["gate", str(results), "--config", str(config)])
    assert result.exit_code == 3
    assert f"{config}: [coverage] max_parse must be a number" in result.output
