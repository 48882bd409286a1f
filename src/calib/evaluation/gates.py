"""CI gates on a report's metrics, with three outcomes: pass, fail, or inconclusive (the sampling
noise of the test rows leaves it open).

Two kinds of gate:

- a threshold gate, ``cmce>0.01``: fails when the condition holds (or the value is undefined);
- a change gate against a baseline report, ``cmce=0.001`` (absolute) or ``cmce=10%`` (relative to
  the baseline value): fails when the metric worsened by more than that. "Worsened" follows the
  metric's direction: an increase for errors and losses, a decrease where higher is better
  (accuracy).

Noise. When the report carries bootstrap replicates of the gated quantity q (the value for a
threshold gate; for a change gate the paired replicate differences new_r - baseline_r, which needs
both reports' replicates from the same rows, seed and count), the gate reads the ends [L, U] of
q's confidence interval at level c (0.95: the 2.5% and 97.5% quantiles of the replicates, centred
on the estimate). With the failing condition q > t (or q >= t; mirrored for < and <=):

    fail          when L > t      (the whole interval fails: false alarms at most (1 - c) / 2)
    pass          when U <= t     (the whole interval passes)
    inconclusive  otherwise       (the interval straddles the threshold)

Without replicates the gate compares the value itself (two outcomes) and says that it ignores
noise. An inconclusive gate counts as passed or failed as the caller decides (``inconclusive``).
For it the gate states the minimum detectable change, (z_{(1+c)/2} + z_{0.8}) sd: how far beyond
the threshold a true value must lie to be caught 80% of the time at this n (sd: the replicates'
standard deviation), and roughly how many rows would settle the observed distance d to the
threshold, n ((z_{(1+c)/2} + z_{0.8}) sd / d)^2 (sd shrinking as 1/sqrt(n)).

Why the two-sided interval's ends and not one-sided bounds at c: on 200 pairs of equally
calibrated models the one-sided 95% bounds failed 5.5-8.5% of the gates on CMCE, ECE and accuracy
at n = 2,000 and 10,000 (the bootstrap's spread of binned errors falls short of their sampling
spread by up to 15%); the interval's ends keep every kind at or below 5% (docs/ci-gates.md).
"""

from __future__ import annotations

import json
import math
import operator
import re
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from ..bootstrap import centred_interval
from ..errors import InputError, UsageError
from ..metrics.definitions import METRICS, check_metric_keys, higher_is_better
from .groups import AGGREGATES, worst_group
from .report_types import (
    BootstrapSection,
    EvaluationReport,
    GateResult,
    GroupEntry,
    InputSection,
    MetricEntry,
    paired_differences,
    unpaired_differences,
)

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
#: How a change gate against a report of other rows reads the noise: the difference of the two
#: reports' independent bootstrap distributions.
UNPAIRED = "unpaired bootstrap of independent rows"
#: What an inconclusive gate counts as: ``pass`` (the default: a gate fails a build only on evidence)
#: or ``fail``.
INCONCLUSIVE_POLICIES = ("pass", "fail")
#: The power at which the minimum detectable change is stated.
POWER = 0.8

_OPERATORS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_GATE = re.compile(r"^\s*(?:(max_group|min_group|max_label|min_label):)?([A-Za-z0-9_.]+)\s*(<=|>=|<|>)\s*([-+0-9.eE]+)\s*$")


