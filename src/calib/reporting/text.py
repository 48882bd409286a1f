"""Reports as text: how values and settings read in every table (the terminal's, a CI log's, a
notebook's ``Report.table()``, markdown), and tables as aligned plain text or markdown.

One precision rule everywhere: 4 significant digits (``format_value``), changes signed
(``format_change``); the JSON report keeps every digit."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the command line imports these renderers at start; the metric stack loads with a command
    from ..evaluation.report_types import EvaluationReport, GateResult, MetricEntry

#: Significant digits of every value a table prints.
DIGITS = 4


def reliability_legend() -> list[str]:
    """How a reliability table's columns read: the gap's sign and the bins' intervals."""
    from ..core.binning import MIN_BIN_ROWS

    return [
        "gap = observed - predicted: below 0 (red) over-confident, above 0 (blue) under-confident",
        f"95% interval: the observed rate's Clopper-Pearson interval per bin; few rows: under {MIN_BIN_ROWS}, too few to read",
    ]


def format_value(value) -> str:
    """A value as every table prints it: 4 significant digits (0.002681, 1.172, 3.1e-05), integers
    whole, n/a for undefined."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value + 0.0:.{DIGITS}g}"  # + 0.0: -0.0 prints as 0
    return str(value)


def format_change(value) -> str:
    """A difference (calibrated - uncalibrated, increase over a baseline): signed, 4 significant digits."""
    return "n/a" if value is None else f"{value + 0.0:+.{DIGITS}g}"


def format_exact(value: float, other: float) -> str:
    """``value`` with as many digits as it takes to tell it from ``other`` (a gate's threshold):
    0.01 and 0.010004 both read 0.01 at 4 digits."""
    for digits in range(DIGITS, 18):
        if f"{value:.{digits}g}" != f"{other:.{digits}g}" or float(f"{value:.{digits}g}") == value:
            return f"{value + 0.0:.{digits}g}"
    return repr(value)


#: The terms of ``calib compare``'s decompositions (calib.drift.decomposition.Terms), as its tables name them
COMPARISON_TERMS = {
    "score": "score",
    "mcb": "miscalibration (MCB)",
    "dsc": "discrimination (DSC)",
    "unc": "uncertainty (UNC)",
    "recalibrated": "recalibrated score (UNC - DSC)",
}
#: The quantities of ``calib compare``'s first table, as it names them (top-k accuracies by their k)
COMPARISON_METRICS = {
    "accuracy": "accuracy",
    "class_accuracy": "accuracy at NEW's class shares",
    "brier": "Brier score (all classes)",
    "nll": "log loss",
}
#: The decompositions of ``calib compare``, as its tables name them
COMPARISON_DECOMPOSITIONS = {
    ("top_label", "brier"): "top label, Brier",
    ("top_label", "log_loss"): "top label, log loss",
    ("classwise", "brier"): "class-wise Brier",
}


def settings_text(settings: dict) -> str:
    """A short reading of a metric's settings for the table (the JSON report has them in full)."""
    parts = []
    for key, value in settings.items():
        if key == "bins":
            parts.append(f"{value} bins")
        elif key == "rows_per_bin":
            parts.append(f"bins of {value} rows")
        elif key == "range":
            parts.append(f"mass in [{value[0]}, {value[1]}]")
        elif key == "prob_clip":
            parts.append(f"p clipped at {value:g}")
        elif key in ("scheme", "norm", "label") and value not in ("equal-width", "l1", "top"):
            parts.append(str(value))
        elif key in ("alpha", "score", "threshold"):
            parts.append(f"{key} {value}")
        elif key == "recalibrator":
            from ..estimators.recalibrators import DEFAULT_RECIPE  # only here: tables need no estimator otherwise

            folds = "in sample" if settings["folds"] == 1 else f"{settings['folds']} folds"
            recipe = f" ({settings['recipe']})" if settings.get("recipe", DEFAULT_RECIPE) != DEFAULT_RECIPE else ""
            parts.append(f"{value}{recipe}, {folds}")
        elif key == "kernel" and isinstance(settings.get("bandwidth"), float):
            parts.append(f"{value} kernel, h = {settings['bandwidth']:.3g}")
        elif key == "subsampled" and value:
            parts.append(f"{settings['rows']} rows sampled")
        elif key == "skipped":
            parts.append(f"not estimated: {value}")
    return ", ".join(parts)


def clipped_note(entry: MetricEntry | None) -> str:
    """The settings remark of a V-ECE value clipped at 0: its raw (negative) value."""
    raw = None if entry is None else entry.unclipped
    return f"clipped at 0 from raw {format_value(raw)}" if raw is not None and raw < 0 else ""


#: Printed under a table with a clipped V-ECE value (the V-ECE paper reports max(estimate, 0)).
CLIPPED_FOOTNOTE = (
    "V-ECE: a raw estimate below 0 (the recalibrator found no error of that kind out of fold) is shown as 0; "
    "the raw vece_over + vece_under = the raw vece_top_l1 (the JSON report's 'unclipped')"
)


def metric_table(report: EvaluationReport) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the metric table, as text cells: metric, value (or uncalibrated,
    calibrated, change when a calibrator was applied), the bootstrap interval when there is one,
    settings. Every rendering of the table (terminal, CI log, markdown, notebook) is built from these cells."""
    before, bootstrap = report.uncalibrated, report.bootstrap
    header = ["metric", *(["uncalibrated", "calibrated", "change"] if before is not None else ["value"])]
    if bootstrap is not None:
        header.append(f"{bootstrap.level:.0%} CI ({bootstrap.replicates} boot.)")
    header.append("settings")
    rows = []
    for key, entry in report.metrics.items():
        row = [key]
        notes = [clipped_note(entry)]
        if before is not None:
            old, new = before[key].value if key in before else None, entry.value
            notes.insert(0, clipped_note(before.get(key)).replace("clipped", "uncalibrated clipped"))
            row += [
                format_value(old) if key in before else "-",
                format_value(new),
                "" if old is None or new is None else format_change(new - old),
            ]
        else:
            row.append(format_value(entry.value))
        if bootstrap is not None:
            interval = entry.ci
            row.append(f"[{format_value(interval[0])}, {format_value(interval[1])}]" if interval else "-")
        rows.append(row + ["; ".join(part for part in [settings_text(entry.settings), *notes] if part)])
    return header, rows


def _details(report: EvaluationReport, key: str, field: str):
    """A metric entry's further field (``worst_classes``, ``ci_analytic``...), None where absent."""
    entry = report.metrics.get(key)
    return None if entry is None else entry.details.get(field)


def table_footnotes(report: EvaluationReport) -> list[str]:
    """Lines printed under the metric table: the bundle applied, and why a value reads 0 when clipped."""
    lines = [f"bundle: {report.bundle}"] if report.bundle else []
    worst = _details(report, "set_covgap", "worst_classes")
    if worst:
        listed = ", ".join(f"{c['class']} {format_value(c['coverage'])} ({c['rows']} rows)" for c in worst)
        lines.append(f"lowest class coverage of the sets: {listed}")
    worst_labels = _details(report, "set_coverage_label_min", "worst_labels")
    if worst_labels:
        listed = ", ".join(f"{c['label']} {format_value(c['coverage'])} ({c['rows']} rows)" for c in worst_labels)
        lines.append(f"lowest label coverage of the sets: {listed}")
    bootstrap = report.bootstrap
    gated = {gate.metric for gate in report.gates}
    for key in report.metrics:
        floor = None if bootstrap is None or key not in gated else bootstrap.floor(key)  # a deferred floor is drawn when read
        if floor is not None:
            lines.append(f"{key}: resolution floor {format_value(floor)}, the smallest value these rows tell from 0")
    level = 0.95 if bootstrap is None else bootstrap.level
    for key in report.metrics:
        interval = _details(report, key, "ci_analytic")
        if interval:
            lines.append(f"{key}: analytic {level:.0%} interval [{format_value(interval[0])}, {format_value(interval[1])}]")
    entries = [*report.metrics.values(), *(report.uncalibrated or {}).values()]
    if any(clipped_note(entry) for entry in entries):
        lines.append(CLIPPED_FOOTNOTE)
    return lines


def report_title(report: EvaluationReport) -> str:
    inp = report.input
    return f"{inp.path} ({inp.shape()}, {inp.kind})"


_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}
#: How a gate's outcome is marked in every rendering.
GATE_MARKS = {"pass": "pass", "fail": "FAIL", "inconclusive": "INCONCLUSIVE"}


