"""Everything the command line shows: the only module that imports rich."""

from __future__ import annotations

import contextlib
import sys

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..report_text import format_value, gate_text, metric_table

# No markup: what is printed holds file names and user expressions, and "[x]" in a path must stay as
# it is. Styles are given as Text spans and style arguments instead.
_out = Console(highlight=False, markup=False)
_err = Console(stderr=True, highlight=False, markup=False)


def note(message: str) -> None:
    """A remark for the person at the terminal (stderr, so pipelines stay clean)."""
    _err.print(message, style="dim", soft_wrap=True)


def error(message: str) -> None:
    """The one line a failed command prints (plain text: it may be read by scripts)."""
    sys.stderr.write(f"calib: error: {message}\n")
    sys.stderr.flush()


@contextlib.contextmanager
def progress(description: str, total: int):
    """A progress bar on stderr; yields ``advance(status)`` to call once per step."""
    if total <= 0:
        yield lambda status="": None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=_err,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total, status="")
        yield lambda status="": bar.update(task, advance=1, status=status)


def key_values(title: str, values: dict) -> None:
    """A two-column table of names and values (stderr: a summary, not data)."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for key, value in values.items():
        table.add_row(str(key).replace("_", " "), format_value(value))
    _err.print(table)


def fit_summary(method: str, report: dict, *, n: int, k: int, kind: str, seconds: float, out: str) -> None:
    table = Table(title=f"calib fit: {method}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("rows x classes", f"{n} x {k} ({kind})")
    for key, value in report.items():
        table.add_row(key.replace("_", " "), format_value(value))
    table.add_row("time", f"{seconds:.2f} s")
    table.add_row("bundle", out)
    _err.print(table)


def report_table(report: dict) -> None:
    """The metric table of `calib evaluate`: before/after/change columns when a bundle was applied."""
    inp = report["input"]
    title = f"calib evaluate: {inp['path']} ({inp['n']} x {inp['k']}, {inp['kind']})"
    header, rows = metric_table(report)
    table = Table(title=title, title_justify="left")
    table.add_column(header[0], style="bold", no_wrap=True)
    for name in header[1:-1]:
        table.add_column(name, justify="right")
    table.add_column(header[-1], style="dim")
    for row in rows:
        table.add_row(*row)
    _out.print(table)
    if report.get("bundle"):
        _out.print(f"bundle: {report['bundle']}", style="dim")
    for gate in report["gates"]:
        mark = ("pass", "green") if gate["passed"] else ("FAIL", "red")
        _out.print(Text.assemble("gate ", mark, f": {gate_text(gate)}"))


def methods_table(calibrators: dict, metrics: dict, vece_summaries: dict, flag_options) -> None:
    import dataclasses

    table = Table(title="calibrators (calib fit --method NAME; other options: -O NAME=VALUE)", title_justify="left")
    table.add_column("method", style="bold")
    table.add_column("options (default)")
    table.add_column("what it does")
    for name, cls in calibrators.items():
        options = " ".join(
            f"--{f.name} {f.default}" if f.name in flag_options else f"-O {f.name}={f.default}"
            for f in dataclasses.fields(cls.Options)
        )
        table.add_row(name, options or "-", cls.summary)
    _out.print(table)
    table = Table(title="metrics (calib evaluate --metrics KEY,...)", title_justify="left")
    table.add_column("metric", style="bold")
    table.add_column("what it measures")
    for key, metric in metrics.items():
        table.add_row(key, metric.summary)
    for key, summary in vece_summaries.items():
        table.add_row(key, summary)
    _out.print(table)


def _bar(value: float, scale: float, width: int = 24) -> str:
    filled = 0 if scale <= 0 else int(round(width * min(value / scale, 1.0)))
    return "#" * filled


def diagnosis(result) -> None:
    """Findings, text reliability diagram and cumulative mass curve, worst classes, comparison."""
    _out.print(Text.assemble(("calib diagnose", "bold"), f": {result.n} x {result.k} ({result.kind})"))
    for line in result.findings:
        _out.print(f"  - {line}", soft_wrap=True)
    for title, rows, key in (
        ("reliability (top label)", result.reliability, "confidence"),
        ("cumulative mass calibration curve (CMCE paper)", result.cumulative_mass, "mass"),
    ):
        table = Table(title=title, title_justify="left")
        for column in ("bin", "rows", key, "observed", "gap", ""):
            table.add_column(column, justify="right" if column not in ("bin", "") else "left")
        scale = max((abs(r["observed"] - r[key]) for r in rows), default=0.0)
        for r in rows:
            gap = r["observed"] - r[key]
            colour = "red" if gap < 0 else "blue"
            table.add_row(
                f"[{r['bin'][0]:.2f}, {r['bin'][1]:.2f})",
                str(r["count"]),
                f"{r[key]:.3f}",
                f"{r['observed']:.3f}",
                f"{gap:+.3f}",
                Text(_bar(abs(gap), scale), style=colour),
            )
        _out.print(table)
    _out.print("gap = observed - predicted: red bars over-confident, blue under-confident", style="dim")
    table = Table(title="worst classes (classwise ECE)", title_justify="left")
    for column in ("class", "cw-ECE", "support"):
        table.add_column(column, justify="right")
    for r in result.worst_classes:
        table.add_row(str(r["class"]), f"{r['cw_ece']:.4f}", str(r["support"]))
    _out.print(table)
    if result.comparison:
        keys = [k for k in result.comparison[0] if k not in ("method", "warnings")]
        table = Table(title="cross-validated comparison (mean±std over folds)", title_justify="left")
        table.add_column("method", style="bold", no_wrap=True)
        for key in keys:
            table.add_column(key.replace("coverage_", "cov_"), justify="right")
        for row in result.comparison:
            table.add_row(row["method"], *("n/a" if row[k] is None else f"{row[k][0]:.4g}±{row[k][1]:.1g}" for k in keys))
        _out.print(table)
        _out.print(Text.assemble(("recommendation:", "bold"), f" {result.recommendation}"))
