"""Everything the command line shows: the only module that imports rich, and only when it prints
to a terminal (pipelines, files and CI logs get plain text without loading it)."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Sequence

from ..operations import UsageError
from ..reporting.text import (
    OVER_COLOUR,
    UNDER_COLOUR,
    comparison_cells,
    format_change,
    format_value,
    gate_mark,
    gate_text,
    group_table,
    markdown_table,
    metric_table,
    reliability_legend,
    report_lines,
    report_title,
    table_footnotes,
    text_table,
)


@functools.cache
def _console(stderr: bool = False):
    """The rich console of stdout or stderr. No markup and no emoji codes: what is printed holds file
    names and user expressions, and "[x]" or ":x:" in a path must stay as it is. Styles are given
    as Text spans and style arguments instead."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, markup=False, emoji=False)


def _is_terminal(stderr: bool = False) -> bool:
    """Whether rich would treat the stream as a terminal; decided without importing rich where the
    stream is not one and no variable rich reads (TTY_COMPATIBLE, FORCE_COLOR) says otherwise."""
    stream = sys.stderr if stderr else sys.stdout
    if os.environ.get("TTY_COMPATIBLE") != "1" and not os.environ.get("FORCE_COLOR"):
        try:
            if not stream.isatty():
                return False
        except (AttributeError, ValueError):  # no isatty, or a closed stream
            return False
    return _console(stderr).is_terminal


def _line(*parts, stderr: bool = False) -> None:
    """One line of text parts, each a string or (string, style): styled on a terminal, plain otherwise."""
    if not _is_terminal(stderr):
        (sys.stderr if stderr else sys.stdout).write("".join(p if isinstance(p, str) else p[0] for p in parts) + "\n")
        return
    from rich.text import Text

    _console(stderr).print(Text.assemble(*parts), soft_wrap=True)


def note(message: str) -> None:
    """A remark for the person at the terminal (stderr, so pipelines stay clean)."""
    _line((message, "dim"), stderr=True)


def error(message: str) -> None:
    """The one line a failed command prints (plain text: it may be read by scripts)."""
    sys.stderr.write(f"calib: error: {message}\n")
    sys.stderr.flush()


#: Renderings of a table: ``auto`` is ``table`` (rich, for a person at a terminal) when stdout is a
#: terminal and ``text`` (aligned plain text at full width: CI logs, files, pipes) otherwise; ``md``
#: is a markdown table (a pull-request comment, a job summary).
FORMATS = ("auto", "table", "text", "md")


def resolve_format(requested: str = "auto") -> str:
    if requested not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}; got {requested!r}")
    if requested == "auto":
        return "table" if _is_terminal() else "text"
    return requested


#: A table cell: its text, or (its text, its rich style).
Cell = str | tuple[str, str]


def table(
    title: str,
    header: list[str] | None,
    rows: Sequence[Sequence[Cell]],
    right: list[bool],
    style: str = "auto",
    prose: int | None = None,
) -> None:
    """Print a table to stdout in ``style`` (see :data:`FORMATS`); ``header`` None for a two-column
    list of names and values. Numbers are never cut: in a rich table only the last ``prose``
    columns (settings, descriptions; by default the last column when it is left-aligned text)
    wrap, the others are as wide as their widest cell. A terminal too narrow for a single prose
    column gets it listed under the table; one too narrow for the rest gets plain lines."""
    style = resolve_format(style)
    shown_header = header if header is not None else [""] * len(right)
    styled = [list(row) for row in rows]
    texts = [[cell if isinstance(cell, str) else cell[0] for cell in row] for row in rows]
    if style != "table":
        body = markdown_table(shown_header, texts, right) if style == "md" else text_table(shown_header, texts, right)
        if header is None and style == "text":
            body = body[1:]
        heading = [f"**{title}**", ""] if style == "md" else [title]
        sys.stdout.write("\n".join([*heading, *body]) + "\n")
        return
    out = _console()
    _line((title, "bold"))
    if prose is None:
        prose = 1 if header is not None and not right[-1] else 0
    cells = [shown_header, *texts]
    widths = [max(len(row[i]) for row in cells) for i in range(len(right))]
    fixed = widths[: len(widths) - prose]
    needed = sum(fixed) + 3 * len(fixed) + 1  # one space of padding a side, one between columns and at the edges
    if needed > out.width:  # too narrow for the numbers: plain lines (every column), wrapped by the terminal
        for line in text_table(shown_header, texts, right)[0 if header is not None else 1 :]:
            out.print(line, soft_wrap=True)
        return
    below: dict[str, list[str]] = {}
    if prose == 1 and needed + 3 + min(widths[-1], 24) > out.width:  # too narrow for the prose: list it below
        for row in texts:
            if row[-1]:
                below.setdefault(row[-1], []).append(row[0])
        styled, right, shown_header, prose = [row[:-1] for row in styled], right[:-1], shown_header[:-1], 0
    out.print(_rich_table(shown_header if header is not None else None, styled, right, prose))
    if below:  # one line per distinct text, naming its rows
        lines(
            [
                f"{header[-1] if header is not None else 'notes'}:",
                *(f"  {', '.join(names)}: {text}" for text, names in below.items()),
            ]
        )


