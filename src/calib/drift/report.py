"""The comparison report as data: typed sections built by :func:`calib.drift.compare`, serialised
to the JSON report of ``calib compare`` once, at the edge (:meth:`ComparisonReport.to_json`), and
read back from it (:meth:`ComparisonReport.from_json`). The renderers (text, HTML) and the gates
read these types.

Every quantity compared is a :class:`Change`: its value in REF and in NEW and the change NEW - REF
with its interval. A section (:class:`ComparisonSection`: the whole batches, or one group of both)
holds the registry metrics' changes, the decompositions' changes, the class priors, the tests the
verdict took with their evidence, the verdict, and the held-out evidence of each remedy; its
bootstrap replicates of every change are kept by quantity (``replicates``), so that gates read
them as they read an evaluation's (:meth:`ComparisonReport.gate_view`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..evaluation.report_types import (
    BootstrapSection,
    EvaluationReport,
    GateResult,
    GroupEntry,
    GroupSection,
    InputSection,
    MetricEntry,
)


@dataclass(frozen=True)
class Change:
    """A quantity of both batches (``ref``, ``new``; None where undefined) and its change ``value`` =
    new - ref with its interval ``ci`` at the section's level (None without replicates)."""

    ref: float | None
    new: float | None
    value: float | None
    ci: list[float] | None = None

    def beyond_noise(self) -> int:
        """+1 when the whole interval lies above 0, -1 when below, 0 when it holds 0 (or there is none)."""
        if self.ci is None:
            return 0
        return 1 if self.ci[0] > 0.0 else -1 if self.ci[1] < 0.0 else 0

    def in_widths(self) -> float:
        """|value| / the interval's width: how many widths of its own noise the change is (0 without
        a value or an interval)."""
        if self.value is None or self.ci is None:
            return 0.0
        return abs(self.value) / max(self.ci[1] - self.ci[0], 1e-300)

    def to_json(self) -> dict:
        return {"ref": self.ref, "new": self.new, "change": self.value, "ci": self.ci}

    @classmethod
    def from_json(cls, entry: dict) -> Change:
        return cls(entry.get("ref"), entry.get("new"), entry.get("change"), entry.get("ci"))


@dataclass(frozen=True)
class Finding:
    """One test the verdict took: its name, the quantity it reads, the verdict it calls when it
    fires (None when it did not), and its evidence in one line."""

    test: str
    reads: str
    verdict: str | None
    evidence: str

    @property
    def fired(self) -> bool:
        return self.verdict is not None

    def to_json(self) -> dict:
        return {"test": self.test, "reads": self.reads, "verdict": self.verdict, "evidence": self.evidence}

    @classmethod
    def from_json(cls, entry: dict) -> Finding:
        return cls(entry["test"], entry["reads"], entry.get("verdict"), entry["evidence"])


@dataclass(frozen=True)
class RemedyEvidence:
    """What a remedy does to NEW on rows held out from its fit: ``measure`` names the quantity
    (log loss and ECE with labels; without them the log-likelihood gain of the rows), ``before`` and
    ``after`` its values (``after`` alone for a gain), ``improves`` whether the remedy helps, and
    ``method`` the calibrator that implements it."""

    remedy: str
    method: str
    rows: int
    before: dict
    after: dict
    improves: bool

    def to_json(self) -> dict:
        return {
            "remedy": self.remedy,
            "method": self.method,
            "rows_held_out": self.rows,
            "before": self.before,
            "after": self.after,
            "improves": self.improves,
        }

    @classmethod
    def from_json(cls, entry: dict) -> RemedyEvidence:
        return cls(entry["remedy"], entry["method"], entry["rows_held_out"], entry["before"], entry["after"], entry["improves"])


