"""Gate configuration, checks and exit codes (pure part; the CLI test runs the command)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from faithjudge.exit_codes import ExitCode
from faithjudge.markup import md_escape
from faithjudge.reports import gate as g
from faithjudge.reports.junit import junit_unevaluable, junit_xml
from faithjudge.reports.render_md import gate_markdown
from faithjudge.reports.report import Report, build_report
from faithjudge.reports.table import item_table
from faithjudge_client.lines import ItemResult

from tests.unit.test_reports_aggregate import fixture_lines

# The fixture holds a transport error and a KB gap on purpose; the tests that are not about them
# tolerate them explicitly, since without max_not_judged no item may miss the judge.
TOLERATE_LOST = {"max_not_judged": 100.0}


def _items(lines: list[dict] | None = None) -> pd.DataFrame:
    return item_table(
        ItemResult.model_validate_json(json.dumps(x)) for x in (lines or fixture_lines())
    )


def _report(
    lines: list[dict] | None = None,
    baseline: list[dict] | None = None,
    config: g.GateConfig | None = None,
) -> Report:
    """The report the gate command builds: with the config's regression tolerances."""
    base = None if baseline is None else _items(baseline)
    tolerance = None if config is None else g.regression_tolerance(config)
    return build_report(_items(lines), baseline=base, B=200, seed=0, tolerance=tolerance)


def _judged_lines() -> list[dict]:
    """The fixture without its lines that never reached the judge (transport, KB)."""
    return [x for x in fixture_lines() if x["item_id"] not in ("it-4", "it-6")]


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


def test_parse_config_rejects_a_config_without_checks() -> None:
    for data in ({}, {"gate": {"seed": 1}}, {"coverage": {"scopes": ["CA"]}},
                 {"quality": {}, "coverage": {}, "regression": {}}):  # fmt: skip
        with pytest.raises(g.GateConfigError, match="the config sets no check"):
            g.parse_config(data)
    assert g.configured_kinds(g.parse_config({"regression": {"max_drop_cf": 1.0}})) == {
        "regression"
    }


def test_load_config_without_checks_names_the_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(g.GateConfigError, match=f"{empty}: the config sets no check"):
        g.load_config(empty)


def test_quality_pass_and_fail() -> None:
    report = _report()
    ok = g.evaluate(report, g.parse_config({"quality": {"min_cf": 60.0, "max_flip_rate": 40},
                                            "coverage": TOLERATE_LOST}))  # fmt: skip
    assert [c.passed for c in ok if c.kind == "quality"] == [True, True]
    assert g.verdict(ok).code == ExitCode.OK
    bad = g.evaluate(report, g.parse_config({"quality": {"min_cf": 70.0},
                                             "coverage": TOLERATE_LOST}))  # fmt: skip
    assert g.verdict(bad).code == ExitCode.CHECK_FAILED
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
    assert g.verdict(checks).code == ExitCode.COVERAGE_FAILED


def test_no_sham_items_is_not_a_failure() -> None:
    lines = [x for x in fixture_lines() if x["modification"]["code"] != "SHAM"]
    config = g.parse_config({"coverage": {"max_fpr_sham": 5.0, **TOLERATE_LOST}})
    checks = g.evaluate(_report(lines), config)
    assert next(c for c in checks if c.name.startswith("fpr_sham")).passed is None
    assert g.verdict(checks).code == ExitCode.OK


def test_not_judged_items_are_bounded_without_their_key() -> None:
    """A run that lost lines must not pass a config that says nothing about them."""
    config = g.parse_config({"quality": {"min_cf": 10.0}})
    checks = g.evaluate(_report(), config)
    lost = [c for c in checks if c.name.startswith("not_judged [")]
    assert [c.name for c in lost] == [f"not_judged [{s}]" for s in config.scopes]
    assert all(c.threshold == g.DEFAULT_MAX_NOT_JUDGED == 0.0 for c in lost)
    assert any(c.passed is False for c in lost)
    assert "set [coverage] max_not_judged" in lost[0].detail
    assert g.verdict(checks).code == ExitCode.COVERAGE_FAILED
    # whatever its size, a run whose every item reached the judge passes the default
    clean = g.evaluate(_report(_judged_lines()), config)
    assert all(c.passed for c in clean) and g.verdict(clean).code == ExitCode.OK
    # an explicit key replaces the default
    tolerant = g.evaluate(_report(), g.parse_config({"coverage": TOLERATE_LOST}))
    assert {c.threshold for c in tolerant if c.name.startswith("not_judged")} == {100.0}
    assert g.verdict(tolerant).code == ExitCode.OK


