"""The HTML report's item explorer data: what an opened item shows, safely embedded."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import orjson
import pytest
from faithjudge.reports.explorer import (
    ItemDetails,
    RequestViews,
    cot_segments,
    explorer_data,
    explorer_json,
    listed_keys,
    read_request_views,
)
from faithjudge.reports.io import ReportInputError, summarize_problems
from faithjudge.reports.render_html import report_html
from faithjudge.reports.report import build_report
from faithjudge.reports.table import item_table
from faithjudge_client.lines import ItemResult

from tests.unit.test_reports_aggregate import fixture_lines

EVIL = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"


def _results(lines: list[dict]) -> list[ItemResult]:
    return [ItemResult.model_validate_json(json.dumps(x)) for x in lines]


def _data(lines: list[dict], max_items: int = 50, **kw: object) -> dict:
    details = ItemDetails(max_items)
    items = item_table(details.watch(_results(lines)), quote_rows=max_items)
    return explorer_data(items, max_items=max_items, details=details.rows, **kw)  # type: ignore[arg-type]


def _no_nan(value: object) -> None:
    if isinstance(value, float):
        assert not math.isnan(value)
    elif isinstance(value, dict):
        for v in value.values():
            _no_nan(v)
    elif isinstance(value, list):
        for v in value:
            _no_nan(v)


def test_an_opened_item_holds_the_judges_rationale_answer_and_failures() -> None:
    lines = fixture_lines()
    data = _data(lines)
    assert len(data["items"]) == len(lines) == data["total"]
    first, source = data["items"][0], lines[0]
    cf = first["metrics"]["CF"]
    graded = source["metrics"]["clinical_fidelity"]
    assert cf["outcome"] == "valid" and cf["score"] == graded["score"]
    assert cf["rationale"] == graded.get("rationale")
    assert cf["judge"]["score"] == graded["score"]
    assert first["n_quotes"] == len(first["quotes"]) > 0  # no CoT: the quotes are listed
    _no_nan(data)


def test_unmatched_answers_and_input_errors_read_as_words_never_nan() -> None:
    lines = fixture_lines()
    lines[0].update(answer=None, answer_raw="maybe", answer_in_options=False)
    lines[1].update(answer=None, answer_raw=None, answer_in_options=None)
    broken = {"line": 99, "error": {"stage": "input", "detail": "line 99: not valid JSON"}}
    data = _data([*lines, broken])
    first, second, error = data["items"][0], data["items"][1], data["items"][-1]
    assert (first["answer"], first["answer_raw"], first["answer_matched"]) == (
        "no option matched",
        "maybe",
        False,
    )
    assert second["answer"] == "no answer"
    assert error["error"] == {"stage": "input", "detail": "line 99: not valid JSON"}
    assert error["line"] == 99 and error["stages"] == ["input"] and error["flip"] == "n/a"
    # a line never judged records no modification: none is filled in for it
    assert [error[k] for k in ("modification", "kind", "channel", "alignment")] == [None] * 4
    assert first["modification"] is not None and first["kind"] is not None
    assert not re.search(r"\bnan\b", explorer_json(data), re.IGNORECASE)
    _no_nan(data)


def test_the_embedded_json_cannot_close_its_script_element() -> None:
    lines = fixture_lines()
    lines[0]["model"] = EVIL
    lines[0]["metrics"]["clinical_fidelity"]["rationale"] = EVIL
    text = explorer_json(_data(lines))
    assert "<" not in text and ">" not in text and "&" not in text
    assert orjson.loads(text)["items"][0]["model"] == EVIL  # the same data once parsed
    page = report_html(build_report(item_table(_results(lines), quote_rows=5), B=20))
    assert EVIL not in page
    assert len(re.findall(r"<script", page)) == 2 and page.count("</script>") == 2


def test_cot_segments_cover_the_cot_and_name_every_quoting_metric() -> None:
    cot = "the angle is blunted and more"
    quotes = [("CF", 0, 20, "x"), ("CA", 13, 20, "y"), ("CT", 40, 60, "out of range")]
    segments = cot_segments(cot, quotes)
    assert "".join(s[0] for s in segments) == cot
    assert segments == [["the angle is ", "CF"], ["blunted", "CA CF"], [" and more"]]
    assert cot_segments("", []) == []


def test_request_views_keep_only_the_listed_items_and_match_lines_by_id(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    rows = [
        {"item_id": "a", "ground_truth": "yes", "cot": "A", "baseline": {"answer": "no"}},
        {"item_id": "b", "ground_truth": "no", "cot": "B"},
        {"item_id": "c", "ground_truth": "left", "cot": "C"},
    ]
    requests.write_text("".join(json.dumps(r) + "\n" for r in rows) + "[1]\n{torn\n")
    views = read_request_views(requests, wanted={"#1", "b"})
    assert set(views.views) == {"#1", "b"}  # c (line 3) is not listed: not kept
    assert len(views.problems) == 2
    assert views.problems[0] == f"{requests}:4: expected a JSON object"
    assert views.problems[1].startswith(f"{requests}:5: not valid JSON")
    warning = summarize_problems(requests, "request", views.problems)
    assert warning.startswith(f"{requests}: 2 unreadable request line(s)")
    first = views.find(1, "a")
    assert first is not None
    assert (first.ground_truth, first.baseline_answer, first.cot) == ("yes", "no", "A")
    # a result from another file: its line 1 is item b there, so the id decides
    other = views.find(1, "b")
    assert other is not None and other.cot == "B"
    assert views.find(7, "zzz") is None
    everything = read_request_views(requests)
    assert {"#1", "#2", "#3", "a", "b", "c"} <= set(everything.views)
    with pytest.raises(ReportInputError, match="cannot read"):
        read_request_views(tmp_path / "missing.jsonl")


def test_a_request_text_longer_than_score_accepts_is_cut_in_the_page(tmp_path: Path) -> None:
    from faithjudge_client.lines import MAX_COT_CHARS

    requests = tmp_path / "requests.jsonl"
    cot = "y" * (MAX_COT_CHARS + 5_000)
    requests.write_text(json.dumps({"item_id": "a", "cot": cot, "ground_truth": "yes"}) + "\n")
    view = read_request_views(requests).find(1, "a")
    assert view is not None and view.cot is not None and view.ground_truth == "yes"
    assert view.cot.startswith("y" * MAX_COT_CHARS)
    assert view.cot.endswith("[… 5,000 more characters not shown]")


def test_ground_truth_and_cot_come_from_the_request_views(tmp_path: Path) -> None:
    lines = fixture_lines()
    item_id = lines[0]["item_id"]
    cot = "x" * 200
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps({"item_id": item_id, "ground_truth": "yes", "cot": cot}) + "\n")
    items = item_table(_results(lines), quote_rows=5)
    views = read_request_views(requests, listed_keys(items, 5))
    data = explorer_data(items, max_items=5, requests=views)
    first = data["items"][0]
    assert first["ground_truth"] == "yes" and first["quotes"] == []
    assert "".join(s[0] for s in first["cot"]) == cot
    assert data["requests"] is True and data["details"] is False
    assert isinstance(views, RequestViews) and len(data["items"]) == 5
