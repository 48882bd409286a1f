"""The metric registry: every metric key of docs/metrics.md, one :class:`Metric` entry each.

A streamed metric names the accumulator it reads (merged over chunks of rows), how its value is
computed from it, and its settings; metrics that share an accumulator (ece, mce and debiased_ece_sq
share one set of top-label bins) share one instance: the accumulator's identity is
``(class, settings)``. A whole-sample metric (V-ECE, KDE-ECE) names its family
(:mod:`calib.metrics.sample`) and the field of the family's estimate it reports. Each entry says
which way is better (``direction``). A new metric is one entry here; its functional form
(``calib.metrics.KEY``) is generated from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Callable

import numpy as np

from ..core.binning import clopper_pearson
from ..core.numerics import PROB_FLOOR, edge_index, isotonic_fit
from ..errors import UsageError
from . import accumulators as acc
from . import conventions, selective
from .sample import IN_SAMPLE, KDE, VARIATIONAL, SampleFamily
from .smooth import GRID, smooth_ece


@dataclass(frozen=True)
class MetricConfig:
    bins: int = 15
    cmce_bins: int = 25


#: A bin count chosen from the rows: :func:`auto_bins`.
AUTO_BINS = "auto"


def auto_bins(n: int) -> int:
    """The bins of ``bins="auto"``: the smallest B with B^3 >= 2 n, i.e. ceil((2 n)^(1/3)), the
    oversmoothed histogram rule of Terrell & Scott (1985). Binned errors trade the noise of few rows
    per bin (their resolution floor grows as sqrt(B / n)) against the smoothing of wide bins, which
    hides miscalibration that changes within a bin; B ~ n^(1/3) balances the two. 2,000 rows get
    16 bins (close to the customary 15), 10,000 rows 28, 100 rows 6."""
    count = max(1, round((2.0 * n) ** (1.0 / 3.0)) - 1)
    while count**3 < 2 * n:
        count += 1
    return count


def bin_count(value, n: int, name: str = "bins") -> int:
    """A bin count as given (a positive integer) or :data:`AUTO_BINS` resolved for ``n`` rows."""
    if value == AUTO_BINS:
        return auto_bins(n)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        flag = "--" + name.lstrip("-").replace("_", "-")
        raise UsageError(
            f"{name} takes a positive number of bins or {AUTO_BINS!r}; got {value!r}", cli_hint=f"{flag} 15 or {flag} auto"
        )
    return int(value)


@dataclass(frozen=True)
class Metric:
    key: str
    summary: str
    #: Streamed: (config, K) -> (identity, factory) of the accumulator it reads.
    accumulator: Callable[[MetricConfig, int], tuple[tuple, Callable[[], object]]] | None = None
    #: Streamed: (accumulator, config) -> value (None when undefined, e.g. no pair in a coverage band).
    compute: Callable[[object, MetricConfig], float | None] | None = None
    #: Streamed: (config, accumulator) -> the settings reported beside the value.
    settings: Callable[[MetricConfig, object], dict] | None = None
    #: True when the metric needs the true conditional probabilities.
    needs_truth: bool = False
    #: "lower" is better (errors, losses), "higher" (accuracy), or "band": ideally inside the
    #: [lo, hi] its key names (coverage_LO_HI), counted as higher-is-better when gated.
    direction: str = "lower"
    #: Whole-sample: the family whose estimate holds the value, and the estimate's field.
    family: SampleFamily | None = None
    field: str | None = None
    #: Defined for binary models (K = 2) only: the positive-class conventions of scikit-learn and
    #: torchmetrics' binary metrics; in the default table of a binary input.
    binary: bool = False
    #: The value is a norm of its bins' gaps |mean_b outcome - mean_b score|, with bins set by the
    #: scores alone: by the triangle inequality it exceeds the truth by at most the same norm of the
    #: bins' noise, whose quantile is the resolution floor (calib.evaluation.resolution).
    binned_norm: bool = False
    #: Streamed: accumulator -> (outcomes, rows, sum of scores) of the one set of bins the value is
    #: a norm over, one independent pair per row, for a value at least |mean outcome - mean score|
    #: (an L1, L2 or max norm of bins weighted by their rows): the bound that the resolution floor's
    #: gates read beside it (calib.evaluation.resolution). None where pairs of a row are dependent
    #: (CMCE) or the value averages several sets of bins (classwise ECE).
    mean_gap: Callable[[object], tuple[float, float, float]] | None = None
    #: Streamed: (accumulator, config, level) -> the metric's asymptotic or exact interval at that
    #: level, computed from the same state (beside the bootstrap's; docs/metrics.md).
    interval: Callable[[object, MetricConfig, float], tuple[float, float]] | None = None
    #: Another tool's or paper's binning reproduced under its own key, to compare with the numbers
    #: it prints (calib.metrics.conventions): asked for by name, never in a default table.
    convention: bool = False
    #: Streamed: ``compute`` takes the state of R bootstrap replicates at once (its counters as
    #: :class:`calib.core.binning.ReplicateBins`, its other sums with a leading axis of R) and
    #: returns the R values.
    stacks: bool = False

    @property
    def streamed(self) -> bool:
        return self.family is None


def _proper(config, k):
    return ("proper", k), lambda: acc.ProperScores(k)


#: The k of the top-k accuracies in the registry (``top5_accuracy``)
TOP_K = (2, 3, 5, 10)


def _label_ranks(config, k):
    return ("ranks", max(TOP_K)), lambda: acc.LabelRanks(max(TOP_K))


def _top_k_accuracy(k: int):
    return lambda s, c: float(s.at_rank[:k].sum() / s.n)


def _top_k_interval(k: int):
    def top_k_interval(state: acc.LabelRanks, config: MetricConfig, level: float) -> tuple[float, float]:
        """Clopper-Pearson interval of the share of rows with the label among the top k."""
        lower, upper = clopper_pearson(state.at_rank[:k].sum(), state.n, level)
        return float(lower), float(upper)

    return top_k_interval


def _top_bins(config, k):
    return ("top", config.bins), lambda: acc.TopLabelBins(config.bins)


def _top_values(config, k):
    return ("top-values",), acc.TopLabelValues


def _top_label_class_values(config, k):
    return ("top-label-class-values",), conventions.TopLabelClassValues


def _answer_values(config, k):
    return ("answer-values",), conventions.AnswerValues


def _adaptive_settings(scheme: str):
    return lambda c, s: {"rows_per_bin": conventions.ROWS_PER_BIN, "scheme": scheme, "norm": "l2", "label": "answer"}


def _classwise(config, k):
    return ("classwise", config.bins, k), lambda: acc.ClasswiseBins(config.bins, k)


def _cumulative(config, k):
    return ("cumulative", config.cmce_bins), lambda: acc.CumulativeMassBins(config.cmce_bins)


def _coverage(lo, hi):
    return lambda config, k: (("coverage", lo, hi), lambda: acc.CumulativeMassRange(lo, hi))


def _clip_settings(config, state):
    return {"prob_clip": PROB_FLOOR} if state.prob_clipped else {}


def _bins(config, state):
    return {"bins": config.bins, "scheme": "equal-width", "norm": "l1", "label": "top"}


def debiased_ece_sq(state: acc.TopLabelBins, config: MetricConfig) -> float:
    """sum_b (n_b/N) [(f_b - y_b)^2 - y_b (1 - y_b) / (n_b - 1)] over bins with n_b > 1 (Kumar et al. 2019)."""
    counter = state.counter
    keep = counter.count > 1
    n_b = counter.count[keep]
    f_b = counter.sum_pred[keep] / n_b
    y_b = counter.sum_true[keep] / n_b
    return float(np.sum(n_b / state.n * ((f_b - y_b) ** 2 - y_b * (1.0 - y_b) / (n_b - 1.0))))


def debiased_ece_sq_interval(state: acc.TopLabelBins, config: MetricConfig, level: float) -> tuple[float, float]:
    """The asymptotic interval of the binned squared error given the scores: the estimate
    +- z_{(1 + level) / 2} sqrt(V), V = sum_b (n_b / N)^2 [4 d_b^2 s_b / n_b + 2 s_b^2 / n_b^2] over
    bins with n_b > 1, the variance of (f_b - y_b)^2 when the bin's rate y_b is normal around its
    truth with variance s_b / n_b (Kumar et al. 2019), with s_b = y_b (1 - y_b) n_b / (n_b - 1) and
    d_b^2 the bin's debiased term clipped at 0."""
    counter = state.counter
    keep = counter.count > 1
    n_b = counter.count[keep]
    f_b = counter.sum_pred[keep] / n_b
    y_b = counter.sum_true[keep] / n_b
    term = (f_b - y_b) ** 2 - y_b * (1.0 - y_b) / (n_b - 1.0)
    s_b = y_b * (1.0 - y_b) * n_b / (n_b - 1.0)
    variance = np.sum((n_b / state.n) ** 2 * (4.0 * np.maximum(term, 0.0) * s_b / n_b + 2.0 * s_b**2 / n_b**2))
    estimate = float(np.sum(n_b / state.n * term))
    half = NormalDist().inv_cdf((1.0 + level) / 2.0) * float(np.sqrt(variance))
    return estimate - half, estimate + half


