"""A report of ``calib evaluate`` as plain text: how values and settings read in every table (the
terminal's, a notebook's ``Report.table()``)."""

from __future__ import annotations


def format_value(value) -> str:
    """A metric value as every table prints it: 6 significant digits, n/a for undefined."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        value += 0.0  # -0.0 prints as 0
        return f"{value:.6g}" if abs(value) >= 1e-4 or value == 0 else f"{value:.3e}"
    return str(value)


def settings_text(settings: dict) -> str:
    """A short reading of a metric's settings for the table (the JSON report has them in full)."""
    parts = []
    for key, value in settings.items():
        if key == "bins":
            parts.append(f"{value} bins")
        elif key == "range":
            parts.append(f"mass in [{value[0]}, {value[1]}]")
        elif key == "prob_clip":
            parts.append(f"p clipped at {value:g}")
        elif key in ("scheme", "norm", "label") and value not in ("equal-width", "l1", "top"):
            parts.append(str(value))
        elif key in ("alpha", "score", "threshold"):
            parts.append(f"{key} {value}")
        elif key == "recalibrator":
            folds = "in sample" if settings["folds"] == 1 else f"{settings['folds']} folds"
            parts.append(f"{value}, {folds}")
        elif key == "kernel" and isinstance(settings.get("bandwidth"), float):
            parts.append(f"{value} kernel, h = {settings['bandwidth']:.3g}")
        elif key == "subsampled" and value:
            parts.append(f"{settings['rows']} rows sampled")
    return ", ".join(parts)


def metric_table(report: dict) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the metric table, as text cells: metric, value (or uncalibrated,
    calibrated, change when a calibrator was applied), the bootstrap interval when there is one,
    settings. Every rendering of the table (terminal, notebook text) is built from these cells."""
    before = report.get("uncalibrated_metrics")
    bootstrap = report.get("bootstrap")
    header = ["metric", *(["uncalibrated", "calibrated", "change"] if before is not None else ["value"])]
    if bootstrap is not None:
        header.append(f"{bootstrap['level']:.0%} CI ({bootstrap['replicates']} boot.)")
    header.append("settings")
    rows = []
    for key, entry in report["metrics"].items():
        row = [key]
        if before is not None:
            old, new = before.get(key, {}).get("value"), entry["value"]
            row += [
                format_value(old) if key in before else "-",
                format_value(new),
                "" if old is None or new is None else f"{new - old:+.4g}",
            ]
        else:
            row.append(format_value(entry["value"]))
        if bootstrap is not None:
            interval = entry.get("ci")
            row.append(f"[{format_value(interval[0])}, {format_value(interval[1])}]" if interval else "-")
        rows.append(row + [settings_text(entry["settings"])])
    return header, rows


def gate_text(gate: dict) -> str:
    """A gate's outcome after its pass/FAIL mark: the condition, the value, and against a baseline
    the baseline value, the increase and (paired) its lower bound."""
    extra = ""
    if "baseline" in gate:
        extra = f" (baseline {format_value(gate['baseline'])}, increase {format_value(gate['increase'])})"
    if "increase_lower_bound" in gate:
        extra += f", lower bound {format_value(gate['increase_lower_bound'])}"
    return f"{gate['expr']}  value {format_value(gate['value'])}{extra}"


def report_lines(report: dict) -> list[str]:
    """The metric table as aligned plain-text lines (every digit of every value kept)."""
    header, rows = metric_table(report)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        text = [cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:-1], widths[1:-1])] + [cells[-1]]
        return "  ".join(text).rstrip()

    inp = report["input"]
    lines = [f"{inp['path']} ({inp['n']} x {inp['k']}, {inp['kind']})", line(header)]
    lines += [line(row) for row in rows]
    lines += [f"gate {'pass' if g['passed'] else 'FAIL'}: {gate_text(g)}" for g in report["gates"]]
    return lines