@dataclass(frozen=True)
class Spread:
    """What the bootstrap replicates of a gated quantity say: the ends of its confidence interval at
    ``level`` (``lower`` the (1 - level) / 2 quantile, ``upper`` the (1 + level) / 2 quantile),
    their standard deviation, the rows they resample and how they were drawn (``bootstrap`` or
    ``paired bootstrap``)."""

    lower: float
    upper: float
    sd: float
    rows: int
    level: float
    how: str
    #: The resolution floor F of a binned error (calib.evaluation.resolution): the lower end is
    #: then the value less F, a bound of the true error that the estimator's upward bias cannot move.
    floor: float | None = None
    #: The groups (of ``floor_unit``: "group" or "label") the floor is simultaneous over.
    floor_groups: int = 1
    floor_unit: str = "group"
    #: The mean-gap bound read beside the floor (calib.evaluation.resolution): a lower bound of the
    #: true error from the calibration in the large.
    gap: float | None = None

    def with_lower_bounds(
        self, value: float | None, floor: float | None, groups: int = 1, unit: str = "group", gap: float | None = None
    ) -> Spread:
        """This spread with its lower end at min(its own, max(``value`` - ``floor``, ``gap``)), the
        floor and the mean-gap bound simultaneous over ``groups`` of ``unit``: each end is a lower
        bound of the true error at the level, and the smaller never fails a gate that the
        bootstrap's end alone would pass."""
        bounds = ([] if value is None or floor is None else [value - floor]) + ([] if gap is None else [gap])
        if not bounds:
            return self
        return replace(self, lower=min(self.lower, max(bounds)), floor=floor, floor_groups=groups, floor_unit=unit, gap=gap)

    @classmethod
    def of(cls, replicates, level: float, rows: int, how: str, estimate: float | None = None) -> Spread | None:
        """The spread of ``replicates`` (NaN ones dropped), centred on ``estimate`` when given: the
        replicates are shifted by estimate - mean(replicates), so that the bootstrap's own bias
        (resampled rows repeat, which inflates binned errors) does not move the bounds. None with
        fewer than two values."""
        found = centred_interval(replicates, level, estimate)
        if found is None:
            return None
        lower, upper, values = found
        return cls(lower, upper, float(np.std(values, ddof=1)), rows, level, how)

    def detectable(self) -> float:
        """Minimum detectable change: (z_{(1 + level) / 2} + z_power) sd."""
        normal = NormalDist()
        return (normal.inv_cdf((1.0 + self.level) / 2.0) + normal.inv_cdf(POWER)) * self.sd

    def rows_to_settle(self, distance: float) -> int | None:
        """Rows at which the minimum detectable change shrinks to ``distance`` (sd ~ 1/sqrt(n))."""
        if distance <= 0 or self.sd == 0:
            return None
        return math.ceil(self.rows * (self.detectable() / distance) ** 2)


def outcome(value: float | None, spread: Spread | None, op: str, limit: float) -> str:
    """pass / fail / inconclusive of the gate "fails when ``value`` OP ``limit``" (module docstring);
    an undefined value fails; without a spread the value decides alone."""
    if value is None:
        return FAIL
    holds = _OPERATORS[op]
    if spread is None:
        return FAIL if holds(value, limit) else PASS
    optimistic, pessimistic = (spread.lower, spread.upper) if op in (">", ">=") else (spread.upper, spread.lower)
    if holds(optimistic, limit):
        return FAIL
    if not holds(pessimistic, limit):
        return PASS
    return INCONCLUSIVE


def noise_fields(spread: Spread | None, value: float | None, limit: float | None, why_not: str | None) -> dict:
    """The gate entry's account of noise: how it was read, the bounds, the minimum detectable change
    and the rows that would settle the observed distance; or why noise was ignored."""
    if spread is None:
        return {"noise": "ignored", "noise_reason": why_not}
    noise = f"{spread.how}, {spread.level:g} interval"
    read = [
        name
        for name, bound in (("the value less its resolution floor", spread.floor), ("the bound from the mean gap", spread.gap))
        if bound is not None
    ]
    if read:
        over = "" if spread.floor_groups == 1 else f" (simultaneous over {spread.floor_groups} {spread.floor_unit}s)"
        noise += f"; lower end {' or '.join(read)}{', the larger' if len(read) > 1 else ''}{over}"
    fields = {
        "noise": noise,
        "level": spread.level,
        "bounds": [spread.lower, spread.upper],
        "power": POWER,
        "min_detectable": spread.detectable(),
        "rows": spread.rows,
    }
    if read:
        fields["floor_groups"] = spread.floor_groups
    if spread.floor is not None:
        fields["floor"] = spread.floor
    if spread.gap is not None:
        fields["gap_bound"] = spread.gap
    if value is not None and limit is not None:
        fields["distance"] = abs(value - limit)
        fields["rows_to_settle"] = spread.rows_to_settle(fields["distance"])
    return fields


def bonferroni_level(level: float, count: int) -> float:
    """The level of each of ``count`` intervals whose family keeps the false alarms of one interval
    at ``level``: 1 - (1 - level) / count."""
    return 1.0 - (1.0 - level) / max(1, count)


def _decided(entry: dict, result: str, inconclusive: str) -> dict:
    """The entry with its outcome and whether it counts as passed (``inconclusive``: "pass" or "fail")."""
    passed = result == PASS or (result == INCONCLUSIVE and inconclusive == "pass")
    return {**entry, "outcome": result, "passed": passed}


