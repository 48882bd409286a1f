"""`calib diagnose`: what is wrong with a model's probabilities, where, and which calibrator helps.

Returns a plain :class:`Diagnosis` (no printing here; the CLI renders it). Curves come from the same
mergeable bin counters as the metrics: the reliability diagram from top-label bins, the cumulative
mass calibration curve of the CMCE paper from the CMCE bins (25), worst classes from classwise bins.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from ._version import __version__
from .calibrators.base import CalibrationInputs, builds_sets
from .calibrators.conformal import (
    SCORE_PARAMETERS,
    conformal_quantile,
    given_score_terms,
    in_conformal_set,
    min_calibration_size,
    nonconformity,
)
from .core.binning import MIN_BIN_ROWS, BinCounter, clopper_pearson
from .core.numerics import LOG_PROB_FLOOR, softmax
from .errors import InputError
from .evaluation import EvaluationReport, check_metric_keys, uncalibrated_batch
from .evaluation.groups import Groups, groups_for
from .evaluation.request import BootstrapSettings, EvaluationRequest
from .io.predictions import Predictions
from .metrics import DEFAULT_METRICS, Batch, MetricConfig, selective
from .metrics.accumulators import ClasswiseBins, CumulativeMassBins
from .metrics.definitions import metric_badness
from .metrics.metric_set import MetricSet
from .registry import calibrator_class
from .reporting.text import format_change, format_value

#: Logits beyond this magnitude make softmax saturate to exact 0/1 in float64.
SATURATED_LOGIT = 700.0
CONFORMAL_ALPHAS = (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
#: The level of each reliability bin's interval of its observed rate.
BAND_LEVEL = 0.95


#: How much a finding matters, mildest first.
SEVERITIES = ("info", "warning", "problem")


@dataclass
class Diagnosis:
    n: int
    k: int
    kind: str
    findings: list[dict] = field(default_factory=list)  # {"severity": one of SEVERITIES, "text"}
    reliability: list[dict] = field(default_factory=list)  # per confidence bin
    cumulative_mass: list[dict] = field(default_factory=list)  # per mass bin (CMCE paper's curve)
    cumulative_mass_uncalibrated: list[dict] = field(default_factory=list)  # the same before --bundle
    conformal: dict | None = None  # set coverage and size against alpha, for a conformal bundle
    worst_classes: list[dict] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    comparison: list[dict] = field(default_factory=list)
    recommendation: str | None = None
    groups: dict | None = None  # top-label calibration per group: the spread and the worst groups' curves
    #: Selective prediction with the top-label confidence: AURC, E-AURC and the risk-coverage curve
    risk_coverage: dict | None = None
    tradeoffs: list[str] = field(default_factory=list)  # per compared method, its changes beyond fold noise
    source: dict = field(default_factory=dict)  # what was diagnosed: input path, bundle and its method
    #: The metric table: calib evaluate's report (calib.evaluation.EvaluationReport), V-ECE included
    report: EvaluationReport | None = None

    def note(self, severity: str, text: str) -> None:
        self.findings.append({"severity": severity, "text": text})

    def finding_texts(self) -> list[str]:
        return [finding["text"] for finding in self.findings]

    def to_json(self) -> dict:
        out = dict(self.__dict__)
        if self.report is not None:
            out["report"] = self.report.to_json()
        return out


def _batch(calibrator, preds: Predictions, rows: slice) -> Batch:
    """The rows' probabilities: the model's own (no calibrator), or after ``calibrator``."""
    if calibrator is None:
        return uncalibrated_batch(preds, rows)
    log_probs = calibrator.apply(CalibrationInputs.of(preds, rows), counts=False)[0]
    return Batch(preds.labels[rows], log_probs=log_probs, answers=preds.answers)


def _curves(
    preds: Predictions, calibrator=None, bins: int = 15, cmce_bins: int = 25, groups: Groups | None = None, positive: bool = False
):
    """Reliability (top-label), cumulative-mass and classwise bin counters of every row, the label counts, the
    rows holding a probability of 0 or 1, and (with ``groups``) top-label bins per group; with
    ``positive`` (a multi-label input's pairs) the reliability counters, overall and per group, bin
    P(y = 1) against y = 1 instead of the top label's confidence against correctness; and (without
    ``positive``) every row's top-label confidence and correctness, for the risk-coverage curve."""
    cumulative, classwise, pooled = CumulativeMassBins(cmce_bins), ClasswiseBins(bins, preds.k), BinCounter(bins)
    by_group = BinCounter(bins, len(groups.names)) if groups is not None else None
    support = np.bincount(preds.labels, minlength=preds.k)
    saturated = 0
    confidence, correct = [], []
    for rows in preds.chunks():
        batch = _batch(calibrator, preds, rows)
        if not positive:
            confidence.append(batch.confidence.copy())
            correct.append(batch.correct)
        extreme = (batch.probs == 0.0) | (batch.probs == 1.0)
        if preds.absent is not None:  # a padded choice's 0 is the reader's, not the model's
            extreme &= ~preds.absent[rows]
        saturated += int(extreme.any(axis=1).sum())
        for accumulator in (cumulative, classwise):
            accumulator.update(batch)
        predicted, observed = (batch.probs[:, 1], batch.labels == 1) if positive else (batch.confidence, batch.correct)
        pooled.add(predicted, observed)
        if by_group is not None:
            by_group.add(predicted, observed, group=groups.codes[rows])
    answers = None if positive else (np.concatenate(confidence), np.concatenate(correct))
    return pooled, cumulative.counter, classwise.counter, support, saturated, by_group, answers


