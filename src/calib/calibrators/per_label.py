"""A calibrator per label of a multi-label input (docs/multilabel.md): label l's map is fitted on
its own N (row, label) pairs and applied to them, for any method that calibrates the pairs'
binary probabilities (temperature scaling, Platt, isotonic, beta, histogram binning, Venn-Abers,
...). The same method fitted on all pairs at once is the shared calibrator (one temperature for
every label)."""

from __future__ import annotations

import numpy as np

from ..bundle import State
from ..errors import InputError, UsageError
from .base import CalibrationInputs, Calibrator, absent_classes


class PerLabel(Calibrator):
    """``base`` with ``options`` fitted once per label; :attr:`calibrators_` [l] is label l's."""

    name = "per-label"
    summary = "one calibrator per label of a multi-label input"

    def __init__(self, base: type[Calibrator], options=None, n_labels: int = 0):
        super().__init__(options if options is not None else base.Options())
        self.base, self.n_labels = base, n_labels
        self.name = base.name

    @property
    def makes_sets(self) -> bool:
        """Per label of a conformal method: each label's set over {0, 1} covers y_l with
        probability >= 1 - alpha (per-label coverage)."""
        return bool(getattr(self.base, "makes_sets", False))

    def fit(self, logits, labels, *, seed=0, features=None):
        raise UsageError("a calibrator per label is fitted on a multi-label input's pairs, each with its label")

    def fit_inputs(self, inputs: CalibrationInputs, labels: np.ndarray, *, seed: int = 0) -> "PerLabel":
        """Label l's calibrator on the pairs of label l (every row's l-th score and 0/1 label)."""
        if inputs.pair_labels is None:
            raise UsageError(f"method {self.base.name!r} per label needs a multi-label input (labels a (N, L) 0/1 matrix)")
        fitted = []
        by_label = _rows_by_label(inputs.pair_labels, self.n_labels)
        for label, rows in enumerate(by_label):
            calibrator = self.base(self.options)
            try:
                calibrator.fit_inputs(_rows(inputs, rows), labels[rows], seed=seed)
            except InputError as exc:
                raise InputError(f"label {label}: {exc}") from None
            calibrator.absent_classes_ = absent_classes(labels[rows], 2)  # a label never (or always) 1 here
            fitted.append(calibrator)
        self.calibrators_ = fitted
        return self

    def apply(self, inputs: CalibrationInputs, output: str = "log-probs", *, counts: bool = True):
        """Each pair through its label's calibrator, in the pairs' order."""
        if inputs.pair_labels is None:
            raise UsageError(f"a calibrator per label ({self.base.name}) applies to a multi-label input's pairs")
        parts, total = None, {}
        for label, rows in enumerate(_rows_by_label(inputs.pair_labels, self.n_labels)):
            if not len(rows):
                continue
            result, info = self.calibrators_[label].apply(_rows(inputs, rows), output, counts=counts)
            results = result if isinstance(result, tuple) else (result,)  # log-probs and sets: two arrays
            if parts is None:
                parts = [np.empty((len(inputs.logits), *r.shape[1:]), dtype=r.dtype) for r in results]
            for part, r in zip(parts, results):
                part[rows] = r
            for key, value in info.items():
                total[key] = total.get(key, 0) + value
        if parts is None:
            return None, total
        return (tuple(parts) if len(parts) > 1 else parts[0]), total

    def transform(self, logits, features=None):
        raise UsageError(f"a calibrator per label ({self.base.name}) applies to a multi-label input's pairs, each with its label")

    def fit_report(self):
        """The per-label calibrators' report entries: as they are where every label has the same,
        else the numeric ones as min / median / max over the labels that report them (a count a
        label's report leaves out when it is zero, say); other entries that differ are left out."""
        reports = [calibrator.fit_report() for calibrator in self.calibrators_]
        out = {"labels": self.n_labels}
        if self.makes_sets:
            out["coverage"] = "per label"  # each label's set covers y_l with probability >= 1 - alpha
        keys = dict.fromkeys(key for report in reports for key in report)  # every label's, in order
        for key in keys:
            values = [report[key] for report in reports if key in report]
            if len(values) == len(reports) and all(v == values[0] for v in values):  # alpha, the score, ...
                out[key] = values[0]
            elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                out[f"{key} per label (min / median / max)"] = [
                    float(np.min(values)),
                    float(np.median(values)),
                    float(np.max(values)),
                ]
        return out

    def warnings(self):
        return [f"label {label}: {w}" for label, calibrator in enumerate(self.calibrators_) for w in calibrator.fit_warnings()]

    def to_state(self):
        """Every label's state, its arrays and files named ``label<l>.<name>``."""
        state = State(params={"per_label": []})
        for label, calibrator in enumerate(self.calibrators_):
            own = calibrator.to_state()
            state.params["per_label"].append({**own.params, "_absent_classes": list(calibrator.absent_classes_)})
            state.arrays.update({f"label{label}.{name}": array for name, array in own.arrays.items()})
            state.blobs.update({f"label{label}.{name}": blob for name, blob in own.blobs.items()})
        return state

    @classmethod
    def from_state(cls, options, state):
        raise UsageError("a calibrator per label is rebuilt with its method: PerLabel.restore")

    @classmethod
    def restore(cls, base: type[Calibrator], options, state: State) -> "PerLabel":
        params = state.params["per_label"]
        calibrator = cls(base, options, len(params))
        fitted = []
        for label, own_params in enumerate(params):
            prefix = f"label{label}."
            own = State(
                {key: value for key, value in own_params.items() if key != "_absent_classes"},
                {name[len(prefix) :]: array for name, array in state.arrays.items() if name.startswith(prefix)},
                {name[len(prefix) :]: blob for name, blob in state.blobs.items() if name.startswith(prefix)},
            )
            restored = base.from_state(options, own)
            restored.absent_classes_ = tuple(own_params.get("_absent_classes", ()))
            fitted.append(restored)
        calibrator.calibrators_ = fitted
        return calibrator


def _rows_by_label(pair_labels: np.ndarray, n_labels: int) -> list[np.ndarray]:
    """The positions of each label's pairs, in order: one stable sort of the pair labels, cut at
    each label's first position (not a scan of every pair per label)."""
    order = np.argsort(pair_labels, kind="stable")
    cuts = np.searchsorted(pair_labels[order], np.arange(1, n_labels))
    return np.split(order, cuts)


def _rows(inputs: CalibrationInputs, rows: np.ndarray) -> CalibrationInputs:
    """The inputs of ``rows`` (one label's pairs), without the pair labels."""
    return CalibrationInputs(
        inputs.logits[rows],
        None if inputs.probs is None else inputs.probs[rows],
        None if inputs.features is None else inputs.features[rows],
        inputs.train,
    )