def ece_l2_interval(state: acc.TopLabelBins, config: MetricConfig, level: float) -> tuple[float, float]:
    """The true binned L2 error's interval: the square roots of :func:`debiased_ece_sq_interval`'s
    ends, clipped at 0 (the plug-in ece_l2 itself is biased upward and may lie above it)."""
    lower, upper = debiased_ece_sq_interval(state, config, level)
    return float(np.sqrt(max(lower, 0.0))), float(np.sqrt(max(upper, 0.0)))


def accuracy_interval(state: acc.ProperScores, config: MetricConfig, level: float) -> tuple[float, float]:
    """Clopper-Pearson interval of the share of correct rows."""
    lower, upper = clopper_pearson(state.n_correct, state.n, level)
    return float(lower), float(upper)


def ece_l2(state: acc.TopLabelBins, config: MetricConfig) -> float:
    """Top-label L2 calibration error: sqrt(sum_b (n_b/N) (f_b - y_b)^2) over non-empty equal-width
    bins, the root of the binned squared error (torchmetrics' ``norm="l2"``)."""
    counter = state.counter
    keep = counter.count > 0
    n_b = counter.count[keep]
    f_b = counter.sum_pred[..., keep] / n_b
    y_b = counter.sum_true[..., keep] / n_b
    return np.sqrt(np.sum(n_b / state.n * (f_b - y_b) ** 2, axis=-1))


