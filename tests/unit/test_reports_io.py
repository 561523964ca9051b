"""Reading result lines (errors name file:line) and exporting the item table."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest
from faithjudge.jsonl import describe_json_error
from faithjudge.reports.export import ExportError, export_items
from faithjudge.reports.io import (
    ReportInputError,
    read_results,
)
from faithjudge.reports.report import build_report
from faithjudge.reports.table import item_table
from faithjudge_client.metric_catalogue import metric_names

from tests.unit.test_reports_aggregate import fixture_lines


def _write(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_bad_lines_become_input_errors_named_by_file_and_line(tmp_path: Path) -> None:
    good = json.dumps(fixture_lines()[0])
    torn = json.dumps({"item_id": "x-1", "model": "m2", "line": "x"})
    path = _write(tmp_path / "r.jsonl", [good, "{not json", "", torn])
    problems: list[str] = []
    results = read_results(path, problems)
    assert len(problems) == 2 and problems[0].startswith(f"{path}:2: not valid JSON: ")
    assert problems[1].startswith(f"{path}:4: line: ")
    assert len(results) == 3 and results[0].error is None
    unreadable = results[1]
    assert unreadable.line == 2 and unreadable.model is None and unreadable.item_id is None
    assert unreadable.error is not None and unreadable.error.stage == "input"
    assert unreadable.error.detail == f"r.jsonl:2: {describe_json_error(b'{not json')}"
    # what can be read of a JSON object is kept: its error counts under its model
    assert (results[2].line, results[2].item_id, results[2].model) == (4, "x-1", "m2")
    assert results[2].error is not None and results[2].error.detail.startswith("r.jsonl:4: line:")


def test_a_torn_line_is_no_model_of_its_own(tmp_path: Path) -> None:
    lines = [json.dumps(x) for x in fixture_lines()]
    (model,) = {x["model"] for x in fixture_lines()}
    items = item_table(read_results(_write(tmp_path / "one.jsonl", [*lines, '{"item_id": "t'])))
    # one model: the lost line is that model's, counted as its input error
    assert items["model"].tolist() == [model] * (len(lines) + 1)
    assert items["error_stage"].iloc[-1] == "input"
    # several models: the line belongs to none of them, and to no model of its own
    other = [json.dumps({**x, "model": "m2"}) for x in fixture_lines()]
    items = item_table(read_results(_write(tmp_path / "two.jsonl", [*lines, *other, "{"])))
    assert pd.isna(items["model"].iloc[-1])
    report = build_report(items, B=20)
    assert report.summary["models"] == sorted({model, "m2"})
    assert set(report.aggregates["model"]) == {model, "m2"}
    assert report.summary["input_errors"] == 1 + 2 * sum(
        1 for x in fixture_lines() if x.get("error", {}).get("stage") == "input"
    )


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="cannot read"):
        read_results(tmp_path / "nope.jsonl")


def test_csv_export_round_trips(tmp_path: Path) -> None:
    rows = [json.dumps(x) for x in fixture_lines()]
    items = item_table(read_results(_write(tmp_path / "r.jsonl", rows)))
    export_items(items, tmp_path / "out" / "items.csv")
    back = pd.read_csv(tmp_path / "out" / "items.csv")
    # lines 1 and 2 carry one quote in each metric's grade
    assert len(back) == 6 and back["n_quotes"].tolist()[:2] == [len(metric_names())] * 2
    assert back["CF"].iloc[0] == 1.0


def test_unknown_format_and_parquet_without_pyarrow(tmp_path: Path) -> None:
    items = item_table([])
    with pytest.raises(ExportError, match="unknown export format"):
        export_items(items, tmp_path / "x.xlsx")
    if importlib.util.find_spec("pyarrow") is None:
        with pytest.raises(ExportError, match="pyarrow"):
            export_items(items, tmp_path / "x.parquet")


def test_quote_rows_keeps_the_quotes_of_the_first_rows_and_every_count(tmp_path: Path) -> None:
    rows = [json.dumps(x) for x in fixture_lines()]
    results = read_results(_write(tmp_path / "r.jsonl", rows))
    full, cut = item_table(results), item_table(results, quote_rows=1)
    assert cut["quotes"].iloc[0] == full["quotes"].iloc[0]
    assert len(cut["quotes"].iloc[0]) == len(metric_names())
    assert all(q == () for q in cut["quotes"].iloc[1:])
    assert cut["n_quotes"].tolist() == full["n_quotes"].tolist()
    assert cut.drop(columns="quotes").equals(full.drop(columns="quotes"))
    # repeated strings are one object per distinct value, not one per line
    assert len({id(q) for q in full["question"]}) == full["question"].nunique()