def _bin_rows(counter, value_key: str, bands: bool = False) -> list[dict]:
    """One entry per non-empty bin: its edges, rows, mean prediction, observed rate and weighted
    over/under gaps; with ``bands`` (bins of one outcome per row: the reliability diagrams) the
    observed rate's 95% Clopper-Pearson interval and whether the bin has too few rows to read
    (fewer than :data:`calib.core.binning.MIN_BIN_ROWS`)."""
    rows = []
    nonempty = np.flatnonzero(counter.count > 0)
    if bands:
        lowers, uppers = clopper_pearson(counter.sum_true[nonempty], counter.count[nonempty], BAND_LEVEL)
    for i, b in enumerate(nonempty):
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
        if bands:
            rows[-1].update(interval=[float(lowers[i]), float(uppers[i])], few_rows=bool(n_b < MIN_BIN_ROWS))
    return rows


def diagnose(
    preds: Predictions,
    request: EvaluationRequest = EvaluationRequest(vece=True, bootstrap=BootstrapSettings(0)),
    *,
    calibrator=None,
    compare: list[str] = (),
    folds: int = 5,
    seed: int = 0,
    rank_by: str = "cmce",
    worst: int = 10,
    groups: Groups | None = None,
    bundle_path: str | None = None,
    progress=None,
) -> Diagnosis:
    """Findings, curves, worst classes, the metric table of ``calib evaluate`` as ``request`` asks
    (by default with the V-ECE family and its over/under-confidence split, no replicates), (with
    ``groups``) the spread of top-label ECE over the groups and the worst groups' reliability
    curves, and (with ``compare``) a cross-validated ranking of methods (folds drawn with ``seed``)."""
    from .evaluation import build_report

    # a multi-label input's pairs: the reliability of P(y_l = 1) pooled and per label (the groups)
    positive = preds.output_layout.n_labels is not None
    groups = groups_for(preds, groups)
    result = Diagnosis(preds.n, preds.k, preds.kind)
    result.source = {"path": preds.name, "n": preds.n, "k": preds.k, "kind": preds.kind, "calib_version": __version__}
    if calibrator is not None:
        options = dataclasses.asdict(calibrator.options)
        if hasattr(calibrator.options, "score_settings"):  # only the parameters of the score in use
            unused = set(SCORE_PARAMETERS) - set(calibrator.options.score_settings())
            options = {key: value for key, value in options.items() if key not in unused}
        result.source.update(bundle=bundle_path, method=calibrator.name, options=options)
    result.report = build_report(preds, request, calibrator=calibrator, bundle_path=bundle_path, progress=progress)
    result.note("info", f"input kind: {preds.kind} ({preds.kind_reason})")
    if calibrator is not None:
        for warning in calibrator.fit_warnings():
            result.note("warning", f"bundle ({calibrator.name}): {warning}")
    top, cumulative, classwise, support, saturated, by_group, answers = _curves(
        preds, calibrator, groups=groups, positive=positive
    )
    measure = "positive-class (P(y_l = 1), pairs pooled)" if positive else "top-label"
    _input_findings(result, preds, support, saturated)
    result.reliability = _bin_rows(top, "confidence", bands=True)
    result.cumulative_mass = _bin_rows(cumulative, "mass")
    if calibrator is not None:
        result.cumulative_mass_uncalibrated = _bin_rows(_curves(preds)[1], "mass")
        if builds_sets(calibrator):
            if positive:
                _label_set_findings(result, preds, calibrator)
            else:
                _conformal_findings(result, preds, calibrator, seed)
    if answers is not None:
        result.risk_coverage = risk_coverage(*answers)
    per_class = classwise.weighted_error()
    order = np.argsort(-per_class, kind="stable")[:worst]
    result.worst_classes = [{"class": int(c), "cw_ece": float(per_class[c]), "support": int(support[c])} for c in order]
    over = sum(r["over"] for r in result.reliability)
    under = sum(r["under"] for r in result.reliability)
    result.metrics = {
        "ece_pos" if positive else "ece": float(top.weighted_error()[0]),
        "cmce": float(cumulative.weighted_error()[0]),
        "ece_over": over,
        "ece_under": under,
    }
    direction = "over-confident" if over > 2 * under else "under-confident" if under > 2 * over else "mixed"
    result.note(
        "info" if over + under < 0.01 else "warning" if over + under < 0.05 else "problem",
        f"{measure} calibration error {over + under:.4f}: {over:.4f} from over-confidence, "
        f"{under:.4f} from under-confidence ({direction})",
    )
    if by_group is not None:
        result.groups = _group_calibration(by_group, groups, request.min_group_rows, labels=positive)
        for text in result.groups.pop("findings"):
            result.note("warning", text)
    if compare:
        result.comparison, result.recommendation, result.tradeoffs = compare_methods(
            preds, list(compare), folds=folds, seed=seed, rank_by=rank_by
        )
        for row in result.comparison:
            for warning in row["warnings"]:
                result.note("warning", f"compared method {row['method']} (in some folds): {warning}")
    return result