def ece_quantile(state: acc.TopLabelValues, config: MetricConfig) -> float:
    """Top-label ECE with equal-mass bins: edges at the quantiles of the confidences, duplicate
    edges merged, bins [l, u) with the last one closed."""
    confidence = np.concatenate(state.confidence)
    correct = np.concatenate(state.correct)
    edges = np.unique(np.quantile(confidence, np.linspace(0.0, 1.0, config.bins + 1)))
    gaps = np.bincount(edge_index(confidence, edges), weights=correct - confidence)
    return float(np.abs(gaps).sum() / len(confidence))


def isotonic_ece(state: acc.TopLabelValues, config: MetricConfig) -> float:
    """Plug-in top-label ECE with the binning chosen by isotonic regression (Berta et al. 2026, estimator
    family (i)): mean |F_i - g(F_i)| with g the PAVA fit of correctness on confidence, ties in F
    pooled (the same g as the ``isotonic`` recalibrator, fitted on the evaluated rows)."""
    confidence = np.concatenate(state.confidence)
    x, level = isotonic_fit(confidence, np.concatenate(state.correct))
    return float(np.abs(confidence - level[np.searchsorted(x, confidence)]).mean())


def _smece(state: acc.TopLabelValues, config: MetricConfig) -> float:
    return smooth_ece(np.concatenate(state.confidence), np.concatenate(state.correct))[0]


