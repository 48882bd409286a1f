"""How a gate reads the sampling noise of the test rows, and its three outcomes: pass, fail, or
inconclusive (the noise leaves it open). The gates themselves are in :mod:`.gates`.

When the report carries bootstrap replicates of the gated quantity q (the value for a threshold
gate; for a change gate the paired replicate differences new_r - baseline_r, which needs both
reports' replicates from the same rows, seed and count), the gate reads the ends [L, U] of q's
confidence interval at level c (0.95: the 2.5% and 97.5% quantiles of the replicates, centred on the
estimate). With the failing condition q > t (or q >= t; mirrored for < and <=):

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

import math
import operator
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from ..bootstrap import centred_interval
from .report_types import BootstrapSection, EvaluationReport

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
#: How a change gate against a report of other rows reads the noise: the difference of the two
#: reports' independent bootstrap distributions.
UNPAIRED = "unpaired bootstrap of independent rows"
#: What an inconclusive gate counts as: ``pass`` (the default: a gate fails a build only on evidence)
#: or ``fail``.
INCONCLUSIVE_POLICIES = ("pass", "fail")
#: The power at which the minimum detectable change is stated.
POWER = 0.8

OPERATORS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


@dataclass(frozen=True)
class Spread:
    """What the bootstrap replicates of a gated quantity say: the ends of its confidence interval at
    ``level`` (``lower`` the (1 - level) / 2 quantile, ``upper`` the (1 + level) / 2 quantile),
    their standard deviation, the rows they resample and how they were drawn (``bootstrap`` or
    ``paired bootstrap``)."""

    lower: float
    upper: float
    sd: float
    rows: int | None
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
    def of(cls, replicates, level: float, rows: int | None, how: str, estimate: float | None = None) -> Spread | None:
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
        """Rows at which the minimum detectable change shrinks to ``distance`` (sd ~ 1/sqrt(n));
        None where nothing would settle it or the rows are unknown."""
        if distance <= 0 or self.sd == 0 or self.rows is None:
            return None
        return math.ceil(self.rows * (self.detectable() / distance) ** 2)


def outcome(value: float | None, spread: Spread | None, op: str, limit: float) -> str:
    """pass / fail / inconclusive of the gate "fails when ``value`` OP ``limit``" (module docstring);
    an undefined value fails; without a spread the value decides alone."""
    if value is None:
        return FAIL
    holds = OPERATORS[op]
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
        distance = abs(value - limit)
        fields["distance"] = distance
        fields["rows_to_settle"] = spread.rows_to_settle(distance)
    return fields


def bonferroni_level(level: float, count: int) -> float:
    """The level of each of ``count`` intervals whose family keeps the false alarms of one interval
    at ``level``: 1 - (1 - level) / count."""
    return 1.0 - (1.0 - level) / max(1, count)


def decided(entry: dict, result: str, inconclusive: str) -> dict:
    """The entry with its outcome and whether it counts as passed (``inconclusive``: "pass" or "fail")."""
    passed = result == PASS or (result == INCONCLUSIVE and inconclusive == "pass")
    return {**entry, "outcome": result, "passed": passed}


def report_unit(report: EvaluationReport) -> str:
    """What a report's groups are: "label" (a multi-label input's labels) or "group"."""
    return report.groups.unit if report.groups is not None else "group"


def group_spreads(report: EvaluationReport, metric: str, values: dict) -> tuple[dict, str | None]:
    """({group: the spread of its replicates of ``metric`` at the Bonferroni level 1 - (1 - level) / G,
    G the groups with a value, its lower end at the group's simultaneous resolution floor for a
    binned error}, why there are none). The family of G tests then fails falsely with probability
    at most (1 - level) / 2."""
    bootstrap, groups = report.bootstrap, report.groups
    if bootstrap is None or not bootstrap.by_group or groups is None:
        why = (
            "the report has no bootstrap replicates" if bootstrap is None else "the report has no bootstrap replicates per group"
        )
        return {}, why
    valued = [name for name, value in values.items() if value is not None]
    level = bonferroni_level(bootstrap.level, len(valued))
    unit, spreads = report_unit(report), {}
    for name in valued:
        replicates = bootstrap.by_group.get(name, {}).get(metric)
        rows = groups.groups[name].n
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
