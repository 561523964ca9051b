"""JUnit XML of a gate run: one test case per check, so CI systems list each threshold.

The suite's ``<properties>`` name the judge of the run (``judge.evaluator``, ``judge.model``,
...; ``judge.N.*`` per judge when the results mix several), so a CI artifact says who graded.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from faithjudge.reports.gate import Check
from faithjudge.reports.judges import JudgeSummary

__all__ = ["junit_xml"]


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def junit_xml(
    checks: Sequence[Check], *, suite: str = "faithjudge-gate", judges: JudgeSummary | None = None
) -> str:
    """A JUnit XML document; failed checks carry a ``<failure>``, unevaluable ones ``<skipped>``."""
    failures = sum(c.passed is False for c in checks)
    skipped = sum(c.passed is None for c in checks)
    root = ET.Element("testsuites", name=suite, tests=str(len(checks)), failures=str(failures))
    node = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(checks)),
        failures=str(failures),
        skipped=str(skipped),
        errors="0",
    )
    if judges is not None:
        properties = ET.SubElement(node, "properties")
        for name, value in judges.properties():
            ET.SubElement(properties, "property", name=name, value=value)
    for check in checks:
        case = ET.SubElement(
            node, "testcase", classname=f"faithjudge.{check.kind}", name=check.name
        )
        message = f"value {_fmt(check.value)} vs threshold {_fmt(check.threshold)}: {check.detail}"
        if check.passed is False:
            ET.SubElement(case, "failure", message=message, type=check.kind).text = message
        elif check.passed is None:
            ET.SubElement(case, "skipped", message=message)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
