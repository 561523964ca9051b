"""One run, four outputs, one coverage count.

The ``score`` summary, the run report, the gate and ``validate-judge`` must count coverage the
same way: items that never reached the judge (kb, transport, input) count against coverage and
are shown on their own. This feeds one result file to all four and compares what they say.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from faithjudge.agreement.ratings import load_judge_results
from faithjudge.reports import gate as gating
from faithjudge.reports.io import iter_results
from faithjudge.reports.report import build_report
from faithjudge.reports.table import item_table
from faithjudge.runners.file_runner import ScoreFileSummary
from faithjudge.stats.judge_coverage import axis_outcomes, coverage_diagnostics
from faithjudge_client.lines import ItemResult

from tests.unit.test_reports_aggregate import fixture_lines

LABEL = {"clinical_fidelity": "CF", "causal_attribution": "CA", "confidence_tone": "CT"}


@pytest.fixture
def results_file(tmp_path: Path) -> Path:
    lines = fixture_lines()
    # an unreadable request line: its result names the item, with an ``input`` error
    lines.append({"line": 7, "item_id": "i7", "error": {"stage": "input", "detail": "line 7: x"}})
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_the_summary_the_report_the_gate_and_validation_agree(results_file: Path) -> None:
    summary = ScoreFileSummary()
    for raw in results_file.read_bytes().splitlines():
        summary.add(ItemResult.model_validate_json(raw))

    report = build_report(item_table(iter_results(results_file)), B=50, seed=0)

    judged = load_judge_results(results_file)
    items = sorted(set(judged["item_id"]))
    validation = coverage_diagnostics(axis_outcomes(judged, items), B=50, seed=0, label="t")

    config = gating.parse_config({"coverage": {"max_not_judged": 100.0, "max_invalid": 100.0}})
    checks = {c.name: c for c in gating.evaluate(report, config)}

    for metric, label in LABEL.items():
        counts = summary.outcomes[metric]
        rates = summary.coverage(metric)
        for view in (report.coverage[label], validation[label]):
            assert {k: v for k, v in view.counts.items() if v} == {
                k: v for k, v in counts.items() if v
            }, label
            for rate, estimate in view.rates.items():
                assert estimate.point == pytest.approx(rates[rate], nan_ok=True), (label, rate)
        if label == "CT":
            continue  # the gate checks CF, CA, CC and macro
        # the gate bounds the very same count
        assert (
            f"({report.coverage[label].n_not_judged} of 7)"
            in checks[f"not_judged [{label}]"].detail
        )

    # the KB failure, the transport error and the unreadable line are neither judged nor valid
    cf = summary.outcomes["clinical_fidelity"]
    assert (cf["kb"], cf["transport"], cf["input"]) == (1, 1, 1)
    assert summary.coverage("clinical_fidelity")["cov"] == pytest.approx(4 / 7)
    assert summary.coverage("clinical_fidelity")["invalid"] == 0.0
