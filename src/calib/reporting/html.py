"""report.html of ``calib diagnose --out``: one self-contained page (inline CSS and SVG, no
script, no network, no date) that reads top to bottom: what was diagnosed, the findings by
severity, the recommendation with its trade-offs, the metric table, the figures, the groups, the
worst classes, the conformal sets and the cross-validated comparison. And the page of ``calib
compare --html`` (:func:`comparison_page`), in the same style."""

from __future__ import annotations

import html

from .text import (
    OVER_COLOUR,
    UNDER_COLOUR,
    comparison_cells,
    comparison_group_rows,
    comparison_notes,
    comparison_tables,
    comparison_title,
    format_value,
    gate_text,
    metric_table,
    table_footnotes,
    verdict_lines,
)

STYLE = f"""
:root {{ color-scheme: light dark; --fg: #1d1d1f; --bg: #ffffff; --muted: #5f6368; --line: #d9d9de;
  --stripe: #f5f5f7; --accent: #2c5d8f; --info: #5f6368; --warning: #a15c00; --problem: {OVER_COLOUR}; }}
@media (prefers-color-scheme: dark) {{ :root {{ --fg: #e8e8ea; --bg: #16171a; --muted: #a0a3a8;
  --line: #3a3b40; --stripe: #1f2024; --accent: #8ab4f8; --info: #a0a3a8; --warning: #f0b45a; --problem: #ff7b72; }} }}
* {{ box-sizing: border-box; }}
body {{ margin: 0; background: var(--bg); color: var(--fg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }}
main {{ max-width: 1180px; margin: 0 auto; padding: 24px 28px 64px; }}
h1 {{ font-size: 26px; margin: 0 0 4px; }}
h2 {{ font-size: 19px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }}
p.lead, .muted {{ color: var(--muted); }}
table {{ border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; }}
th, td {{ padding: 4px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }}
th {{ font-weight: 600; }}
td.num, th.num {{ text-align: right; white-space: nowrap; }}
tbody tr:nth-child(even) {{ background: var(--stripe); }}
.wide {{ overflow-x: auto; }}
dl.source {{ display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 12px 0; }}
dl.source dt {{ color: var(--muted); }} dl.source dd {{ margin: 0; font-family: ui-monospace, Menlo, Consolas, monospace; }}
ul.findings {{ list-style: none; padding: 0; }}
ul.findings li {{ margin: 4px 0; padding-left: 6px; border-left: 4px solid var(--info); }}
ul.findings li.warning {{ border-color: var(--warning); }} ul.findings li.problem {{ border-color: var(--problem); }}
.badge {{ display: inline-block; min-width: 84px; font-size: 12px; font-weight: 600; text-transform: uppercase; }}
.badge.info {{ color: var(--info); }} .badge.warning {{ color: var(--warning); }} .badge.problem {{ color: var(--problem); }}
.advice {{ border: 1px solid var(--accent); border-radius: 6px; padding: 10px 14px; margin: 12px 0; }}
.advice b {{ color: var(--accent); }}
td.best {{ font-weight: 700; }}
td .sd {{ display: block; font-size: 12px; font-weight: 400; color: var(--muted); }}
th {{ overflow-wrap: anywhere; }}
.figures {{ display: flex; flex-wrap: wrap; gap: 18px; }}
figure.plot {{ margin: 0; background: #ffffff; border: 1px solid var(--line); border-radius: 6px; padding: 8px; }}
figure.plot svg {{ display: block; max-width: 100%; height: auto; }}
.over {{ color: {OVER_COLOUR}; }} .under {{ color: {UNDER_COLOUR}; }}
"""


def _escape(value) -> str:
    return html.escape(str(value))