@dataclass(frozen=True)
class ComparisonSection:
    """The comparison of REF's and NEW's rows (all of them, or one group's).

    ``metrics``: {key: :class:`Change`} of the registry's metrics (accuracy, top-k accuracy, Brier,
    log loss) and ``class_accuracy`` (each batch's per-class accuracy weighted by NEW's class
    shares); ``decomposition``: {"top_label" | "classwise": {score: {term: Change}}}; ``priors``:
    the class priors of both (label shares, or EM's estimate for NEW without labels) and how far
    apart; ``findings``: the verdict's tests in order; ``remedies``: {remedy: its held-out
    evidence}; ``replicates``: {quantity path ("accuracy", "top_label.brier.mcb", "prior_shift"):
    the replicates of its change}."""

    ref_n: int
    new_n: int
    labelled: bool
    level: float
    metrics: dict[str, Change]
    decomposition: dict[str, dict[str, dict[str, Change]]]
    priors: dict
    findings: list[Finding]
    verdict: str
    remedy: str | None
    remedies: dict[str, RemedyEvidence] = field(default_factory=dict)
    replicates: dict[str, list] = field(default_factory=dict)

    def quantity(self, path: str) -> Change | None:
        """The :class:`Change` at ``path``: a metric key, "PROBLEM.SCORE.TERM" of a decomposition, or
        "prior_shift" (the L1 distance of the priors); None where the section has none."""
        if path == "prior_shift":
            return Change(None, None, self.priors.get("l1"), self.priors.get("l1_ci"))
        if path in self.metrics:
            return self.metrics[path]
        parts = path.split(".")
        if len(parts) == 3:
            return self.decomposition.get(parts[0], {}).get(parts[1], {}).get(parts[2])
        return None

    @property
    def evidence(self) -> str:
        """The evidence of the verdict: the line of the test that called it, or why nothing did."""
        fired = next((finding for finding in self.findings if finding.fired), None)
        return fired.evidence if fired is not None else self.findings[-1].evidence if self.findings else ""

    def to_json(self) -> dict:
        return {
            "ref_n": self.ref_n,
            "new_n": self.new_n,
            "labelled": self.labelled,
            "level": self.level,
            "verdict": self.verdict,
            "evidence": self.evidence,
            "remedy": self.remedy,
            "metrics": {key: change.to_json() for key, change in self.metrics.items()},
            "decomposition": {
                problem: {score: {term: change.to_json() for term, change in terms.items()} for score, terms in scores.items()}
                for problem, scores in self.decomposition.items()
            },
            "priors": self.priors,
            "findings": [finding.to_json() for finding in self.findings],
            "remedies": {name: evidence.to_json() for name, evidence in self.remedies.items()},
            "replicates": self.replicates,
        }

    @classmethod
    def from_json(cls, entry: dict) -> ComparisonSection:
        return cls(
            entry["ref_n"],
            entry["new_n"],
            entry["labelled"],
            entry["level"],
            {key: Change.from_json(change) for key, change in entry["metrics"].items()},
            {
                problem: {score: {term: Change.from_json(c) for term, c in terms.items()} for score, terms in scores.items()}
                for problem, scores in entry["decomposition"].items()
            },
            entry["priors"],
            [Finding.from_json(finding) for finding in entry["findings"]],
            entry["verdict"],
            entry.get("remedy"),
            {name: RemedyEvidence.from_json(evidence) for name, evidence in entry.get("remedies", {}).items()},
            entry.get("replicates", {}),
        )


@dataclass(frozen=True)
class ComparisonGroups:
    """The comparison within each group both batches hold enough rows of (``sections``, each at
    the Bonferroni ``level`` over them), the groups' source, whether they are a multi-label input's
    labels, and the groups left out with the reason (``skipped``)."""

    source: str
    level: float
    sections: dict[str, ComparisonSection]
    skipped: dict[str, str]
    of_labels: bool = False

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "level": self.level,
            "of_labels": self.of_labels,
            "values": {name: section.to_json() for name, section in self.sections.items()},
            "skipped": self.skipped,
        }

    @classmethod
    def from_json(cls, entry: dict) -> ComparisonGroups:
        sections = {name: ComparisonSection.from_json(section) for name, section in entry["values"].items()}
        return cls(entry["source"], entry["level"], sections, entry["skipped"], entry.get("of_labels", False))


