"""How `calib evaluate` (and `calib merge-states` on estimation states) shows estimates of rows
without labels (calib.estimate): the JSON, the HTML page and the tables, after the evaluation of
the rows that have labels when there is one."""

from __future__ import annotations

import typer

from .. import operations
from . import render


def show(report, flags: dict, evaluation=None) -> None:
    """The JSON (--json), the HTML page (--html) and the tables of an estimation (after the labelled
    rows' evaluation, when there is one); exit 1 when a gate of either failed."""
    from ..reporting.estimation import estimate_notes, estimate_table, estimation_page, gate_lines, group_rows

    document = report.to_json()
    if evaluation is not None:
        document["labelled_evaluation"] = evaluation.to_json()
    if flags["json_path"] is not None:
        render.write_json(document, flags["json_path"])
    if flags.get("html") is not None:
        operations.write_output(flags["html"], estimation_page(report))
    if flags["json_path"] != "-":
        if evaluation is not None:
            render.report_table(evaluation, flags["table_format"])
        title, header, rows, right = estimate_table(report)
        render.table(title, header, rows, right, flags["table_format"])
        if report.groups:
            group_header, body = group_rows(report)
            render.table("Estimates per group", group_header, body, [False, True, True, True, False], flags["table_format"])
        render.lines(estimate_notes(report) + gate_lines(report))
    passed = [gate["passed"] for gate in report.gates] + (
        [] if evaluation is None else [gate.passed for gate in evaluation.gates]
    )
    if not all(passed):
        render.error(f"gate failed: {passed.count(False)} of {len(passed)}")
        raise typer.Exit(1)
