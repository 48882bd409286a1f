"""The streaming pass of an evaluation: every chunk of rows through the model's (and a calibrator's)
probabilities into the metric accumulators, in row order, with optional bootstrap groups."""

from __future__ import annotations

import numpy as np

from ..bootstrap import MAX_GROUPS_WITH_REPLICATES, BootstrapConfig, BootstrapStates, intervals
from ..calibrators.base import Calibrator, calibrator_inputs
from ..errors import InputError
from ..io.predictions import Predictions
from ..metrics import Batch, MetricConfig
from ..metrics.batch import model_batch as uncalibrated_batch
from ..metrics.metric_set import GroupedMetricSets, MetricSet
from ..numerics import map_in_order
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

    def __init__(self, calibrator, n_classes: int):
        self.settings = {k: v for k, v in calibrator.fit_report().items() if k in ("alpha", "score", "threshold")}
        self.n = self.covered = self.size = self.empty = self.full = 0
        self.class_rows = np.zeros(n_classes, dtype=np.int64)
        self.class_covered = np.zeros(n_classes, dtype=np.int64)
        self.stratum_rows = np.zeros(len(SIZE_STRATA) + 1, dtype=np.int64)
        self.stratum_covered = np.zeros(len(SIZE_STRATA) + 1, dtype=np.int64)

    def update(self, in_set: np.ndarray, labels: np.ndarray) -> None:
        sizes = in_set.sum(axis=1)
        hit = in_set[np.arange(len(labels)), labels]
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