#: Points of the risk-coverage curve a diagnosis keeps (evenly spaced in coverage).
RISK_COVERAGE_POINTS = 100


def risk_coverage(values: np.ndarray, hits: np.ndarray) -> dict:
    """Selective prediction with the rows' top-label confidences ``values`` and correctness ``hits``
    (calib.metrics.selective): AURC, E-AURC, and at most :data:`RISK_COVERAGE_POINTS` points of the
    risk-coverage curve and the oracle's, at k = ceil(j n / points) rows."""
    risks = selective.expected_risks(values, hits)[0]
    kept = np.unique(np.ceil(np.round(np.linspace(0.0, 1.0, RISK_COVERAGE_POINTS + 1)[1:] * len(values), 6)).astype(np.int64))
    oracle = np.maximum(0.0, kept - float(hits.sum())) / kept
    return {
        "aurc": selective.aurc(values, hits),
        "eaurc": selective.excess_aurc(values, hits),
        "points": [
            {"coverage": float(k / len(values)), "risk": float(risks[k - 1]), "oracle": float(best)}
            for k, best in zip(kept, oracle)
        ],
    }


def saturation_finding(rows: int, n: int, kind: str) -> str:
    """What rows with a probability of exactly 0 or 1 do, by the rules the metrics and calibrators
    apply to the input's kind: probabilities are floored at 1e-12 for their logs (NLL, the logit view
    of calibrators); a softmax of logits rounds to 0 or 1, while NLL is taken from the log-softmax."""
    share = f"{rows} rows ({rows / n:.1%}) hold a probability of exactly 0 or 1"
    if kind == "probs":
        return (
            f"{share}: NLL takes log max(p, 1e-12), so a label given probability 0 costs {-LOG_PROB_FLOOR:.4g}, "
            "and calibrators of logits read log 1e-12 as the logit of 0"
        )
    return (
        f"{share} after the softmax (float64 rounds it): NLL is computed from the log-softmax and stays exact, "
        "but calibrators of probabilities (isotonic, histogram binning, Venn-Abers) see exact 0s and 1s"
    )