def _selective(measure, *argument):
    """A selective-prediction measure (calib.metrics.selective) of the rows' top-label confidence
    and correctness."""

    def compute(state: acc.TopLabelValues, config: MetricConfig) -> float | None:
        return measure(np.concatenate(state.confidence), np.concatenate(state.correct), *argument)

    return compute


def _fixed_settings(values: dict) -> Callable[[MetricConfig, object], dict]:
    """A metric's settings that depend on neither the configuration nor the state."""
    return lambda config, state: dict(values)


_SELECTIVE_SETTINGS = {"confidence": "top label", "ties": "expected over their order"}
#: The coverages of the selective accuracies and the risks of the coverages in the registry.
SELECTIVE_COVERAGES = (0.1, 0.8)
RISK_LEVELS = (0.05, 0.1)


def brier_positive(state: acc.ProperScores, config: MetricConfig) -> float | None:
    """Positive-class Brier score of a binary model, mean_i (p_i1 - 1{y_i = 1})^2 (scikit-learn's
    ``brier_score_loss``): half the two-class sum, since (p_0 - 1{y = 0})^2 = (p_1 - 1{y = 1})^2
    when p_0 = 1 - p_1. None unless K = 2."""
    return state.brier_sum / (2.0 * state.n) if state.n_classes == 2 else None


def ece_positive(state: acc.ClasswiseBins, config: MetricConfig) -> float | None:
    """Positive-class ECE of a binary model: sum_b (n_b / N) |mean p_1 - share of y = 1| over
    equal-width bins of p_1 (torchmetrics' ``BinaryCalibrationError``): classwise ECE's class 1.
    None unless K = 2."""
    return state.counter.weighted_error()[..., 1] if state.n_classes == 2 else None


def _bins_total(counter, group: int = 0) -> tuple[float, float, float]:
    """(outcomes, rows, sum of scores) over the bins of ``counter``'s ``group``."""
    part = slice(group * counter.n_bins, (group + 1) * counter.n_bins)
    return float(counter.sum_true[part].sum()), float(counter.count[part].sum()), float(counter.sum_pred[part].sum())


def _top_total(state: acc.TopLabelBins) -> tuple[float, float, float]:
    return _bins_total(state.counter)


def _positive_total(state: acc.ClasswiseBins) -> tuple[float, float, float] | None:
    return _bins_total(state.counter, 1) if state.n_classes == 2 else None


def _coverage_value(state: acc.CumulativeMassRange, config: MetricConfig) -> float | None:
    return state.covered / state.count if state.count else None


