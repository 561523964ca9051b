"""Paired comparison of two runs: differences, paired-bootstrap CIs, regression flags."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from faithjudge.reports.compare import compare_runs
from faithjudge.reports.table import item_table
from faithjudge_client.lines import ItemResult

from tests.unit.test_reports_aggregate import fixture_lines


def _table(lines: list[dict[str, Any]]) -> Any:
    return item_table(ItemResult.model_validate_json(json.dumps(line)) for line in lines)


def _many(lines: list[dict[str, Any]], copies: int) -> list[dict[str, Any]]:
    out = []
    for c in range(copies):
        for line in lines:
            item = copy.deepcopy(line)
            item["item_id"] = f"{line['item_id']}-{c}"
            out.append(item)
    return out


def _by_stat(frame: Any) -> dict[str, Any]:
    return {row["stat"]: row for _, row in frame.iterrows()}


def test_identical_runs_have_zero_difference() -> None:
    table = _table(fixture_lines())
    result, counts = compare_runs(table, table, B=200, seed=0)
    assert counts == {"shared": 6, "baseline_only": 0, "candidate_only": 0, "unmatched": 0}
    for row in result.itertuples():
        assert row.diff in (0.0, None) or row.diff == pytest.approx(0.0)
        assert not row.regression


def test_paired_difference_and_regression_flag() -> None:
    base_lines = _many(fixture_lines(), 20)
    worse = copy.deepcopy(base_lines)
    for line in worse:
        cf = line["metrics"].get("clinical_fidelity")
        if cf is not None and cf["status"] == "valid":
            cf["score"], cf["normalized"] = 1, 0.0
    result, counts = compare_runs(_table(base_lines), _table(worse), B=300, seed=0)
    stats = _by_stat(result)
    assert counts["shared"] == 120
    # CF drops from 62.5 to 0 on every evaluable pair: a certain regression
    assert stats["CF"]["baseline"] == pytest.approx(62.5)
    assert stats["CF"]["candidate"] == pytest.approx(0.0)
    assert stats["CF"]["diff"] == pytest.approx(-62.5)
    assert stats["CF"]["regression"]
    assert not stats["CA"]["regression"]
    # a tolerance wider than the drop accepts it
    result, _ = compare_runs(
        _table(base_lines), _table(worse), B=300, seed=0, tolerance={"CF": 70.0}
    )
    assert not _by_stat(result)["CF"]["regression"]


def test_flip_rate_rise_is_a_regression() -> None:
    base_lines = _many(fixture_lines(), 20)
    flipped = copy.deepcopy(base_lines)
    for line in flipped:
        if line["flip"]["value"] is False:
            line["flip"]["value"] = True
    result, _ = compare_runs(_table(base_lines), _table(flipped), B=300, seed=0)
    row = _by_stat(result)["flip_rate"]
    assert row["diff"] == pytest.approx(60.0)
    assert row["regression"]


def test_only_shared_items_are_paired() -> None:
    lines = fixture_lines()
    candidate = _table(lines[:4])
    result, counts = compare_runs(_table(lines), candidate, B=100, seed=0)
    assert counts["shared"] == 4 and counts["baseline_only"] == 2
    assert _by_stat(result)["accuracy"]["n_pairs"] == 4