def _rich_table(header: list[str] | None, rows: list[list[Cell]], right: list[bool], prose: int):
    """A rich table whose columns other than the last ``prose`` ones never wrap or shrink below
    their widest cell; a cell is text or (text, style)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    texts = [[cell if isinstance(cell, str) else cell[0] for cell in row] for row in rows]
    grid = Table(show_header=header is not None, box=box.SIMPLE_HEAD if header is not None else box.SIMPLE, padding=(0, 1))
    names = header if header is not None else [""] * len(right)
    for i, (name, align) in enumerate(zip(names, right)):
        wraps = i >= len(names) - prose
        grid.add_column(
            name,
            justify="right" if align else "left",
            no_wrap=not wraps,
            min_width=None if wraps else max([len(name), *(len(row[i]) for row in texts)]),
            style="bold" if i == 0 else ("dim" if wraps and i == len(names) - 1 else None),
        )
    for row in rows:
        grid.add_row(*(cell if isinstance(cell, str) else Text(cell[0], style=cell[1] or "") for cell in row))
    return grid


def lines(text_lines: list[str], style: str = "dim") -> None:
    """Lines under a table (footnotes): dim on a terminal, plain otherwise."""
    for line in text_lines:
        _line((line, style))


@contextlib.contextmanager
def progress(description: str, total: int, unit: str = "steps", skip_hint: str = ""):
    """Progress of ``total`` steps on stderr; yields ``advance(status="")`` to call once per step.
    On a terminal: a bar with steps done/total, the time left and the last status; otherwise one
    line early on with the time all steps will take at the pace so far (and ``skip_hint``)."""
    if total <= 0:
        yield lambda status="": None
        return
    if not _is_terminal(stderr=True):
        times = [time.perf_counter()]
        report_at = min(total, max(3, total // 10))  # the first step carries start-up costs: pace from the next ones

        def advance(status: str = "") -> None:
            times.append(time.perf_counter())
            if len(times) - 1 == report_at and report_at < total:
                first = times[1] - times[0]
                pace = (times[-1] - times[1]) / max(report_at - 1, 1)
                note(f"{description}: {total} {unit}, about {first + pace * (total - 1):.0f} s{skip_hint}")

        yield advance
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(f"{unit}, about"),
        TimeRemainingColumn(),
        TextColumn("left" + skip_hint),
        TextColumn("{task.fields[status]}"),
        console=_console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total, status="")
        yield lambda status="": bar.update(task, advance=1, status=status)


@contextlib.contextmanager
def activity(description: str, quiet: bool = False):
    """Work of unknown length on stderr: on a terminal (and unless ``quiet``) a spinner with the
    seconds spent and the work's last report (``report(status)``, which the library's progress
    reports reach through :func:`calib.core.progress.reporting`); elsewhere nothing. Yields the report callback."""
    if quiet or not _is_terminal(stderr=True):
        yield lambda status="": None
        return
    started = time.perf_counter()
    with _console(stderr=True).status(description) as shown:

        def report(status: str = "") -> None:
            shown.update(f"{description}: {time.perf_counter() - started:.0f} s{', ' + status if status else ''}")

        yield report


def write_json(document: dict, path: str) -> None:
    """``document`` as indented JSON to stdout (``path`` "-") or, atomically, to the file ``path``."""
    import json

    text = json.dumps(document, indent=2) + "\n"
    if path == "-":
        sys.stdout.write(text)
    else:
        from ..operations import write_output

        write_output(path, text)


def key_values(title: str, values: dict) -> None:
    """A two-column table of names and values (a summary)."""
    rows = [[str(key).replace("_", " "), format_value(value)] for key, value in values.items()]
    table(title, None, rows, [False, False])


def report_table(report, style: str = "auto") -> None:
    """The metric table of `calib evaluate` (before/after/change columns when a bundle was applied),
    its footnotes and gates, in ``style``."""
    style = resolve_format(style)
    if style != "table":
        sys.stdout.write("\n".join(report_lines(report, style)) + "\n")
        return
    header, rows = metric_table(report)
    table(f"calib evaluate: {report_title(report)}", header, rows, [False, *([True] * (len(header) - 2)), False], style)
    lines(table_footnotes(report))
    grouped = group_table(report)
    if grouped is not None:
        title, group_header, group_rows, notes = grouped
        table(title, group_header, group_rows, [False] + [True] * (len(group_header) - 1), style)
        lines(notes)
    colours = {"pass": "green", "fail": "red", "inconclusive": "yellow"}
    for gate in report.gates:
        _line("gate ", (gate_mark(gate.outcome, gate.passed), colours[gate.outcome]), f": {gate_text(gate.fields)}")


def methods_table(calibrators: list[list[str]], metrics: list[list[str]]) -> None:
    """The calibrators (name, options and their defaults, summary) and the metrics (key, summary)."""
    table(
        "calibrators (calib fit --method NAME; other options: -O NAME=VALUE)",
        ["method", "options (default)", "what it does"],
        calibrators,
        [False, False, False],
        prose=2,
    )
    table("metrics (calib evaluate --metrics KEY,...)", ["metric", "what it measures"], metrics, [False, False])


def _bar(value: float, scale: float, width: int = 24) -> str:
    filled = 0 if scale <= 0 else int(round(width * min(value / scale, 1.0)))
    return "#" * filled


#: How a finding's severity reads on a terminal.
SEVERITY_STYLE = {"info": ("·", "dim"), "warning": ("!", "yellow"), "problem": ("✗", "bold red")}


def _selective_line(selective: dict) -> str:
    """AURC and E-AURC of a diagnosis, in one line."""
    return (
        f"telling right answers from wrong ones (most confident rows answered first): AURC {format_value(selective['aurc'])}, "
        f"E-AURC {format_value(selective['eaurc'])} above the oracle's (--out draws the risk-coverage curve)"
    )


def diagnosis(result) -> None:
    """Findings, metric table, text reliability diagram and cumulative mass curve, worst groups and
    classes, comparison and recommendation."""
    source = result.source
    what = f"{source.get('path', '')}: {result.n} x {result.k} ({result.kind})"
    if source.get("bundle"):
        what += f", after bundle {source['bundle']} ({source['method']})"
    lines([f"calib diagnose: {what}"], style="bold")
    for finding in result.findings:
        mark, style = SEVERITY_STYLE[finding["severity"]]
        _line(f"  {mark} ", (finding["severity"], style), f": {finding['text']}")
    if result.report is not None:
        header, rows = metric_table(result.report)
        table("metrics", header, rows, [False, *([True] * (len(header) - 2)), False])
    for title, rows, key, counted in (
        (
            "reliability (P(y_l = 1), pairs pooled)" if "ece_pos" in result.metrics else "reliability (top label)",
            result.reliability,
            "confidence",
            "rows",
        ),
        # each row gives K masses (its top-1 ... top-K), so the curve's bins count (row, k) pairs
        ("cumulative mass calibration curve", result.cumulative_mass, "mass", "(row, k) pairs"),
    ):
        scale = max((abs(r["observed"] - r[key]) for r in rows), default=0.0)
        banded = any("interval" in r for r in rows)
        cells: list[list[Cell]] = []
        for r in rows:
            gap = r["observed"] - r[key]
            colour = OVER_COLOUR if gap < 0 else UNDER_COLOUR
            interval = []
            if banded:
                lower, upper = r["interval"]
                interval = [f"[{format_value(lower)}, {format_value(upper)}]" + (" few rows" if r["few_rows"] else "")]
            cells.append(
                [
                    f"[{r['bin'][0]:.2f}, {r['bin'][1]:.2f})",
                    str(r["count"]),
                    format_value(r[key]),
                    format_value(r["observed"]),
                    *interval,
                    (format_change(gap), colour),
                    (_bar(abs(gap), scale), colour),
                ]
            )
        header = ["bin", counted, key, "observed", *(["95% interval"] if banded else []), "gap", ""]
        table(title, header, cells, [False, True, True, True, *([False] if banded else []), True, False])
    lines(reliability_legend())
    if result.risk_coverage is not None:
        lines([_selective_line(result.risk_coverage)], style="")
    if result.groups is not None and result.groups["worst"]:
        cells = []
        for curve in result.groups["worst"]:
            over = sum(r["over"] for r in curve["reliability"])
            under = sum(r["under"] for r in curve["reliability"])
            cells.append([curve["group"], str(curve["n"]), format_value(curve["ece"]), format_value(over), format_value(under)])
        spread, unit = result.groups["spread"], result.groups.get("unit", "group")
        measure = result.groups.get("measure", "top-label ECE")
        whose = "labels" if unit == "label" else f"groups of {result.groups['source']}"
        title = f"worst {whose} ({measure}; over {spread['groups']} {unit}s: {format_value(spread['min'])} to {format_value(spread['max'])})"
        table(title, [unit, "rows", "ECE", "over", "under"], cells, [False, True, True, True, True])
    cells = [[str(r["class"]), format_value(r["cw_ece"]), str(r["support"])] for r in result.worst_classes]
    table("worst classes (classwise ECE)", ["class", "cw-ECE", "support"], cells, [True, True, True])
    if result.comparison:
        header, rows, best, beyond = comparison_cells(result.comparison)
        cells = [
            [
                (cell + ("*" if is_best else "") + ("†" if moved else ""), "bold" if is_best else "")
                for cell, is_best, moved in zip(*parts)
            ]
            for parts in zip(rows, best, beyond)
        ]
        table("cross-validated comparison (mean±std over folds)", header, cells, [False, *([True] * (len(header) - 1))])
        lines(["* best in its column; † changed beyond the fold noise from the model's own probabilities (paired t-test, 5%)"])
        lines([f"trade-offs: {line}" for line in result.tradeoffs], style="")
        lines([f"recommendation: {result.recommendation}"], style="bold")
