"""Alpha-agnostic ATS-CP (ATS-CP paper; docs/calibrators.md): ``ats-mgq`` and ``ats-maq``.

Instead of one alpha, a row is calibrated at several levels a at once and the tempered
distributions are aggregated. For each (row, level) pair the set C_a(x) is a top set of the
ranking and SelectTau finds the temperature giving it in-set mass 1 - a (same solver as ats-gq,
batched over all pairs of a chunk of rows; a pair is one row of the solver, so memory is
pairs x K, never N x K x K).

Levels:
- ``ats-mgq``: per class y, a_y = 1 - F(V(x, y)) with F the empirical CDF of the calibration
  scores, F(v) = #{V_i <= v} / n; C = {y' : V(x, y') <= V(x, y)}.
- ``ats-maq --model flow``: the same with a conditional CDF from the gauss flow b(v, x) =
  log(v / (gamma + w(x))). calib takes F(v | x) = the empirical CDF of b over the conformalising
  half, evaluated at b(v, x): Phi(.) of the ATS-CP paper's flow composed with the conformal recalibration of b,
  so that its threshold F^{-1}(1 - a | x) is exactly the conformal gauss-flow threshold at level a
  (without the recalibration, Phi(b) is not a CDF: the flow's loss only centres b).
- ``ats-maq --model multiqr``: one conformalised quantile threshold t_a(x) per alpha of the grid
  (thresholds.fit_multi_quantile); C_a = {y : V(x, y) <= t_a(x)}.
Only levels in [level_min, level_max] (default [0.01, 0.5]) are used; a row without one is left
unchanged, and so is a pair whose set is empty or full (its distribution is the model's own).

Aggregation of a row's tempered distributions p_1..p_m:
- ``mean``: (1/m) sum_j p_j (the minimiser of (1/m) sum_j KL(p_j || q) over all q);
- ``geometric``: softmax((1/m) sum_j log p_j) (the minimiser of (1/m) sum_j KL(q || p_j));
  ``central`` is the same, under the ATS-CP paper's name for it (p_central, section 3.2);
- ``kl-forward`` / ``kl-reverse``: one temperature of the base distribution, q = p~(tau*), with tau*
  minimising the same averages over tau only. Both objectives reduce to a function of one row vector
  (the mean, resp. the normalised geometric mean) and are minimised on log tau in [1e-4, 1e6]: a
  64-point grid brackets each row's minimum, then a vectorised golden-section search narrows it to
  1e-9 (forward: convex in 1/tau; reverse: flat where q(tau) is one-hot, with a valley elsewhere,
  which is why the grid comes first; checked against scipy's bounded minimiser in the tests).
"""

from __future__ import annotations

import abc
import dataclasses

import numpy as np

from ..bundle import State
from ..core.numerics import CHUNK_ELEMENTS, log_softmax, log_softmax_and_softmax, map_in_order, row_chunks
from . import mlp
from .ats import VARIANTS
from .base import Calibrator, add_counts
from .conditioning import check_conditioning, conditioning_inputs
from .conformal import EMPTY, FULL, ScoreOptions, check_choice, given_score_terms, in_conformal_set, nonconformity, scores_at_most
from .select_tau import LOG_TAU_MAX, LOG_TAU_MIN, tempered_distribution
from .set_based import _count, conditioning_params, restore_conditioning, start_fit
from .thresholds import (
    DEFAULT_FLOW_TRAINING,
    FLOW_TRAININGS,
    SCORE_FLOOR,
    fit_flow,
    fit_multi_quantile,
    flow_scale,
    flow_transform,
    multi_quantile_values,
)

AGGREGATES = ("mean", "geometric", "central", "kl-forward", "kl-reverse")
#: ats-maq's models of the conditional quantiles.
QUANTILE_MODELS = ("multiqr", "flow")
#: ats-maq --model multiqr alpha grid (docs/calibrators.md), in head order: levels 1 - alpha increasing.
HEAD_ALPHAS = np.array([0.5, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1, 0.05])
GOLDEN_TOL = 1e-9
#: The most calibration rows an alpha-agnostic fit applies itself to, to count its infeasible rows
COUNTED_ROWS = 5000
GRID_POINTS = 64


