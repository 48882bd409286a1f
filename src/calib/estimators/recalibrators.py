"""Recalibration maps g for the variational estimator (V-ECE paper, section 5.1; docs/metrics.md).

Each takes mixed probabilities P (n, K) of the training folds and labels, and returns a function
from probabilities to recalibrated probabilities. For K = 2 the binary ones work on P_1 only.
"""

from __future__ import annotations

import io
import sys
import threading
from dataclasses import dataclass

import numpy as np

from ..calibrators.matrix_scaling import MatrixScaling, VectorScaling
from ..calibrators.onevsrest import beta_features, fit_logistic, quadratic_features, sigmoid
from ..calibrators.temperature import fit_inverse_temperature
from ..core.extras import import_in_background
from ..core.numerics import PROB_FLOOR, bin_index, edge_index, isotonic_fit, log_floored, softmax, worker_count
from .coarse import refine

#: log(P + 1e-12) is the logit of a mixed probability vector (docs/metrics.md, WS-CatBoost step 1).
LOGIT_EPS = 1e-12
#: V-ECE's temperature search interval in log beta (docs/metrics.md).
TS_LOG_BOUND = 10.0
#: WS-CatBoost's CatBoost settings shared by every recipe (docs/metrics.md).
CATBOOST_PARAMS = dict(
    iterations=100,
    bootstrap_type="Bernoulli",
    subsample=0.5,
    border_count=32,
)
#: The training loss is computed once a fit, not every round (CatBoost's ``metric_period``): nothing
#: reads it, and skipping it leaves the models unchanged (the held-out loss of the early stopping is
#: still computed every round, which CatBoost says in a warning that :func:`_fit_quietly` drops)
#: and takes a sixth off a fit on CIFAR-100's coarse problem.
LEARN_METRIC_PERIOD = CATBOOST_PARAMS["iterations"]
#: The start of CatBoost's warning that the held-out loss is computed every round whatever
#: ``metric_period`` says: expected, so not shown.
_METRIC_PERIOD_WARNING = "Warning: Overfitting detector is active, thus evaluation metric is calculated on every iteration."


@dataclass(frozen=True)
class BoostingRecipe:
    """How many inner folds WS-CatBoost boosts on, how deep its trees are, its learning rate, and
    how many rounds without improvement on the held-out inner fold stop the boosting."""

    inner_folds: int
    depth: int
    learning_rate: float = 0.2
    early_stopping_rounds: int = 20

    def describe(self) -> str:
        """The recipe in words, for help texts."""
        return (
            f"{self.inner_folds} inner folds of depth-{self.depth} trees, learning rate {self.learning_rate:g},"
            f" early stopping after {self.early_stopping_rounds} rounds"
        )


#: WS-CatBoost's recipes by name (docs/vece.md has the evidence for each):
#: ``compact-es10``, the default: 4 inner folds of depth-4 trees stopped after 10 rounds without
#: improvement (the same estimates as ``compact`` within the seeds' noise on CIFAR-10/100 and the
#: same ratios to a known error, with a fifth fewer boosting rounds);
#: ``compact``: the same trees stopped after 20 rounds (the default before);
#: ``paper``: the V-ECE paper's (8 inner folds of depth-6 trees), for reproducing its tables;
#: ``quick``: 2 inner folds, learning rate 0.3, early stopping after 10 rounds (a third of
#: compact's boosting rounds, the same ratios to a known error, looser on CIFAR-100 test).
RECIPES = {
    "compact-es10": BoostingRecipe(inner_folds=4, depth=4, early_stopping_rounds=10),
    "compact": BoostingRecipe(inner_folds=4, depth=4),
    "paper": BoostingRecipe(inner_folds=8, depth=6),
    "quick": BoostingRecipe(inner_folds=2, depth=4, learning_rate=0.3, early_stopping_rounds=10),
}
DEFAULT_RECIPE = "compact-es10"


def check_recalibrator(name: str) -> str:
    from ..errors import UsageError

    if name not in RECALIBRATORS:
        raise UsageError(
            f"the V-ECE recalibrator must be one of {', '.join(RECALIBRATORS)}; got {name!r}", cli_hint="--vece-recalibrator NAME"
        )
    return name


