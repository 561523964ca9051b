"""Renderers: Markdown, self-contained HTML (escaping, plots, highlighted quotes), JSON."""

from __future__ import annotations

import json
import re

from faithjudge.reports.explorer import RequestView, RequestViews
from faithjudge.reports.markup import md_escape
from faithjudge.reports.render_html import highlight, report_html
from faithjudge.reports.render_md import report_markdown
from faithjudge.reports.report import build_report, report_json
from faithjudge.reports.table import item_table
from faithjudge_client.lines import ItemResult

from tests.unit.test_reports_aggregate import fixture_lines

EVIL = "<script>alert(1)</script>"


def _report(lines: list[dict]) -> object:
    items = item_table(ItemResult.model_validate_json(json.dumps(x)) for x in lines)
    return build_report(items, baseline=items, B=100, seed=0)


def test_highlight_marks_spans_and_escapes() -> None:
    cot = f"the angle is blunted {EVIL} and & more"
    out = highlight(cot, [("CF", 0, 20, "x"), ("CA", 13, 20, "y"), ("CT", 500, 600, "z")])
    assert "<script>" not in out and "&lt;script&gt;" in out and "&amp;" in out
    assert '<mark class="CF" title="CF">the angle is </mark>' in out
    assert '<mark class="multi" title="CA CF">blunted</mark>' in out
    # the out-of-range span is ignored, the text survives intact
    assert (
        re.sub(r"<[^>]+>", "", out)
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
        .replace("&#x27;", "'")
        == cot
    )


def test_html_is_self_contained_and_escaped() -> None:
    lines = fixture_lines()
    lines[0]["model"] = EVIL
    lines[0]["metrics"]["clinical_fidelity"]["quotes"][0]["text"] = EVIL
    report = _report(lines)
    cot = RequestView(item_id="it-2", cot=f"the angle is blunted {EVIL}")
    page = report_html(report, requests=RequestViews({"it-2": cot}))
    # two script elements, both the report's own: the inert data block and the explorer
    assert re.findall(r"<script[^>]*>", page.lower()) == [
        '<script type="application/json" id="explorer-data">',
        '<script id="explorer-script">',
    ]
    assert EVIL not in page and "alert(1)" in page  # there, but only as escaped text
    data = page.split('id="explorer-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and "\\u003cscript\\u003ealert(1)" in data
    # nothing is fetched (and the policy forbids it): the only URL is the SVG namespace
    assert "//" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "default-src 'none'; script-src 'sha256-" in page
    assert page.count("<svg") >= 2
    assert "<mark" in page and "&lt;script&gt;" in page
    assert "<table>" in page and "Coverage diagnostics" in page and "Comparison" in page


def test_markdown_escapes_cells_and_shows_sections() -> None:
    lines = fixture_lines()
    lines[0]["model"] = "a|b"
    text = report_markdown(_report(lines))
    assert "a\\|b" in text
    for heading in ("## Table 1", "## Per modification — flip", "## Coverage diagnostics",
                    "## Comparison with the baseline"):  # fmt: skip
        assert heading in text
    assert md_escape("x\ny|z") == "x y\\|z"


def test_json_is_strict_json() -> None:
    data = report_json(_report(fixture_lines()))
    text = json.dumps(data, allow_nan=False)
    assert json.loads(text)["summary"]["lines"] == 6
    assert {"table1", "aggregates", "coverage", "fpr_sham", "gates", "comparison"} <= set(data)


def test_markdown_cells_carry_no_control_characters() -> None:
    # a model name with a terminal escape sequence must not reach a CI log as one
    cell = md_escape("m\x1b[31mred\x07\tx\r\ny|z")
    assert cell == "m\\u001b\\[31mred\\u0007 x  y\\|z"
    assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in cell)