@dataclasses.dataclass(frozen=True)
class AlphaAgnosticOptions(ScoreOptions):
    variant: str = "prob"
    aggregate: str = "mean"
    level_min: float = 0.01
    level_max: float = 0.5

    def __post_init__(self):
        super().__post_init__()
        check_choice("variant", self.variant, VARIANTS)
        check_choice("aggregate", self.aggregate, AGGREGATES)
        if not 0.0 < self.level_min <= self.level_max < 1.0:
            raise ValueError(f"need 0 < level_min <= level_max < 1; got {self.level_min}, {self.level_max}")


@dataclasses.dataclass(frozen=True)
class MAQOptions(AlphaAgnosticOptions):
    model: str = "multiqr"
    flow_training: str = DEFAULT_FLOW_TRAINING
    #: What the quantile model is a function of (calib.calibrators.conditioning)
    conditioning: str = "auto"

    def __post_init__(self):
        super().__post_init__()
        check_choice("model", self.model, QUANTILE_MODELS)
        check_conditioning(self.conditioning)
        check_choice("flow_training", self.flow_training, tuple(FLOW_TRAININGS))


def golden_section(objective, n: int, lo: float = LOG_TAU_MIN, hi: float = LOG_TAU_MAX, tol: float = GOLDEN_TOL):
    """argmin over log tau in [lo, hi] of ``objective(log_tau)`` -> (n,) values, for n rows at once.

    A grid of GRID_POINTS values first brackets each row's minimum between the neighbours of its
    best grid point, then golden-section search narrows that bracket to ``tol``. The grid matters:
    a tempered distribution is flat in tau once it is one-hot, so an objective can be constant over
    decades of small tau and have a narrow valley elsewhere, where a golden-section search of the
    whole range would follow the ties to the wrong end.
    """
    grid = np.linspace(lo, hi, GRID_POINTS)
    best = np.argmin(np.stack([objective(np.full(n, point)) for point in grid]), axis=0)
    a, b = grid[np.maximum(best - 1, 0)], grid[np.minimum(best + 1, GRID_POINTS - 1)]
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = objective(c), objective(d)
    while np.max(b - a) > tol:
        left = fc <= fd  # the minimum lies in [a, d]
        a, b = np.where(left, a, c), np.where(left, d, b)
        c_new, d_new = b - ratio * (b - a), a + ratio * (b - a)
        f_new = objective(np.where(left, c_new, d_new))
        fc, fd = np.where(left, f_new, fd), np.where(left, fc, f_new)
        c, d = np.where(left, c_new, d), np.where(left, c, d_new)
    return (a + b) / 2.0


def kl_temperature(base: np.ndarray, log_reference: np.ndarray, direction: str) -> np.ndarray:
    """log tau* per row: forward minimises the cross-entropy -sum r log q(tau) of the mean r;
    reverse minimises KL(q(tau) || r) for the normalised geometric mean r; q(tau) = softmax(base / tau).
    ``log_reference`` is log r, kept in log space: a geometric mean of sharp distributions underflows."""
    reference = np.exp(log_reference)

    def objective(log_tau):
        log_q = log_softmax(base / np.exp(log_tau)[:, None])
        if direction == "kl-forward":
            return -np.einsum("ij,ij->i", reference, log_q)
        return np.einsum("ij,ij->i", np.exp(log_q), log_q - log_reference)

    return golden_section(objective, len(base))


