"""Gates written as text (``--fail-if "cmce>0.01"``, ``--max-increase cmce=10%``) and the baseline
report a change gate reads: :func:`parse_gate`, :func:`parse_change_gates`, :func:`read_report`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence

from ..errors import InputError, UsageError
from ..metrics.definitions import METRICS, check_metric_keys, higher_is_better
from .gates import ChangeGate, Gate
from .report_types import EvaluationReport

#: A gate's text: an optional aggregate, the key, the operator and the number.
GATE_PATTERN = re.compile(
    r"^\s*(?:(max_group|min_group|max_label|min_label):)?([A-Za-z0-9_.]+)\s*(<=|>=|<|>)\s*([-+0-9.eE]+)\s*$"
)


def split_condition(expr: str, example: str = "cmce>0.01") -> tuple[str | None, str, str, str]:
    """(aggregate, key, operator, number as text) of a gate ``expr`` such as "max_group:cmce>0.02"."""
    match = GATE_PATTERN.match(expr)
    if not match:
        raise UsageError(
            f"gate {expr!r}: expected METRIC OP NUMBER with OP one of < <= > >=, e.g. {example!r}", cli_hint="--fail-if"
        )
    aggregate, key, op, number = match.groups()
    return aggregate, key, op, number


def parse_gate(expr: str, keys: dict[str, str] | None = None) -> Gate:
    """The gate ``expr`` ("cmce>0.01", "max_group:ece>0.05") on a metric of the registry, or with
    ``keys`` ({key: what it is}) on one of those keys (a comparison's changes: any aggregate)."""
    example = "cmce>0.01" if keys is None else f"{next(iter(keys))}>0.01"
    aggregate, metric, op, number = split_condition(expr, example)
    if keys is None:
        check_metric_keys([metric])
        if aggregate is not None and not METRICS[metric].streamed:
            raise UsageError(f"gate {expr!r}: {metric} is computed on all rows only, not per group", cli_hint="--fail-if")
    elif metric not in keys:
        raise UsageError(f"gate {expr!r}: unknown key {metric!r}; the keys are {', '.join(keys)}", cli_hint="--fail-if")
    try:
        return Gate(expr, metric, op, float(number), aggregate)
    except ValueError:
        raise UsageError(f"gate {expr!r}: {number!r} is not a number", cli_hint="--fail-if") from None


def parse_allowance(spec: str, direction: str) -> tuple[str, float, bool]:
    """``cmce=0.001`` -> ("cmce", 0.001, False); ``cmce=10%`` -> ("cmce", 0.1, True). The amount is
    a finite number (a negative one demands an improvement); a metric whose direction does not
    match is refused."""
    flag = f"--max-{direction}"
    metric, sep, number = (part.strip() for part in spec.partition("="))
    relative = number.endswith("%")
    try:
        allowed = float(number[:-1]) / 100.0 if relative else float(number)
    except ValueError:
        allowed = None
    if not sep or allowed is None or not math.isfinite(allowed):
        raise UsageError(
            f"{direction} gate {spec!r}: expected METRIC=NUMBER or METRIC=PERCENT%, e.g. cmce=0.001 or cmce=10%", cli_hint=flag
        )
    check_metric_keys([metric])
    if direction == "increase" and higher_is_better(metric):
        raise UsageError(
            f"{metric}: higher is better, so an increase is an improvement; gate a drop instead",
            cli_hint=f"--max-decrease {metric}=...",
        )
    if direction == "decrease" and not higher_is_better(metric):
        raise UsageError(
            f"{metric}: lower is better, so a decrease is an improvement; gate a rise instead",
            cli_hint=f"--max-increase {metric}=...",
        )
    return metric, allowed, relative


def parse_change_gates(
    increases: Sequence[str], baseline_path: str | None, paired: bool = False, decreases: Sequence[str] = ()
) -> list[ChangeGate]:
    """Change gates from ``METRIC=AMOUNT`` specs (increases for lower-is-better metrics, decreases
    for higher-is-better ones) against the report at ``baseline_path``."""
    specs = [(spec, "increase") for spec in increases] + [(spec, "decrease") for spec in decreases]
    if not specs:
        if paired:
            raise UsageError(
                "a paired comparison applies to change gates against a baseline; none given",
                cli_hint="--paired with --max-increase",
            )
        return []
    if baseline_path is None:
        raise UsageError("a change gate needs a baseline report", cli_hint="--baseline REPORT.json")
    baseline = read_report(baseline_path)
    gates = []
    for spec, direction in specs:
        metric, allowed, relative = parse_allowance(spec, direction)
        if metric not in baseline.metrics:
            raise InputError(f"{baseline_path}: the baseline report has no metric {metric!r}")
        gates.append(ChangeGate(metric, allowed, baseline, paired, relative, direction))
    return gates


def read_report(path: str) -> EvaluationReport:
    """The JSON report of ``calib evaluate`` at ``path`` (a baseline), read once into its types."""
    try:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON report of calib evaluate ({exc})") from None
    if not isinstance(report, dict) or not isinstance(report.get("metrics"), dict):
        raise InputError(f"{path}: not a JSON report of calib evaluate (no 'metrics')")
    try:
        return EvaluationReport.from_json(report)
    except (AttributeError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not a JSON report of calib evaluate (a section is malformed: {exc!r})") from None