@dataclass(frozen=True)
class Gate:
    """``--fail-if "cmce>0.01"``: the gate fails when the condition holds (or the value is
    undefined). With ``aggregate`` ``max_group`` (``min_group``) the value is the largest
    (smallest) over the groups with enough rows: ``max_group:cmce>0.02``; every gated group is
    also checked on its own (``per_group``)."""

    expr: str
    metric: str
    op: str
    threshold: float
    aggregate: str | None = None

    def check(self, report: EvaluationReport, *, ignore_noise: bool = False, inconclusive: str = "pass") -> dict:
        """The gate's entry (docs/ci-gates.md) on ``report``: its value, how the noise was read, its
        outcome and whether it counts as passed (``inconclusive``: what an inconclusive one counts as)."""
        entry = {"expr": self.expr, "metric": self.metric, "op": self.op, "threshold": self.threshold}
        if self.aggregate is not None:
            return self._check_worst_group(entry, report, ignore_noise, inconclusive)
        value = report.metrics[self.metric].value
        spread, why = None, "noise ignored on request"
        if not ignore_noise:
            bootstrap = report.bootstrap
            spread, why = replicate_spread(bootstrap, self.metric, value)
            if spread is not None:
                spread = spread.with_lower_bounds(value, bootstrap.floor(self.metric), gap=bootstrap.gap_bound(self.metric))
        entry.update(value=value, **noise_fields(spread, value, self.threshold, why))
        return _decided(entry, outcome(value, spread, self.op, self.threshold), inconclusive)

    def _check_worst_group(self, entry: dict, report: EvaluationReport, ignore_noise: bool, inconclusive: str) -> dict:
        """The gate on every gated group (``per_group``), each with its own replicates at the
        Bonferroni level (and, for a binned error, the lower end at its simultaneous resolution
        floor) when there are some. On the largest value with a failing ``>`` (the smallest with
        ``<``) it fails when some group fails and passes when every group passes; on the largest
        with ``<`` (the smallest with ``>``) it fails when every group fails and passes when some
        group passes; inconclusive otherwise. The entry names the group that decides: the worst
        of the groups with the overall outcome, and says how many groups it covered."""
        groups = report.groups.gated if report.groups is not None else {}
        values = {name: group.metrics.get(self.metric) for name, group in groups.items()}
        spreads, why = ({}, "noise ignored on request") if ignore_noise else group_spreads(report, self.metric, values)
        per_group = {}
        for name, value in values.items():
            spread = spreads.get(name)
            fields = {"group": name, "value": value, **noise_fields(spread, value, self.threshold, why)}
            per_group[name] = _decided(fields, outcome(value, spread, self.op, self.threshold), inconclusive)
        results = [item["outcome"] for item in per_group.values()]
        if not results:
            overall = FAIL
        elif self.any_group_decides:
            overall = FAIL if FAIL in results else INCONCLUSIVE if INCONCLUSIVE in results else PASS
        else:
            overall = PASS if PASS in results else INCONCLUSIVE if INCONCLUSIVE in results else FAIL
        deciding = {name: group for name, group in groups.items() if per_group[name]["outcome"] == overall}
        found = worst_group(deciding, self.metric, self.aggregate)
        name = None if found is None else found[0]
        entry.update(aggregate=self.aggregate, group=name, value=None if found is None else found[1])
        entry.update(groups=len(groups), unit=_unit(report))
        fields = per_group[name] if name is not None else noise_fields(None, None, self.threshold, why)
        entry.update({key: value for key, value in fields.items() if key not in ("group", "value", "outcome", "passed")})
        entry["per_group"] = list(per_group.values())
        return _decided(entry, overall, inconclusive)

    @property
    def any_group_decides(self) -> bool:
        """True when one failing group fails the gate: the largest value with a failing ``>`` or
        ``>=``, the smallest with ``<`` or ``<=``. Otherwise (``max_group:accuracy<0.5``: every group
        below 0.5) the gate fails only when every group fails."""
        return (AGGREGATES[self.aggregate] is max) == (self.op in (">", ">="))


def _unit(report: EvaluationReport) -> str:
    """What a report's groups are: "label" (a multi-label input's labels) or "group"."""
    return report.groups.unit if report.groups is not None else "group"