_METRICS = [
    Metric(
        "accuracy",
        "share of rows whose argmax is the label",
        _proper,
        lambda s, c: s.n_correct / s.n,
        lambda c, s: {},
        direction="higher",
        interval=accuracy_interval,
    ),
    *(
        Metric(
            f"top{k}_accuracy",
            f"share of rows whose label is among the {k} most probable classes (ties to the lower class)",
            _label_ranks,
            _top_k_accuracy(k),
            lambda c, s, k=k: {"k": k},
            direction="higher",
            interval=_top_k_interval(k),
        )
        for k in TOP_K
    ),
    Metric("nll", "negative log-likelihood of the label", _proper, lambda s, c: s.nll_sum / s.n, _clip_settings),
    Metric(
        "brier",
        "Brier score summed over classes",
        _proper,
        lambda s, c: s.brier_sum / s.n,
        lambda c, s: {"sum_over_classes": True},
    ),
    Metric(
        "brier_pos",
        "binary models: Brier score of the positive class, mean (p_1 - y)^2",
        _proper,
        brier_positive,
        lambda c, s: {"label": "class 1", "sum_over_classes": False, "as": "scikit-learn brier_score_loss"},
        binary=True,
    ),
    Metric(
        "ece",
        "top-label expected calibration error, equal-width bins",
        _top_bins,
        lambda s, c: s.counter.weighted_error()[..., 0],
        _bins,
        binned_norm=True,
        mean_gap=_top_total,
        stacks=True,
    ),
    Metric(
        "mce",
        "top-label maximum calibration error over non-empty bins",
        _top_bins,
        lambda s, c: s.counter.max_error(),
        _bins,
        binned_norm=True,
        mean_gap=_top_total,
        stacks=True,
    ),
    Metric(
        "ece_l2",
        "top-label L2 (root mean square) calibration error, equal-width bins",
        _top_bins,
        ece_l2,
        lambda c, s: {"bins": c.bins, "scheme": "equal-width", "norm": "l2", "label": "top"},
        binned_norm=True,
        mean_gap=_top_total,
        interval=ece_l2_interval,
    ),
    Metric(
        "ece_quantile",
        "top-label ECE with equal-mass bins",
        _top_values,
        ece_quantile,
        lambda c, s: {"bins": c.bins, "scheme": "equal-mass", "norm": "l1", "label": "top"},
    ),
    Metric(
        "smece",
        "smooth ECE at its fixed-point bandwidth (Blasiok & Nakkiran 2024)",
        _top_values,
        _smece,
        lambda c, s: {"grid": GRID, "kernel": "gaussian, reflected", "bandwidth": "fixed point", "label": "top"},
    ),
    Metric(
        "isotonic_ece",
        "top-label plug-in ECE with isotonic-regression bins (Berta et al. 2026)",
        _top_values,
        isotonic_ece,
        lambda c, s: {"scheme": "isotonic", "norm": "l1", "label": "top"},
    ),
    Metric(
        "rms_ce",
        "RMS calibration error, adaptive bins of 100 rows (the LLM literature's; binary: of P(class 1))",
        _answer_values,
        lambda s, c: conventions.rms_calibration_error(*s.values()),
        _adaptive_settings("adaptive"),
        convention=True,
    ),
    Metric(
        "rms_ce_hle",
        "rms_ce as the Humanity's Last Exam reference code computes it: its last bin skipped",
        _answer_values,
        lambda s, c: conventions.rms_calibration_error(*s.values(), skip_last=True),
        _adaptive_settings("adaptive, its last bin skipped as the reference code does"),
        convention=True,
    ),
    Metric(
        "ece_extra_bin",
        "top-label ECE binned as torchmetrics bins it: a confidence of exactly 1.0 in a bin of its own",
        _top_values,
        lambda s, c: conventions.extra_bin_ece(np.concatenate(s.confidence), np.concatenate(s.correct), c.bins),
        lambda c, s: {"bins": c.bins + 1, "scheme": "equal-width and 1.0 apart", "norm": "l1", "label": "top"},
        convention=True,
    ),
    Metric(
        "tl_ece",
        "top-label ECE of Gupta & Ramdas (2022): uniform-mass bins within each predicted class, weighted by its share",
        _top_label_class_values,
        lambda s, c: conventions.top_label_ece(*s.values(), c.bins),
        lambda c, s: {"bins": c.bins, "scheme": "equal-mass per predicted class", "norm": "l1", "label": "top"},
        convention=True,
    ),
    Metric(
        "ece_pos_quantile",
        "binary models: ECE of scikit-learn's calibration_curve(strategy='quantile') bins of p_1",
        _answer_values,
        lambda s, c: conventions.quantile_curve_ece(*s.values(), c.bins),
        lambda c, s: {"bins": c.bins, "scheme": "equal-mass, as scikit-learn", "norm": "l1", "label": "class 1"},
        binary=True,
        convention=True,
    ),
    Metric(
        "debiased_ece_sq",
        "debiased squared top-label ECE (Kumar et al. 2019); may be negative",
        _top_bins,
        debiased_ece_sq,
        lambda c, s: {"bins": c.bins, "scheme": "equal-width", "norm": "squared", "label": "top"},
        interval=debiased_ece_sq_interval,
    ),
    Metric(
        "cw_ece",
        "classwise ECE averaged over all K classes",
        _classwise,
        lambda s, c: np.mean(s.counter.weighted_error(), axis=-1),
        lambda c, s: {"bins": c.bins, "scheme": "equal-width", "norm": "l1", "label": "classwise"},
        binned_norm=True,
        stacks=True,
    ),
    Metric(
        "ece_pos",
        "binary models: ECE of the positive class's probability p_1, equal-width bins",
        _classwise,
        ece_positive,
        lambda c, s: {
            "bins": c.bins,
            "scheme": "equal-width",
            "norm": "l1",
            "label": "class 1",
            "as": "torchmetrics BinaryCalibrationError",
        },
        binary=True,
        binned_norm=True,
        mean_gap=_positive_total,
        stacks=True,
    ),
    Metric(
        "cmce",
        "cumulative mass calibration error, weighted over N*K pairs",
        _cumulative,
        lambda s, c: s.counter.weighted_error()[..., 0],
        lambda c, s: {"bins": c.cmce_bins, "scheme": "equal-width", "weighting": "weighted"},
        binned_norm=True,
        stacks=True,
    ),
    Metric(
        "coverage_0.9_0.92",
        "label coverage of top-k sets with mass in [0.9, 0.92]",
        _coverage(0.9, 0.92),
        _coverage_value,
        lambda c, s: {"range": [0.9, 0.92]},
        direction="band",
    ),
    Metric(
        "coverage_0.99_0.995",
        "label coverage of top-k sets with mass in [0.99, 0.995]",
        _coverage(0.99, 0.995),
        _coverage_value,
        lambda c, s: {"range": [0.99, 0.995]},
        direction="band",
    ),
]


