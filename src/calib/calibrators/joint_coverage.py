"""Conformal sets of a multi-label input that cover every label of a row at once (joint coverage;
docs/multilabel.md).

Label l of row i is a binary pair (x_il, y_il) with the method's score V_il = V(x_il, y_il). With
the row maximum M_i = max_l V_il over the L labels and n calibration rows,

  q = the ceil((n + 1)(1 - alpha))-th smallest M_i,   C_l(x) = {v in {0, 1} : V(x_l, v) <= q},

so that P(y_l in C_l(x) for every l) >= 1 - alpha for an exchangeable test row: split conformal
on the row maxima (Cauchois et al. 2021), a row covered exactly when its maximum is at most q.
The sets are the method's own constant-threshold sets at q, so its probabilities are the method's
at the per-pair level those sets reach on the calibration rows,

  alpha_pair = (m + 1) / (n L + 1),   m = #{(i, l) : V_il > q},

which mass rescaling puts outside each pair's set (1 - alpha_pair inside): the share of pairs the
sets miss, counted as a conformal p-value counts (never 0).
"""

from __future__ import annotations

import numpy as np

from ..errors import UsageError
from .base import CalibrationInputs
from .conformal import conformal_quantile, given_score_terms, in_conformal_set
from .set_based import SetCalibrator, start_fit


def fit_joint(cls: type, options, inputs: CalibrationInputs, labels: np.ndarray, n_labels: int, *, seed: int) -> SetCalibrator:
    """``cls`` (a conformal method with a constant threshold) fitted on a multi-label input's pairs
    (``labels`` the pairs' 0/1 labels, row-major: pair p is row p // L's label p % L) with the
    joint threshold q of the row maxima and the per-pair level alpha_pair of the module docstring
    (its ``mass_alpha``); its options keep the joint alpha asked for."""
    calibrator = cls(options)
    if not isinstance(calibrator, SetCalibrator) or calibrator.threshold_kind != "constant":
        raise UsageError(
            f"joint coverage of a multi-label input's sets takes a conformal method with a constant threshold "
            f"(mr, conformal-ts, ats-gq); {cls.name!r} with its options is not one; fit it per label instead"
        )
    probs = inputs.probs if cls.scores_given_probs else None
    # the fit's bookkeeping (what it conditions on, its score seed) and the pairs' scores V_il, once
    logits, scores, _ = start_fit(calibrator, inputs.logits, labels, seed=seed, features=None, probs=probs, train=None)
    q = conformal_quantile(scores.reshape(-1, n_labels).max(axis=1), options.alpha, allow_full_set=options.allow_full_set)
    missed = int(np.count_nonzero(~in_conformal_set(scores, q, given_score_terms(options, 2, probs is not None))))
    calibrator.threshold_ = {"q": np.array(q, dtype=np.float64)}
    calibrator.joint_ = {"labels": int(n_labels), "pair_alpha": (missed + 1) / (len(scores) + 1)}
    calibrator.fit_counts_ = calibrator._count_rows(logits, None, probs)
    return calibrator