def _worse_ca(lines: list[dict]) -> list[dict]:
    for line in lines:
        ca = line["metrics"].get("causal_attribution")
        if ca is not None and ca["status"] == "valid":
            ca["score"], ca["normalized"] = 1, 0.0
    return lines


def test_regression_checks_only_the_configured_keys() -> None:
    # CA drops from 56 to 0; only CF is configured, so CA must not be checked (at 0 tolerance)
    config = g.parse_config({"regression": {"max_drop_cf": 2.0}, "coverage": TOLERATE_LOST})
    report = _report(_worse_ca(fixture_lines()), baseline=fixture_lines(), config=config)
    regressions = [c for c in g.evaluate(report, config) if c.kind == "regression"]
    assert [(c.name, c.threshold, c.passed) for c in regressions] == [("CF vs baseline", 2.0, True)]
    assert g.verdict(g.evaluate(report, config)).code == ExitCode.OK
    # an empty [regression] table checks nothing (it no longer means "everything at 0")
    empty = g.parse_config({"regression": {}, "coverage": TOLERATE_LOST})
    assert not [c for c in g.evaluate(report, empty) if c.kind == "regression"]


def test_regression_is_judged_at_the_configured_tolerance() -> None:
    strict = g.parse_config({"regression": {"max_drop_ca": 0.0}, "coverage": TOLERATE_LOST})
    lax = g.parse_config({"regression": {"max_drop_ca": 100.0}, "coverage": TOLERATE_LOST})
    lines, base = _worse_ca(fixture_lines()), fixture_lines()
    (failed,) = [c for c in g.evaluate(_report(lines, base, strict), strict)
                 if c.kind == "regression"]  # fmt: skip
    (passed,) = [c for c in g.evaluate(_report(lines, base, lax), lax) if c.kind == "regression"]
    assert failed.passed is False and passed.passed is True and passed.threshold == 100.0


def test_verdict_names_every_kind_that_failed() -> None:
    report = _report(_worse_ca(fixture_lines()), baseline=fixture_lines())
    cases = {
        "PASSED": {"quality": {"min_cf": 10.0}, "coverage": TOLERATE_LOST},
        "FAILED (regression)": {"regression": {"max_drop_ca": 0.0}, "coverage": TOLERATE_LOST},
        "FAILED (quality)": {"quality": {"min_cf": 99.0}, "coverage": TOLERATE_LOST},
        "FAILED (quality, regression)": {
            "quality": {"min_cf": 99.0},
            "regression": {"max_drop_ca": 0.0},
            "coverage": TOLERATE_LOST,
        },
        "FAILED (coverage, regression)": {"regression": {"max_drop_ca": 0.0}},
    }
    for verdict, data in cases.items():
        checks = g.evaluate(report, g.parse_config(data))
        result = g.verdict(checks)
        assert result.label == verdict, data
        assert gate_markdown(result, report).startswith(f"# FaithJudge gate: {verdict}\n")
    assert g.verdict([]).kinds == () and g.verdict([]).label == "PASSED"


def test_unevaluable_reason() -> None:
    assert g.unevaluable_reason(item_table([])) is not None
    transport = [x for x in fixture_lines() if "error" in x]
    items = item_table(ItemResult.model_validate_json(json.dumps(x)) for x in transport)
    assert "grades is valid (transport " in (g.unevaluable_reason(items) or "")
    assert g.unevaluable_reason(_report().items) is None
    # every line judged, not one grade valid: nothing to stand on either
    judged = [json.loads(json.dumps(x)) for x in fixture_lines() if "error" not in x]
    for line in judged:
        for graded in line.get("metrics", {}).values():
            graded.update(
                status="invalid",
                score=None,
                normalized=None,
                quotes=[],
                failure={"stage": "schema", "detail": "score: 7 is too big"},
            )
    items = item_table(ItemResult.model_validate_json(json.dumps(x)) for x in judged)
    reason = g.unevaluable_reason(items) or ""
    assert reason.startswith("not one of the ") and "(schema " in reason


def test_unshared_reason() -> None:
    assert g.unshared_reason({"shared": 3}) is None
    reason = g.unshared_reason({"shared": 0, "baseline_only": 0, "candidate_only": 6})
    assert reason is not None and "shares no item" in reason and "results only 6" in reason


def test_junit_lists_every_check() -> None:
    config = g.parse_config({"quality": {"min_cf": 70.0, "min_ca": 1.0}})
    checks = [c for c in g.evaluate(_report(), config) if c.kind == "quality"]
    xml = junit_xml(checks)
    assert 'tests="2"' in xml and 'failures="1"' in xml
    assert "<failure" in xml and "min_cf [m1]" in xml


