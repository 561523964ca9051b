"""The benchmark summary names the machine behind each figure."""

from __future__ import annotations

import pytest

from benchmarks import run_all
from benchmarks.run_all import summary_markdown


@pytest.fixture(autouse=True)
def _no_metric_table(monkeypatch: pytest.MonkeyPatch) -> None:
    # The metric rows read each benchmark's own fields; these tests are about the machine lines.
    monkeypatch.setattr(run_all, "table", lambda results: "")


def _result(cpu: str) -> dict[str, object]:
    return {
        "machine": {
            "cpu_count": 2,
            "cpu_model": cpu,
            "python": "3.11.7",
            "platform": "Linux",
            "load_average": [0.5, 0.5, 0.5],
        },
        "duration_s": 10.0,
    }


def test_one_machine_is_named_once_in_the_header() -> None:
    text = summary_markdown(
        {"verify_throughput": _result("EPYC"), "cli_process": _result("EPYC")}, {}
    )
    assert "Machine: 2 CPUs (EPYC), Python 3.11.7, Linux." in text
    assert "more than one" not in text


def test_results_from_two_machines_are_not_claimed_for_the_first() -> None:
    text = summary_markdown(
        {"verify_throughput": _result("Xeon"), "cli_process": _result("EPYC")}, {}
    )
    assert "Machine: " not in text
    assert "Machines: more than one" in text
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()}
    assert "(Xeon)" in rows["verify_throughput"]
    assert "(EPYC)" in rows["cli_process"]