@dataclass
class ComparisonReport:
    """What changed from REF to NEW (:func:`calib.drift.compare`): both inputs, the settings, the
    comparison of all rows (``whole``) and of each group, the gates and whether all passed, and the
    remedy bundle when one was written (``remedy_written``: its path, or why none was)."""

    calib_version: str
    ref: InputSection
    new: InputSection
    settings: dict
    whole: ComparisonSection
    groups: ComparisonGroups | None = None
    gates: list[GateResult] = field(default_factory=list)
    passed: bool = True
    inconclusive_counts_as: str | None = None
    note: str | None = None
    remedy_written: dict | None = None

    @property
    def verdict(self) -> str:
        return self.whole.verdict

    @property
    def remedy(self) -> str | None:
        return self.whole.remedy

    def to_json(self) -> dict:
        """The JSON report of ``calib compare --json`` (docs/compare.md), keys in their documented order."""
        out = {
            "calib_version": self.calib_version,
            "ref": self.ref.to_json(),
            "new": self.new.to_json(),
            "settings": self.settings,
            **self.whole.to_json(),
        }
        if self.groups is not None:
            out["groups"] = self.groups.to_json()
        if self.note is not None:
            out["note"] = self.note
        out["gates"] = [gate.to_json() for gate in self.gates]
        out["passed"] = self.passed
        if self.inconclusive_counts_as is not None:
            out["inconclusive_counts_as"] = self.inconclusive_counts_as
        if self.remedy_written is not None:
            out["remedy_written"] = self.remedy_written
        return out

    @classmethod
    def from_json(cls, report: dict) -> ComparisonReport:
        """A report as ``calib compare --json`` wrote it."""
        groups = report.get("groups")
        return cls(
            report.get("calib_version", ""),
            InputSection.from_json(report["ref"]),
            InputSection.from_json(report["new"]),
            report["settings"],
            ComparisonSection.from_json(report),
            None if groups is None else ComparisonGroups.from_json(groups),
            [GateResult.from_json(entry) for entry in report.get("gates", [])],
            bool(report.get("passed", True)),
            report.get("inconclusive_counts_as"),
            report.get("note"),
            report.get("remedy_written"),
        )

    def gate_view(self, keys: dict) -> EvaluationReport:
        """The changes that gates read, as an evaluation report's metrics: each gate key of ``keys``
        ({key: (quantity path, sign)}: sign +1 where the key is the change NEW - REF, -1 where it is
        REF - NEW) with its value and its replicates, of the whole batches and of each group, so
        that :func:`calib.evaluation.gates.check_gates` reads them as it reads an evaluation's
        (three outcomes, the worst group at the Bonferroni level, JUnit and CI outputs alike)."""

        def values(section: ComparisonSection) -> tuple[dict, dict]:
            found, replicates = {}, {}
            for key, (path, sign) in keys.items():
                change = section.quantity(path)
                if change is None or change.value is None:
                    continue
                found[key] = sign * change.value
                if path in section.replicates:
                    replicates[key] = [None if r is None else sign * r for r in section.replicates[path]]
            return found, replicates

        whole, replicates = values(self.whole)
        level = self.whole.level
        rows = min(self.whole.ref_n, self.whole.new_n)
        by_group, group_section = None, None
        if self.groups is not None and self.groups.sections:
            entries, by_group = {}, {}
            for name, section in self.groups.sections.items():
                found, by_group[name] = values(section)
                entries[name] = GroupEntry(min(section.ref_n, section.new_n), found)
            group_section = GroupSection(entries, self.groups.source, 1, {}, of_labels=self.groups.of_labels)
        count = self.settings.get("bootstrap")
        bootstrap = BootstrapSection(count, self.settings.get("seed"), level, rows, None, None, [], replicates, by_group)
        shown = InputSection(f"{self.ref.path} -> {self.new.path}", "comparison", rows, self.ref.k)
        metrics = {key: MetricEntry(value, {}) for key, value in whole.items()}
        view = EvaluationReport(self.calib_version, shown, None, metrics, bootstrap=bootstrap, groups=group_section)
        view.gates, view.passed, view.inconclusive_counts_as = self.gates, self.passed, self.inconclusive_counts_as
        return view