def _truth(config, k):
    return ("truth",), acc.TrueProbScores


def _cpsme(index):
    return lambda s, c: float(s.cpsme_sum[index] / s.n)


_TRUTH_METRICS = [
    Metric(
        "nll_true",
        "expected NLL under the true probabilities: mean -sum_k p_k log p^_k",
        _truth,
        lambda s, c: s.nll_sum / s.n,
        lambda c, s: {"against": "true_probs"},
        needs_truth=True,
    ),
    Metric(
        "brier_true",
        "squared distance to the true probabilities: mean sum_k (p^_k - p_k)^2",
        _truth,
        lambda s, c: s.brier_sum / s.n,
        lambda c, s: {"against": "true_probs"},
        needs_truth=True,
    ),
    Metric(
        "cpsme_avg",
        "CPSME averaged over alpha = 0.05..0.5 (Kotelevskii et al. 2025)",
        _truth,
        lambda s, c: float(s.cpsme_sum.mean() / s.n),
        lambda c, s: {"alphas": list(acc.CPSME_ALPHAS)},
        needs_truth=True,
    ),
] + [
    Metric(
        f"cpsme_{alpha:g}",
        f"mass error on the true {1 - alpha:g}-set of the true probabilities",
        _truth,
        _cpsme(i),
        lambda c, s, a=alpha: {"alpha": a},
        needs_truth=True,
    )
    for i, alpha in enumerate(acc.CPSME_ALPHAS)
]

_SAMPLE_METRICS = [
    Metric("vece_l1", "V-ECE: cross-validated variational L1 calibration error (V-ECE paper)", family=VARIATIONAL, field="l1"),
    Metric("vece_l2", "V-ECE: variational L2 calibration error", family=VARIATIONAL, field="l2"),
    Metric("vece_sq", "V-ECE: variational squared (Brier) calibration error", family=VARIATIONAL, field="sq"),
    Metric("vece_top_l1", "V-ECE: top-class L1 calibration error = over + under", family=VARIATIONAL, field="top_l1"),
    Metric("vece_over", "V-ECE: over-confidence E[(F - C)+] of the top class", family=VARIATIONAL, field="over"),
    Metric("vece_under", "V-ECE: under-confidence E[(C - F)+] of the top class", family=VARIATIONAL, field="under"),
    Metric(
        "vece_is_l1",
        "in-sample variational L1 error (g fitted on the evaluated rows; may overestimate)",
        family=IN_SAMPLE,
        field="l1",
    ),
    Metric("vece_is_l2", "in-sample variational L2 error", family=IN_SAMPLE, field="l2"),
    Metric(
        "vece_is_sq",
        "in-sample variational squared error (isotonic g: CORP's miscalibration component)",
        family=IN_SAMPLE,
        field="sq",
    ),
    Metric(
        "kde_ece_l1",
        "KDE-ECE: Dirichlet-kernel plug-in L1 canonical calibration error (Popordanoska et al. 2022)",
        family=KDE,
        field="l1",
    ),
    Metric("kde_ece_l2", "KDE-ECE: Dirichlet-kernel plug-in L2 canonical calibration error", family=KDE, field="l2"),
    Metric("kde_ece_sq", "KDE-ECE: Dirichlet-kernel plug-in squared canonical calibration error", family=KDE, field="sq"),
]

