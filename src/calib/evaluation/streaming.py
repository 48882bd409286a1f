"""The streaming pass of an evaluation: every chunk of rows through the model's (and a calibrator's)
probabilities into the metric accumulators, in row order, with optional bootstrap groups."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..bootstrap import MAX_GROUPS_WITH_REPLICATES, BootstrapConfig, BootstrapStates, intervals
from ..calibrators.base import CalibrationInputs, Calibrator, builds_sets
from ..core.numerics import Turns, map_in_order
from ..io.predictions import Predictions
from ..metrics import Batch, MetricConfig
from ..metrics.batch import model_batch as uncalibrated_batch
from ..metrics.metric_set import GroupedMetricSets, MetricSet
from .groups import Groups

#: Upper ends of the set-size strata of SSCV (Angelopoulos et al. 2021): 0-1, 2-3, 4-10, 11-100, 101-1000, > 1000.
SIZE_STRATA = np.array([1, 3, 10, 100, 1000])
#: Classes listed with the lowest coverage.
WORST_COVERED = 5


class SetStats:
    """Conformal sets of a bundle on the evaluated rows: coverage P(y in C(x)), mean |C(x)|, the
    shares of empty and full sets, and (for a method with an alpha) the conditional coverage
    diagnostics: CovGap = mean over classes of |coverage_y - (1 - alpha)| (Ding et al. 2023), SSCV =
    max over set-size strata with a row of |coverage_stratum - (1 - alpha)| (Angelopoulos et al.
    2021), and the classes with the lowest coverage."""

    def __init__(self, calibrator, n_classes: int, layout=None):
        self.settings = {k: v for k, v in calibrator.fit_report().items() if k in ("alpha", "score", "threshold", "coverage")}
        #: A multi-label input's pairs (``layout``, the input's output layout, a
        #: calib.io.predictions.LabelLayout): each label's coverage and the rows with every label
        #: covered, instead of the per-class diagnostics. None for rows of classes.
        self.layout = None if layout is None or layout.n_labels is None else layout
        if self.layout is not None:
            self.label_pairs = np.zeros(layout.n_labels, dtype=np.int64)
            self.label_covered = np.zeros(layout.n_labels, dtype=np.int64)
            self.row_missed = np.zeros(layout.n_rows, dtype=bool)
        self.n = self.covered = self.size = self.empty = self.full = 0
        self.class_rows = np.zeros(n_classes, dtype=np.int64)
        self.class_covered = np.zeros(n_classes, dtype=np.int64)
        self.stratum_rows = np.zeros(len(SIZE_STRATA) + 1, dtype=np.int64)
        self.stratum_covered = np.zeros(len(SIZE_STRATA) + 1, dtype=np.int64)

    def update(self, in_set: np.ndarray, labels: np.ndarray, positions=None) -> None:
        """Add a chunk's set mask with its labels; ``positions`` (a slice or indices) place a
        multi-label input's pairs: pair p is row p // L's label p % L."""
        sizes = in_set.sum(axis=1)
        hit = in_set[np.arange(len(labels)), labels]
        if self.layout is not None:
            n_labels = self.layout.n_labels
            label = self.layout.pair_labels(positions)
            self.label_pairs += np.bincount(label, minlength=n_labels)
            self.label_covered += np.bincount(label, weights=hit, minlength=n_labels).astype(np.int64)
            self.row_missed[self.layout.pair_rows(positions)[~hit]] = True
        self.n += len(labels)
        self.covered += int(hit.sum())
        self.size += int(sizes.sum())
        self.empty += int((sizes == 0).sum())
        self.full += int((sizes == in_set.shape[1]).sum())
        k = len(self.class_rows)
        self.class_rows += np.bincount(labels, minlength=k)
        self.class_covered += np.bincount(labels, weights=hit, minlength=k).astype(np.int64)
        stratum = np.searchsorted(SIZE_STRATA, sizes, side="left")
        self.stratum_rows += np.bincount(stratum, minlength=len(self.stratum_rows))
        self.stratum_covered += np.bincount(stratum, weights=hit, minlength=len(self.stratum_rows)).astype(np.int64)

    def results(self) -> dict:
        values = {"set_coverage": self.covered, "set_size": self.size, "set_empty": self.empty, "set_full": self.full}
        out = {key: {"value": value / self.n, "settings": self.settings} for key, value in values.items()}
        if self.layout is not None:
            return {**out, **self.label_results()}
        alpha = self.settings.get("alpha")
        if alpha is None:
            return out
        seen = self.class_rows > 0
        class_coverage = self.class_covered[seen] / self.class_rows[seen]
        strata = self.stratum_rows > 0
        stratum_coverage = self.stratum_covered[strata] / self.stratum_rows[strata]
        order = np.argsort(class_coverage, kind="stable")[:WORST_COVERED]
        classes = np.flatnonzero(seen)
        out["set_covgap"] = {
            "value": float(np.mean(np.abs(class_coverage - (1.0 - alpha)))),
            "settings": {**self.settings, "classes": int(seen.sum())},
            "worst_classes": [
                {"class": int(classes[i]), "coverage": float(class_coverage[i]), "rows": int(self.class_rows[classes[i]])}
                for i in order
            ],
        }
        out["set_sscv"] = {
            "value": float(np.max(np.abs(stratum_coverage - (1.0 - alpha)))),
            "settings": {**self.settings, "strata": "0-1, 2-3, 4-10, 11-100, 101-1000, >1000"},
        }
        return out

    def label_results(self) -> dict:
        """A multi-label input's set statistics: ``set_coverage_joint`` = the share of rows whose
        every label's set holds its label, ``set_coverage_label_min`` = the lowest label's coverage
        (its ``worst_labels``: the lowest WORST_COVERED)."""
        seen = self.label_pairs > 0
        coverage = self.label_covered[seen] / self.label_pairs[seen]
        labels = np.flatnonzero(seen)
        order = np.argsort(coverage, kind="stable")[:WORST_COVERED]
        return {
            "set_coverage_joint": {"value": 1.0 - float(self.row_missed.mean()), "settings": self.settings},
            "set_coverage_label_min": {
                "value": float(coverage.min()),
                "settings": {**self.settings, "labels": int(seen.sum())},
                "worst_labels": [
                    {"label": int(labels[i]), "coverage": float(coverage[i]), "rows": int(self.label_pairs[labels[i]])}
                    for i in order
                ],
            },
        }


@dataclass
class StreamedMetrics:
    """What the streaming pass found: the entries of the main side (after the calibrator, or the
    model's own without one) and of the model's own with a calibrator (``uncalibrated``); the
    accumulators behind the main side (``state``, ``group_states``: what a metric state file
    holds); the bootstrap replicates of the main side (``replicates``: "groups", "values" and, per
    group, "by_group") and its per-cluster sums (``bootstrap_states``, which a state file holds too);
    each group's entries per side (``group_values``)."""

    keys: list[str]
    config: MetricConfig
    values: dict
    uncalibrated: dict | None
    state: MetricSet
    replicates: dict = field(default_factory=dict)
    group_values: dict = field(default_factory=dict)
    group_states: list | None = None
    bootstrap_states: BootstrapStates | None = None


def compute_metrics(
    preds: Predictions, keys: list[str], config: MetricConfig, calibrator: Calibrator | None = None, features=None
):
    """(metrics, the model's own metrics or None) of ``preds``: :func:`stream_metrics`'s entries."""
    streamed = stream_metrics(preds, keys, config, calibrator, features)
    return streamed.values, streamed.uncalibrated


def stream_metrics(
    preds: Predictions,
    keys: list[str],
    config: MetricConfig,
    calibrator: Calibrator | None = None,
    features: np.ndarray | None = None,
    bootstrap: BootstrapConfig | None = None,
    groups: Groups | None = None,
    first_row: int = 0,
    row_ids: np.ndarray | None = None,
) -> StreamedMetrics:
    """Stream ``preds`` in chunks through the accumulators of the streamed metric ``keys``.

    With a calibrator the main entries are the calibrated metrics and ``uncalibrated`` the model's
    own; a conformal calibrator adds its set statistics (set_coverage, set_size, set_empty,
    set_full). ``bootstrap`` adds a percentile interval "ci" to every entry (:mod:`calib.bootstrap`)
    and keeps the main side's replicate values (and, with at most MAX_GROUPS_WITH_REPLICATES
    ``groups``, each group's). ``groups`` adds each group's entries per side; the rows are then read
    in group order when the scores allow random access (calib.evaluation.groups). ``first_row``:
    the global index of the input's first row (a shard's place among all rows), which the
    replicates' clusters are keyed by; ``row_ids``: each row's own id instead (a table's rows, in
    any order and partitioning: calib.table_partitions).
    """
    labels = preds.required_labels()
    calibrated = MetricSet(keys, config, preds.k) if calibrator is not None else None
    sets = SetStats(calibrator, preds.k, preds.output_layout) if calibrator is not None and builds_sets(calibrator) else None
    uncalibrated = MetricSet(keys, config, preds.k)
    sides = ["uncalibrated"] + (["calibrated"] if calibrated is not None else [])

    def new_set(clusters: int | None = None) -> MetricSet:
        return MetricSet(keys, config, preds.k, clusters)

    sliced, grouped = _side_accumulators(sides, new_set, groups, bootstrap, first_row, row_ids)
    # Each chunk's accumulator states (per slice when grouped by a column) are filled on the worker
    # thread that computed its probabilities and added here in row order: the same sums, in the same
    # order, as updating here, with the sort and bin counts of two chunks running on two cores (and
    # the same values with replicates as without). With bootstrap replicates the worker also computes
    # the chunk's rows' clusters and its small per-cluster sums, and then, in its turn (chunks in row
    # order, Turns), adds the chunk to the large ones (classwise bins of many classes: a chunk's own
    # would be as large), whose rows' plain sums are counted in that same pass without groups.
    turns = Turns() if grouped else None

    def batches(item: tuple[int, slice | np.ndarray]):
        """The chunk's accumulator states per side, the plain sums its per-cluster pass counted, and
        its conformal-set mask: the costly part, run on worker threads; the results are combined in
        row order on this thread (same result for any thread count)."""
        index, rows = item
        prepared = None
        try:
            filled, prepared, in_set = _chunk_states(preds, rows, calibrator, features, sets, sliced, grouped, new_set)
        finally:  # every chunk takes its turn, so that a failed one holds none of the others up
            add = None if prepared is None else lambda: _add_per_cluster(grouped, prepared)
            counted = turns.take(index, add) if turns is not None else {}
        return rows, filled, counted, in_set

    chunks: Iterable[slice | np.ndarray] = preds.chunks()
    if groups is not None and isinstance(preds.scores, np.ndarray):  # random access: read the rows in group order
        order = groups.order()
        chunks = (order[rows] for rows in preds.chunks())
    # with groups, the overall states are the sum of the groups' (added after the pass, not counted twice)
    overall = {"uncalibrated": uncalibrated}
    if calibrated is not None:
        overall["calibrated"] = calibrated
    for rows, filled, counted, in_set in map_in_order(batches, enumerate(chunks), values=preds.n * preds.k):
        for side, state in filled.items():
            if side in sliced:
                sliced[side].absorb_chunk(state)
            else:
                overall[side].absorb_parts(state)
        for side, plain in counted.items():
            overall[side].absorb_parts(plain)
        if in_set is not None and sets is not None:
            sets.update(in_set, labels[rows], rows)
    for side, states in sliced.items():
        for group_set in states.sets:
            overall[side].absorb(group_set.state())
    main_side = "calibrated" if calibrated is not None else "uncalibrated"
    results = {"uncalibrated": uncalibrated.results()}
    if calibrated is not None:
        results["calibrated"] = calibrated.results()
    replicates = _add_intervals(results, grouped, bootstrap, main_side, groups)
    values = results[main_side]
    if sets is not None:
        values.update(sets.results())
    return StreamedMetrics(
        keys,
        config,
        values,
        results["uncalibrated"] if calibrated is not None else None,
        overall[main_side],
        replicates,
        {side: [metric_set.results() for metric_set in states.sets] for side, states in sliced.items()},
        sliced[main_side].sets if sliced else None,
        grouped.get(main_side),
    )


def _chunk_states(preds: Predictions, rows, calibrator, features, sets, sliced: dict, grouped: dict, new_set):
    """(a chunk's accumulator states per side, its per-cluster sums prepared per side (with
    replicates, :meth:`BootstrapStates.prepare`), its conformal-set mask or None)."""
    batch, after, in_set = uncalibrated_batch(preds, rows), None, None
    if calibrator is not None:
        after, in_set = calibrated_batch(calibrator, preds, rows, features, sets is not None)
    preds.release(rows)
    filled, prepared = {}, {}
    for side, side_batch in (("uncalibrated", batch), ("calibrated", after)):
        if side_batch is not None:
            beside = ()  # the accumulators whose plain sums the per-cluster pass counts
            if side in grouped:  # the rows' clusters first: the plain and per-cluster bins in one pass
                grouped[side].assign_cells(side_batch, rows)
                beside = grouped[side].plain_beside
            filled[side] = _filled_states(side_batch, rows, sliced.get(side), new_set, beside)
            if side in grouped:
                prepared[side] = grouped[side].prepare(side_batch, rows)
    return filled, prepared, in_set


def _add_per_cluster(grouped: dict, prepared: dict) -> dict:
    """Add a prepared chunk to each side's per-cluster sums (:meth:`BootstrapStates.update`, in the
    chunk's turn); {side: the plain sums counted in the same pass}."""
    return {side: grouped[side].update(chunk) for side, chunk in prepared.items()}


def calibrated_batch(calibrator: Calibrator, preds: Predictions, rows, features, with_sets: bool):
    """(the rows' batch after ``calibrator``, their conformal-set mask or None)."""
    inputs = CalibrationInputs.of(preds, rows, features)
    in_set = None
    if with_sets:
        log_probs, in_set = calibrator.apply(inputs, "log-probs and sets")[0]
    else:
        log_probs = calibrator.apply(inputs, counts=False)[0]
    labels = preds.required_labels()[rows]
    return Batch(labels, log_probs=log_probs, true_probs=preds.true_probs_rows(rows), answers=preds.answers), in_set


def _filled_states(batch: Batch, rows, sliced, new_set, skip=()):
    """A chunk's accumulator states: per group when grouped by a column, else one metric set's by
    accumulator (:meth:`MetricSet.absorb_parts`), but those of ``skip``, whose sums the bootstrap's
    pass counts."""
    if sliced is not None:
        return sliced.chunk_states(batch, rows)
    chunk_set = new_set()
    chunk_set.update(batch, skip=skip)
    return {identity: accumulator.state() for identity, accumulator in chunk_set.accumulators.items() if identity not in skip}


def _side_accumulators(
    sides: list[str], new_set, groups: Groups | None, bootstrap: BootstrapConfig | None, first_row: int, row_ids
):
    """({side: per-group metric sets} with ``groups``, {side: bootstrap states} with ``bootstrap``):
    the bootstrap stratified by group when there are at most MAX_GROUPS_WITH_REPLICATES groups."""
    sliced = {}
    if groups is not None:
        sliced = {side: GroupedMetricSets(new_set, groups.codes, len(groups.names)) for side in sides}
    grouped = {}
    if bootstrap is not None:
        strata, n_strata, pairs_per_row = None, 1, 1
        if groups is not None:
            pairs_per_row = groups.pairs_per_row
            if len(groups.names) <= MAX_GROUPS_WITH_REPLICATES:
                strata, n_strata = groups.codes, len(groups.names)
        grouped = {
            side: BootstrapStates(
                new_set,
                bootstrap.seed,
                strata=strata,
                n_strata=n_strata,
                pairs_per_row=pairs_per_row,
                first_row=first_row,
                row_ids=row_ids,
                plain_beside=groups is None,
            )
            for side in sides
        }
    return sliced, grouped


def _add_intervals(results: dict, grouped: dict, bootstrap, main_side: str, groups) -> dict:
    """The bootstrap interval "ci" (:func:`calib.bootstrap.centred_interval`, the gates' own) on every
    entry of each side from its bootstrap states; returns the
    main side's replicate values (and each group's under "by_group")."""
    kept = {}
    for side, states in grouped.items():
        replicates = states.replicate_values(bootstrap)
        estimates = {key: entry.get("value") for key, entry in results[side].items()}
        for key, interval in intervals(replicates, bootstrap.level, estimates).items():
            results[side][key]["ci"] = interval
        if side == main_side:
            kept = {"groups": states.clusters, "values": {k: as_report_list(v) for k, v in replicates.items()}}
            if states.n_strata > 1:
                kept["by_group"] = {
                    name: {k: as_report_list(v) for k, v in values.items()}
                    for name, values in zip(groups.names, states.stratum_replicate_values(bootstrap))
                }
    return kept


def as_report_list(values: np.ndarray) -> list[float | None]:
    """Replicate values as a report holds them: None (JSON null) for a replicate without a value
    (a group with no row in it), never NaN, which is not JSON."""
    return [value if math.isfinite(value) else None for value in values.tolist()]