class AlphaAgnostic(Calibrator):
    """Shared transform: levels -> SelectTau per (row, level) -> aggregate per row."""

    absent_class_effect = (
        "the set thresholds are fitted on the other classes' rows alone, so the coverage guarantee does not extend to them"
    )

    Options = AlphaAgnosticOptions
    scores_given_probs = True
    not_exportable = "it aggregates a temperature search at many levels of alpha, which the export does not translate"

    def fit(self, logits, labels, *, seed=0, features=None, probs=None, train=None):
        """``train``: :class:`~calib.calibrators.base.TrainingRows` for ats-maq's model."""
        logits, scores, train = start_fit(self, logits, labels, seed=seed, features=features, probs=probs, train=train)
        self.fit_levels(scores, self._conditioning(logits, features), seed, train)
        self.fit_counts_ = self._count_rows(logits, features, probs, seed)
        return self

    def _count_rows(self, logits, features, probs, seed: int) -> dict:
        """The infeasible-row counts of the calibration rows, or of :data:`COUNTED_ROWS` of them
        drawn without replacement (seeded) when there are more: counting applies the method, a
        temperature search per (row, level), which at 50,000 x 1,000 cost more than the fit
        (``counted`` in the counts says how many were counted). Chunks of rows in parallel."""
        sample = np.arange(len(logits))
        if len(sample) > COUNTED_ROWS:
            sample = np.sort(np.random.default_rng(seed).choice(len(sample), COUNTED_ROWS, replace=False))

        def count(rows):
            chosen = sample[rows]
            return self.transform_with_info(
                logits[chosen], None if features is None else features[chosen], None if probs is None else probs[chosen]
            )[1]

        counts: dict = {}
        for chunk_counts in map_in_order(count, row_chunks(len(sample), logits.shape[1]), values=len(sample) * logits.shape[1]):
            add_counts(counts, chunk_counts)
        if len(sample) < len(logits):
            counts["counted"] = len(sample)
        return counts

    @abc.abstractmethod
    def fit_levels(self, scores: np.ndarray, conditioning: np.ndarray, seed: int, train: tuple | None) -> None:
        """Fit what :meth:`levels` needs from the calibration scores (and the conditioning inputs;
        ``train``: the training rows' (scores, conditioning) for a method with a model)."""

    @abc.abstractmethod
    def levels(self, values: np.ndarray, conditioning: np.ndarray | None, summed_terms: int | None = None):
        """(owner row, in-set mask, target mass) of every pair, owners non-decreasing; ``summed_terms``
        as :func:`calib.calibrators.conformal.set_rule_slack` takes it (None: scores of logits)."""

    def softmax_only(self):
        """Levels of scores of softmax(z) and tempered softmax(z / tau); a trained model of the
        levels is a function of the logits themselves unless it conditions on features or on the
        ranked log-probabilities."""
        return not self.trains_a_model() or self.conditioning_ != "logits"

    def _conditioning(self, logits, features):
        return conditioning_inputs(self.conditioning_, self.n_conditioning_, logits, features, "this bundle")

    def tempered_levels(self, logits, features=None, probs=None):
        """(owner, base scores u of the rows, tempered log-probs per pair, categories per pair, log_probs of the rows).
        The scores V are taken on ``probs`` (the model's probabilities as given) when given."""
        logits = np.asarray(logits, dtype=np.float64)
        log_probs, softmax_probs = log_softmax_and_softmax(logits)
        given = probs is not None
        probs = np.asarray(probs, dtype=np.float64) if given else softmax_probs
        values = nonconformity(probs, self.options, self.score_seed_)
        base = logits if self.options.variant == "prob" else -np.log(np.maximum(values, SCORE_FLOOR))
        terms = given_score_terms(self.options, probs.shape[1], given)
        owner, in_set, target = self.levels(values, self._conditioning(logits, features), terms)
        tempered, _, category = tempered_distribution(base[owner], in_set, target, log_space=True)
        unchanged = (category == EMPTY) | (category == FULL)
        tempered[unchanged] = log_probs[owner[unchanged]]
        return owner, base, tempered, category, log_probs

    def transform_with_info(self, logits, features=None, probs=None):
        logits = np.asarray(logits, dtype=np.float64)
        n, k = logits.shape
        out = np.empty((n, k))
        info = {"rows without a level": 0}
        # keep the pairs of a block of rows below about CHUNK_ELEMENTS values
        per_block = max(1, CHUNK_ELEMENTS // (k * self.max_levels(k)))
        for start in range(0, n, per_block):
            rows = slice(start, min(start + per_block, n))
            owner, base, tempered, category, log_probs = self.tempered_levels(
                logits[rows], None if features is None else features[rows], None if probs is None else probs[rows]
            )
            add_counts(info, _count(category))
            out[rows] = self.aggregate(owner, base, tempered, log_probs)
            info["rows without a level"] += int(len(log_probs) - len(np.unique(owner)))
        return out, info

    def transform(self, logits, features=None, probs=None):
        return self.transform_with_info(logits, features, probs)[0]

    def transform_probs_with_info(self, logits, features=None, probs=None):
        log_probs, info = self.transform_with_info(logits, features, probs)
        return np.exp(log_probs, out=log_probs), info

    def max_levels(self, k: int) -> int:
        """Most levels a row can have: bounds the rows per block so pairs x K stays near CHUNK_ELEMENTS."""
        return k

    def aggregate(self, owner, base, tempered, log_probs):
        out = log_probs.copy()
        if not len(owner):
            return out
        starts = np.flatnonzero(np.diff(owner, prepend=-1))
        rows, counts = owner[starts], np.diff(np.append(starts, len(owner)))[:, None]
        method = self.options.aggregate
        if method in ("mean", "kl-forward"):
            log_reference = np.log(np.maximum(np.add.reduceat(np.exp(tempered), starts, axis=0) / counts, 1e-300))
        else:
            log_reference = log_softmax(np.add.reduceat(tempered, starts, axis=0) / counts)
        if method in ("mean", "geometric", "central"):
            out[rows] = log_reference
        else:
            out[rows] = log_softmax(base[rows] / np.exp(kl_temperature(base[rows], log_reference, method))[:, None])
        return out

    def fit_report(self):
        report = {
            **self.options.score_settings(),
            "variant": self.options.variant,
            "aggregate": self.options.aggregate,
            "levels": [self.options.level_min, self.options.level_max],
        }
        if self.trains_a_model():
            report["model fitted on"] = self.trained_on_
        counted = self.fit_counts_.get("counted")
        unit = "cal" if counted is None else f"of {counted} sampled cal rows"
        report.update({f"{k.replace('_', ' ')} ({unit})": v for k, v in self.fit_counts_.items() if v and k != "counted"})
        return report

    def to_state(self):
        return State(params=conditioning_params(self), arrays=dict(self.arrays_))

    @classmethod
    def from_state(cls, options, state):
        calibrator = restore_conditioning(cls(options), state.params)
        calibrator.arrays_ = dict(state.arrays)
        return calibrator


def _pairs_from_levels(values: np.ndarray, level: np.ndarray, level_min: float, level_max: float):
    """Pairs (i, y) with level a_iy in range: C = {y' : V(x_i, y') <= V(x_i, y)}, target 1 - a_iy."""
    owner, column = np.nonzero((level >= level_min) & (level <= level_max))
    in_set = values[owner] <= values[owner, column][:, None]
    return owner, in_set, 1.0 - level[owner, column]


class ATSMultiGlobal(AlphaAgnostic):
    name = "ats-mgq"
    summary = "alpha-agnostic ATS-CP: a temperature per level a_y = 1 - F(V(x, y)), aggregated (Kotelevskii et al. 2025)"

    def fit_levels(self, scores, conditioning, seed, train):
        self.arrays_ = {"sorted_scores": np.sort(scores)}

    def levels(self, values, conditioning, summed_terms=None):
        sorted_scores = self.arrays_["sorted_scores"]
        cdf = scores_at_most(sorted_scores, values, summed_terms) / len(sorted_scores)
        return _pairs_from_levels(values, 1.0 - cdf, self.options.level_min, self.options.level_max)


class ATSMultiAdaptive(AlphaAgnostic):
    name = "ats-maq"
    requires = ("torch",)
    summary = "alpha-agnostic ATS-CP with adaptive thresholds: multi-head QR or conditional flow (Kotelevskii et al. 2025)"
    Options = MAQOptions

    def trains_a_model(self) -> bool:
        return True

    def fit_levels(self, scores, conditioning, seed, train):
        if self.options.model == "multiqr":
            self.arrays_ = fit_multi_quantile(scores, conditioning, HEAD_ALPHAS, seed, train=train)
        else:
            arrays, transformed = fit_flow(scores, conditioning, "gauss", seed, train=train, training=self.options.flow_training)
            self.arrays_ = {**arrays, "sorted_transformed": np.sort(transformed)}

    def max_levels(self, k):
        return len(HEAD_ALPHAS) if self.options.model == "multiqr" else k

    def warnings(self):
        if self.options.model == "multiqr":
            return mlp.training_warnings(self.arrays_, "mqr", "multi-head quantile regression")
        return mlp.training_warnings(self.arrays_, "flow", "flow")

    def levels(self, values, conditioning, summed_terms=None):
        # the flow's transformed scores and the heads' thresholds are computed: the slack of logits' scores
        lo, hi = self.options.level_min, self.options.level_max
        if self.options.model == "flow":
            b = flow_transform(values, flow_scale(self.arrays_, conditioning)[:, None], "gauss")
            reference = self.arrays_["sorted_transformed"]
            cdf = scores_at_most(reference, b) / len(reference)
            return _pairs_from_levels(values, 1.0 - cdf, lo, hi)
        thresholds = multi_quantile_values(self.arrays_, conditioning)  # (N, heads) in HEAD_ALPHAS order
        keep = (HEAD_ALPHAS >= lo) & (HEAD_ALPHAS <= hi)
        owner = np.repeat(np.arange(len(values)), keep.sum())
        in_set = in_conformal_set(values[owner], thresholds[:, keep].ravel()[:, None])
        return owner, in_set, np.tile(1.0 - HEAD_ALPHAS[keep], len(values))