_SELECTIVE_METRICS = [
    Metric(
        "aurc",
        "area under the risk-coverage curve of the top-label confidence (Geifman et al. 2019)",
        _top_values,
        _selective(selective.aurc),
        _fixed_settings(_SELECTIVE_SETTINGS),
    ),
    Metric(
        "eaurc",
        "excess AURC: AURC less the oracle's, which answers its correct rows first",
        _top_values,
        _selective(selective.excess_aurc),
        _fixed_settings(_SELECTIVE_SETTINGS),
    ),
    Metric(
        "auroc_correct",
        "AUROC of the top-label confidence as a detector of correct answers",
        _top_values,
        _selective(selective.auroc_of_correct),
        lambda c, s: {"confidence": "top label", "ties": "count 1/2"},
        direction="higher",
    ),
    *(
        Metric(
            key,
            summary,
            _top_values,
            _selective(measure, at),
            _fixed_settings({name: at, **_SELECTIVE_SETTINGS}),
            direction="higher",
        )
        for key, summary, measure, name, at in [
            *(
                (
                    f"selective_accuracy_{c:g}",
                    f"accuracy of the {c:.0%} most confident rows",
                    selective.selective_accuracy,
                    "coverage",
                    c,
                )
                for c in SELECTIVE_COVERAGES
            ),
            *(
                (
                    f"coverage_at_risk_{r:g}",
                    f"largest share of rows a confidence threshold keeps with selective risk <= {r:g}",
                    selective.coverage_at_risk,
                    "risk",
                    r,
                )
                for r in RISK_LEVELS
            ),
        ]
    ),
]


def _helm(measure, *argument, part: int | None = None):
    """One of HELM's calibration numbers (calib.metrics.conventions) of the rows' top-label
    confidence (HELM's max_prob) and correctness; ``part`` picks one of a pair."""

    def compute(state: acc.TopLabelValues, config: MetricConfig) -> float | None:
        found = measure(np.concatenate(state.confidence), np.concatenate(state.correct), *argument)
        return found if part is None or found is None else found[part]

    return compute


_HELM_SETTINGS = {"confidence": "top label (HELM's max_prob)", "as": "HELM compute_calibration_metrics"}
#: HELM's numbers: key, what it is, its computation, its own settings, its direction.
_HELM_TABLE: list[tuple[str, str, Callable, dict, str]] = [
    (
        "helm_ece_10",
        "HELM's ece_10_bin: top-label ECE, 10 equal-mass bins (uncertainty-calibration's get_ece_em)",
        _helm(conventions.helm_ece, 10),
        {"bins": 10, "scheme": "equal-mass, edges halfway between parts"},
        "lower",
    ),
    ("helm_ece_1", "HELM's ece_1_bin: |mean confidence - accuracy|", _helm(conventions.helm_ece, 1, False), {"bins": 1}, "lower"),
    (
        "helm_platt_ece_10",
        "HELM's platt_ece_10_bin: helm_ece_10 after HELM's Platt scaling of the confidences (needs scikit-learn)",
        _helm(conventions.helm_platt_ece, 10),
        {"bins": 10, "recalibration": "Platt (LogisticRegression C=1e10, lbfgs)"},
        "lower",
    ),
    (
        "helm_selective_acc_10",
        "HELM's selective_acc@10: accuracy of the floor(0.1 n) + 1 most confident rows (ties in argsort order)",
        _helm(conventions.helm_selective, part=1),
        {},
        "higher",
    ),
    (
        "helm_selective_area",
        "HELM's selective_cov_acc_area: mean accuracy of the k most confident rows over k = 1..n (1 - AURC, ties in argsort order)",
        _helm(conventions.helm_selective, part=0),
        {},
        "higher",
    ),
]
_HELM_METRICS = [
    Metric(key, summary, _top_values, compute, _fixed_settings({**own, **_HELM_SETTINGS}), direction=direction, convention=True)
    for key, summary, compute, own, direction in _HELM_TABLE
]

