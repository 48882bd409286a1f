"""The gates of an evaluation report as JUnit XML, the test-report format CI systems read (GitHub
Actions' test reporters, GitLab's ``artifacts:reports:junit``, Jenkins, Azure Pipelines).

One ``testsuite`` named after the input, one ``testcase`` per gate entry (a change gate's group
entries are entries of their own) and, for a gate on the worst group (``max_group:``), one per
gated group as well. A failed gate is a ``failure``; an inconclusive one is ``skipped`` when it
counts as a pass and a ``failure`` of type ``inconclusive`` when it counts as a failure. The
document holds no time stamps: the same report gives the same bytes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from .text import gate_text, report_title

if TYPE_CHECKING:
    from ..evaluation.report_types import EvaluationReport

#: ``classname`` of the test cases: the gates, and the per-group cases of a worst-group gate.
CLASSNAME, GROUP_CLASSNAME = "calib.gates", "calib.gates.groups"


def _case(suite: ET.Element, classname: str, name: str, outcome: str, passed: bool, message: str) -> str:
    """Add one test case; returns its outcome as counted (pass, fail or skipped)."""
    case = ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")
    if outcome == "pass":
        ET.SubElement(case, "system-out").text = message
        return "pass"
    if outcome == "inconclusive" and passed:
        ET.SubElement(case, "skipped", type="inconclusive", message=message)
        return "skipped"
    failure = ET.SubElement(case, "failure", type=outcome, message=message)
    failure.text = message
    return "fail"


def junit_xml(report: EvaluationReport) -> bytes:
    """The report's gates as a JUnit XML document (UTF-8, with its declaration)."""
    suites = ET.Element("testsuites", name="calib evaluate")
    suite = ET.SubElement(suites, "testsuite", name=f"calib gates: {report_title(report)}")
    counted = []
    for gate in report.gates:
        counted.append(_case(suite, CLASSNAME, gate.expr, gate.outcome, gate.passed, gate_text(gate.fields)))
        for entry in gate.fields.get("per_group", []):
            single = {**gate.fields, "aggregate": None, **entry}
            name = f"{gate.expr} [group {entry['group']}]"
            counted.append(_case(suite, GROUP_CLASSNAME, name, entry["outcome"], entry["passed"], gate_text(single)))
    totals = {
        "tests": str(len(counted)),
        "failures": str(counted.count("fail")),
        "errors": "0",
        "skipped": str(counted.count("skipped")),
        "time": "0",
    }
    suite.attrib.update(totals)
    suites.attrib.update({key: totals[key] for key in ("tests", "failures", "errors", "time")})
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"