def compute_metrics(
    preds: Predictions,
    keys: list[str],
    config: MetricConfig,
    calibrator: Calibrator | None = None,
    features: np.ndarray | None = None,
    state_out: list | None = None,
    bootstrap: BootstrapConfig | None = None,
    replicates_out: dict | None = None,
    groups: Groups | None = None,
    groups_out: dict | None = None,
):
    """Stream ``preds`` in chunks; returns (metrics, uncalibrated metrics or None).

    With a calibrator, the first dict holds the calibrated metrics and the second the model's own;
    a conformal calibrator adds its set statistics (set_coverage, set_size, set_empty, set_full).
    ``state_out``, if given, receives the MetricSet behind the first dict (for --emit-state).
    ``bootstrap`` adds a percentile interval "ci" to every entry (:mod:`calib.bootstrap`) and puts the
    first dict's replicate values into ``replicates_out`` (and, with at most
    MAX_GROUPS_WITH_REPLICATES ``groups``, each group's under "by_group"). ``groups`` fills ``groups_out`` with
    {side: [each group's metrics]} and {"states": the first side's per-group MetricSets}; the rows
    are then read in group order when the scores allow random access (calib.evaluation.groups).
    """
    if preds.labels is None:
        raise InputError(f"{preds.name}: evaluation needs labels; none in the file and none given", cli_hint="--labels FILE")
    calibrated = MetricSet(keys, config, preds.k) if calibrator is not None else None
    sets = SetStats(calibrator, preds.k) if calibrator is not None and calibrator.builds_sets else None
    uncalibrated = MetricSet(keys, config, preds.k)
    sliced = {}
    if groups is not None:
        sides = ["uncalibrated"] + (["calibrated"] if calibrated is not None else [])
        sliced = {
            side: GroupedMetricSets(lambda: MetricSet(keys, config, preds.k), groups.codes, len(groups.names)) for side in sides
        }
    grouped = {}
    if bootstrap is not None:
        sides = ["uncalibrated"] + (["calibrated"] if calibrated is not None else [])
        stratified = groups is not None and len(groups.names) <= MAX_GROUPS_WITH_REPLICATES
        strata = {"strata": groups.codes, "n_strata": len(groups.names)} if stratified else {}
        grouped = {
            side: BootstrapStates(lambda: MetricSet(keys, config, preds.k), preds.n, bootstrap.seed, **strata) for side in sides
        }

    # Each chunk's accumulator states (per slice when grouped by a column) are filled on the worker
    # thread that computed its probabilities and added here in row order: the same sums, in the same
    # order, as updating here, with the sort and bin counts of two chunks running on two cores. The
    # bootstrap's random row groups need the batches here.
    per_chunk = not grouped

    def batches(rows: slice):
        """The chunk's model and calibrated batches and set mask (or, without bootstrap groups, the
        accumulator states they fill): the costly part, run on worker threads; the results are
        combined in row order on this thread (same result for any thread count)."""
        batch, after, in_set = uncalibrated_batch(preds, rows), None, None
        if calibrated is not None:
            logits, given = calibrator_inputs(calibrator, preds, rows)
            chunk_features = None if features is None else features[rows]
            if sets is None:
                log_probs = calibrator.transform(logits, chunk_features, **given)
            else:
                log_probs, in_set = calibrator.transform_and_sets(logits, chunk_features, **given)
            after = Batch(preds.labels[rows], log_probs=log_probs, true_probs=preds.true_probs_rows(rows))
        preds.release(rows)
        if not per_chunk:
            return rows, {"uncalibrated": batch, "calibrated": after}, in_set
        filled = {}
        for side, side_batch in (("uncalibrated", batch), ("calibrated", after)):
            if side_batch is None:
                continue
            if side in sliced:
                filled[side] = sliced[side].chunk_states(side_batch, rows)
            else:
                chunk_set = MetricSet(keys, config, preds.k)
                chunk_set.update(side_batch)
                filled[side] = chunk_set.state()
        return rows, filled, in_set

    chunks = preds.chunks()
    if groups is not None and isinstance(preds.scores, np.ndarray):  # random access: read the rows in group order
        order = groups.order()
        chunks = (order[rows] for rows in chunks)
    # with groups, the overall states are the sum of the groups' (added after the pass, not counted twice)
    overall = {"uncalibrated": uncalibrated, "calibrated": calibrated}
    for rows, by_side, in_set in map_in_order(batches, chunks):
        for side, side_batch in by_side.items():
            if side_batch is None:
                continue
            if per_chunk and side in sliced:
                sliced[side].absorb_chunk(side_batch)
            elif per_chunk:
                overall[side].absorb(side_batch)
            elif side in sliced:
                sliced[side].update(side_batch, rows)
            else:
                overall[side].update(side_batch)
            if side in grouped:
                grouped[side].update(side_batch, rows)
        if in_set is not None:
            sets.update(in_set, preds.labels[rows])
    for side, states in sliced.items():
        for group_set in states.sets:
            overall[side].absorb(group_set.state())
    main_side = "calibrated" if calibrated is not None else "uncalibrated"
    if state_out is not None:
        state_out.append(calibrated if calibrated is not None else uncalibrated)
    if groups_out is not None and sliced:
        groups_out.update({side: [metric_set.results() for metric_set in states.sets] for side, states in sliced.items()})
        groups_out["states"] = sliced[main_side].sets
    results = {"uncalibrated": uncalibrated.results()}
    if calibrated is not None:
        results["calibrated"] = calibrated.results()
    for side, states in grouped.items():
        replicates = states.replicate_values(bootstrap)
        for key, interval in intervals(replicates, bootstrap.level).items():
            results[side][key]["ci"] = interval
        if replicates_out is not None and side == main_side:
            replicates_out.update({"groups": states.clusters, "values": {k: v.tolist() for k, v in replicates.items()}})
            if states.n_strata > 1:
                replicates_out["by_group"] = {
                    name: {k: v.tolist() for k, v in states.stratum_replicate_values(bootstrap, i).items()}
                    for i, name in enumerate(groups.names)
                }
    if calibrated is None:
        return results["uncalibrated"], None
    values = results["calibrated"]
    if sets is not None:
        values.update(sets.results())
    return values, results["uncalibrated"]