#: Registry order keys each metric's seeded draws (calib.evaluation.resolution): new keys go last.
METRICS: dict[str, Metric] = {m.key: m for m in _METRICS + _TRUTH_METRICS + _SAMPLE_METRICS + _SELECTIVE_METRICS + _HELM_METRICS}
#: Added to the default table when the true probabilities are given.
TRUTH_METRICS = tuple(m.key for m in _TRUTH_METRICS)
#: The default table of `calib evaluate` (docs/metrics.md keys; V-ECE joins when it exists).
DEFAULT_METRICS = ("accuracy", "nll", "brier", "ece", "mce", "cw_ece", "cmce", "coverage_0.9_0.92", "coverage_0.99_0.995")
#: Added to the default table of a binary input (K = 2).
BINARY_METRICS = tuple(m.key for m in _METRICS if m.binary and not m.convention)
#: The default table of a multi-label input: its (row, label) pairs are binary predictions.
LABEL_PAIR_METRICS = ("accuracy", "nll", *BINARY_METRICS)
#: The V-ECE keys, in the default table unless V-ECE is switched off.
VECE_METRICS = tuple(m.key for m in _SAMPLE_METRICS if m.family is VARIATIONAL)


def check_metric_keys(keys) -> list[str]:
    """``keys`` without repeats, in order; an unknown key is refused, listing the known ones."""
    unknown = [k for k in keys if k not in METRICS]
    if unknown:
        raise UsageError(f"unknown metric {unknown[0]!r}; choose from {', '.join(METRICS)}")
    return list(dict.fromkeys(keys))


def compute_value(metric: Metric, state, config: MetricConfig) -> float | None:
    """The metric's value as a float, or None where it is undefined (never NaN in a report): on no
    rows (a bootstrap replicate of a tiny input, an empty group) every mean is undefined."""
    try:
        value = metric.compute(state, config)
    except ZeroDivisionError:  # a mean over no rows
        return None
    return None if value is None or not np.isfinite(value) else float(value)


#: Report values that are not metric keys (a conformal calibrator's set statistics) and their direction.
OTHER_DIRECTIONS = {
    "set_coverage": "higher",
    "set_coverage_joint": "higher",
    "set_coverage_label_min": "higher",
    "set_size": "lower",
    "set_empty": "lower",
    "set_full": "lower",
}


def higher_is_better(key: str) -> bool:
    """Whether a larger value of ``key`` is better (the worst group of such a metric is its lowest)."""
    direction = METRICS[key].direction if key in METRICS else OTHER_DIRECTIONS.get(key, "lower")
    return direction != "lower"


def metric_badness(key: str, value: float | None) -> float:
    """How far a value is from ideal, for ranking methods and marking the best: the value itself
    for errors and losses, minus it where higher is better (accuracy), the distance to the band's
    middle for a coverage band (coverage_0.9_0.92 ideally lies in [0.9, 0.92])."""
    if value is None:
        return np.inf
    if key in METRICS and METRICS[key].direction == "band":
        lo, hi = (float(x) for x in key.split("_")[1:3])
        return abs(value - (lo + hi) / 2)
    return -value if higher_is_better(key) else value
