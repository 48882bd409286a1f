"""The evaluation report as data: typed sections built by :func:`calib.evaluation.build_report`,
serialised to the JSON report of ``calib evaluate`` once, at the edge
(:meth:`EvaluationReport.to_json`: ``--json``), and read back from it once
(:meth:`EvaluationReport.from_json`: a baseline report).

Gates, a baseline comparison and every renderer (text, markdown, HTML, JUnit, a CI system's
summary) read these types, so a report read from a file and one computed now go through the same
code.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Callable, overload

import numpy as np

from ..bootstrap import labels_fingerprint
from ..io.predictions import task_name


@dataclass(frozen=True)
class MetricEntry:
    """One metric's value (None where undefined) and the settings it was computed with; ``ci`` the
    bootstrap interval, ``unclipped`` the raw estimate of a value clipped at 0 (V-ECE), ``details``
    any further fields (a conformal method's worst-covered classes)."""

    value: float | None
    settings: dict
    ci: list[float] | None = None
    unclipped: float | None = None
    details: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {"value": self.value, "settings": self.settings, **self.details}
        if self.ci is not None:
            out["ci"] = self.ci
        if self.unclipped is not None:
            out["unclipped"] = self.unclipped
        return out

    @classmethod
    def from_json(cls, entry: dict) -> MetricEntry:
        known = {"value", "settings", "ci", "unclipped"}
        return cls(
            entry.get("value"),
            entry.get("settings", {}),
            entry.get("ci"),
            entry.get("unclipped"),
            {key: value for key, value in entry.items() if key not in known},
        )


@overload
def entries_from_json(section: dict) -> dict[str, MetricEntry]: ...
@overload
def entries_from_json(section: None) -> None: ...
def entries_from_json(section: dict | None) -> dict[str, MetricEntry] | None:
    """A report's metrics section as {key: MetricEntry} (None for none)."""
    return None if section is None else {key: MetricEntry.from_json(entry) for key, entry in section.items()}


def entries_to_json(entries: dict[str, MetricEntry] | None) -> dict | None:
    return None if entries is None else {key: entry.to_json() for key, entry in entries.items()}


@dataclass(frozen=True)
class InputSection:
    """What was evaluated: its path, the kind of its scores, N rows, K classes and the SHA-256 of
    the scores and of the labels; or, for merged metric states, the inputs they came from
    (``merged_from``: each one's path and digest) and the directory of shards when there was one."""

    path: str | None
    kind: str | None
    n: int | None  # None only in a hand-made report
    k: int | None
    sha256: str | None = None
    labels_sha256: str | None = None
    merged_from: list[dict] | None = None
    #: A multi-label input: {"rows": N, "labels": L}; ``n`` then counts its N L (row, label) pairs.
    multilabel: dict | None = None

    def task(self) -> str:
        """The problem the input poses: "multi-label (L labels)", "binary" or "K-class"."""
        return task_name(self.k, self.multilabel)

    def shape(self) -> str:
        """The input's shape as a report's title reads it: "N x K", or "multi-label: N rows x L
        labels = N L pairs"."""
        if self.multilabel:
            return f"multi-label: {self.multilabel['rows']} rows x {self.multilabel['labels']} labels = {self.n} pairs"
        return f"{self.n} x {self.k}"

    def to_json(self) -> dict:
        layout = {} if self.multilabel is None else {"multilabel": self.multilabel}
        if self.merged_from is not None:
            out = {"merged_from": self.merged_from, "n": self.n, "k": self.k, **layout}
            return out if self.path is None else {**out, "path": self.path}
        return {
            "path": self.path,
            "kind": self.kind,
            "n": self.n,
            "k": self.k,
            "sha256": self.sha256,
            "labels_sha256": self.labels_sha256,
            **layout,
        }

    @classmethod
    def of(cls, preds) -> InputSection:
        """What was evaluated of ``preds`` (a calib.io.Predictions): its path, kind, shape, the
        digests of its scores and labels (None without labels), and a multi-label input's layout."""
        return cls(
            preds.name,
            preds.kind,
            preds.n,
            preds.k,
            preds.sha256,
            None if preds.labels is None else labels_fingerprint(preds.labels),
            multilabel=preds.output_layout.to_json(),
        )

    @classmethod
    def from_json(cls, section: dict) -> InputSection:
        return cls(
            section.get("path"),
            section.get("kind"),
            section.get("n"),
            section.get("k"),
            section.get("sha256"),
            section.get("labels_sha256"),
            section.get("merged_from"),
            section.get("multilabel"),
        )


class Deferred:
    """A value computed once, on its first read (:meth:`get`): by ``source`` then and there, or, for
    a ``Future`` already running (started where the value will surely be read), its result."""

    def __init__(self, source: Callable[[], object] | Future):
        self._source = source
        self._lock = threading.Lock()
        self._read = False
        self._value = None

    def get(self):
        with self._lock:
            if not self._read:
                self._value = self._source.result() if isinstance(self._source, Future) else self._source()
                self._read = True
            return self._value


@dataclass(frozen=True)
class BootstrapSection:
    """The bootstrap replicates a report records (:mod:`calib.bootstrap`): their count, seed and
    level, the rows and the random row clusters they resample and the labels' digest (two reports
    pair when all of these match), the metrics not bootstrapped, each metric's replicate values
    (None where a replicate has no value), each group's (``by_group``, with the digest of the rows'
    groups) and the resolution floors of the binned errors (:mod:`calib.evaluation.resolution`; a
    :class:`Deferred` where they are drawn when first read: a table that reads none draws none)."""

    replicates: int | None
    seed: int | None
    level: float
    rows: int | None
    groups: int | None
    labels_sha256: str | None
    not_bootstrapped: list[str]
    values: dict[str, list]
    by_group: dict[str, dict[str, list]] | None = None
    groups_sha256: str | None = None
    floors: dict | Deferred | None = None
    #: How the rows' clusters were drawn (calib.bootstrap.CLUSTER_DRAW; None in older reports).
    draw: str | None = None

    #: What must match for two reports' replicates to pair (the same rows resampled alike).
    PAIRING = ("replicates", "seed", "groups", "rows", "labels_sha256", "draw")

    def _group_floors(self, metric: str) -> dict:
        """The groups' floors of ``metric``: {"groups", "values", "means", "gaps"}, each of the
        last three {group: number}; {} where there are none."""
        return (self.floor_table() or {}).get("by_group", {}).get(metric, {})

    def floor_table(self) -> dict | None:
        """The floors section (drawn now if deferred): {"method", "draws", ..., "values", "means", "gaps", "by_group"}."""
        return self.floors.get() if isinstance(self.floors, Deferred) else self.floors

    def _floor_item(self, kind: str, metric: str, group: str | None) -> float | None:
        """The floors' ``kind`` ("values", "means" or "gaps") of ``metric``, of all rows or of ``group``."""
        if group is None:
            return (self.floor_table() or {}).get(kind, {}).get(metric)
        return self._group_floors(metric).get(kind, {}).get(group)

    def floor(self, metric: str, group: str | None = None) -> float | None:
        """The resolution floor of ``metric`` (of all rows, or of ``group``), None where there is none."""
        return self._floor_item("values", metric, group)

    def mean_noise(self, metric: str, group: str | None = None) -> float | None:
        """The mean noise of a binned error (of all rows, or of ``group``), None where there is none."""
        return self._floor_item("means", metric, group)

    def gap_bound(self, metric: str, group: str | None = None) -> float | None:
        """The mean-gap bound of a binned error (of all rows, or of ``group``), None where there is none."""
        return self._floor_item("gaps", metric, group)

    def floor_groups(self, metric: str) -> int:
        """The groups the groups' floors of ``metric`` are simultaneous over (1 where there are none)."""
        return self._group_floors(metric).get("groups", 1)

    def of_group(self, name: str) -> BootstrapSection:
        """The replicates of the group ``name`` (its values in place of the whole sample's)."""
        return replace(self, values=(self.by_group or {}).get(name, {}))

    def to_json(self) -> dict:
        out: dict[str, Any] = {
            "replicates": self.replicates,
            "seed": self.seed,
            "level": self.level,
            "rows": self.rows,
            "groups": self.groups,
            "draw": self.draw,
            "labels_sha256": self.labels_sha256,
            "not_bootstrapped": self.not_bootstrapped,
            "values": self.values,
        }
        if self.by_group is not None:
            out.update(by_group=self.by_group, groups_sha256=self.groups_sha256)
        floors = self.floor_table()
        if floors is not None:
            out["floors"] = floors
        return out

    @classmethod
    def from_json(cls, section: dict | None) -> BootstrapSection | None:
        """The section as a report holds it (None or an empty one: no replicates)."""
        if not section:
            return None
        return cls(
            section.get("replicates"),
            section.get("seed"),
            section.get("level", 0.95),
            section.get("rows"),
            section.get("groups"),
            section.get("labels_sha256"),
            section.get("not_bootstrapped", []),
            section.get("values", {}),
            section.get("by_group"),
            section.get("groups_sha256"),
            section.get("floors"),
            section.get("draw"),
        )


def paired_differences(
    current: BootstrapSection | None, baseline: BootstrapSection | None, metric: str
) -> tuple[np.ndarray | None, str | None]:
    """(the paired replicate differences current_r - baseline_r of ``metric``, NaN where either
    lacks a value; or None and the reason they cannot be paired: the two reports' replicates must
    resample the same rows alike, :attr:`BootstrapSection.PAIRING`)."""
    if (
        current is None
        or baseline is None
        or any(getattr(baseline, key) != getattr(current, key) for key in BootstrapSection.PAIRING)
    ):
        return None, (
            "the baseline report has no bootstrap replicates from the same rows, seed and count "
            "(run it with the same number of replicates and seed on the same labels)"
        )
    if metric not in baseline.values or metric not in current.values:
        return None, f"no bootstrap replicates of {metric} in both reports"
    # dtype float reads a JSON null (a replicate without a value) as NaN
    return np.array(current.values[metric], dtype=float) - np.array(baseline.values[metric], dtype=float), None


def unpaired_differences(current: BootstrapSection | None, baseline: BootstrapSection | None, metric: str) -> np.ndarray | None:
    """current_r - baseline_r of ``metric`` over the first min(R_current, R_baseline) replicates,
    NaN where either lacks a value; None where either has none. For two reports of other rows (or
    other seeds): each report's replicates are independent draws of its own estimate's bootstrap
    distribution, so these differences are draws of the difference of two independent estimates,
    whose spread adds both variances (the unpaired comparison)."""
    ours = None if current is None else current.values.get(metric)
    theirs = None if baseline is None else baseline.values.get(metric)
    if ours is None or theirs is None:
        return None
    count = min(len(ours), len(theirs))
    return np.array(ours[:count], dtype=float) - np.array(theirs[:count], dtype=float)


@dataclass(frozen=True)
class GroupEntry:
    """One group's rows and its streamed metrics' values (and the model's own, with a calibrator)."""

    n: int
    metrics: dict[str, float | None]
    uncalibrated_metrics: dict[str, float | None] | None = None

    def to_json(self) -> dict:
        out = {"n": self.n, "metrics": self.metrics}
        if self.uncalibrated_metrics is not None:
            out["uncalibrated_metrics"] = self.uncalibrated_metrics
        return out


@dataclass(frozen=True)
class GroupSection:
    """Per-group metrics (``groups``) and their summary (``group_by``: where the group values came
    from, how many groups, the rows a group needs to be gated, those below, the worst gated group
    per metric, and the mean over the groups per metric: a multi-label input's macro average)."""

    groups: dict[str, GroupEntry]
    source: str
    min_rows: int
    worst: dict[str, dict]
    mean: dict[str, float] = field(default_factory=dict)
    #: The groups are a multi-label input's labels (its report's input section says so; the
    #: source's name cannot: a column of the labels of rows of classes may be called "labels" too).
    of_labels: bool = False

    @property
    def below_min_rows(self) -> list[str]:
        return [name for name, entry in self.groups.items() if entry.n < self.min_rows]

    @property
    def gated(self) -> dict[str, GroupEntry]:
        """The groups with at least ``min_rows`` rows: the ones gates read and rank."""
        return {name: entry for name, entry in self.groups.items() if entry.n >= self.min_rows}

    @property
    def unit(self) -> str:
        """What the groups are: "label" (a multi-label input's labels) or "group"."""
        return "label" if self.of_labels else "group"

    def to_json(self) -> tuple[dict, dict]:
        summary = {
            "source": self.source,
            "count": len(self.groups),
            "min_rows": self.min_rows,
            "below_min_rows": self.below_min_rows,
            "worst": self.worst,
            **({"mean": self.mean} if self.mean else {}),
        }
        return {name: entry.to_json() for name, entry in self.groups.items()}, summary

    @classmethod
    def from_json(cls, groups: dict, summary: dict, of_labels: bool = False) -> GroupSection:
        entries = {
            name: GroupEntry(entry["n"], entry["metrics"], entry.get("uncalibrated_metrics")) for name, entry in groups.items()
        }
        return cls(
            entries,
            summary.get("source", ""),
            summary.get("min_rows", 0),
            summary.get("worst", {}),
            summary.get("mean", {}),
            of_labels,
        )


@dataclass(frozen=True)
class GateResult:
    """One checked gate: its expression, metric, outcome ("pass", "fail" or "inconclusive"), whether
    it passed (an inconclusive one as the policy says), and the fields its kind reports (the value,
    the threshold or baseline, the noise: docs/ci-gates.md) in ``fields``, in their JSON order."""

    expr: str
    metric: str
    outcome: str
    passed: bool
    fields: dict

    def to_json(self) -> dict:
        return self.fields

    @classmethod
    def of(cls, entry: dict) -> GateResult:
        """The result of a gate's check (its entry: docs/ci-gates.md)."""
        return cls(entry["expr"], entry["metric"], entry["outcome"], bool(entry["passed"]), entry)

    @classmethod
    def from_json(cls, entry: dict) -> GateResult:
        """A gate entry as a report holds it (one written before gates had three outcomes: pass or fail)."""
        passed = bool(entry["passed"])
        if "outcome" not in entry:
            entry = {**entry, "outcome": "pass" if passed else "fail"}
        return cls(entry["expr"], entry.get("metric", entry["expr"]), entry["outcome"], passed, entry)


@dataclass
class EvaluationReport:
    """An evaluation: the input, the bundle applied (if any), the metrics (after the bundle) and the
    model's own (``uncalibrated``, with a bundle), the bootstrap replicates, the groups, warnings,
    the gates and whether all passed."""

    calib_version: str
    input: InputSection
    bundle: str | None
    metrics: dict[str, MetricEntry]
    uncalibrated: dict[str, MetricEntry] | None = None
    bootstrap: BootstrapSection | None = None
    groups: GroupSection | None = None
    warnings: list[str] | None = None
    gates: list[GateResult] = field(default_factory=list)
    passed: bool = True
    inconclusive_counts_as: str | None = None
    #: The accumulators behind the streamed metrics (calib.evaluation.StreamedMetrics; not serialised)
    streamed: object = field(default=None, repr=False, compare=False)

    @property
    def values(self) -> dict[str, float | None]:
        return {key: entry.value for key, entry in self.metrics.items()}

    def to_json(self) -> dict:
        """The JSON report (docs/cli.md), keys in their documented order."""
        out: dict[str, Any] = {"calib_version": self.calib_version, "input": self.input.to_json(), "bundle": self.bundle}
        out["metrics"] = entries_to_json(self.metrics)
        if self.uncalibrated is not None:
            out["uncalibrated_metrics"] = entries_to_json(self.uncalibrated)
        if self.bootstrap is not None:
            out["bootstrap"] = self.bootstrap.to_json()
        if self.groups is not None:
            out["groups"], out["group_by"] = self.groups.to_json()
        if self.warnings is not None:
            out["warnings"] = self.warnings
        out["gates"] = [gate.to_json() for gate in self.gates]
        out["passed"] = self.passed
        if self.inconclusive_counts_as is not None:
            out["inconclusive_counts_as"] = self.inconclusive_counts_as
        return out

    @classmethod
    def from_json(cls, report: dict) -> EvaluationReport:
        """A report as ``calib evaluate --json`` wrote it; a hand-made one needs only its metrics."""
        groups, inputs = report.get("groups"), InputSection.from_json(report.get("input") or {})
        of_labels = inputs.multilabel is not None
        return cls(
            report.get("calib_version", ""),
            inputs,
            report.get("bundle"),
            entries_from_json(report["metrics"]),
            entries_from_json(report.get("uncalibrated_metrics")),
            BootstrapSection.from_json(report.get("bootstrap")),
            None if not groups else GroupSection.from_json(groups, report.get("group_by") or {}, of_labels),
            report.get("warnings"),
            [GateResult.from_json(entry) for entry in report.get("gates", [])],
            bool(report.get("passed", True)),
            report.get("inconclusive_counts_as"),
        )