def gate_mark(outcome: str, passed: bool) -> str:
    """``pass``, ``FAIL``, ``INCONCLUSIVE (counts as a pass)`` or ``INCONCLUSIVE (counts as a failure)``."""
    if outcome != "inconclusive":
        return GATE_MARKS[outcome]
    return f"INCONCLUSIVE (counts as {'a pass' if passed else 'a failure'})"


def _level(gate: dict) -> str:
    """The level of a gate's interval, e.g. ``95%`` or ``98.75% (Bonferroni over 4 groups)``."""
    text = f"{100 * gate['level']:.4g}%"
    found = [part for part in gate["noise"].split(", ") if part.startswith("Bonferroni")]
    return text + (f" ({found[0]})" if found else "")


def _rows(count: int) -> str:
    """A row count with thousands separators, estimates above 1,000 to two significant digits."""
    if count > 1000:
        count = int(float(f"{count:.2g}"))
    return f"{count:,}"


def _unsettled(gate: dict, change: str) -> str:
    """What would settle an inconclusive gate: the minimum detectable change at this n and the rows
    that would tell the observed distance from the threshold."""
    text = (
        f"; at n = {_rows(gate['rows'])} the gate detects {change} {format_value(gate['min_detectable'])} beyond the "
        f"threshold ({gate['power']:.0%} power)"
    )
    if gate.get("rows_to_settle"):
        distance = format_value(gate["distance"])
        if gate["rows_to_settle"] > 1000 * gate["rows"]:  # the value is a hair from the threshold
            text += f"; the observed distance {distance} is too small for any realistic test set to settle"
        else:
            text += f"; about {_rows(gate['rows_to_settle'])} rows would settle the observed distance {distance}"
    return text