def _junit_failures(xml: str) -> dict[str, str]:
    import xml.etree.ElementTree as ET

    root = ET.fromstring(xml)
    return {
        case.attrib["name"]: failure.attrib["message"]
        for case in root.iter("testcase")
        if (failure := case.find("failure")) is not None
    }


def test_one_verdict_for_header_markdown_junit_and_exit_code() -> None:
    # a check that cannot be evaluated fails: the JUnit file must say so as the header does
    lines = _judged_lines()
    config = g.parse_config({"quality": {"min_cf": 10.0, "min_accuracy": 10.0},
                             "coverage": {"max_schema": 50.0, **TOLERATE_LOST}})  # fmt: skip
    report = _report(lines)
    checks = g.evaluate(report, config)
    unevaluable = [
        g.Check("quality", "min_cf [m-none]", 10.0, None, None, "CF = n/a over 0 items"),
        *checks,
    ]
    result = g.verdict(unevaluable)
    assert result.label == "FAILED (coverage, quality)"
    assert result.code == ExitCode.COVERAGE_FAILED == g.verdict(unevaluable).code
    failures = _junit_failures(junit_xml(result))
    assert set(failures) == {c.name for c in result.failed}
    assert "min_cf [m-none]" in failures
    markdown = gate_markdown(result, report)
    assert markdown.startswith("# FaithJudge gate: FAILED (coverage, quality)\n")
    for check in result.failed:
        row = next(x for x in markdown.splitlines() if x.startswith(f"| {md_escape(check.name)} |"))
        assert "**FAIL**" in row
    assert markdown.count("**FAIL**") == len(result.failed)
    # every failed coverage check names its rate, its exact bound and its threshold
    schema = next(c for c in result.failed if c.kind == "coverage")
    message = failures[schema.name]
    assert message.startswith(
        f"rate {schema.rate:.1f}%, upper bound {schema.value:.1f}%, "
        f"threshold {schema.threshold:.1f}%"
    )


def test_junit_skips_only_what_the_verdict_skips() -> None:
    lines = [x for x in _judged_lines() if x["modification"]["code"] != "SHAM"]
    config = g.parse_config({"coverage": {"max_fpr_sham": 5.0, **TOLERATE_LOST}})
    result = g.verdict(g.evaluate(_report(lines), config))
    xml = junit_xml(result)
    assert 'skipped="1"' in xml and f'failures="{len(result.failed)}"' in xml
    assert [g.check_status(c) for c in result.checks if c.name.startswith("fpr_sham")] == ["skip"]


def test_junit_stays_well_formed_whatever_a_model_is_called() -> None:
    import xml.etree.ElementTree as ET

    # control characters are legal in JSON strings but not in XML, escaped or not
    model = "m\x01\x1b[31m<&]]>"
    checks = [g.Check("quality", f"min_cf [{model}]", 10.0, 5.0, False, f"CF of {model}")]
    root = ET.fromstring(junit_xml(checks))
    case = next(root.iter("testcase"))
    assert case.attrib["name"] == "min_cf [m\\u0001\\u001b[31m<&]]>]"
    failure = case.find("failure")
    assert failure is not None and "CF of m\\u0001" in failure.attrib["message"]
    unevaluable = ET.fromstring(junit_unevaluable(f"no grade of {model}", 4))
    assert "no grade of m\\u0001" in (next(unevaluable.iter("failure")).text or "")


def test_coverage_rates_print_the_gates_exact_bound() -> None:
    from faithjudge.reports.render_md import coverage_markdown
    from faithjudge.reports.run_coverage import fpr_bound, rate_bound

    report = _report()
    config = g.parse_config({"coverage": {"max_schema": 1.0, "max_fpr_sham": 5.0}})
    checks = {c.name: c for c in g.evaluate(report, config)}
    text = "\n".join(coverage_markdown(report))
    for scope in config.scopes:
        schema = checks[f"schema [{scope}]"]
        assert schema.value is not None
        bound = rate_bound("schema", report.coverage[scope].rates["schema"])
        assert bound is not None and 100 * bound == pytest.approx(schema.value)
        row = next(x for x in text.splitlines() if x.startswith(f"| {scope} |"))
        assert f"[≤ {schema.value:.1f}]" in row.split(" | ")[4]
    fpr = checks["fpr_sham [CA]"]
    upper = fpr_bound(report.fpr)
    assert upper is not None and fpr.value == pytest.approx(100 * upper)
    assert f"[≤ {fpr.value:.1f}]" in next(x for x in text.splitlines() if "Placebo FPR" in x)