def group_spreads(report: EvaluationReport, metric: str, values: dict) -> tuple[dict, str | None]:
    """({group: the spread of its replicates of ``metric`` at the Bonferroni level 1 - (1 - level) / G,
    G the groups with a value, its lower end at the group's simultaneous resolution floor for a
    binned error}, why there are none). The family of G tests then fails falsely with probability
    at most (1 - level) / 2."""
    bootstrap = report.bootstrap
    if bootstrap is None or not bootstrap.by_group:
        why = (
            "the report has no bootstrap replicates" if bootstrap is None else "the report has no bootstrap replicates per group"
        )
        return {}, why
    valued = [name for name, value in values.items() if value is not None]
    level = bonferroni_level(bootstrap.level, len(valued))
    unit, spreads = _unit(report), {}
    for name in valued:
        replicates = bootstrap.by_group.get(name, {}).get(metric)
        rows = report.groups.groups[name].n
        how = f"bootstrap, Bonferroni over {len(valued)} {unit}s"
        found = None if replicates is None else Spread.of(replicates, level, rows, how, values[name])
        if found is not None:
            floor, gap = bootstrap.floor(metric, name), bootstrap.gap_bound(metric, name)
            spreads[name] = found.with_lower_bounds(values[name], floor, bootstrap.floor_groups(metric), unit, gap)
    return spreads, None if spreads else f"no bootstrap replicates of {metric} per group"


def replicate_spread(bootstrap: BootstrapSection | None, metric: str, estimate: float | None) -> tuple[Spread | None, str | None]:
    """(the spread of a report's replicates of ``metric`` centred on its ``estimate``, why there is none)."""
    if bootstrap is None:
        return None, "the report has no bootstrap replicates"
    values = bootstrap.values.get(metric)
    spread = None if values is None else Spread.of(values, bootstrap.level, bootstrap.rows, "bootstrap", estimate)
    return spread, None if spread is not None else f"no bootstrap replicates of {metric}"


