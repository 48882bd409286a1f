"""``tl-hb``: top-label histogram binning (Gupta and Ramdas 2022), the recalibration of a model's
confidence in its predicted class, one histogram per predicted class.

Fit: rows are grouped by their predicted class l (the argmax of p). A class predicted on n_l
calibration rows gets B_l = floor(n_l / m) uniform-mass bins of its rows' top probabilities
(m = ``points_per_bin``, 50; :func:`calib.core.binning.uniform_mass_upper_edges`), each bin's value
the share of its rows whose label is l (0.5 for a bin no row reaches); a class predicted on fewer
than m rows keeps its confidences (the authors' rule, and a warning here). Apply: the predicted
class's probability becomes its bin's value p'; the other classes share 1 - p' in proportion to
their probabilities, each capped below p' (:func:`share_the_rest`), so the prediction keeps its
class (wherever p' >= 1 / K). The authors break ties among confidences with a random
1e-10 nudge; calib sends a tie to the lower bin, without randomness (their top-label ECE moves by
about 1e-11 over nudge seeds).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..bundle import State
from ..core.binning import uniform_mass_upper_edges, upper_edge_bins
from ..core.numerics import log_of_probs, softmax
from ..errors import UsageError
from .base import Calibrator

#: The value of a bin no calibration row reaches (the authors' 0.5)
EMPTY_BIN_VALUE = 0.5


def share_the_rest(probs: np.ndarray, predicted: np.ndarray, calibrated: np.ndarray) -> np.ndarray:
    """Rows whose ``predicted`` class has probability ``calibrated`` (p') and whose other classes
    share 1 - p' in proportion to ``probs``, each at most p' so that no other class is more
    probable than the predicted one: q_k = min(c p_k, p'), c solving sum_k q_k = 1 - p' (capping the
    largest shares first, as a projection onto a capped simplex). A capped class ties with the
    predicted one, and the argmax's rule (the lower index) may then name it. Where even shares of
    (1 - p') / (K - 1) exceed p' (p' < 1 / K) no share keeps the predicted class on top; those rows
    get the even shares. Where the other classes had no probability at all, they share evenly."""
    n, k = probs.shape
    rows = np.arange(n)
    others = probs.copy()
    others[rows, predicted] = -1.0  # sorted last
    order = np.argsort(-others, axis=1)
    ordered = np.take_along_axis(others, order, axis=1)[:, : k - 1]  # the K - 1 other classes, largest first
    cap = calibrated
    left = 1.0 - calibrated
    capped = np.arange(k - 1)[None, :]  # j classes capped, j = 0 .. K - 2
    remaining = np.cumsum(ordered[:, ::-1], axis=1)[:, ::-1]  # sum of the classes from j on, uncapped
    scale = (left[:, None] - capped * cap[:, None]) / np.where(remaining > 0, remaining, np.inf)
    fits = scale * ordered <= cap[:, None]
    first = np.argmax(fits, axis=1)
    c = scale[rows, first]
    shares = np.where(capped < first[:, None], cap[:, None], c[:, None] * ordered)
    even = np.broadcast_to((left / (k - 1))[:, None], shares.shape)
    uneven = fits.any(axis=1) & (ordered.sum(axis=1) > 0) & (calibrated >= 1.0 / k)
    shares = np.where(uneven[:, None], shares, even)
    out = np.empty_like(probs)
    np.put_along_axis(out, order[:, : k - 1], shares, axis=1)
    out[rows, predicted] = calibrated
    return out


class TopLabelHistogramBinning(Calibrator):
    name = "tl-hb"
    summary = "top-label histogram binning: uniform-mass bins of the confidence within each predicted class (Gupta & Ramdas 2022)"

    @dataclasses.dataclass(frozen=True)
    class Options:
        points_per_bin: int = 50

        def __post_init__(self):
            if self.points_per_bin < 1:
                raise UsageError(f"points_per_bin must be a positive count of rows; got {self.points_per_bin}")

    not_exportable = "the other classes' capped shares of 1 - p' need a sort of each row, which calib writes in no ONNX graph"

    def softmax_only(self):
        return True  # reads the logits only through p

    def fit(self, logits, labels, *, seed=0, features=None):
        probs = softmax(np.asarray(logits, dtype=np.float64))
        k = probs.shape[1]
        predicted, top = probs.argmax(axis=1), probs.max(axis=1)
        edges, values, offsets = [], [], [0]
        for label in range(k):
            rows = predicted == label
            bins = int(rows.sum()) // self.options.points_per_bin
            if bins:
                upper = uniform_mass_upper_edges(top[rows], bins)
                index = upper_edge_bins(top[rows], upper)
                counts = np.bincount(index, minlength=bins)
                hits = np.bincount(index, weights=(labels[rows] == label).astype(np.float64), minlength=bins)
                edges.append(upper)
                values.append(np.where(counts > 0, hits / np.maximum(counts, 1), EMPTY_BIN_VALUE))
            offsets.append(offsets[-1] + bins)
        self.edges_ = np.concatenate(edges) if edges else np.zeros(0)
        self.values_ = np.concatenate(values) if values else np.zeros(0)
        self.offsets_ = np.asarray(offsets, dtype=np.int64)
        return self

    def _class_bins(self, label: int) -> slice:
        return slice(int(self.offsets_[label]), int(self.offsets_[label + 1]))

    def transform(self, logits, features=None):
        return log_of_probs(self._probs(logits))

    def transform_probs_with_info(self, logits, features=None):
        """The probabilities themselves: each bin's value exactly, not through its log and back."""
        return self._probs(logits), {}

    def _probs(self, logits) -> np.ndarray:
        probs = softmax(np.asarray(logits, dtype=np.float64))
        rows = np.arange(len(probs))
        predicted, top = probs.argmax(axis=1), probs[rows, probs.argmax(axis=1)]
        calibrated = top.copy()
        for label in np.unique(predicted):
            part = self._class_bins(int(label))
            if part.stop > part.start:
                mine = predicted == label
                calibrated[mine] = self.values_[part][upper_edge_bins(top[mine], self.edges_[part])]
        return share_the_rest(probs, predicted, calibrated)

    def warnings(self):
        kept = [label for label in range(len(self.offsets_) - 1) if self.offsets_[label + 1] == self.offsets_[label]]
        if not kept:
            return []
        shown = ", ".join(map(str, kept[:10])) + (f" and {len(kept) - 10} more" if len(kept) > 10 else "")
        return [
            f"{len(kept)} classes are predicted on fewer than {self.options.points_per_bin} calibration rows ({shown}): "
            "their confidences are left as they are"
        ]

    def fit_report(self):
        bins = np.diff(self.offsets_)
        return {"classes binned": int((bins > 0).sum()), "bins per class (min / max)": [int(bins.min()), int(bins.max())]}

    def to_state(self):
        return State(params={}, arrays={"edges": self.edges_, "values": self.values_, "offsets": self.offsets_})

    @classmethod
    def from_state(cls, options, state):
        calibrator = cls(options)
        calibrator.edges_ = np.asarray(state.arrays["edges"], dtype=np.float64)
        calibrator.values_ = np.asarray(state.arrays["values"], dtype=np.float64)
        calibrator.offsets_ = np.asarray(state.arrays["offsets"], dtype=np.int64)
        return calibrator
