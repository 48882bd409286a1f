"""The text and the HTML page of an estimation without labels (calib.estimation.report): the
estimates with their intervals, whether they can be trusted and why, the priors, the checks, what the
labelled rows say, the groups and the gates."""

from __future__ import annotations

import html

from .text import format_value, gate_mark, gate_text

#: Each score's row name
SCORE_NAMES = {"accuracy": "accuracy", "nll": "log loss", "brier": "Brier score"}


def _cell(entry) -> str:
    return f"{format_value(entry.value)} [{format_value(entry.lower)}, {format_value(entry.upper)}]"


def estimate_table(report) -> tuple[str, list[str], list[list[str]], list[bool]]:
    """(title, header, rows, right-aligned) of the estimates: one row per score, as calibrated and
    under the batch's priors."""
    source = report.source
    part = f", {source['labelled']} of them labelled" if source["labelled"] else ""
    title = (
        f"Estimates for {source.get('path', 'the batch')} ({source['rows']} rows{part}; {100 * report.whole.level:g}% intervals)"
    )
    header = ["score", "as calibrated", "under the batch's priors"]
    rows = [
        [name, _cell(report.estimates[f"est_{score}"]), _cell(report.estimates[f"est_{score}_shifted"])]
        for score, name in SCORE_NAMES.items()
    ]
    return title, header, rows, [False, True, True]


def estimate_notes(report) -> list[str]:
    """The lines under the table: the verdict, the priors, the checks, the labelled rows and the notes."""
    whole = report.whole
    lines = [
        "reliable: the checks found nothing that breaks the calibration map"
        if report.reliable
        else "UNRELIABLE: " + "; ".join(report.reasons)
    ]
    shift = whole.prior_shift
    lines.append(
        f"class priors: L1 distance {format_value(shift['l1'])} from the map's own (the sampling alone gives about "
        f"{format_value(shift['l1_noise'])}); the shifted estimates follow the estimated priors"
    )
    lines += [f"check {check.name}: {check.finding}" for check in whole.checks]
    if report.labelled is not None and report.test is not None:
        realised = ", ".join(f"{SCORE_NAMES[k]} {format_value(v)}" for k, v in report.labelled["realised"].items())
        lines.append(f"labelled rows ({report.labelled['rows']}): {realised}; {report.test.finding}")
    lines += [f"note: {note}" for note in whole.notes]
    return lines


def group_rows(report) -> tuple[list[str], list[list[str]]]:
    header = ["group", "rows", "accuracy", "accuracy (batch's priors)", "reliable"]
    rows = [
        [
            g.name,
            str(g.rows),
            _cell(g.estimate.estimates["est_accuracy"]),
            _cell(g.estimate.estimates["est_accuracy_shifted"]),
            "yes" if g.estimate.reliable else "no: " + "; ".join(g.estimate.reasons),
        ]
        for g in report.groups
    ]
    return header, rows


def gate_lines(report) -> list[str]:
    lines = []
    for gate in report.gates:
        text = f"gate {gate_mark(gate['outcome'], gate['passed'])}: {gate_text(gate)}"
        if gate.get("unreliable"):
            text += "; inconclusive as the estimate is unreliable (above)"
        lines.append(text)
    return lines


def estimation_page(report) -> str:
    """A self-contained HTML page of the estimation."""
    from .html import _page_start, _table

    title, header, rows, right = estimate_table(report)
    parts = _page_start(f"calib evaluate: {report.source.get('path', 'estimates')}", "Estimates without labels", title)
    parts.append(f'<section id="estimates">{_table(header, rows, right)}</section>')
    notes = "".join(f"<li>{html.escape(line)}</li>" for line in estimate_notes(report))
    parts.append(f'<section id="checks"><h2>Can the estimates be trusted</h2><ul>{notes}</ul></section>')
    whole = report.whole
    shares = [
        [str(k), format_value(a), format_value(b), f"[{format_value(lo)}, {format_value(hi)}]"]
        for k, (a, b, (lo, hi)) in enumerate(zip(whole.reference_priors, whole.priors, whole.prior_intervals))
    ]
    header = ["class", "the map's own", "batch (EM)", "interval"]
    parts.append(f'<section id="priors"><h2>Class priors</h2>{_table(header, shares, [False, True, True, True])}</section>')
    if report.groups:
        group_header, group_body = group_rows(report)
        parts.append(
            f'<section id="groups"><h2>Groups</h2>{_table(group_header, group_body, [False, True, True, True, False])}</section>'
        )
    if report.gates:
        listed = "".join(f"<li>{html.escape(line)}</li>" for line in gate_lines(report))
        parts.append(f'<section id="gates"><h2>Gates</h2><ul>{listed}</ul></section>')
    parts.append("</main></body></html>")
    return "".join(parts) + "\n"