def _threshold_text(gate: dict, metric: str, value: float) -> str:
    """A threshold gate ``METRIC OP THRESHOLD`` (it fails when the condition holds)."""
    threshold, op = gate["threshold"], gate["op"]
    shown, limit = format_exact(value, threshold), format_value(threshold)
    outcome = gate["outcome"]
    if "bounds" not in gate:
        if outcome == "pass":
            return f"{metric} = {shown} {_NEGATED[op]} {limit} (fails when {op} {limit})"
        return f"{metric} = {shown} {op} {limit} (the gate fails when {gate['metric']} {op} {limit})"
    lower, upper = gate["bounds"]
    level = _level(gate)
    high = op in (">", ">=")
    if outcome == "fail":
        name, end = ("lower", lower) if high else ("upper", upper)
        if high and "floor" in gate and end == value - gate["floor"]:
            return (
                f"{metric} = {format_value(value)}; less its resolution floor {format_value(gate['floor'])}"
                f"{_floor_over(gate)}, {format_exact(end, threshold)} {op} {limit} "
                f"(the gate fails when {gate['metric']} {op} {limit})"
            )
        if high and "gap_bound" in gate and end == gate["gap_bound"]:
            return (
                f"{metric} = {format_value(value)}; its bound from the mean score against the hit rate"
                f"{_floor_over(gate)}, {format_exact(end, threshold)} {op} {limit} "
                f"(the gate fails when {gate['metric']} {op} {limit})"
            )
        return (
            f"{metric} = {format_value(value)}, the {name} end of its {level} interval {format_exact(end, threshold)} "
            f"{op} {limit} (the gate fails when {gate['metric']} {op} {limit})"
        )
    if outcome == "pass":
        name, end = ("upper", upper) if high else ("lower", lower)
        return (
            f"{metric} = {format_value(value)}, the {name} end of its {level} interval {format_exact(end, threshold)} "
            f"{_NEGATED[op]} {limit} (fails when {op} {limit})"
        )
    text = (
        f"{metric} = {format_value(value)}: {_bounds_name(gate, value, level)} [{format_value(lower)}, {format_value(upper)}] "
        f"straddles {limit} (fails when {op} {limit})"
    )
    if "floor" in gate:
        per = f" per {_unit(gate)}" if gate.get("aggregate") else ""
        text += (
            f"; with {_rows(gate['rows'])} rows{per}, {gate['metric']} below {format_value(gate['floor'])} "
            f"cannot be told from 0{_floor_over(gate)}"
        )
    return text + _unsettled(gate, "a value")