def _input_findings(result: Diagnosis, preds: Predictions, support: np.ndarray, saturated: int) -> None:
    """Findings about the input itself: saturated probabilities or logits, classes without labels,
    labels that stop short of K, probabilities read as logits, too few rows for conformal alphas."""
    if saturated:
        result.note("warning", saturation_finding(saturated, preds.n, preds.kind))
    if preds.kind == "logits":
        present = (lambda rows: True) if preds.absent is None else (lambda rows: ~preds.absent[rows])
        big = max(float(np.abs(np.where(present(rows), preds.logits(rows), 0.0)).max()) for rows in preds.chunks())
        if big > SATURATED_LOGIT:
            result.note("problem", f"logits reach |z| = {big:.3g}: softmax saturates; check they are not scaled scores")
    unseen = np.flatnonzero(support == 0)
    if len(unseen):
        listed = ", ".join(map(str, unseen[:10])) + (" ..." if len(unseen) > 10 else "")
        default = calibrator_class("isotonic")()  # the one-vs-rest rule for absent classes, with its default option
        result.note(
            "warning",
            f"{len(unseen)} of {preds.k} classes never appear among the labels ({listed}); one-vs-rest calibrators "
            f"fitted on these rows: {default.absent_class_effect} (absent={default.options.absent}; the other rule, "
            "absent=base-rate, gives them the constant map at 0)",
        )
    if preds.labels.max() + 1 < preds.k / 2:
        result.note("problem", f"labels only reach {preds.labels.max()} but K = {preds.k}: are the scores for another label set?")
    if preds.kind == "logits":
        raw = [np.asarray(preds.scores[rows]) for rows in preds.chunks()]
        if all(chunk.min() >= 0.0 and chunk.max() <= 1.0 for chunk in raw):
            result.note(
                "problem",
                "every score lies in [0, 1] although the input is read as logits: probabilities "
                "passed as logits? (declare the input kind probs)",
            )
    for alpha in (0.1, 0.05, 0.01):
        if preds.n < min_calibration_size(alpha):
            result.note(
                "info",
                f"{preds.n} rows are too few to calibrate a conformal method at alpha = {alpha:g} "
                f"(needs {min_calibration_size(alpha)})",
            )


def _conformal_findings(result: Diagnosis, preds: Predictions, calibrator, seed: int) -> None:
    """The conformal bundle's coverage curve, and a finding on the classes its sets cover below 1 - alpha."""
    result.conformal = conformal_curve(preds, calibrator, seed)
    own = result.conformal["bundle"]
    seen = [(c, k) for k, c in enumerate(own["class_coverage"]) if c is not None]
    below = [(c, k) for c, k in seen if c < 1.0 - own["alpha"]]
    if seen:
        lowest = ", ".join(f"{k} ({c:.3g})" for c, k in sorted(seen)[:3])
        result.note(
            "warning" if len(below) > len(seen) / 2 else "info",
            f"the bundle's sets cover {len(below)} of {len(seen)} classes below 1 - alpha = {1 - own['alpha']:g} "
            f"on these rows; lowest: {lowest}",
        )


def _label_set_findings(result: Diagnosis, preds: Predictions, calibrator) -> None:
    """A multi-label input's conformal bundle: the share of rows whose every label's set holds its
    label, and the labels its sets cover least, against 1 - alpha (joint or per label, as fitted)."""
    from .evaluation.streaming import SetStats

    stats = SetStats(calibrator, preds.k, preds.output_layout)
    for rows in preds.chunks():
        stats.update(calibrator.apply(CalibrationInputs.of(preds, rows), "sets")[0], preds.labels[rows], rows)
    found = stats.results()
    joint, lowest_label = found["set_coverage_joint"]["value"], found["set_coverage_label_min"]
    alpha = stats.settings["alpha"]
    lowest = ", ".join(f"{c['label']} ({c['coverage']:.3g})" for c in lowest_label["worst_labels"][:3])
    if getattr(calibrator, "joint_", None) is not None:
        measured = joint
        text = f"the bundle's joint sets cover every label of a row at once in {joint:.4g} of the rows"
    else:
        measured = lowest_label["value"]
        text = f"the bundle's per-label sets cover each label at least {measured:.4g} of the time"
    # below 1 - alpha by more than the noise of a coverage measured on these rows and fitted on as
    # many: 3 standard errors of a difference of two binomial shares at 1 - alpha
    noise = 3.0 * math.sqrt(2.0 * alpha * (1.0 - alpha) / preds.output_layout.shape[0])  # the input's rows
    result.note(
        "warning" if measured < 1.0 - alpha - noise else "info",
        f"{text} (target >= 1 - alpha = {1 - alpha:g}); lowest labels: {lowest}; every label at once: {joint:.4g}",
    )