def _table(header: list[str], rows: list[list[str]], numeric: list[bool], table_id: str = "", classes=None) -> str:
    """An HTML table; ``classes[i][j]`` adds a class to a cell (e.g. "best"). A "mean±std" cell
    shows the std on a line of its own; header names may break after an underscore."""
    head = "".join(
        f"<th{' class=num' if num else ''}>{_escape(name).replace('_', '_<wbr>')}</th>" for name, num in zip(header, numeric)
    )
    body = []
    for i, row in enumerate(rows):
        cells = []
        for j, (cell, num) in enumerate(zip(row, numeric)):
            names = " ".join((["num"] if num else []) + ([classes[i][j]] if classes and classes[i][j] else []))
            attribute = f' class="{names}"' if names else ""
            mean, plus, spread = str(cell).partition("±")
            shown = _escape(mean) + (f"<span class=sd>±{_escape(spread)}</span>" if plus else "")
            cells.append(f"<td{attribute}>{shown}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    ident = f' id="{table_id}"' if table_id else ""
    return f'<div class="wide"><table{ident}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _marked(cell: str, best: bool, moved: bool) -> str:
    """A comparison cell with its marks after the mean: ★ best in the column, † beyond the fold noise."""
    mean, plus, spread = cell.partition("±")
    return mean + (" ★" if best else "") + (" †" if moved else "") + plus + spread


def _svg(markup: str) -> str:
    """A matplotlib SVG ready to inline: from its <svg> element on (no XML declaration or DOCTYPE)."""
    return markup[markup.index("<svg") :]


def _figure(figures: dict, name: str, caption: str) -> str:
    if name not in figures:
        return ""
    return f'<figure class="plot" id="figure-{name}" aria-label="{_escape(caption)}">{_svg(figures[name])}</figure>'


def _page_start(title: str, heading: str, lead: str) -> list[str]:
    return [
        "<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport content='width=device-width'>",
        f"<title>{_escape(title)}</title><style>{STYLE}</style></head><body><main>",
        f"<h1>{_escape(heading)}</h1><p class=lead>{_escape(lead)}</p>",
    ]


def comparison_page(report) -> str:
    """The page for a report of :func:`calib.drift.compare` (a ComparisonReport): the verdict with
    its evidence and remedy, the tables of what changed and of the decompositions, the priors and
    the remedies' held-out evidence, the groups and the gates."""
    section = report.whole
    parts = _page_start(f"calib compare: {report.ref.path} -> {report.new.path}", "calib compare", comparison_title(report))
    lines = verdict_lines(section)
    parts.append(
        f'<section id="verdict"><div class="advice"><b>{_escape(lines[0])}</b><br>{"<br>".join(_escape(line) for line in lines[1:])}</div>'
    )
    if report.note:
        parts.append(f"<p class=muted>{_escape(report.note)}</p>")
    parts.append("</section>")
    for (title, header, rows, right), ident in zip(comparison_tables(section), ("changes", "decompositions")):
        parts.append(f'<section id="{ident}"><h2>{_escape(title.capitalize())}</h2>{_table(header, rows, right)}</section>')
    notes = "".join(f"<li>{_escape(line)}</li>" for line in comparison_notes(section))
    parts.append(f'<section id="priors"><h2>Class priors and remedies</h2><ul>{notes}</ul>')
    priors = section.priors
    shares = [[str(k), format_value(a), format_value(b)] for k, (a, b) in enumerate(zip(priors["ref"], priors["new"]))]
    parts.append(f"{_table(['class', 'REF', 'NEW'], shares, [False, True, True])}</section>")
    if report.groups is not None:
        title, header, rows, group_notes = comparison_group_rows(report.groups)
        listed = "".join(f"<li>{_escape(line)}</li>" for line in group_notes)
        parts.append(
            f'<section id="groups"><h2>{_escape(title.capitalize())}</h2>'
            f"{_table(header, rows, [False, True, True, True, False])}<ul>{listed}</ul></section>"
        )
    if report.gates:
        rows = [[gate.expr, gate.outcome, gate_text(gate.fields)] for gate in report.gates]
        parts.append(
            f'<section id="gates"><h2>Gates</h2>{_table(["gate", "outcome", "reading"], rows, [False, False, False])}</section>'
        )
    parts.append("</main></body></html>")
    return "".join(parts) + "\n"


def report_page(result, figures: dict[str, str]) -> str:
    """The page for a :class:`calib.diagnose.Diagnosis` with its figures as SVG markup by name."""
    source = result.source
    parts = _page_start(f"calib diagnose: {source.get('path', '')}", "calib diagnose", source.get("path", ""))
    parts.append(_source_section(result))

    findings = "".join(
        f"<li class={f['severity']}><span class='badge {f['severity']}'>{f['severity']}</span>{_escape(f['text'])}</li>"
        for f in result.findings
    )
    parts.append(f'<section id="findings"><h2>Findings</h2><ul class="findings">{findings}</ul></section>')
    if result.recommendation:
        tradeoffs = "".join(f"<li>{_escape(line)}</li>" for line in result.tradeoffs)
        parts.append(
            f'<section id="recommendation"><div class="advice"><b>Recommendation:</b> {_escape(result.recommendation)}'
            f"<ul>{tradeoffs}</ul></div></section>"
        )

    if result.report is not None:
        header, rows = metric_table(result.report)
        numeric = [False, *([True] * (len(header) - 2)), False]
        notes = "".join(f"<p class=muted>{_escape(line)}</p>" for line in table_footnotes(result.report))
        parts.append(f'<section id="metric-section"><h2>Metrics</h2>{_table(header, rows, numeric, "metrics")}{notes}</section>')

    over = sum(r["over"] for r in result.reliability)
    under = sum(r["under"] for r in result.reliability)
    parts.append(
        "<section id='calibration'><h2>Where the probabilities are off</h2>"
        f"<p>Top-label ECE {format_value(over + under)}: <span class=over>{format_value(over)} from over-confidence</span>, "
        f"<span class=under>{format_value(under)} from under-confidence</span>. "
        "Red marks over-confidence (accuracy below the confidence) and blue under-confidence, here and in the terminal.</p>"
        "<div class=figures>"
        + _figure(figures, "reliability", "reliability diagram")
        + _figure(figures, "cumulative_mass", "cumulative mass calibration curve")
        + _figure(figures, "over_under", "over- and under-confidence by bin")
        + "</div></section>"
    )
    if result.risk_coverage is not None:
        selective = result.risk_coverage
        parts.append(
            "<section id='selective'><h2>Telling right answers from wrong ones</h2>"
            f"<p>Answering the most confident rows first: AURC {format_value(selective['aurc'])} (the area under the "
            f"risk-coverage curve), E-AURC {format_value(selective['eaurc'])} (above the oracle's, which answers every "
            "right row first).</p><div class=figures>"
            + _figure(figures, "risk_coverage", "risk-coverage curve")
            + "</div></section>"
        )

    if result.groups is not None:
        parts.append(_groups_section(result, figures))

    rows = [[str(r["class"]), format_value(r["cw_ece"]), str(r["support"])] for r in result.worst_classes]
    parts.append(
        "<section id='classes'><h2>Worst classes</h2>"
        + _table(["class", "classwise ECE", "rows with this label"], rows, [True, True, True], "worst-classes")
        + "</section>"
    )

    if result.conformal is not None:
        curve = result.conformal
        rows = [
            [format_value(a), format_value(c), format_value(s)]
            for a, c, s in zip(curve["alphas"], curve["coverage"], curve["set_size"])
        ]
        parts.append(
            "<section id='conformal'><h2>Conformal sets against alpha, and per class</h2>"
            + _figure(figures, "conformal_sets", "conformal sets against alpha")
            + _table(["alpha", "coverage", "mean set size"], rows, [True, True, True], "conformal-sets")
            + "</section>"
        )

    if result.comparison:
        parts.append(_comparison_section(result))
    parts.append("</main></body></html>\n")
    return "".join(parts)


def _source_section(result) -> str:
    """What was diagnosed: input, shape, kind, bundle and method, calib version."""
    source = result.source
    described = {
        "input": source.get("path"),
        "rows x classes": f"{result.n} x {result.k}",
        "input kind": result.kind,
        "bundle": source.get("bundle") or "none (the model's own probabilities)",
    }
    if source.get("method"):
        options = ", ".join(f"{k}={v}" for k, v in source.get("options", {}).items()) or "defaults"
        described["method"] = f"{source['method']} ({options})"
    described["calib"] = source.get("calib_version")
    items = "".join(f"<dt>{_escape(k)}</dt><dd>{_escape(v)}</dd>" for k, v in described.items())
    return f'<section id="input"><dl class="source">{items}</dl></section>'


def _groups_section(result, figures: dict[str, str]) -> str:
    """Top-label ECE over the groups, the worst groups and their reliability curves."""
    spread, unit = result.groups["spread"], result.groups.get("unit", "group")
    measure = result.groups.get("measure", "top-label ECE")
    rows = [[c["group"], str(c["n"]), format_value(c["ece"])] for c in result.groups["worst"]]
    summary = (
        f"<p>{_escape(measure[0].upper() + measure[1:])} over {spread['groups']} {unit}s: {format_value(spread['min'])} to "
        f"{format_value(spread['max'])} (median {format_value(spread['median'])}).</p>"
        if spread
        else ""
    )
    heading = "Labels" if unit == "label" else f"Groups of {_escape(result.groups['source'])}"
    return (
        f"<section id='groups'><h2>{heading}</h2>{summary}"
        + _table([f"worst {unit}", "rows", "ECE"], rows, [False, True, True], "worst-groups")
        + _figure(figures, "reliability_groups", f"reliability of the worst {unit}s")
        + "</section>"
    )


def _comparison_section(result) -> str:
    """The cross-validated comparison of methods, best and beyond-noise cells marked."""
    header, rows, best, beyond = comparison_cells(result.comparison)
    marked = [[cell + (" ★" if b else "") + (" †" if m else "") for cell, b, m in zip(*row)] for row in zip(rows, best, beyond)]
    classes = [["best" if b else "" for b in row] for row in best]
    return (
        "<section id='comparison-section'><h2>Cross-validated comparison</h2>"
        "<p class=muted>Mean ± standard deviation over the folds. ★ best in its column; † changed beyond the fold "
        "noise from the model's own probabilities (paired t-test over the folds, 5%).</p>"
        + _table(header, marked, [False, *([True] * (len(header) - 1))], "comparison", classes)
        + "</section>"
    )
