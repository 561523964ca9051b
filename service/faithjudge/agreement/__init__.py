"""Judge-vs-radiologist validation: consensus, Kendall tau-b, coverage gates, ceiling, screening.

``ratings`` reads the inputs (the one module here that does I/O); ``consensus``,
``calibration``, ``split``, ``screening`` and ``validate`` are pure; ``render`` writes Markdown.
Tau-b, the bootstraps, the coverage rates and the gates are ``faithjudge.stats``, shared with the
run reports and the audits. METHODS §1.7, §1.11 and §1.12 define what is computed.
"""

from __future__ import annotations

from faithjudge.agreement.calibration import CcScaleFit, fit_cc_scale
from faithjudge.agreement.consensus import Consensus, DroppedRater, build_consensus
from faithjudge.agreement.ratings import (
    load_judge_results,
    load_ratings,
    load_reader_study,
    reader_study_requests,
)
from faithjudge.agreement.render import render_markdown
from faithjudge.agreement.report import JudgeReport, Screening, ValidationReport
from faithjudge.agreement.split import stratified_split
from faithjudge.agreement.validate import validate_judge

__all__ = [
    "CcScaleFit",
    "Consensus",
    "DroppedRater",
    "JudgeReport",
    "Screening",
    "ValidationReport",
    "build_consensus",
    "fit_cc_scale",
    "load_judge_results",
    "load_ratings",
    "load_reader_study",
    "reader_study_requests",
    "render_markdown",
    "stratified_split",
    "validate_judge",
]
