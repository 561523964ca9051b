"""JUnit XML of a gate run: one test case per check, so CI systems list each threshold.

It renders the gate's ``Verdict``: its failures are exactly the checks the verdict failed.

The suite's ``<properties>`` name the judge of the run (``judge.judge``, ``judge.model``,
...; ``judge.N.*`` per judge when the results mix several), so a CI artifact says who graded.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from faithjudge.reports.gate import TOO_FEW, Check, Verdict, check_status, verdict
from faithjudge.reports.judges import JudgeSummary

__all__ = ["junit_unevaluable", "junit_xml"]

# Characters XML 1.0 cannot hold even escaped: ElementTree writes them as they are, and a CI
# viewer then refuses the whole file. Model names and reasons come from the user's lines.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _document(root: ET.Element) -> str:
    ET.indent(root)
    text = ET.tostring(root, encoding="unicode", xml_declaration=True)
    # markup never holds these characters, so only text and attribute values change
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


def junit_xml(
    result: Verdict | Sequence[Check],
    *,
    suite: str = "faithjudge-gate",
    judges: JudgeSummary | None = None,
) -> str:
    """A JUnit XML document of the gate's verdict: every check the verdict failed is a
    ``<failure>`` with its rate, bound and threshold, and a check of too few items one of type
    ``too few items`` with the items it has and needs (JUnit has no state between); a skipped
    one is ``<skipped>``."""
    result = result if isinstance(result, Verdict) else verdict(result)
    checks = result.checks
    failures = len(result.failed) + len(result.too_few)
    skipped = sum(check_status(c) == "skip" for c in checks)
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
        message = f"{check.measured()}: {check.detail}"
        status = check_status(check)
        if status in ("fail", TOO_FEW):
            kind = TOO_FEW if status == TOO_FEW else check.kind
            ET.SubElement(case, "failure", message=message, type=kind).text = message
        elif status == "skip":
            ET.SubElement(case, "skipped", message=message)
    return _document(root)


def junit_unevaluable(reason: str, code: int, *, suite: str = "faithjudge-gate") -> str:
    """A JUnit XML document of a gate that could not judge the run (exit 3 or 4): one failing
    case saying why, so a CI viewer shows a failure where it would otherwise show nothing."""
    root = ET.Element("testsuites", name=suite, tests="1", failures="1")
    node = ET.SubElement(
        root, "testsuite", name=suite, tests="1", failures="1", skipped="0", errors="0"
    )
    case = ET.SubElement(node, "testcase", classname="faithjudge.run", name="run is evaluable")
    message = f"exit {code}: {reason}"
    ET.SubElement(case, "failure", message=message, type="unevaluable").text = message
    return _document(root)
