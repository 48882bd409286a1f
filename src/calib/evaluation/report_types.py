"""The evaluation report as data: typed sections built by :func:`calib.evaluation.build_report`,
serialised to the JSON report of ``calib evaluate`` at the edge (:meth:`EvaluationReport.to_json`)
and read back from it (:meth:`EvaluationReport.from_json`: a baseline, merged shard states).

Gates, renderers (text, HTML, JUnit) and a baseline comparison read the serialised form, so a
report written to a file and one computed now go through the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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


def entries_from_json(section: dict | None) -> dict[str, MetricEntry] | None:
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
    n: int
    k: int
    sha256: str | None = None
    labels_sha256: str | None = None
    merged_from: list[dict] | None = None
    #: A multi-label input: {"rows": N, "labels": L}; ``n`` then counts its N L (row, label) pairs.
    multilabel: dict | None = None

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
    def from_json(cls, section: dict) -> InputSection:
        return cls(
            section.get("path"),
            section.get("kind"),
            section["n"],
            section["k"],
            section.get("sha256"),
            section.get("labels_sha256"),
            section.get("merged_from"),
            section.get("multilabel"),
        )


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

    @property
    def below_min_rows(self) -> list[str]:
        return [name for name, entry in self.groups.items() if entry.n < self.min_rows]

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
    def from_json(cls, groups: dict, summary: dict) -> GroupSection:
        entries = {
            name: GroupEntry(entry["n"], entry["metrics"], entry.get("uncalibrated_metrics")) for name, entry in groups.items()
        }
        return cls(entries, summary["source"], summary["min_rows"], summary["worst"], summary.get("mean", {}))


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
    def from_json(cls, entry: dict) -> GateResult:
        return cls(entry["expr"], entry["metric"], entry["outcome"], bool(entry["passed"]), entry)


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
    bootstrap: dict | None = None
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
        out = {"calib_version": self.calib_version, "input": self.input.to_json(), "bundle": self.bundle}
        out["metrics"] = entries_to_json(self.metrics)
        if self.uncalibrated is not None:
            out["uncalibrated_metrics"] = entries_to_json(self.uncalibrated)
        if self.bootstrap is not None:
            out["bootstrap"] = self.bootstrap
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
        groups = report.get("groups")
        return cls(
            report.get("calib_version", ""),
            InputSection.from_json(report["input"]),
            report.get("bundle"),
            entries_from_json(report["metrics"]),
            entries_from_json(report.get("uncalibrated_metrics")),
            report.get("bootstrap"),
            None if groups is None else GroupSection.from_json(groups, report["group_by"]),
            report.get("warnings"),
            [GateResult.from_json(entry) for entry in report.get("gates", [])],
            bool(report.get("passed", True)),
            report.get("inconclusive_counts_as"),
        )
