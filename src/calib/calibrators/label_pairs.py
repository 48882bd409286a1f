"""How a method is fitted on a multi-label input's (row, label) pairs (docs/multilabel.md), each
pair a binary prediction with its 0/1 label:

- one calibrator for all pairs (the shared map: one temperature for every label), the default;
- one calibrator per label (:class:`calib.calibrators.per_label.PerLabel`), ``per_label``;
- conformal sets that cover every label of a row at once (``joint``:
  :func:`calib.calibrators.joint_coverage.fit_joint`).

A conformal method's sets need a stated coverage, per label (each label's set covers y_l with
probability >= 1 - alpha) or joint (every label of a row at once): without one it is refused, since
sets fitted on the pooled pairs cover an average pair, which is neither.
"""

from __future__ import annotations

import numpy as np

from ..errors import UsageError
from .alpha_agnostic import AlphaAgnostic
from .base import CalibrationInputs, Calibrator, absent_classes, builds_sets
from .joint_coverage import fit_joint
from .per_label import PerLabel


def fit_pairs(
    cls: type[Calibrator],
    options,
    inputs: CalibrationInputs,
    labels: np.ndarray,
    n_labels: int,
    *,
    per_label: bool,
    joint: bool,
    seed: int,
) -> Calibrator:
    """``cls`` with its parsed ``options`` fitted on the pairs ``inputs`` of L = ``n_labels``
    labels (``labels``: each pair's 0/1 label, pair p being row p // L's label p % L): shared by
    all pairs, ``per_label``, or ``joint`` as the module docstring says."""
    if per_label and joint:
        raise UsageError("the sets of a multi-label input cover each label or every label at once: choose one")
    calibrator = cls(options)
    conformal = builds_sets(calibrator) or isinstance(calibrator, AlphaAgnostic)
    if per_label:
        return PerLabel(cls, options, n_labels).fit_inputs(inputs, labels, seed=seed)
    if joint:
        if not conformal:
            raise UsageError(f"method {cls.name!r} builds no conformal sets; joint coverage is a conformal method's")
        fitted = fit_joint(cls, options, inputs, labels, n_labels, seed=seed)
    elif conformal:
        raise UsageError(
            f"method {cls.name!r} is conformal: the sets of a multi-label input need a stated coverage, per label "
            "(each label's set covers y_l with probability >= 1 - alpha) or joint (every label of a row at once)",
            cli_hint="--per-label or --joint",
        )
    else:
        fitted = calibrator.fit_inputs(inputs, labels, seed=seed)
    fitted.absent_classes_ = absent_classes(labels, 2)  # a pair's classes: y_l = 0 and y_l = 1
    return fitted
