"""Gate configuration, checks and exit codes (pure part; the CLI test runs the command)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from faithjudge.exit_codes import ExitCode
from faithjudge.reports import gate as g
from faithjudge.reports.junit import junit_unevaluable, junit_xml
from faithjudge.reports.markup import md_escape
from faithjudge.reports.render_md import gate_markdown
from faithjudge.reports.report import Report, build_report
from faithjudge.reports.table import item_table
from faithjudge_client.lines import ItemResult
from faithjudge_client.metric_catalogue import headline_scopes

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
    with pytest.raises(
        g.GateConfigError, match=r"unknown section \[qualty\]; did you mean \[quality\]\?"
    ):
        g.parse_config({"qualty": {}})
    with pytest.raises(
        g.GateConfigError, match=r"unknown key 'min_cx' in \[quality\]; did you mean 'min_cf'\?"
    ):
        g.parse_config({"quality": {"min_cx": 3}})
    # a key near none of the table's own lists them
    with pytest.raises(
        g.GateConfigError,
        match=r"unknown key 'zzz' in \[gate\]; known keys: 'bootstrap', 'flip_rate', 'seed'",
    ):
        g.parse_config({"gate": {"zzz": 1}, "quality": {"min_cf": 3}})
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


def test_coverage_fails_on_its_failures_and_wins_over_quality() -> None:
    report = _report()
    config = g.parse_config(
        {"quality": {"min_cf": 99.0}, "coverage": {"max_invalid": 10.0, "scopes": ["CA"]}}
    )
    checks = g.evaluate(report, config)
    invalid = next(c for c in checks if c.name == "invalid [CA]")
    # 1 invalid of 5 is 20%: beyond 10% whatever the number of items
    assert g.check_status(invalid) == "fail" and invalid.rate == pytest.approx(20.0)
    result = g.verdict(checks)
    assert result.code == ExitCode.COVERAGE_FAILED and result.label == "FAILED (coverage, quality)"
    assert invalid in result.failed and not result.too_few


def test_a_rate_within_its_threshold_on_too_few_items_is_too_few_not_a_failure() -> None:
    report = _report()
    config = g.parse_config(
        {"quality": {"min_cf": 99.0}, "coverage": {"max_invalid": 25.0, "scopes": ["CA"]}}
    )
    checks = g.evaluate(report, config)
    # point 20% is within 25%, but the exact upper bound of 5 items is not
    assert "invalid [CA]" not in {c.name for c in checks}
    (short,) = [c for c in checks if g.check_status(c) == g.TOO_FEW]
    assert short.name == "too few items [CA]" and short.kind == "coverage"
    assert [p.name for p in short.parts] == ["invalid [CA]"] and short.parts[0].value > 25.0
    assert (short.value, short.needed) == (5.0, 18)
    assert short.measured() == "too few items: 5 of 18 needed"
    assert short.shown() == ("18 items", "5 items")
    assert "1 failure in 5 items" in short.detail and "a pass needs 18" in short.detail
    # the items that never reached the judge are named as its cause
    assert "1 of 6 items in CA never reached the judge (transport failures 1)" in short.detail
    result = g.verdict(checks)
    assert result.too_few == (short,) and short not in result.failed
    # not-judged fails on its one lost item: a coverage failure beside the too-few reason
    assert result.label == "FAILED (coverage, too few items, quality)"
    assert result.code == ExitCode.COVERAGE_FAILED
    # alone, too few items fails the gate with exit 2 under its own reason
    alone = g.verdict([c for c in checks if c.kind == "coverage" and c.name != "not_judged [CA]"])
    assert alone.label == "FAILED (too few items)" and alone.code == ExitCode.COVERAGE_FAILED


def _lost_lines(judged: int, lost: int) -> list[dict]:
    """``judged`` lines every metric of which the judge graded valid, then ``lost`` lines that
    never reached it (unreadable request lines)."""
    clean = [x for x in _judged_lines()
             if all(m["status"] == "valid" for m in x["metrics"].values())]  # fmt: skip
    lines = []
    for i in range(judged):
        line = json.loads(json.dumps(clean[i % len(clean)]))
        line.update(item_id=f"ok-{i}", line=i + 1)
        lines.append(line)
    lines += [{"line": judged + i + 1, "item_id": f"lost-{i}", "model": "m1",
               "error": {"stage": "input", "detail": f"line {judged + i + 1}: not valid JSON"}}
              for i in range(lost)]  # fmt: skip
    return lines


def test_lines_not_judged_are_named_once_per_scope_not_as_schema_and_evidence_failures() -> None:
    """300 lines, 14 of them never judged, no failing grade: 286 judged items cannot show a 1%
    schema or evidence rate (299 needed). That is one state per scope, with its cause."""
    lines = _lost_lines(286, 14)
    config = g.parse_config({"coverage": {"max_schema": 1.0, "max_evidence": 1.0,
                                          "max_parse": 0.0, "max_invalid": 2.0}})  # fmt: skip
    report = _report(lines)
    result = g.verdict(g.evaluate(report, config))
    by_name = {c.name: c for c in result.checks}
    # no schema or evidence check fails: their rates are 0
    assert not [c for c in result.failed if c.name.startswith(("schema", "evidence"))]
    short = [c for c in result.checks if g.check_status(c) == g.TOO_FEW]
    assert [c.name for c in short] == [f"too few items [{s}]" for s in headline_scopes()]
    for check in short:
        assert [p.name.split(" ")[0] for p in check.parts] == ["schema", "evidence"]
        assert check.measured() == "too few items: 286 of 299 needed"
        assert f"14 of 300 items in {check.scope} never reached the judge (input errors 14)" in (
            check.detail
        )
        assert f"schema [{check.scope}]" not in by_name
    # the macro view pools 858 judged items: enough for 1%
    assert g.check_status(by_name["schema [macro]"]) == "pass"
    # the lost lines fail not-judged once per scope (the default limit: none may be lost)
    assert [c.name for c in result.failed] == [f"not_judged [{s}]" for s in config.scopes]
    assert result.label == "FAILED (coverage, too few items)"
    assert result.code == ExitCode.COVERAGE_FAILED

    markdown = gate_markdown(result, report)
    scopes = headline_scopes()  # CF, CA and CC
    needed = ", ".join(f"{s} 286 of 299 needed" for s in scopes)
    assert f"Too few items to show coverage ({len(scopes)} scopes): {needed}." in markdown
    row = next(x for x in markdown.splitlines() if x.startswith("| too few items \\[CF\\] |"))
    assert "| coverage | 299 items | 286 items | **too few items** |" in row
    assert not re.search(r"^\| (schema|evidence) \\\[C", markdown, re.MULTILINE)
    failures = _junit_failures(junit_xml(result))
    assert set(failures) == {c.name for c in (*result.failed, *result.too_few)}
    assert failures["too few items [CF]"].startswith("too few items: 286 of 299 needed: ")
    # the parse check is judged on its count: its value is the rate, never the bound of 0
    parse = by_name["parse [CF]"]
    assert parse.value == 0.0 and parse.shown() == ("0.00", "0.00")
    assert g.check_status(parse) == "pass"


def test_values_print_with_the_digits_that_tell_them_from_the_threshold() -> None:
    assert g.compared(1.0028, 1.0) == ("1.003", "1.000")
    assert g.compared(0.9996, 1.0) == ("0.9996", "1.0000")
    assert g.compared(62.5, 10.0) == ("62.50", "10.00")
    assert g.compared(2.0, 2.0) == ("2.00", "2.00")
    assert g.compared(0.4, 0.125) == ("0.400", "0.125")  # the threshold's own decimals
    assert g.compared(None, 1.0) == ("n/a", "1.00")
    fail = g.Check("coverage", "schema [CA]", 1.0, 1.0028, False, "d", rate=0.0)
    assert fail.shown() == ("1.000", "1.003")
    assert fail.measured() == "rate 0.00%, upper bound 1.003%, threshold 1.000%"
    quality = g.Check("quality", "min_cf [m]", 30.0, 29.996, False, "d")
    assert quality.measured() == "value 29.996%, threshold at least 30.000%"


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
    # 4 judged items cannot show a 50% schema rate: too few items, once per scope
    assert result.label == "FAILED (too few items, quality)"
    assert result.code == ExitCode.COVERAGE_FAILED == g.verdict(unevaluable).code
    assert [c.name for c in result.too_few] == [f"too few items [{s}]" for s in headline_scopes()]
    failures = _junit_failures(junit_xml(result))
    assert set(failures) == {c.name for c in (*result.failed, *result.too_few)}
    assert "min_cf [m-none]" in failures
    markdown = gate_markdown(result, report)
    assert markdown.startswith("# FaithJudge gate: FAILED (too few items, quality)\n")
    for check, cell in [(c, "**FAIL**") for c in result.failed] + [
        (c, "**too few items**") for c in result.too_few
    ]:
        row = next(x for x in markdown.splitlines() if x.startswith(f"| {md_escape(check.name)} |"))
        assert cell in row
    assert markdown.count("**FAIL**") == len(result.failed)
    assert markdown.count("| **too few items** |") == len(result.too_few)
    # every check of too few items says what it has and needs, in the table and the JUnit file
    for check in result.too_few:
        assert failures[check.name].startswith(f"too few items: 4 of {check.needed} needed: ")


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
    # a check short of items stands in a scope's too-few check: its parts keep its bound
    checks = {c.name: c for top in g.evaluate(report, config) for c in (top, *top.parts)}
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
