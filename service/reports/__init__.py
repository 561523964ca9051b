"""Reports of scored runs: aggregates, coverage, comparisons, renderers and the CI gate.

Everything here is a pure function of result lines (via the item table of ``table``); only
``io`` and ``export`` touch files.
"""

from __future__ import annotations

from service.reports.aggregate import aggregate, table1
from service.reports.compare import compare_runs
from service.reports.coverage import run_coverage, run_fpr, run_gates
from service.reports.report import Report, build_report, report_json
from service.reports.table import item_table

__all__ = [
    "Report",
    "aggregate",
    "build_report",
    "compare_runs",
    "item_table",
    "report_json",
    "run_coverage",
    "run_fpr",
    "run_gates",
    "table1",
]