@dataclass(frozen=True)
class ChangeGate:
    """``--baseline old.json --max-increase cmce=0.001``: fails when the metric worsened by more
    than ``allowed`` (``relative``: by more than ``allowed`` x |baseline|, e.g. 10%). Worsening is
    new - old, or old - new where higher is better (``direction`` "decrease": ``--max-decrease
    accuracy=0.01``)."""

    metric: str
    allowed: float
    #: The baseline report (read once, from the file ``--baseline`` names).
    baseline: EvaluationReport
    #: True: a paired comparison is required (an error when the reports cannot be paired).
    paired: bool = False
    relative: bool = False
    direction: str = "increase"

    @property
    def baseline_entry(self) -> MetricEntry:
        """The baseline report's entry of the gated metric."""
        return self.baseline.metrics[self.metric]

    @property
    def baseline_bootstrap(self) -> BootstrapSection | None:
        """The baseline report's replicates (they pair with this run's)."""
        return self.baseline.bootstrap

    @property
    def baseline_input(self) -> InputSection | None:
        """What the baseline report evaluated (None for a hand-made report without it)."""
        return self.baseline.input

    @property
    def baseline_groups(self) -> dict[str, GroupEntry]:
        """The baseline report's groups with enough rows to be gated."""
        return self.baseline.groups.gated if self.baseline.groups is not None else {}

    @property
    def sign(self) -> float:
        """+1 when an increase worsens the metric, -1 when a decrease does."""
        return 1.0 if self.direction == "increase" else -1.0

    def limit(self, old: float | None) -> float | None:
        """The allowed worsening in the metric's units (relative: a fraction of |old|)."""
        if not self.relative:
            return self.allowed
        return None if old is None else self.allowed * abs(old)

    def _entry(self, new: float | None, old: float | None, group: str | None = None) -> dict:
        """The gate on the raw change: passes when the worsening is at most the allowed one (an
        undefined value on either side fails)."""
        change = None if new is None or old is None else new - old
        worsening = None if change is None else self.sign * change
        limit = self.limit(old)
        shown = f"{self.allowed * 100:g}% of |baseline|" if self.relative else f"{self.allowed:g}"
        worse = f"{self.metric} - baseline" if self.direction == "increase" else f"baseline - {self.metric}"
        expr = f"{worse} <= {shown}"
        entry = {
            "expr": expr + ("" if group is None else f" (group {group})"),
            "metric": self.metric,
            "direction": self.direction,
            **({} if group is None else {"group": group}),
            "allowed": limit,
            **({"allowed_relative": self.allowed} if self.relative else {}),
            "value": new,
            "baseline": old,
            "increase": change,
            "worsening": worsening,
        }
        if old is not None and old != 0 and change is not None:
            entry["relative_change"] = change / abs(old)
        return entry

    def check(self, report: EvaluationReport, *, ignore_noise: bool = False, inconclusive: str = "pass") -> dict:
        """The gate's entry (docs/ci-gates.md) on ``report`` against the baseline's value: the
        change, how the noise was read, the outcome and whether it counts as passed."""
        other = other_input(self.baseline_input, report.input)
        if other is not None and self.paired:
            raise InputError(f"paired gate on {self.metric}: {other}; a paired comparison needs the same rows")
        bootstrap = report.bootstrap
        entry = self._entry(report.metrics[self.metric].value, self.baseline_entry.value)
        limit = entry["allowed"]
        spread, why, worsening = None, "noise ignored on request", entry["worsening"]
        if not ignore_noise:
            worsening = self._less_noise(entry, bootstrap, self.baseline_bootstrap)
            spread, why = self._paired_spread(bootstrap, worsening)
        if limit is None:
            result = FAIL
        else:
            result = outcome(worsening, spread, ">", limit)
        entry.update(noise_fields(spread, worsening, limit, why))
        if spread is not None:
            entry["increase_lower_bound"] = spread.lower if self.sign > 0 else -spread.upper
            entry["increase_upper_bound"] = spread.upper if self.sign > 0 else -spread.lower
        if other is not None:
            entry["baseline_input"] = other
        return _decided(entry, result, inconclusive)

    def _less_noise(
        self, entry: dict, current: BootstrapSection | None, baseline: BootstrapSection | None, group: str | None = None
    ) -> float | None:
        """The worsening of a binned error less the change of the two reports' mean noise m (the
        expected estimate of a perfectly calibrated model with each one's bin counts,
        calib.evaluation.resolution): sign ((new - m_new) - (old - m_old)). Recorded in ``entry``
        (``worsening_less_noise``, ``mean_noise``); the raw worsening where either report lacks m."""
        worsening = entry["worsening"]
        if current is None or baseline is None:
            return worsening
        ours, theirs = current.mean_noise(self.metric, group), baseline.mean_noise(self.metric, group)
        if worsening is None or ours is None or theirs is None:
            return worsening
        adjusted = worsening - self.sign * (ours - theirs)
        entry.update(worsening_less_noise=adjusted, mean_noise=[theirs, ours])
        return adjusted

    def _paired_spread(self, bootstrap: BootstrapSection | None, worsening: float | None) -> tuple[Spread | None, str | None]:
        """The spread of the replicate worsening, or why there is none: paired when both reports'
        replicates come from the same rows, seed and count; else, unless a paired comparison was
        required (then an error), unpaired, from the two reports' independent replicates
        (:func:`calib.evaluation.report_types.unpaired_differences`)."""
        how = "paired bootstrap"
        differences, reason = paired_differences(bootstrap, self.baseline_bootstrap, self.metric)
        if differences is None and self.paired:
            raise InputError(f"paired gate: {reason}")
        if differences is None:
            differences = unpaired_differences(bootstrap, self.baseline_bootstrap, self.metric)
            if differences is not None:
                how, reason = UNPAIRED, None
        spread = None
        if differences is not None:
            spread = Spread.of(self.sign * differences, bootstrap.level, bootstrap.rows, how, worsening)
            if spread is None:
                reason = f"no {how.split()[0]} replicates of {self.metric} with a value"
        return spread, reason

    def check_groups(self, report: EvaluationReport, inconclusive: str = "pass", *, ignore_noise: bool = False) -> list[dict]:
        """One entry per group gated in both this report and the baseline: the group's change,
        read from the paired replicates of each group at the Bonferroni level 1 - (1 - level) / G
        (G: the groups compared) when both reports have them from the same rows and groups."""
        current = report.groups.gated if report.groups is not None else {}
        baseline = self.baseline_groups
        names = [name for name in baseline if name in current]
        differences, why = ({}, "noise ignored on request") if ignore_noise else self._group_differences(report, names)
        entries = []
        for name in names:
            gate = self._entry(current[name].metrics.get(self.metric), baseline[name].metrics.get(self.metric), name)
            gate["unit"] = _unit(report)
            limit, spread, reason, worsening = gate["allowed"], None, why, gate["worsening"]
            if name in differences:
                worsening = self._less_noise(gate, report.bootstrap, self.baseline_bootstrap, name)
                level = bonferroni_level(report.bootstrap.level, len(names))
                how = f"paired bootstrap, Bonferroni over {len(names)} {_unit(report)}s"
                spread = Spread.of(self.sign * differences[name], level, current[name].n, how, worsening)
                reason = None if spread is not None else f"no paired replicates of {self.metric} with a value"
            result = FAIL if limit is None else outcome(worsening, spread, ">", limit)
            gate.update(noise_fields(spread, worsening, limit, reason))
            entries.append(_decided(gate, result, inconclusive))
        return entries

    def _group_differences(self, report: EvaluationReport, names: list[str]) -> tuple[dict, str | None]:
        """({group: paired replicate differences of the metric}, why there are none)."""
        current, baseline = report.bootstrap, self.baseline_bootstrap
        if current is None or baseline is None or not current.by_group or not baseline.by_group:
            return {}, "the reports have no bootstrap replicates per group"
        if current.groups_sha256 != baseline.groups_sha256:
            return {}, "the baseline report's rows fall into other groups"
        out = {}
        for name in names:
            found, why = paired_differences(current.of_group(name), baseline.of_group(name), self.metric)
            if found is None:
                return {}, why
            out[name] = found
        return out, None