def _bounds_name(gate: dict, value: float, level: str) -> str:
    """What a threshold gate's [lower, upper] is: its ``level`` interval (the table's), or, where the
    lower end is the value less the resolution floor or the mean-gap bound, the range from that
    bound to the interval's upper end (not the interval the table shows)."""
    lower = gate["bounds"][0]
    if "floor" in gate and lower == value - gate["floor"]:
        return f"the range from the value less its resolution floor to the upper end of its {level} interval"
    if "gap_bound" in gate and lower == gate["gap_bound"]:
        return f"the range from its mean-gap bound to the upper end of its {level} interval"
    return f"its {level} interval"


def _floor_over(gate: dict) -> str:
    """`` (simultaneous over 50 labels)`` for a floor over several groups, else nothing."""
    count = gate.get("floor_groups", 1)
    return "" if count == 1 else f" (simultaneous over {count} {_unit(gate)}s)"


def _unit(gate: dict) -> str:
    """What a gate's groups are: "label" or "group" (as the gate says; a report written before gates
    said so: by their aggregate's name)."""
    return gate.get("unit") or ("label" if str(gate.get("aggregate") or "").endswith("_label") else "group")


def _change_text(gate: dict, metric: str, value: float) -> str:
    """A change gate against a baseline: how the metric moved, against the allowed worsening."""
    old, change, allowed = gate["baseline"], gate["increase"], gate["allowed"]
    if change is None or allowed is None:
        return f"{metric}: the baseline value is undefined (n/a), so the change cannot be checked"
    worsening = gate.get("worsening", change)
    moved = f"rose by {format_exact(change, allowed)}" if change > 0 else f"fell by {format_exact(-change, allowed)}"
    if change == 0:
        moved = "did not move"
    if "relative_change" in gate and change != 0:
        moved += f" ({100 * gate['relative_change']:+.3g}%)"
    text = f"{metric} {moved} ({format_value(old)} -> {format_value(value)})"
    what = "increase" if gate.get("direction", "increase") == "increase" else "decrease"
    if "worsening_less_noise" in gate:
        theirs, ours = gate["mean_noise"]
        text += (
            f", {format_change(gate['worsening_less_noise'])} less the change in their mean noise "
            f"({format_value(theirs)} -> {format_value(ours)})"
        )
    allowed_text = format_value(allowed)
    if "allowed_relative" in gate:
        allowed_text = f"{gate['allowed_relative'] * 100:g}% of the baseline ({format_value(allowed)})"
    outcome = gate["outcome"]
    if "bounds" in gate:
        lower, upper = gate["bounds"]
        level = _level(gate)
        paired = "unpaired" if gate.get("noise", "").startswith("unpaired") else "paired"
        if outcome == "fail":
            text += f"; the lower end of the {paired} {level} interval of the {what}, {format_exact(lower, allowed)}, is above the allowed {allowed_text}"
        elif outcome == "pass":
            text += f"; the upper end of the {paired} {level} interval of the {what}, {format_exact(upper, allowed)}, is within the allowed {allowed_text}"
        else:
            text += f"; the {paired} {level} interval of the {what} [{format_value(lower)}, {format_value(upper)}] straddles the allowed {allowed_text}"
            text += _unsettled(gate, f"an {what}")
    elif worsening > allowed:
        text += f", more than the allowed {allowed_text}"
    else:
        text += f", within the allowed {allowed_text}"
    if "baseline_input" in gate:
        text += f" (note: {comparison_note(gate)})"
    return text