def check_recipe(recipe: str) -> str:
    from ..errors import UsageError

    if recipe not in RECIPES:
        raise UsageError(f"the V-ECE recipe must be one of {', '.join(RECIPES)}; got {recipe!r}", cli_hint="--vece-recipe NAME")
    return recipe


def kfold(n: int, n_folds: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled k-fold: a seeded permutation cut into n_folds near-equal parts (held-out indices)."""
    return [np.sort(part) for part in np.array_split(rng.permutation(n), n_folds)]


def logits_of(probs: np.ndarray) -> np.ndarray:
    """log(P + 1e-12), in one pass into one new array."""
    return log_floored(probs, shift=LOGIT_EPS)


def tempered(logits: np.ndarray, beta: float) -> np.ndarray:
    """softmax(beta z), scaling ``logits`` in place (callers pass an array they own)."""
    logits *= beta
    return softmax(logits)


def fit_beta(logits: np.ndarray, labels: np.ndarray) -> float:
    """The inverse temperature beta in (e^-10, e^10) minimising the NLL of softmax(beta z) on
    ``logits`` z = log(P + 1e-12) (TS and WS-CatBoost's warm start)."""
    return fit_inverse_temperature(logits, labels, log_bound=TS_LOG_BOUND)


def temperature_scaling(probs, labels, rng):
    """TS on log(P + 1e-12), beta in (e^-10, e^10); g(P) = softmax(beta log(P + 1e-12))."""
    beta = fit_beta(logits_of(probs), labels)
    return lambda new: tempered(logits_of(new), beta)


#: Above this many classes WS-CatBoost boosts a coarse problem of the top (this - 1) classes and the
#: rest (:mod:`calib.estimators.coarse`, docs/vece.md).
MAX_BOOSTED_CLASSES = 10


def ws_catboost(probs, labels, rng, progress=None, recipe=DEFAULT_RECIPE):
    """WS-CatBoost (V-ECE paper, appendix E.2): TS warm start s(P), then one CatBoost model per inner
    fold of ``recipe`` (:data:`RECIPES`) with baseline s(P), features P (binary: P_1), early stopping
    on the held-out inner fold; g = mean over models of softmax(s(P) + h_j(P)) (a sigmoid in the
    binary case). Every class of ``probs`` is boosted: the variational estimator gives it the coarse
    problem of :mod:`calib.estimators.coarse` above :data:`MAX_BOOSTED_CLASSES` classes.
    """
    plan = WarmStartBoosting(probs, labels, rng, recipe)
    return plan.recalibrator(fit_inner_folds([plan], progress))


def fit_inner_folds(plans: list, progress=None) -> list:
    """The CatBoost models of every inner fold of every :class:`WarmStartBoosting` in ``plans``, in
    order (plan by plan, fold by fold), fitted one after another.

    CatBoost fits are not safe to run at the same time in threads of one process (two pool threads
    inside CatBoost at once crashed the process about one run in ten), so every fit in this process
    holds :data:`CATBOOST_LOCK` and uses CatBoost's own threads instead (``thread_count`` =
    :func:`calib.core.numerics.worker_count`), which CatBoost documents as not affecting the model: the
    same models for any thread count (tested)."""
    models = []
    for plan in plans:
        for fold in plan.folds:
            models.append(plan.fit_fold(fold))
            if progress is not None:
                progress()
    return models


#: Held by every CatBoost fit and prediction of this process: no two run at once, whichever threads call them.
CATBOOST_LOCK = threading.Lock()


def start_catboost_import() -> None:
    """Import CatBoost on a thread of its own (:func:`calib.core.extras.import_in_background`), so that
    its import overlaps the work before the first fit."""
    import_in_background("catboost")


def _fit_quietly(model, fit_set, eval_set) -> None:
    """``model.fit`` with CatBoost's log kept: every line of it but the expected warning about
    ``metric_period`` (:data:`LEARN_METRIC_PERIOD`) goes on to standard error after the fit."""
    log = io.StringIO()
    model.fit(fit_set, eval_set=eval_set, log_cout=log, log_cerr=log)
    shown = [line for line in log.getvalue().splitlines(keepends=True) if not line.startswith(_METRIC_PERIOD_WARNING)]
    if shown:
        sys.stderr.write("".join(shown))


class WarmStartBoosting:
    """WS-CatBoost prepared on its training rows (see :func:`ws_catboost`): the TS warm start fitted,
    the features, baseline log s(P) and labels of the boosting, and the inner folds of ``recipe``
    (:data:`RECIPES`) and their seeds drawn from ``rng``, in fold order. The CatBoost fits
    (:meth:`fit_fold` of each entry of :attr:`folds`) depend on nothing else, so they may run in any
    order on any thread; :meth:`recalibrator` turns their models into g.

    ``warm``: the warm start of these rows when it is not temperature scaling of ``probs`` itself
    (above :data:`MAX_BOOSTED_CLASSES` classes, the coarsened warm start of all K classes:
    :mod:`calib.estimators.coarse`); g is then :meth:`boosted`, given both."""

    def __init__(self, probs, labels, rng, recipe=DEFAULT_RECIPE, warm=None):
        self.recipe = RECIPES[check_recipe(recipe)]
        if warm is None:
            logits = logits_of(probs)
            self.beta = fit_beta(logits, labels)
            warm = tempered(logits, self.beta)  # the warm start s(P) of the training rows
            del logits
        self.labels = labels
        self.n_boosted = probs.shape[1]
        self.binary = self.n_boosted == 2
        self.features = self._features(probs)
        self.start = self._baseline(warm)
        self._pool = None  # every training row's features, labels and baseline, made on the first fit
        n = len(probs)
        self.folds = []
        for held_out in kfold(n, self.recipe.inner_folds, rng):
            train = np.setdiff1d(np.arange(n), held_out, assume_unique=True)
            self.folds.append((train, held_out, int(rng.integers(2**31 - 1))))

    def _baseline(self, warm):
        """log s(P) (binary: its logit), the boosting's starting point."""
        s = np.log(np.maximum(warm, LOGIT_EPS))
        return (s[:, 1] - s[:, 0]) if self.binary else s

    def _features(self, p):
        return p[:, 1:2] if self.binary else p

    def fit_fold(self, fold):
        """One inner fold's CatBoost model and the classes it boosts (None when fewer than two
        classes are present in its training part). Classes absent from the training part get no
        correction: their warm start stays."""
        from catboost import CatBoostClassifier, Pool

        train, held_out, seed = fold
        present = np.unique(self.labels[train])
        if len(present) < 2:
            return None, present
        model = CatBoostClassifier(
            loss_function="Logloss" if self.binary else "MultiClass",
            random_seed=seed,
            class_names=list(present),
            verbose=False,
            allow_writing_files=False,
            thread_count=worker_count(),
            depth=self.recipe.depth,
            learning_rate=self.recipe.learning_rate,
            early_stopping_rounds=self.recipe.early_stopping_rounds,
            metric_period=LEARN_METRIC_PERIOD,
            **CATBOOST_PARAMS,
        )
        with CATBOOST_LOCK:
            if len(present) == self.n_boosted:  # always so when binary: one class present returned above
                # every class present: the rows of one pool of all training rows (the same data as
                # pools of those rows, made once: CatBoost copies a baseline element by element)
                if self._pool is None:
                    self._pool = Pool(self.features, self.labels, baseline=self.start)
                fit_set, eval_set = self._pool.slice(train), self._pool.slice(held_out)
            else:
                known = held_out[np.isin(self.labels[held_out], present)]
                fit_set = Pool(self.features[train], self.labels[train], baseline=self.start[train][:, present])
                eval_set = (
                    Pool(self.features[known], self.labels[known], baseline=self.start[known][:, present]) if len(known) else None
                )
            _fit_quietly(model, fit_set, eval_set)
        return model, present

    def recalibrator(self, models):
        """g from the inner folds' ``models`` (:meth:`fit_fold`'s results, in fold order)."""
        boost = self.boosted(models)
        return lambda new: boost(new, tempered(logits_of(new), self.beta))

    def boosted(self, models):
        """predict(P, warm(P)) = mean_j softmax(log warm + h_j(P)) (binary: the sigmoid)."""
        from catboost import Pool

        def predict(new_probs, new_warm):
            s = self._baseline(new_warm)
            total = np.zeros((len(new_probs), self.n_boosted))
            features = Pool(self._features(new_probs))
            for model, present in models:
                raw = np.zeros(s.shape)
                if model is not None:
                    with CATBOOST_LOCK:
                        out = model.predict(features, prediction_type="RawFormulaVal", thread_count=worker_count())
                    out = np.asarray(out)
                    if self.binary:
                        raw = out.reshape(-1)
                    else:
                        raw[:, present] = out.reshape(len(new_probs), len(present))
                if self.binary:
                    p1 = 1.0 / (1.0 + np.exp(-(s + raw)))
                    total += np.stack([1.0 - p1, p1], axis=1)
                else:
                    total += softmax(s + raw)
            return total / len(models)

        return predict


#: Bins of the histogram recalibrators (V-ECE paper, section 5.1).
HIST_BINS = 10


def _top_class_map(fit_binary):
    """A binary recalibrator as a multiclass one (docs/metrics.md): for K = 2 it maps P_1; otherwise it
    maps the top-class probability F to G (fitted on 1{y = argmax}) and the other classes share
    1 - G in proportion to P (:func:`refine` with one kept class)."""

    def fit(probs, labels, rng):
        binary = probs.shape[1] == 2
        top = np.ones(len(probs), dtype=np.intp) if binary else probs.argmax(axis=1)
        score = probs[np.arange(len(probs)), top]
        g = fit_binary(score, (labels == top).astype(np.float64))

        def predict(new):
            if binary:
                p1 = np.clip(g(new[:, 1]), 0.0, 1.0)
                return np.stack([1.0 - p1, p1], axis=1)
            order = new.argmax(axis=1)[:, None]
            coarse_g = np.clip(g(np.take_along_axis(new, order, axis=1)[:, 0]), 0.0, 1.0)
            return refine(new, np.stack([coarse_g, 1.0 - coarse_g], axis=1), order)

        return predict

    return fit


def _histogram(binning):
    """Histogram binning of the score: ``binning(score)`` gives (number of bins, the bin of each
    value); an empty bin predicts the mean outcome."""

    def fit_binary(score, outcome):
        n_bins, bin_of = binning(score)
        index = bin_of(score)
        counts = np.bincount(index, minlength=n_bins)
        means = np.where(counts > 0, np.bincount(index, outcome, minlength=n_bins) / np.maximum(counts, 1), outcome.mean())
        return lambda new: means[bin_of(new)]

    return fit_binary


def _equal_width_bins(score):
    return HIST_BINS, lambda values: bin_index(values, HIST_BINS)


def _equal_mass_bins(score):
    edges = np.unique(np.quantile(score, np.linspace(0.0, 1.0, HIST_BINS + 1)))
    return max(len(edges) - 1, 1), lambda values: edge_index(values, edges)


def _isotonic(score, outcome):
    x, level = isotonic_fit(score, outcome)
    return lambda new: np.interp(new, x, level)


def _logistic(features_of):
    """A binary logistic map sigma(w . phi(s)) of the score s, fitted by Newton (calibrators' fit_logistic)."""

    def fit_binary(score, outcome):
        weights = fit_logistic(features_of(score[:, None]), outcome[:, None])[0]
        return lambda new: sigmoid(features_of(new[:, None])[:, 0, :] @ weights)

    return fit_binary


def _quadratic_features(score):
    """Quadratic scaling on the logit of the score (docs/metrics.md: 1, z, z^2 of the class-1 logit)."""
    score = np.clip(score, PROB_FLOOR, 1.0 - PROB_FLOOR)
    return quadratic_features(np.log(score) - np.log1p(-score))


def _structured(calibrator_class):
    """SVS / SMS (docs/calibrators.md) fitted on the logits log(P + 1e-12) of the mixed probabilities."""

    def fit(probs, labels, rng):
        calibrator = calibrator_class().fit(logits_of(probs), labels)
        return lambda new: calibrator.predict_proba(logits_of(new))

    return fit


RECALIBRATORS = {
    "ws-catboost": ws_catboost,
    "ts": temperature_scaling,
    "hist-uniform": _top_class_map(_histogram(_equal_width_bins)),
    "hist-quantile": _top_class_map(_histogram(_equal_mass_bins)),
    "isotonic": _top_class_map(_isotonic),
    "quadratic": _top_class_map(_logistic(_quadratic_features)),
    "beta": _top_class_map(_logistic(beta_features)),
    "svs": _structured(VectorScaling),
    "sms": _structured(MatrixScaling),
}
