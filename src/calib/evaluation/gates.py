"""CI gates on a report's metrics: absolute conditions and increases over a baseline report."""

from __future__ import annotations

import json
import operator
import re
from dataclasses import dataclass

from ..bootstrap import paired_increase
from ..errors import InputError, UsageError
from ..estimators import SAMPLE_METRICS
from .groups import gated_groups, worst_group
from .streaming import check_metric_keys

_OPERATORS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


_GATE = re.compile(r"^\s*(?:(max_group|min_group):)?([A-Za-z0-9_.]+)\s*(<=|>=|<|>)\s*([-+0-9.eE]+)\s*$")


@dataclass(frozen=True)
class Gate:
    """``--fail-if "cmce>0.01"``: the gate fails when the condition holds (or the value is
    undefined). With ``aggregate`` ``max_group`` (``min_group``) the value is the largest
    (smallest) over the groups with enough rows: ``max_group:cmce>0.02``."""

    expr: str
    metric: str
    op: str
    threshold: float
    aggregate: str | None = None

    def check(self, metrics: dict, report: dict | None = None) -> dict:
        entry = {"expr": self.expr, "metric": self.metric, "op": self.op, "threshold": self.threshold}
        if self.aggregate is None:
            value = metrics[self.metric]["value"]
        else:
            found = worst_group(gated_groups(report or {}), self.metric, self.aggregate)
            value = None if found is None else found[1]
            entry.update(aggregate=self.aggregate, group=None if found is None else found[0])
        failed = value is None or _OPERATORS[self.op](value, self.threshold)
        return {**entry, "value": value, "passed": not failed}


@dataclass(frozen=True)
class IncreaseGate:
    """``--baseline old.json --max-increase cmce=0.001``: fails when new - old > allowed."""

    metric: str
    allowed: float
    baseline: dict
    #: With ``--paired``: the baseline report's bootstrap section; the gate then fails only when the
    #: one-sided lower confidence bound of the paired increase exceeds ``allowed``.
    baseline_bootstrap: dict | None = None
    paired: bool = False
    #: The baseline report's ``input`` section ({"path", "n", "sha256", ...}).
    baseline_input: dict | None = None
    #: The baseline report's groups with enough rows to be gated ({name: {"n", "metrics"}}).
    baseline_groups: dict | None = None

    def _entry(self, new: float | None, old: float | None, group: str | None = None) -> dict:
        """The gate on the raw increase new - old: passes when it is at most ``allowed`` (an
        undefined value on either side fails)."""
        increase = None if new is None or old is None else new - old
        return {
            "expr": f"{self.metric} - baseline <= {self.allowed:g}" + ("" if group is None else f" (group {group})"),
            "metric": self.metric,
            **({} if group is None else {"group": group}),
            "allowed": self.allowed,
            "value": new,
            "baseline": old,
            "increase": increase,
            "passed": increase is not None and increase <= self.allowed,
        }

    def check(self, metrics: dict, bootstrap: dict | None = None, current_input: dict | None = None) -> dict:
        other = other_input(self.baseline_input, current_input)
        if other is not None and self.paired:
            raise InputError(f"paired gate on {self.metric}: {other}; a paired comparison needs the same rows")
        result = self._entry(metrics[self.metric]["value"], self.baseline["value"])
        increase = result["increase"]
        if self.paired:
            level = (bootstrap or {}).get("level", 0.95)
            bound, reason = paired_increase(bootstrap or {}, self.baseline_bootstrap or {}, self.metric, level)
            if reason is not None:
                raise InputError(f"paired gate: {reason}")
            result.update(
                expr=f"{self.metric} - baseline <= {self.allowed:g} (paired bootstrap, {level:g} one-sided)",
                increase_lower_bound=bound,
                passed=increase is not None and bound <= self.allowed,
            )
        if other is not None:
            result["baseline_input"] = other
        return result

    def check_groups(self, report: dict) -> list[dict]:
        """One entry per group gated in both this report and the baseline: the group's increase."""
        current = gated_groups(report)
        entries = []
        for name, entry in (self.baseline_groups or {}).items():
            if name not in current:
                continue
            entries.append(self._entry(current[name]["metrics"].get(self.metric), entry["metrics"].get(self.metric), name))
        return entries


