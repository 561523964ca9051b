"""Judge-vs-radiologist validation: consensus, Kendall tau-b, coverage gates, ceiling, screening.

``ratings`` reads the inputs (the one module here that does I/O); ``consensus``, ``stats``,
``coverage``, ``calibration``, ``split``, ``screening`` and ``validate`` are pure; ``render``
writes Markdown. METHODS §1.7, §1.11 and §1.12 define what is computed.
"""

from __future__ import annotations

from service.agreement.calibration import CcScaleFit, fit_cc_scale
from service.agreement.consensus import Consensus, DroppedRater, build_consensus
from service.agreement.coverage import GateResult, GateThresholds
from service.agreement.ratings import (
    load_judge_results,
    load_ratings,
    load_reader_study,
    reader_study_requests,
)
from service.agreement.render import render_markdown
from service.agreement.report import JudgeReport, Screening, ValidationReport
from service.agreement.split import stratified_split
from service.agreement.stats import bootstrap_tau_b, kendall_tau_b
from service.agreement.validate import validate_judge

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
