"""Judge-vs-radiologist validation: consensus, Kendall tau-b, coverage gates, ceiling, screening.

``ratings`` reads the inputs (the one module here that does I/O); ``consensus``, ``stats``,
``coverage``, ``calibration``, ``split``, ``screening`` and ``validate`` are pure; ``render``
writes Markdown. METHODS §1.7, §1.11 and §1.12 define what is computed.
"""

from __future__ import annotations

from faithjudge.agreement.calibration import CcScaleFit, fit_cc_scale
from faithjudge.agreement.consensus import Consensus, DroppedRater, build_consensus
from faithjudge.agreement.judge_coverage import GateResult, GateThresholds
from faithjudge.agreement.ratings import (
    load_judge_results,
    load_ratings,
    load_reader_study,
    reader_study_requests,
)
from faithjudge.agreement.render import render_markdown
from faithjudge.agreement.report import JudgeReport, Screening, ValidationReport
from faithjudge.agreement.split import stratified_split
from faithjudge.agreement.stats import bootstrap_tau_b, kendall_tau_b
from faithjudge.agreement.validate import validate_judge

__all__ = [
    "CcScaleFit",
    "Consensus",
    "DroppedRater",
    "GateResult",
    "GateThresholds",
    "JudgeReport",
    "Screening",
    "ValidationReport",
    "bootstrap_tau_b",
    "build_consensus",
    "fit_cc_scale",
    "kendall_tau_b",
    "load_judge_results",
    "load_ratings",
    "load_reader_study",
    "reader_study_requests",
    "render_markdown",
    "stratified_split",
    "validate_judge",
]
