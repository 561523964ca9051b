"""Gate configuration, checks and exit codes (pure part; the CLI test runs the command)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.contracts import ItemResult
from service.exit_codes import ExitCode
from service.reports import gate as g
from service.reports.junit import junit_xml
from service.reports.report import build_report
from service.reports.table import item_table
from tests.unit.test_reports_aggregate import fixture_lines


def _report(lines: list[dict] | None = None) -> object:
    items = item_table(
        ItemResult.model_validate_json(json.dumps(x)) for x in (lines or fixture_lines())
    )
    return build_report(items, B=200, seed=0)


def test_parse_config_rejects_bad_values() -> None:
    with pytest.raises(g.GateConfigError, match="unknown section"):
        g.parse_config({"qualty": {}})
    with pytest.raises(g.GateConfigError, match="unknown keys"):
        g.parse_config({"quality": {"min_xx": 3}})
    with pytest.raises(g.GateConfigError, match="must be a number"):
        g.parse_config({"quality": {"min_cf": "30"}})
    with pytest.raises(g.GateConfigError, match="within"):
        g.parse_config({"coverage": {"max_invalid": 120}})
    with pytest.raises(g.GateConfigError, match="scopes"):
        g.parse_config({"coverage": {"scopes": ["XX"]}})


def test_load_config_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[quality\nmin_cf = 1", encoding="utf-8")
    with pytest.raises(g.GateConfigError, match="not valid TOML"):
        g.load_config(bad)
    with pytest.raises(g.GateConfigError, match="cannot read"):
        g.load_config(tmp_path / "missing.toml")


def test_quality_pass_and_fail() -> None:
    report = _report()
    ok = g.evaluate(report, g.parse_config({"quality": {"min_cf": 60.0, "max_flip_rate": 40}}))
    assert [c.passed for c in ok] == [True, True]
    assert g.exit_code(ok) == ExitCode.OK
    bad = g.evaluate(report, g.parse_config({"quality": {"min_cf": 70.0}}))
    assert g.exit_code(bad) == ExitCode.CHECK_FAILED
    assert bad[0].value == pytest.approx(62.5)


def test_coverage_fails_on_upper_bound_and_wins_over_quality() -> None:
    report = _report()
    config = g.parse_config(
        {"quality": {"min_cf": 99.0}, "coverage": {"max_invalid": 25.0, "scopes": ["CA"]}}
    )
    checks = g.evaluate(report, config)
    invalid = next(c for c in checks if c.name == "invalid [CA]")
    # point 20% is within 25%, but the bootstrap upper bound of 5 items is not
    assert invalid.passed is False and invalid.value > 25.0
    assert g.exit_code(checks) == ExitCode.COVERAGE_FAILED


def test_no_sham_items_is_not_a_failure() -> None:
    lines = [x for x in fixture_lines() if x["modification"]["code"] != "SHAM"]
    checks = g.evaluate(_report(lines), g.parse_config({"coverage": {"max_fpr_sham": 5.0}}))
    assert checks[0].passed is None
    assert g.exit_code(checks) == ExitCode.OK


def test_unevaluable_reason() -> None:
    assert g.unevaluable_reason(item_table([])) is not None
    transport = [x for x in fixture_lines() if "error" in x]
    items = item_table(ItemResult.model_validate_json(json.dumps(x)) for x in transport)
    assert "no metric" in (g.unevaluable_reason(items) or "")
    assert g.unevaluable_reason(_report().items) is None


def test_junit_lists_every_check() -> None:
    checks = g.evaluate(_report(), g.parse_config({"quality": {"min_cf": 70.0, "min_ca": 1.0}}))
    xml = junit_xml(checks)
    assert 'tests="2"' in xml and 'failures="1"' in xml
    assert "<failure" in xml and "min_cf [m1]" in xml
