"""`calib diagnose`: what is wrong with a model's probabilities, where, and which calibrator helps.

Returns a plain :class:`Diagnosis` (no printing here; the CLI renders it). Curves come from the same
mergeable bin counters as the metrics: the reliability diagram from top-label bins, the cumulative
mass calibration curve of the CMCE paper from the CMCE bins (25), worst classes from classwise bins.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .calibrators.base import calibrator_inputs
from .calibrators.conformal import conformal_quantile, min_calibration_size, nonconformity
from .evaluation import check_metric_keys, uncalibrated_batch
from .evaluation.groups import Groups
from .io.predictions import Predictions
from .metrics import Batch, MetricConfig
from .metrics.accumulators import ClasswiseBins, CumulativeMassBins, TopLabelBins
from .metrics.binning import BinCounter
from .metrics.metric_set import MetricSet
from .numerics import softmax
from .registry import calibrator_class

#: Logits beyond this magnitude make softmax saturate to exact 0/1 in float64.
SATURATED_LOGIT = 700.0
COMPARE_METRICS = ("cmce", "ece", "nll", "brier", "cw_ece", "coverage_0.9_0.92")
CONFORMAL_ALPHAS = (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3)


@dataclass
class Diagnosis:
    n: int
    k: int
    kind: str
    findings: list[str] = field(default_factory=list)
    reliability: list[dict] = field(default_factory=list)  # per confidence bin
    cumulative_mass: list[dict] = field(default_factory=list)  # per mass bin (CMCE paper's curve)
    cumulative_mass_uncalibrated: list[dict] = field(default_factory=list)  # the same before --bundle
    conformal: dict | None = None  # set coverage and size against alpha, for a conformal bundle
    worst_classes: list[dict] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    comparison: list[dict] = field(default_factory=list)
    recommendation: str | None = None
    groups: dict | None = None  # top-label calibration per group: the spread and the worst groups' curves

    def to_json(self) -> dict:
        return dict(self.__dict__)


def _batch(calibrator, preds: Predictions, rows: slice) -> Batch:
    """The rows' probabilities: the model's own (no calibrator), or after ``calibrator``."""
    if calibrator is None:
        return uncalibrated_batch(preds, rows)
    logits, given = calibrator_inputs(calibrator, preds, rows)
    return Batch(preds.labels[rows], log_probs=calibrator.transform(logits, None, **given))


def _curves(preds: Predictions, calibrator=None, bins: int = 15, cmce_bins: int = 25, groups: Groups | None = None):
    """Top-label, cumulative-mass and classwise bin counters of every row, the label counts, the
    rows holding a probability of 0 or 1, and (with ``groups``) top-label bins per group."""
    top, cumulative, classwise = TopLabelBins(bins), CumulativeMassBins(cmce_bins), ClasswiseBins(bins, preds.k)
    by_group = BinCounter(bins, len(groups.names)) if groups is not None else None
    support = np.bincount(preds.labels, minlength=preds.k)
    saturated = 0
    for rows in preds.chunks():
        batch = _batch(calibrator, preds, rows)
        saturated += int(((batch.probs == 0.0) | (batch.probs == 1.0)).any(axis=1).sum())
        for accumulator in (top, cumulative, classwise):
            accumulator.update(batch)
        if by_group is not None:
            by_group.add(batch.confidence, batch.correct, group=groups.codes[rows])
    return top.counter, cumulative.counter, classwise.counter, support, saturated, by_group


def _bin_rows(counter, value_key: str) -> list[dict]:
    rows = []
    for b in np.flatnonzero(counter.count > 0):
        n_b = counter.count[b]
        mean_pred, mean_true = counter.sum_pred[b] / n_b, counter.sum_true[b] / n_b
        rows.append(
            {
                "bin": [b / counter.n_bins, (b + 1) / counter.n_bins],
                "count": int(n_b),
                value_key: float(mean_pred),
                "observed": float(mean_true),
                "over": float(max(mean_pred - mean_true, 0.0) * n_b / counter.count.sum()),
                "under": float(max(mean_true - mean_pred, 0.0) * n_b / counter.count.sum()),
            }
        )
    return rows


def diagnose(
    preds: Predictions,
    *,
    calibrator=None,
    compare: list[str] = (),
    folds: int = 5,
    seed: int = 0,
    rank_by: str = "cmce",
    worst: int = 10,
    groups: Groups | None = None,
    min_group_rows: int = 100,
) -> Diagnosis:
    """Findings, curves, worst classes, (with ``groups``) the spread of top-label ECE over the
    groups and the worst groups' reliability curves, and (with ``compare``) a cross-validated
    ranking of methods."""
    result = Diagnosis(preds.n, preds.k, preds.kind)
    result.findings.append(f"input kind: {preds.kind} ({preds.kind_reason})")
    if calibrator is not None:
        result.findings.extend(f"bundle ({calibrator.name}): {warning}" for warning in calibrator.warnings())
    top, cumulative, classwise, support, saturated, by_group = _curves(preds, calibrator, groups=groups)
    if saturated:
        result.findings.append(
            f"{saturated} rows ({saturated / preds.n:.1%}) hold a probability of exactly 0 or 1: "
            "log-losses clip them at 1e-12 and logit-based calibrators see huge scores"
        )
    if preds.kind == "logits":
        big = max(float(np.abs(preds.logits(rows)).max()) for rows in preds.chunks())
        if big > SATURATED_LOGIT:
            result.findings.append(f"logits reach |z| = {big:.3g}: softmax saturates; check they are not scaled scores")
    unseen = np.flatnonzero(support == 0)
    if len(unseen):
        listed = ", ".join(map(str, unseen[:10])) + (" ..." if len(unseen) > 10 else "")
        result.findings.append(
            f"{len(unseen)} of {preds.k} classes never appear among the labels ({listed}); "
            "one-vs-rest calibrators give them a constant 0 map"
        )
    if preds.labels.max() + 1 < preds.k / 2:
        result.findings.append(f"labels only reach {preds.labels.max()} but K = {preds.k}: are the scores for another label set?")
    if preds.kind == "logits":
        raw = [np.asarray(preds.scores[rows]) for rows in preds.chunks()]
        if all(chunk.min() >= 0.0 and chunk.max() <= 1.0 for chunk in raw):
            result.findings.append(
                "every score lies in [0, 1] although the input is read as logits: probabilities "
                "passed as logits? (declare the input kind probs)"
            )
    for alpha in (0.1, 0.05, 0.01):
        if preds.n < min_calibration_size(alpha):
            result.findings.append(
                f"{preds.n} rows are too few to calibrate a conformal method at alpha = {alpha:g} "
                f"(needs {min_calibration_size(alpha)})"
            )
    result.reliability = _bin_rows(top, "confidence")
    result.cumulative_mass = _bin_rows(cumulative, "mass")
    if calibrator is not None:
        result.cumulative_mass_uncalibrated = _bin_rows(_curves(preds)[1], "mass")
        if calibrator.builds_sets:
            result.conformal = conformal_curve(preds, calibrator, seed)
    per_class = classwise.weighted_error()
    order = np.argsort(-per_class, kind="stable")[:worst]
    result.worst_classes = [{"class": int(c), "cw_ece": float(per_class[c]), "support": int(support[c])} for c in order]
    over = sum(r["over"] for r in result.reliability)
    under = sum(r["under"] for r in result.reliability)
    result.metrics = {
        "ece": float(top.weighted_error()[0]),
        "cmce": float(cumulative.weighted_error()[0]),
        "ece_over": over,
        "ece_under": under,
    }
    direction = "over-confident" if over > 2 * under else "under-confident" if under > 2 * over else "mixed"
    result.findings.append(
        f"top-label calibration error {over + under:.4f}: {over:.4f} from over-confidence, "
        f"{under:.4f} from under-confidence ({direction})"
    )
    if by_group is not None:
        result.groups = _group_calibration(by_group, groups, min_group_rows)
        result.findings.extend(result.groups["findings"])
    if compare:
        result.comparison, result.recommendation = compare_methods(preds, list(compare), folds=folds, seed=seed, rank_by=rank_by)
        result.findings.extend(
            f"compared method {row['method']} (in some folds): {warning}"
            for row in result.comparison
            for warning in row["warnings"]
        )
    return result


#: Groups whose reliability curves diagnose shows.
WORST_GROUPS = 3


def _group_calibration(counter: BinCounter, groups: Groups, min_rows: int) -> dict:
    """Top-label ECE of every group (one bin counter with a row of bins per group), its spread over
    the groups with at least ``min_rows`` rows, and the reliability curves of the worst ones."""
    ece = counter.weighted_error()
    counts = groups.counts
    gated = [i for i in range(len(groups.names)) if counts[i] >= min_rows]
    order = sorted(gated, key=lambda i: -ece[i])
    curves = []
    for i in order[:WORST_GROUPS]:
        single = BinCounter(counter.n_bins)
        part = slice(i * counter.n_bins, (i + 1) * counter.n_bins)
        single.count, single.sum_pred, single.sum_true = counter.count[part], counter.sum_pred[part], counter.sum_true[part]
        curves.append(
            {"group": groups.names[i], "n": int(counts[i]), "ece": float(ece[i]), "reliability": _bin_rows(single, "confidence")}
        )
    values = ece[gated] if gated else np.zeros(0)
    spread = None
    findings = []
    if len(values):
        spread = {
            "min": float(values.min()),
            "median": float(np.median(values)),
            "max": float(values.max()),
            "groups": len(gated),
        }
        worst = curves[0]
        over = sum(r["over"] for r in worst["reliability"])
        findings.append(
            f"top-label ECE over {len(gated)} groups of {groups.source}: {spread['min']:.4g} to {spread['max']:.4g} "
            f"(median {spread['median']:.4g}); worst group {worst['group']} ({worst['n']} rows, ECE {worst['ece']:.4g}, "
            f"{over:.4g} of it over-confidence)"
        )
    small = len(groups.names) - len(gated)
    if small:
        findings.append(f"{small} groups have fewer than {min_rows} rows: left out of the spread and the worst groups")
    return {
        "source": groups.source,
        "ece": {groups.names[i]: {"n": int(counts[i]), "ece": float(ece[i])} for i in range(len(groups.names))},
        "spread": spread,
        "worst": curves,
        "findings": findings,
    }


def conformal_curve(preds: Predictions, calibrator, seed: int = 0) -> dict:
    """Coverage and mean set size of split-conformal sets with the bundle's score, against alpha.

    The rows are split in two seeded halves; each half's label scores give the constant threshold q
    at every alpha in CONFORMAL_ALPHAS and the other half is measured (both directions averaged):
    what the bundle's score would give if refitted at that alpha. The bundle's own sets on these
    rows are the marked point (its threshold may be adaptive).
    """
    score = calibrator.options.score
    half = np.random.default_rng([seed, 3]).permutation(preds.n) < preds.n // 2

    def chunk_scores(rows):
        """The rows' log-space scores and V(x, y) of every class, on the probabilities as given
        for probability inputs (as the bundle's own sets score them)."""
        logits, given = preds.logits_and_given(rows)
        return logits, given, nonconformity(softmax(logits) if given is None else given, score)

    def own_scores(rows, values):
        return values[np.arange(rows.stop - rows.start), preds.labels[rows]]

    scores = np.concatenate([own_scores(rows, chunk_scores(rows)[2]) for rows in preds.chunks()])
    alphas = [a for a in CONFORMAL_ALPHAS if min(half.sum(), (~half).sum()) >= min_calibration_size(a)]
    thresholds = {side: [conformal_quantile(scores[half == side], a) for a in alphas] for side in (True, False)}
    covered = np.zeros(len(alphas))
    sizes = np.zeros(len(alphas))
    own_covered = own_size = 0
    for rows in preds.chunks():
        logits, given, values = chunk_scores(rows)
        labels, side, own = preds.labels[rows], half[rows], own_scores(rows, values)
        for i in range(len(alphas)):
            # rows in one half are measured with the threshold fitted on the other half
            q = np.where(side, thresholds[False][i], thresholds[True][i])
            covered[i] += np.sum(own <= q)
            sizes[i] += np.sum(values <= q[:, None])
        in_set = calibrator.sets(logits, None, probs=given)
        own_covered += int(in_set[np.arange(len(labels)), labels].sum())
        own_size += int(in_set.sum())
    return {
        "score": score,
        "alphas": alphas,
        "coverage": (covered / preds.n).tolist(),
        "set_size": (sizes / preds.n).tolist(),
        "bundle": {"alpha": calibrator.options.alpha, "coverage": own_covered / preds.n, "set_size": own_size / preds.n},
    }


def compare_methods(preds: Predictions, methods: list[str], *, folds: int = 5, seed: int = 0, rank_by: str = "cmce"):
    """k-fold cross-validation (seeded): fit each method on k - 1 folds, evaluate on the held-out one;
    mean and std per metric, ranked by ``rank_by`` (lower is better, except coverage: closest to 0.91)."""
    check_metric_keys([rank_by])
    keys = list(dict.fromkeys([rank_by, *COMPARE_METRICS]))
    for method in methods:
        calibrator_class(method)  # unknown names fail before any fitting
    parts = np.array_split(np.random.default_rng(seed).permutation(preds.n), folds)
    scores: dict[str, list[dict]] = {"uncalibrated": [], **{method: [] for method in methods}}
    warnings: dict[str, list[str]] = {method: [] for method in methods}
    for held_out in parts:
        train = np.setdiff1d(np.arange(preds.n), held_out)
        train_preds, test_preds = preds.take(train), preds.take(held_out)
        for name in scores:
            metric_set = MetricSet(keys, MetricConfig(), preds.k)
            calibrator = None
            if name != "uncalibrated":
                cls = calibrator_class(name)
                calibrator = cls(cls.parse_options({}))
                logits, given = calibrator_inputs(calibrator, train_preds, slice(None))
                calibrator.fit(logits, train_preds.labels, seed=seed, **given)
                warnings[name].extend(w for w in calibrator.warnings() if w not in warnings[name])
            for rows in test_preds.chunks():
                metric_set.update(_batch(calibrator, test_preds, rows))
            scores[name].append({k: v["value"] for k, v in metric_set.results().items()})
    table = []
    for name, runs in scores.items():
        row = {"method": name, "warnings": warnings.get(name, [])}
        for key in keys:
            values = np.array([r[key] for r in runs if r[key] is not None], dtype=float)
            row[key] = [float(values.mean()), float(values.std())] if len(values) else None
        table.append(row)

    def badness(row):
        value = row[rank_by]
        if value is None:
            return np.inf
        return abs(value[0] - 0.91) if rank_by.startswith("coverage") else value[0]

    table.sort(key=badness)
    best, base = table[0], next(r for r in table if r["method"] == "uncalibrated")
    if best["method"] == "uncalibrated":
        advice = f"keep the model's own probabilities: no method lowers {rank_by} in {folds}-fold cross-validation"
    else:
        advice = (
            f"use {best['method']}: lowest {rank_by} in {folds}-fold cross-validation "
            f"({best[rank_by][0]:.4g} +- {best[rank_by][1]:.2g} against {base[rank_by][0]:.4g} uncalibrated)"
        )
    return table, advice