def check_same_problem(baseline: InputSection | None, task: str) -> None:
    """Refuse a baseline report of another problem: another class count, task (binary, multiclass,
    multi-label) or label count makes every metric incomparable (a 97-class run against a 10-class
    baseline once printed "ece rose +138%" and failed the build). A baseline without an input
    section (a hand-made report) is taken as it is. ``task``: this run's (:meth:`InputSection.task`)."""
    if baseline is None or baseline.k is None:
        return
    theirs, ours = baseline.task(), task
    if theirs != ours:
        source = "" if baseline.path is None else f" ({baseline.path})"  # merged states have no one path
        raise InputError(
            f"the baseline report is of a {theirs} problem{source}, this run of a {ours} one; "
            "a change gate compares two runs of the same problem"
        )


def other_input(baseline: InputSection | None, current: InputSection | None) -> str | None:
    """How the rows of the baseline report differ from this run's (their count, else their labels),
    or None when they match or either is unknown. The scores' digests are not compared: a baseline
    is usually another model's predictions on the same rows."""
    if baseline is None or current is None or baseline.n is None or current.n is None:
        return None
    if baseline.n != current.n:
        return f"the baseline report covers {baseline.n} rows ({baseline.path}), this run {current.n} rows ({current.path})"
    if baseline.labels_sha256 and current.labels_sha256 and baseline.labels_sha256 != current.labels_sha256:
        return f"the baseline report ({baseline.path}) has as many rows but other labels"
    return None


def split_condition(expr: str, example: str = "cmce>0.01") -> tuple[str | None, str, str, str]:
    """(aggregate, key, operator, number as text) of a gate ``expr`` such as "max_group:cmce>0.02"."""
    match = _GATE.match(expr)
    if not match:
        raise UsageError(
            f"gate {expr!r}: expected METRIC OP NUMBER with OP one of < <= > >=, e.g. {example!r}", cli_hint="--fail-if"
        )
    return match.groups()


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
    increases: list[str], baseline_path: str | None, paired: bool = False, decreases: list[str] = ()
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


def check_gates(
    report: EvaluationReport, gates=(), change_gates=(), *, ignore_noise: bool = False, inconclusive: str = "pass"
) -> tuple[list[GateResult], bool]:
    """Every gate checked against ``report`` (its metrics, groups, bootstrap and input sections):
    (the gate results, all passed). Change gates also check every group gated in both reports.
    ``inconclusive`` ("pass" or "fail") is what an inconclusive gate counts as."""
    if inconclusive not in INCONCLUSIVE_POLICIES:
        raise UsageError(f"an inconclusive gate counts as one of {', '.join(INCONCLUSIVE_POLICIES)}; got {inconclusive!r}")
    checked = [gate.check(report, ignore_noise=ignore_noise, inconclusive=inconclusive) for gate in gates]
    for gate in change_gates:
        checked.append(gate.check(report, ignore_noise=ignore_noise, inconclusive=inconclusive))
        checked += gate.check_groups(report, inconclusive, ignore_noise=ignore_noise)
    results = [GateResult.of(entry) for entry in checked]
    return results, all(result.passed for result in results)