def other_input(baseline: dict | None, current: dict | None) -> str | None:
    """How the rows of the baseline report differ from this run's (their count, else their labels),
    or None when they match or either is unknown. The scores' digests are not compared: a baseline
    is usually another model's predictions on the same rows."""
    if not baseline or not current:
        return None
    if baseline.get("n") != current.get("n"):
        return (
            f"the baseline report covers {baseline.get('n')} rows ({baseline.get('path')}), "
            f"this run {current.get('n')} rows ({current.get('path')})"
        )
    if baseline.get("labels_sha256") and current.get("labels_sha256") and baseline["labels_sha256"] != current["labels_sha256"]:
        return f"the baseline report ({baseline.get('path')}) has as many rows but other labels"
    return None


def parse_gate(expr: str) -> Gate:
    match = _GATE.match(expr)
    if not match:
        raise UsageError(
            f"gate {expr!r}: expected METRIC OP NUMBER with OP one of < <= > >=, e.g. 'cmce>0.01'", cli_hint="--fail-if"
        )
    aggregate, metric, op, number = match.groups()
    check_metric_keys([metric])
    if aggregate is not None and metric in SAMPLE_METRICS:
        raise UsageError(f"gate {expr!r}: {metric} is computed on all rows only, not per group", cli_hint="--fail-if")
    try:
        return Gate(expr, metric, op, float(number), aggregate)
    except ValueError:
        raise UsageError(f"gate {expr!r}: {number!r} is not a number", cli_hint="--fail-if") from None


def parse_increase_gates(specs: list[str], baseline_path: str | None, paired: bool = False) -> list[IncreaseGate]:
    if not specs:
        if paired:
            raise UsageError(
                "a paired comparison applies to increase gates against a baseline; none given",
                cli_hint="--paired with --max-increase",
            )
        return []
    if baseline_path is None:
        raise UsageError("an increase gate needs a baseline report", cli_hint="--baseline REPORT.json")
    baseline = read_report(baseline_path)
    gates = []
    for spec in specs:
        metric, sep, number = spec.partition("=")
        metric = metric.strip()
        try:
            allowed = float(number)
        except ValueError:
            allowed = None
        if not sep or allowed is None:
            raise UsageError(f"increase gate {spec!r}: expected METRIC=NUMBER, e.g. cmce=0.001", cli_hint="--max-increase")
        check_metric_keys([metric])
        if metric not in baseline.get("metrics", {}):
            raise InputError(f"{baseline_path}: the baseline report has no metric {metric!r}")
        gates.append(
            IncreaseGate(
                metric,
                allowed,
                baseline["metrics"][metric],
                baseline.get("bootstrap"),
                paired,
                baseline.get("input"),
                gated_groups(baseline) or None,
            )
        )
    return gates


def read_report(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON report of calib evaluate ({exc})") from None
    if not isinstance(report, dict) or not isinstance(report.get("metrics"), dict):
        raise InputError(f"{path}: not a JSON report of calib evaluate (no 'metrics')")
    return report


def check_gates(report: dict, gates=(), increase_gates=()) -> tuple[list[dict], bool]:
    """Every gate checked against a report (its metrics, groups, bootstrap and input sections):
    (the gate entries, all passed). Increase gates also check every group gated in both reports."""
    checked = [gate.check(report["metrics"], report) for gate in gates]
    for gate in increase_gates:
        checked.append(gate.check(report["metrics"], report.get("bootstrap"), report.get("input")))
        checked += gate.check_groups(report)
    return checked, all(entry["passed"] for entry in checked)
