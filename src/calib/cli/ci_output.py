"""What `calib evaluate` hands to a CI system besides its exit code: a JUnit XML file of the gates
(``--junit``), and on GitHub Actions a markdown summary appended to ``$GITHUB_STEP_SUMMARY`` and the
gate results appended to ``$GITHUB_OUTPUT`` (docs/ci-gates.md)."""

from __future__ import annotations

import json
import os

from ..operations import write_output
from ..reporting.junit import junit_xml
from ..reporting.text import comparison_note, report_lines


def overall_outcome(report) -> str:
    """fail when a gate counts as failed, else inconclusive when one is, else pass."""
    if not report.passed:
        return "fail"
    if any(gate.outcome == "inconclusive" for gate in report.gates):
        return "inconclusive"
    return "pass"


def github_outputs(report) -> dict[str, str]:
    """The step outputs: ``passed`` (true/false), ``outcome`` (pass/fail/inconclusive), the counts
    of gates by outcome, and ``gates``: every gate entry's expression, outcome and value as one
    line of JSON."""
    outcomes = [gate.outcome for gate in report.gates]
    summary = [
        {
            "expr": g.expr,
            "outcome": g.outcome,
            "passed": g.passed,
            "value": g.fields["value"],
            **({"note": comparison_note(g.fields)} if "baseline_input" in g.fields else {}),
        }
        for g in report.gates
    ]
    return {
        "passed": "true" if report.passed else "false",
        "outcome": overall_outcome(report),
        "failed": str(sum(not g.passed for g in report.gates)),
        "inconclusive": str(outcomes.count("inconclusive")),
        "gates": json.dumps(summary, separators=(",", ":")),
    }


def _append(path: str, text: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def write_ci_outputs(report, junit_path: str | None, summary: list[str] | None = None) -> None:
    """The JUnit file (written atomically) and, when GitHub Actions' files are set, the job
    summary (``summary``'s markdown lines, else the report's) and step outputs (appended, as
    GitHub expects)."""
    if junit_path is not None:
        write_output(junit_path, junit_xml(report))
    if not report.gates:
        return
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        _append(summary_path, "\n".join(summary if summary is not None else report_lines(report, "md")) + "\n\n")
    outputs = os.environ.get("GITHUB_OUTPUT")
    if outputs:
        _append(outputs, "".join(f"{key}={value}\n" for key, value in github_outputs(report).items()))
