"""CI gates on a report's metrics, each with three outcomes (pass, fail, inconclusive: how a gate
reads the noise is :mod:`.gate_noise`); their text form and the baseline report they read are
:mod:`.gate_parsing`. Two kinds of gate:

- a threshold gate, ``cmce>0.01``: fails when the condition holds (or the value is undefined);
- a change gate against a baseline report, ``cmce=0.001`` (absolute) or ``cmce=10%`` (relative to
  the baseline value): fails when the metric worsened by more than that. "Worsened" follows the
  metric's direction: an increase for errors and losses, a decrease where higher is better
  (accuracy).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError, UsageError
from .gate_noise import (
    FAIL,
    INCONCLUSIVE,
    INCONCLUSIVE_POLICIES,
    PASS,
    UNPAIRED,
    Spread,
    bonferroni_level,
    decided,
    group_spreads,
    noise_fields,
    outcome,
    replicate_spread,
    report_unit,
)
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
        spread: Spread | None = None
        why: str | None = "noise ignored on request"
        if not ignore_noise:
            bootstrap = report.bootstrap
            spread, why = replicate_spread(bootstrap, self.metric, value)
            if spread is not None and bootstrap is not None:
                spread = spread.with_lower_bounds(value, bootstrap.floor(self.metric), gap=bootstrap.gap_bound(self.metric))
        entry.update(value=value, **noise_fields(spread, value, self.threshold, why))
        return decided(entry, outcome(value, spread, self.op, self.threshold), inconclusive)

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
            per_group[name] = decided(fields, outcome(value, spread, self.op, self.threshold), inconclusive)
        overall = self.over_groups([item["outcome"] for item in per_group.values()])
        deciding = {name: group for name, group in groups.items() if per_group[name]["outcome"] == overall}
        found = worst_group(deciding, self.metric, self.aggregate)
        decider = None if found is None else found[0]
        entry.update(aggregate=self.aggregate, group=decider, value=None if found is None else found[1])
        entry.update(groups=len(groups), unit=report_unit(report))
        fields = per_group[decider] if decider is not None else noise_fields(None, None, self.threshold, why)
        entry.update({key: value for key, value in fields.items() if key not in ("group", "value", "outcome", "passed")})
        entry["per_group"] = list(per_group.values())
        return decided(entry, overall, inconclusive)

    def over_groups(self, results: list[str]) -> str:
        """The outcome over the groups' ``results``: with :attr:`any_group_decides` it fails when some
        group fails and passes when every group passes; otherwise it fails when every group fails and
        passes when some group passes; inconclusive between; no group fails."""
        if not results:
            return FAIL
        if self.any_group_decides:
            return FAIL if FAIL in results else INCONCLUSIVE if INCONCLUSIVE in results else PASS
        return PASS if PASS in results else INCONCLUSIVE if INCONCLUSIVE in results else FAIL

    @property
    def any_group_decides(self) -> bool:
        """True when one failing group fails the gate: the largest value with a failing ``>`` or
        ``>=``, the smallest with ``<`` or ``<=``. Otherwise (``max_group:accuracy<0.5``: every group
        below 0.5) the gate fails only when every group fails."""
        largest = self.aggregate is not None and AGGREGATES[self.aggregate] is max
        return largest == (self.op in (">", ">="))


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
        spread: Spread | None = None
        why: str | None = "noise ignored on request"
        worsening = entry["worsening"]
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
        return decided(entry, result, inconclusive)

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
        if differences is not None and bootstrap is not None:
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
            gate["unit"] = report_unit(report)
            limit, spread, reason, worsening = gate["allowed"], None, why, gate["worsening"]
            if name in differences and report.bootstrap is not None:
                worsening = self._less_noise(gate, report.bootstrap, self.baseline_bootstrap, name)
                level = bonferroni_level(report.bootstrap.level, len(names))
                how = f"paired bootstrap, Bonferroni over {len(names)} {report_unit(report)}s"
                spread = Spread.of(self.sign * differences[name], level, current[name].n, how, worsening)
                reason = None if spread is not None else f"no paired replicates of {self.metric} with a value"
            result = FAIL if limit is None else outcome(worsening, spread, ">", limit)
            gate.update(noise_fields(spread, worsening, limit, reason))
            entries.append(decided(gate, result, inconclusive))
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