def comparison_note(gate: dict) -> str:
    """What a change gate against a report of other rows compared: the rows that differ and how the
    noise was read (the unpaired bootstrap, or raw values)."""
    if gate.get("noise", "").startswith("unpaired"):
        how = "compared unpaired, by the difference of the two reports' independent bootstrap distributions"
    else:
        how = "compared as raw values"
    return f"{gate['baseline_input']}: {how}"


def gate_text(gate: dict) -> str:
    """A gate's outcome after its mark, from its fields (:attr:`GateResult.fields`, or one group's
    entry of a gate on groups), with the value, the threshold and what decided it:
    ``cmce = 0.003919 > 0.001`` (an absolute gate whose failing condition holds), ``cmce rose by
    0.001229 (0.00269 -> 0.003919), more than the allowed 0.001`` (against a baseline); with
    bootstrap replicates, the end of the interval that decided it, or for an inconclusive gate the interval, the
    minimum detectable change and the rows that would settle it."""
    metric, value = gate.get("metric", gate["expr"]), gate["value"]
    if value is None:
        return f"{metric} is undefined (n/a) on this input, so the gate cannot pass"
    if gate.get("aggregate") is not None:  # the worst group's value: name the group (or label)
        covered = f" of {gate['groups']} {_unit(gate)}s" if "groups" in gate else ""
        metric = f"{metric} of {_unit(gate)} {gate['group']} (the {gate['aggregate'].replace('_', ' ')}{covered})"
    elif gate.get("group") is not None:
        metric = f"{metric} of {_unit(gate)} {gate['group']}"
    if "threshold" in gate:
        return _threshold_text(gate, metric, value)
    if "allowed" not in gate:  # a report written before gates carried their parts
        return f"{gate['expr']}  value {format_value(value)}"
    return _change_text(gate, metric, value)


def gate_line(gate: GateResult) -> str:
    """``gate MARK: TEXT``, as every rendering lists a gate."""
    return f"gate {gate_mark(gate.outcome, gate.passed)}: {gate_text(gate.fields)}"