#: Groups whose reliability curves diagnose shows.
WORST_GROUPS = 3


def _group_calibration(counter: BinCounter, groups: Groups, min_rows: int, labels: bool = False) -> dict:
    """Top-label ECE of every group (one bin counter with a row of bins per group), its spread over
    the groups with at least ``min_rows`` rows, and the reliability curves of the worst ones; for a
    multi-label input's labels (``labels``), each label's positive-class ECE (``ece_pos``)."""
    measure, unit = ("positive-class ECE", "label") if labels else ("top-label ECE", "group")
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
            {
                "group": groups.names[i],
                "n": int(counts[i]),
                "ece": float(ece[i]),
                "reliability": _bin_rows(single, "confidence", bands=True),
            }
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
            f"{measure} over {len(gated)} {unit}s{'' if labels else ' of ' + groups.source}: {spread['min']:.4g} to "
            f"{spread['max']:.4g} (median {spread['median']:.4g}); worst {unit} {worst['group']} ({worst['n']} rows, "
            f"ECE {worst['ece']:.4g}, {over:.4g} of it over-confidence)"
        )
    small = len(groups.names) - len(gated)
    if small:
        findings.append(f"{small} {unit}s have fewer than {min_rows} rows: left out of the spread and the worst {unit}s")
    return {
        "source": groups.source,
        "measure": measure,
        "unit": unit,
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
        return (
            logits,
            given,
            nonconformity(softmax(logits) if given is None else given, calibrator.options, calibrator.score_seed_),
        )

    def own_scores(rows, values):
        return values[np.arange(rows.stop - rows.start), preds.labels[rows]]

    scores = np.concatenate([own_scores(rows, chunk_scores(rows)[2]) for rows in preds.chunks()])
    alphas = [a for a in CONFORMAL_ALPHAS if min(half.sum(), (~half).sum()) >= min_calibration_size(a)]
    thresholds = {side: [conformal_quantile(scores[half == side], a) for a in alphas] for side in (True, False)}
    covered = np.zeros(len(alphas))
    sizes = np.zeros(len(alphas))
    own_covered = own_size = 0
    class_rows = np.bincount(preds.labels, minlength=preds.k)
    class_hits = np.zeros(preds.k)
    for rows in preds.chunks():
        logits, given, values = chunk_scores(rows)
        terms = given_score_terms(calibrator.options, preds.k, given is not None)
        labels, side, own = preds.labels[rows], half[rows], own_scores(rows, values)
        for i in range(len(alphas)):
            # rows in one half are measured with the threshold fitted on the other half
            q = np.where(side, thresholds[False][i], thresholds[True][i])
            covered[i] += np.sum(in_conformal_set(own, q, terms))
            sizes[i] += np.sum(in_conformal_set(values, q[:, None], terms))
        in_set = calibrator.apply(CalibrationInputs(logits, given), "sets")[0]
        hit = in_set[np.arange(len(labels)), labels]
        own_covered += int(hit.sum())
        own_size += int(in_set.sum())
        class_hits += np.bincount(labels, weights=hit, minlength=preds.k)
    return {
        "score": score,
        "alphas": alphas,
        "coverage": (covered / preds.n).tolist(),
        "set_size": (sizes / preds.n).tolist(),
        "bundle": {
            "alpha": calibrator.options.alpha,
            "coverage": own_covered / preds.n,
            "set_size": own_size / preds.n,
            # the bundle's sets per class: P(y in C(x) | y), None for a class without rows here
            "class_coverage": [float(h / n) if n else None for h, n in zip(class_hits, class_rows)],
            "class_rows": class_rows.tolist(),
        },
    }


def compare_methods(preds: Predictions, methods: list[str], *, folds: int = 5, seed: int = 0, rank_by: str = "cmce"):
    """k-fold cross-validation (seeded): fit each method on k - 1 folds, evaluate every default
    metric on the held-out one. Returns (table, recommendation, trade-offs).

    Each row holds [mean, std] over the folds per metric and, for a method, its per-fold change
    against the model's own probabilities: d_f = metric(method) - metric(uncalibrated) on fold f,
    with its mean, std and whether it is beyond the fold noise (a paired t-test at 5%: |mean d| >
    t_{0.975, k-1} std(d) / sqrt(k)). The recommendation picks the method that improves
    ``rank_by`` most among those whose improvement is beyond noise, or says that none is; the
    trade-offs list every method's changes beyond noise ("ts: ece -0.032, cmce +0.012")."""
    from scipy.stats import t as student_t

    check_metric_keys([rank_by])
    keys = list(dict.fromkeys([rank_by, *DEFAULT_METRICS]))
    for method in methods:
        calibrator_class(method)  # unknown names fail before any fitting
    if preds.n < 2 * folds:
        raise InputError(
            f"{preds.name}: {preds.n} rows are too few to compare methods by {folds}-fold cross-validation "
            f"(at least {2 * folds}: every fold fitted on and scored)"
        )
    scores, warnings = _fold_scores(preds, methods, keys, folds, seed)
    critical = float(student_t.ppf(0.975, folds - 1))
    table = []
    for name, runs in scores.items():
        row = {"method": name, "warnings": warnings.get(name, [])}
        for key in keys:
            values = np.array([r[key] for r in runs if r[key] is not None], dtype=float)
            row[key] = [float(values.mean()), float(values.std())] if len(values) else None
        if name != "uncalibrated":
            row["change"] = _fold_changes(runs, scores["uncalibrated"], keys, critical)
        table.append(row)
    table.sort(key=lambda row: metric_badness(rank_by, None if row[rank_by] is None else row[rank_by][0]))
    base = next(r for r in table if r["method"] == "uncalibrated")
    tradeoffs = []
    for row in table:
        if row["method"] == "uncalibrated":
            continue
        moved = [f"{key} {format_change(c['mean'])}" for key, c in row["change"].items() if c["beyond_noise"]]
        tradeoffs.append(f"{row['method']}: " + (", ".join(moved) if moved else "no change beyond the fold noise"))
    improving = [
        row
        for row in table
        if row["method"] != "uncalibrated"
        and row["change"].get(rank_by, {}).get("beyond_noise")
        and metric_badness(rank_by, row[rank_by][0]) < metric_badness(rank_by, base[rank_by][0])
    ]
    if improving:
        best = improving[0]
        advice = (
            f"use {best['method']}: {rank_by} {format_value(base[rank_by][0])} -> {format_value(best[rank_by][0])} "
            f"({format_change(best['change'][rank_by]['mean'])}, beyond the noise of {folds}-fold cross-validation)"
        )
    else:
        worse = [row["method"] for row in table if row.get("change", {}).get(rank_by, {}).get("beyond_noise")]
        advice = (
            f"no method improves {rank_by} beyond the noise of {folds}-fold cross-validation"
            + (f" ({', '.join(worse)} make it worse)" if worse else "")
            + ": keep the model's own probabilities, or choose by the trade-offs on the other metrics"
        )
    return table, advice, tradeoffs


def _fold_scores(preds: Predictions, methods: list[str], keys: list[str], folds: int, seed: int):
    """({name: [each held-out fold's {key: value}]}, {method: its fits' warnings}) of the model's own
    probabilities ("uncalibrated") and of each method fitted on the other folds (seeded split)."""
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
                calibrator.fit_inputs(CalibrationInputs.of(train_preds), train_preds.labels, seed=seed)
                warnings[name].extend(w for w in calibrator.warnings() if w not in warnings[name])
            for rows in test_preds.chunks():
                metric_set.update(_batch(calibrator, test_preds, rows))
            scores[name].append({k: v["value"] for k, v in metric_set.results().items()})
    return scores, warnings


def _fold_changes(runs: list[dict], base: list[dict], keys: list[str], critical: float) -> dict:
    """Per key, the per-fold changes d_f = method - uncalibrated: mean, std and whether beyond the
    fold noise (|mean d| > critical std(d) / sqrt(k); with no spread, any change)."""
    change = {}
    for key in keys:
        pairs = [(r[key], b[key]) for r, b in zip(runs, base) if r[key] is not None and b[key] is not None]
        if len(pairs) < 2:
            continue
        diff = np.array([a - b for a, b in pairs])
        spread = float(diff.std(ddof=1))
        beyond = bool(abs(diff.mean()) > critical * spread / np.sqrt(len(diff))) if spread > 0 else bool(diff.mean() != 0)
        change[key] = {"mean": float(diff.mean()), "std": spread, "beyond_noise": beyond}
    return change
