"""Reading result lines (errors name file:line) and exporting the item table."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest
from faithjudge.reports.export import ExportError, export_items
from faithjudge.reports.io import ReportInputError, read_cots, read_results
from faithjudge.reports.table import item_table

from tests.unit.test_reports_aggregate import fixture_lines


def _write(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_bad_lines_are_named_with_file_and_line(tmp_path: Path) -> None:
    good = json.dumps(fixture_lines()[0])
    path = _write(tmp_path / "r.jsonl", [good, "{not json", "", json.dumps({"line": "x"})])
    with pytest.raises(ReportInputError) as info:
        read_results(path)
    assert f"{path}:2: not valid JSON" in str(info.value)
    assert f"{path}:4: line:" in str(info.value)
    assert len(info.value.problems) == 2


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="cannot read"):
        read_results(tmp_path / "nope.jsonl")


def test_read_cots_by_item_id_and_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "req.jsonl",
        [json.dumps({"item_id": "a", "cot": "one"}), json.dumps({"cot": "two"})],
    )
    assert read_cots(path) == {"#1": "one", "a": "one", "#2": "two"}
    with pytest.raises(ReportInputError, match=r"req\.jsonl:1"):
        read_cots(_write(tmp_path / "req.jsonl", ["[1]"]))


def test_csv_export_round_trips(tmp_path: Path) -> None:
    rows = [json.dumps(x) for x in fixture_lines()]
    items = item_table(read_results(_write(tmp_path / "r.jsonl", rows)))
    export_items(items, tmp_path / "out" / "items.csv")
    back = pd.read_csv(tmp_path / "out" / "items.csv")
    assert len(back) == 6 and back["n_quotes"].tolist()[:2] == [3, 3]
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
    assert cut["quotes"].iloc[0] == full["quotes"].iloc[0] and len(cut["quotes"].iloc[0]) == 3
    assert all(q == () for q in cut["quotes"].iloc[1:])
    assert cut["n_quotes"].tolist() == full["n_quotes"].tolist()
    assert cut.drop(columns="quotes").equals(full.drop(columns="quotes"))
    # repeated strings are one object per distinct value, not one per line
    assert len({id(q) for q in full["question"]}) == full["question"].nunique()