def text_table(header: list[str], rows: list[list[str]], right: list[bool]) -> list[str]:
    """An aligned plain-text table at full width: two spaces between columns, columns with
    ``right`` set right-aligned, no cell ever cut, no trailing spaces."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)).rstrip()

    return [line(header), *(line(row) for row in rows)]


def markdown_escape(text: str) -> str:
    """Text that markdown shows as it is: ``|`` (a table's cell border) and ``*`` (emphasis) escaped."""
    return text.replace("|", "\\|").replace("*", "\\*")


def markdown_table(header: list[str], rows: list[list[str]], right: list[bool]) -> list[str]:
    """A GitHub-flavoured markdown table (``|`` and ``*`` in cells escaped)."""

    def line(cells):
        return "| " + " | ".join(markdown_escape(c) for c in cells) + " |"

    return [line(header), "|" + "|".join("---:" if r else "---" for r in right) + "|", *(line(row) for row in rows)]


#: Groups a table lists in full; above this, the worst ones (docs/groups.md).
SHOWN_GROUPS = 25


def group_table(report: EvaluationReport) -> tuple[str, list[str], list[list[str]], list[str]] | None:
    """(title, header, rows, notes) of the per-group table: one row per group (n and each streamed
    metric), the overall row, and notes naming the worst group per metric and the groups too small
    to be gated; None when the rows were not grouped. Above :data:`SHOWN_GROUPS` groups, the ones
    that are worst for some metric and then the largest are shown."""
    section = report.groups
    if section is None or not section.groups:
        return None
    groups = section.groups
    group = section.unit
    labels = group == "label"  # a multi-label input's groups are its labels
    keys = list(next(iter(groups.values())).metrics)
    small = set(section.below_min_rows)
    names = list(groups)
    if len(names) > SHOWN_GROUPS:
        worst = list(dict.fromkeys(item["group"] for item in section.worst.values()))
        largest = sorted(names, key=lambda name: -groups[name].n)
        names = list(dict.fromkeys(worst + largest))[:SHOWN_GROUPS]
        names.sort(key=list(groups).index)
    header = [group, "n", *keys]
    rows = [
        [name + ("*" if name in small else ""), str(groups[name].n), *(format_value(groups[name].metrics[k]) for k in keys)]
        for name in names
    ]
    overall = "(all pairs: micro)" if labels else "(all rows)"
    rows.append([overall, str(report.input.n), *(format_value(report.metrics[k].value) for k in keys)])
    if labels:
        rows.append(["(mean: macro)", "", *(format_value(section.mean.get(k)) for k in keys)])
    notes = []
    if len(names) < len(groups):
        notes.append(
            f"{len(names)} of {len(groups)} {group}s shown (the worst per metric, then the largest); the JSON report has all"
        )
    worst = [f"{k} {item['group']} ({format_value(item['value'])})" for k, item in section.worst.items()]
    if worst:
        notes.append(f"worst {group}: " + "; ".join(worst))
    if small:
        notes.append(
            f"* fewer than {section.min_rows} rows: listed, not gated and not ranked ({len(small)} of {len(groups)} groups)"
        )
    if labels:
        return f"by label ({len(groups)} labels)", header, rows, notes
    return f"by group: {section.source} ({len(groups)} groups)", header, rows, notes


def report_lines(report: EvaluationReport, style: str = "text") -> list[str]:
    """The evaluation report as lines of plain text (``style="text"``: aligned columns) or markdown
    (``"md"``): title, metric table, footnotes, gates. Every digit of every value is kept."""
    header, rows = metric_table(report)
    right = [False, *([True] * (len(header) - 2)), False]
    grouped = group_table(report)
    if style == "md":
        lines = [f"**calib evaluate**: `{report_title(report)}`", "", *markdown_table(header, rows, right), ""]
        if grouped is not None:
            title, group_header, group_rows, notes = grouped
            lines += [f"**{title}**", "", *markdown_table(group_header, group_rows, [False] + [True] * (len(group_header) - 1))]
            lines += ["", *(f"- {markdown_escape(note)}" for note in notes)]
        lines += [f"- {line}" for line in table_footnotes(report) + [gate_line(g) for g in report.gates]]
        return lines
    lines = [f"calib evaluate: {report_title(report)}", *text_table(header, rows, right), *table_footnotes(report)]
    if grouped is not None:
        title, group_header, group_rows, notes = grouped
        lines += [title, *text_table(group_header, group_rows, [False] + [True] * (len(group_header) - 1)), *notes]
    return lines + [gate_line(g) for g in report.gates]


#: Colours with one meaning in every rendering (terminal, figures, HTML): over-confidence (the
#: model claims more than it achieves) and under-confidence.
OVER_COLOUR, UNDER_COLOUR = "#d62728", "#1f77b4"


def comparison_cells(comparison: list[dict]) -> tuple[list[str], list[list[str]], list[list[bool]], list[list[bool]]]:
    """(header, rows, best, beyond) of the cross-validated comparison: per method and metric
    "mean±std" over the folds; ``best`` marks each column's best method (calib.diagnose's
    metric_badness), ``beyond`` the methods' changes from the model's own probabilities that are
    beyond the fold noise."""
    from ..metrics.definitions import metric_badness

    keys = [k for k in comparison[0] if k not in ("method", "warnings", "change")]
    header = ["method", *keys]
    rows, best, beyond = [], [], []
    badness = {key: [metric_badness(key, None if row[key] is None else row[key][0]) for row in comparison] for key in keys}
    for i, row in enumerate(comparison):
        cells = [row["method"]]
        for key in keys:
            cells.append("n/a" if row[key] is None else f"{format_value(row[key][0])}±{format_value(row[key][1])}")
        rows.append(cells)
        best.append([False, *(badness[key][i] == min(badness[key]) < np.inf for key in keys)])
        changes = row.get("change", {})
        beyond.append([False, *(changes.get(key, {}).get("beyond_noise", False) for key in keys)])
    return header, rows, best, beyond


def _change_row(name: str, change) -> list[str]:
    """A comparison table's row: the quantity in REF and NEW, the change and its interval."""
    interval = "-" if change.ci is None else f"[{format_change(change.ci[0])}, {format_change(change.ci[1])}]"
    return [name, format_value(change.ref), format_value(change.new), format_change(change.value), interval]


def comparison_title(report) -> str:
    """``calib compare: REF (N rows) -> NEW (N rows), K classes`` (of a calib.drift.ComparisonReport)."""
    return (
        f"calib compare: {report.ref.path} ({report.whole.ref_n} rows) -> {report.new.path} ({report.whole.new_n} rows), "
        f"{report.ref.task()}" + (", the same rows (paired)" if report.settings.get("paired") else "")
    )


def comparison_tables(section) -> list[tuple[str, list[str], list[list[str]], list[bool]]]:
    """(title, header, rows, right-aligned columns) of a comparison section's tables: what changed
    (accuracy, top-k accuracy, the proper scores) and the decompositions' terms; none without
    labels on NEW."""
    if not section.labelled:
        return []
    level = f"{section.level:.4g} interval" if section.level > 0.995 else f"{section.level:.0%} interval"
    header = ["", "REF", "NEW", "change", level]
    right = [False, True, True, True, False]
    names = {key: COMPARISON_METRICS.get(key) or f"top-{key[3:].split('_')[0]} accuracy" for key in section.metrics}
    order = ["accuracy", *(key for key in section.metrics if key.startswith("top")), "class_accuracy", "brier", "nll"]
    metrics = [_change_row(names[key], section.metrics[key]) for key in order if key in section.metrics]
    terms = []
    for (problem, score), title in COMPARISON_DECOMPOSITIONS.items():
        for term, name in COMPARISON_TERMS.items():
            change = section.decomposition.get(problem, {}).get(score, {}).get(term)
            if change is not None:
                terms.append(_change_row(f"{title}: {name}", change))
    return [("what changed", header, metrics, right), ("decompositions (CORP)", ["term", *header[1:]], terms, right)]


def comparison_notes(section) -> list[str]:
    """The lines under a comparison's tables: the priors and the remedies' held-out evidence."""
    priors = section.priors
    interval = priors.get("l1_ci")
    shown = f" [{format_value(interval[0])}, {format_value(interval[1])}]" if interval else ""
    noise = f"; its sampling noise alone about {format_value(priors['l1_noise'])}" if "l1_noise" in priors else ""
    lines = [f"class priors: L1 distance {format_value(priors['l1'])}{shown} ({priors['from']}){noise}"]
    for name, evidence in section.remedies.items():
        if "nll" in evidence.before:
            measured = (
                f"log loss {format_value(evidence.before['nll'])} -> {format_value(evidence.after['nll'])}, "
                f"ECE {format_value(evidence.before['ece'])} -> {format_value(evidence.after['ece'])}"
            )
        else:
            measured = f"log-likelihood gain {format_change(evidence.after['log_likelihood_gain'])}"
        helps = "helps" if evidence.improves else "does not help"
        lines.append(f"{name} ({evidence.method}) on {evidence.rows} held-out rows of NEW: {measured}: it {helps}")
    return lines


def verdict_lines(section) -> list[str]:
    """``verdict: ...`` with the remedy it implies, ``evidence: ...``, and ``also: ...`` for each
    later test that fired."""
    remedy = f" (remedy: {section.remedy})" if section.remedy else ""
    lines = [f"verdict: {section.verdict}{remedy}", f"evidence: {section.evidence}"]
    fired = [finding for finding in section.findings if finding.fired]
    lines += [f"also {finding.verdict}: {finding.evidence}" for finding in fired[1:]]
    return lines


def comparison_group_rows(groups) -> tuple[str, list[str], list[list[str]], list[str]]:
    """(title, header, rows, notes) of a comparison's groups: each group's rows, its accuracy change
    and its verdict; the groups not compared in the notes."""
    header = [groups.source, "REF n", "NEW n", "accuracy change", "verdict"]
    rows = []
    for name, section in groups.sections.items():
        accuracy = section.metrics.get("accuracy")
        change = "-" if accuracy is None else format_change(accuracy.value)
        rows.append([name, str(section.ref_n), str(section.new_n), change, section.verdict])
    notes = [f"{groups.source} {name} not compared: {why}" for name, why in groups.skipped.items()]
    return f"by {groups.source}, each at level {format_value(groups.level)}", header, rows, notes


def comparison_parts(report) -> tuple[list[tuple], list[str], list[str], list[str]]:
    """(tables, notes, verdict lines, gate lines) of a comparison report (calib.drift.ComparisonReport),
    what every rendering of it shows: each table as (title, header, rows, right-aligned columns), the
    groups' among them; the notes: the priors, the remedies' evidence, the report's note, the groups
    not compared and the remedy's fate."""
    section = report.whole
    tables = comparison_tables(section)
    notes = comparison_notes(section) + ([report.note] if report.note else [])
    if report.groups is not None:
        title, header, rows, group_notes = comparison_group_rows(report.groups)
        tables.append((title, header, rows, [False, True, True, True, False]))
        notes += group_notes
    written = report.remedy_written
    if written is not None:
        notes.append(f"wrote {written['what']} to {written['path']}" if written.get("path") else written["why"])
    return tables, notes, verdict_lines(section), [gate_line(gate) for gate in report.gates]


def comparison_lines(report, style: str = "text") -> list[str]:
    """A comparison report as lines of plain text or markdown (``style="md"``): title, tables,
    notes, the verdict and its evidence, the gates (:func:`comparison_parts`)."""
    tables, notes, verdict, gates = comparison_parts(report)
    if style == "md":
        lines = [f"**{comparison_title(report)}**", ""]
        for title, header, rows, right in tables:
            lines += [f"**{title}**", "", *markdown_table(header, rows, right), ""]
        return lines + [f"- {markdown_escape(line)}" for line in notes + verdict + gates]
    lines = [comparison_title(report)]
    for title, header, rows, right in tables:
        lines += [title, *text_table(header, rows, right)]
    return lines + notes + verdict + gates


def method_rows(flag_options) -> tuple[list[list[str]], list[list[str]]]:
    """The rows of `calib methods`: each calibrator's name, its options with their defaults (an
    option of ``flag_options`` as its flag, another as ``-O NAME=VALUE``) and summary; each
    metric's key and summary."""
    import dataclasses

    from ..metrics import METRICS
    from ..registry import CALIBRATORS

    calibrators = []
    for name, cls in CALIBRATORS.items():
        options = " ".join(
            f"--{f.name} {f.default}" if f.name in flag_options else f"-O {f.name}={f.default}"
            for f in dataclasses.fields(cls.Options)
        )
        calibrators.append([name, options or "-", cls.summary])
    return calibrators, [[key, metric.summary] for key, metric in METRICS.items()]


def noise_notes(report: EvaluationReport, remedy: str) -> list[str]:
    """One note per reason a gate read raw values (noise ignored), unless asked for; ``remedy``
    says how the command that made ``report`` would draw replicates."""
    from ..metrics import METRICS

    notes: dict[str, str] = {}
    for gate in (result.fields for result in report.gates):
        reason = gate.get("noise_reason")
        if gate.get("noise") != "ignored" or reason in (None, "noise ignored on request") or "group" in gate:
            continue
        if not METRICS[gate["metric"]].streamed:
            notes.setdefault(
                "whole-sample " + gate["metric"],
                f"note: {gate['metric']} is never bootstrapped (each replicate would refit its recalibration map), so its "
                "gate compares the raw value: give the threshold a margin (docs/ci-gates.md has the measured false alarms)",
            )
        elif "allowed" in gate:
            notes.setdefault(
                reason,
                f"note: the change gates compare raw values and ignore noise: {reason}. A baseline written by "
                "`calib evaluate --json` on the same rows records bootstrap replicates (--bootstrap N chooses how many)",
            )
        else:
            notes.setdefault(
                "threshold " + reason,
                f"note: the threshold gates compare raw values and ignore noise: {reason} ({remedy})",
            )
    return list(notes.values())
