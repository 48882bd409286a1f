"""Multi-label calibration on synthetic data with known truth, against scikit-learn (not a test).

    python -m benchmarks.multilabel --labels 50 --rows 20000

`calib synth multilabel`'s data (correlated labels, a temperature and a bias per label): the
macro, micro and worst-label `ece_pos` on the test rows of the model, of calib's calibrators
(shared and per label) and of scikit-learn's CalibratedClassifierCV per label (sigmoid and
isotonic, on the frozen model's scores), with the truth's own probabilities as the floor, and the
fit times. docs/multilabel.md has a run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import calib
from calib.synth import multilabel_data


class _Scores:
    """A fitted "classifier" whose decision function is column ``label`` of the stored logits,
    rows picked by index (what CalibratedClassifierCV calibrates, frozen)."""

    def __init__(self, logits: np.ndarray):
        self.logits = logits
        self.classes_ = np.array([0, 1])  # fitted already: scikit-learn looks for an attribute ending in _

    def fit(self, x, y):
        return self

    def decision_function(self, x):
        return self.logits[np.asarray(x)[:, 0].astype(int)]

    def predict(self, x):
        return (self.decision_function(x) > 0).astype(int)

    def get_params(self, deep=True):
        return {"logits": self.logits}


def sklearn_per_label(logits, labels, test_logits, method: str) -> np.ndarray:
    """scikit-learn's CalibratedClassifierCV (``method``) per label, on the frozen logits."""
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.frozen import FrozenEstimator

    class Frozen(_Scores, ClassifierMixin, BaseEstimator):
        pass

    out = np.empty(test_logits.shape)
    everything = np.concatenate([logits, test_logits])
    rows = np.arange(len(everything))[:, None]
    for label in range(logits.shape[1]):
        # ensemble=False: one calibrator on every calibration row (the frozen model needs no folds)
        model = CalibratedClassifierCV(FrozenEstimator(Frozen(everything[:, label])), method=method, ensemble=False)
        model.fit(rows[: len(logits)], labels[:, label])
        out[:, label] = model.predict_proba(rows[len(logits) :])[:, 1]
    return out


def summary(probs: np.ndarray, labels: np.ndarray) -> tuple[float, float, float]:
    """(macro, micro, worst label) ece_pos of per-label probabilities."""
    report = calib.evaluate(probs, labels, metrics=["ece_pos"], kind="probs").to_dict()
    return (
        report["group_by"]["mean"]["ece_pos"],
        report["metrics"]["ece_pos"]["value"],
        report["group_by"]["worst"]["ece_pos"]["value"],
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=50)
    parser.add_argument("--rows", type=int, default=20_000, help="calibration rows, and as many test rows")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logits, labels, truth, _, _ = multilabel_data(2 * args.rows, args.labels, np.random.default_rng(args.seed))
    cal, test = slice(0, args.rows), slice(args.rows, None)
    sigmoid = 1.0 / (1.0 + np.exp(-logits[test]))
    rows = [("the truth's probabilities", summary(truth[test], labels[test]), None)]
    rows.append(("the model", summary(sigmoid, labels[test]), None))
    for name, method, per_label in (
        ("calib ts, shared", "ts", False),
        ("calib ts, per label", "ts", True),
        ("calib platt, per label", "platt", True),
        ("calib isotonic, per label", "isotonic", True),
    ):
        started = time.perf_counter()
        probs = calib.calibrator(method, per_label=per_label).fit(logits[cal], labels[cal]).predict_proba(logits[test])
        rows.append((name, summary(probs, labels[test]), time.perf_counter() - started))
    for method in ("sigmoid", "isotonic"):
        started = time.perf_counter()
        probs = sklearn_per_label(logits[cal], labels[cal], logits[test], method)
        rows.append(
            (
                f"scikit-learn CalibratedClassifierCV({method}) per label",
                summary(probs, labels[test]),
                time.perf_counter() - started,
            )
        )
    print(f"{args.rows:,} calibration and {args.rows:,} test rows x {args.labels} labels, seed {args.seed}\n")
    print("| calibrator | macro ece_pos | micro ece_pos | worst label | fit + apply s |")
    print("|---|---|---|---|---|")
    for name, (macro, micro, worst), seconds in rows:
        print(f"| {name} | {macro:.4f} | {micro:.4f} | {worst:.4f} | {'' if seconds is None else f'{seconds:.2f}'} |")


if __name__ == "__main__":
    main()
