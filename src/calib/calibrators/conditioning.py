"""What a model-trained part of a calibrator is a function of: an adaptive or quantile-regression
threshold (``mr``, ``conformal-ts``, ``ats-gq`` with ``--threshold adaptive``; ``ats-aq``), the
quantile model of ``ats-maq``, and the temperature network of ``adaptive-ts``.

- ``logits``: the row's K logits, as the papers condition on them.
- ``ranked``: the row's :data:`RANKED_WIDTH` largest log-probabilities, largest first,
  log softmax(z) sorted and cut. Its width does not grow with K, it is the same for any order of
  the classes, and it is a function of softmax(z) alone.
- ``features``: per-row features given with the rows (``--features``).

``auto`` (the default) takes the logits up to :data:`RANKED_ABOVE` classes and the ranked
log-probabilities above. At 50,000 x 1,000 the networks on all 1,000 logits took 50-80 s to train on
2 cores and overfit the fitting rows, whose classes are exchangeable there: sets 100-150 times the
constant threshold's, probabilities worse than the model's own (docs/benchmarks.md, "Model-trained
methods at ImageNet's shape"). Up to 128 classes (CIFAR-100 and below) nothing changes.
"""

from __future__ import annotations

import numpy as np

from ..core.numerics import log_softmax
from ..errors import InputError
from .conformal import check_choice

#: The choices of the ``conditioning`` option
CONDITIONINGS = ("auto", "logits", "ranked")
#: Above this many classes ``auto`` conditions on the ranked log-probabilities
RANKED_ABOVE = 128
#: How many of a row's largest log-probabilities the ranked conditioning keeps
RANKED_WIDTH = 32


def check_conditioning(value: str) -> str:
    return check_choice("conditioning", value, CONDITIONINGS)


def chosen(option: str, n_classes: int, features: np.ndarray | None) -> tuple[str, int]:
    """(what the model conditions on, its width) for the ``conditioning`` option ``option``, K =
    ``n_classes`` and the per-row ``features`` (which, when given, are always what it conditions on)."""
    if features is not None:
        return "features", int(features.shape[1])
    if option == "ranked" or (option == "auto" and n_classes > RANKED_ABOVE):
        return "ranked", min(RANKED_WIDTH, n_classes)
    return "logits", n_classes


def ranked_log_probs(logits: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` largest entries of each row of log softmax(z), largest first."""
    log_probs = log_softmax(np.asarray(logits, dtype=np.float64))
    if width < log_probs.shape[1]:
        log_probs = -np.partition(-log_probs, width - 1, axis=1)[:, :width]
    return -np.sort(-log_probs, axis=1)


def conditioning_inputs(kind: str, width: int, logits: np.ndarray, features: np.ndarray | None, what: str) -> np.ndarray:
    """The model's inputs for rows of ``logits`` (and ``features``): ``kind`` and ``width`` as
    :func:`chosen` gave them at the fit, checked against what is given (``what`` names the model
    in the errors)."""
    if kind == "features":
        if features is None:
            raise InputError(f"{what} was fitted on per-row features; give the same features", cli_hint="--features FILE")
        inputs = features
    elif kind == "ranked":
        inputs = ranked_log_probs(logits, width)
        if inputs.shape[1] != width:
            raise InputError(
                f"{what} conditions on the {width} largest log-probabilities; these rows have {inputs.shape[1]} classes"
            )
    else:
        inputs = logits
    if inputs.shape[1] != width:
        raise InputError(f"{what} expects {width} {kind} columns; got {inputs.shape[1]}")
    return inputs
