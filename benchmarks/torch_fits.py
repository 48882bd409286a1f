"""The methods that train a model or search many temperatures, at ImageNet's shape, against the truth
(docs/benchmarks.md, "Model-trained methods at ImageNet's shape"):

    python -m benchmarks.torch_fits --rows 50000 --classes 1000 --test-rows 10000

Data from `calib synth large-k` (known true probabilities): each method is fitted by `calib fit` in a
fresh process on the calibration rows (wall and CPU seconds of that process), then applied in
process to test rows drawn with another seed: the sets' coverage and mean size at alpha 0.1 (set
methods), and the calibrated probabilities' NLL against the truth (nll_true) and top-label ECE.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

import calib
from calib.calibrators.base import builds_sets
from calib.synth import large_k_data

#: (label, `calib fit` arguments): every method that trains a network or searches many levels.
METHODS = (
    ("ats-aq", ["--method", "ats-aq"]),
    ("ats-maq (multiqr)", ["--method", "ats-maq"]),
    ("ats-maq (flow)", ["--method", "ats-maq", "--model", "flow"]),
    ("ats-mgq", ["--method", "ats-mgq"]),
    ("mr --threshold adaptive", ["--method", "mr", "--threshold", "adaptive"]),
    ("adaptive-ts", ["--method", "adaptive-ts"]),
    # the earlier default, the networks on all K logits (selectable by name: --methods "ats-aq (logits)" ...)
    ("ats-aq (logits)", ["--method", "ats-aq", "--option", "conditioning=logits"]),
    ("ats-maq (multiqr, logits)", ["--method", "ats-maq", "--option", "conditioning=logits"]),
    ("mr --threshold adaptive (logits)", ["--method", "mr", "--threshold", "adaptive", "--option", "conditioning=logits"]),
    ("adaptive-ts (logits)", ["--method", "adaptive-ts", "--option", "conditioning=logits"]),
    # references: the closed-form methods the model-trained ones refine
    ("ts", ["--method", "ts"]),
    ("mr", ["--method", "mr"]),
    ("ats-gq", ["--method", "ats-gq"]),
)


def fit_in_process(args: list[str], data: str, bundle: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `calib fit` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "calib", "fit", data, *args, "--out", bundle, "--force"], check=True, capture_output=True
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def quality(bundle: str, logits: np.ndarray, labels: np.ndarray, truth: np.ndarray) -> dict:
    fitted = calib.load(bundle)
    report = calib.evaluate(
        logits,
        labels,
        calibrator=fitted,
        true_probs=truth,
        request=calib.EvaluationRequest.of(metrics=["nll_true", "ece"], bootstrap=0),
    )
    out = {"nll_true": report.values["nll_true"], "ece": report.values["ece"]}
    if builds_sets(fitted.fitted):
        sets = fitted.predict_sets(logits)
        out["coverage"] = float(sets[np.arange(len(labels)), labels].mean())
        out["set size"] = float(sets.sum(axis=1).mean())
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--classes", type=int, default=1_000)
    parser.add_argument("--test-rows", type=int, default=10_000)
    parser.add_argument("--methods", nargs="+", default=[label for label, _ in METHODS if "logits" not in label])
    parser.add_argument("--out", default=None, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        logits, labels, truth = large_k_data(args.rows, args.classes, 0.9, np.random.default_rng(0))
        data = os.path.join(folder, "cal.npz")
        np.savez(data, logits=logits, labels=labels)
        test_logits, test_labels, test_truth = large_k_data(args.test_rows, args.classes, 0.9, np.random.default_rng(1))
        test_truth = test_truth.astype(np.float64)
        test_truth /= test_truth.sum(axis=1, keepdims=True)
        uncalibrated = calib.evaluate(
            test_logits,
            test_labels,
            true_probs=test_truth,
            request=calib.EvaluationRequest.of(metrics=["nll_true", "ece"], bootstrap=0),
        )
        print(f"model's own: nll_true {uncalibrated.values['nll_true']:.4f}, ece {uncalibrated.values['ece']:.4f}", flush=True)
        for label, fit_args in METHODS:
            if label not in args.methods:
                continue
            bundle = os.path.join(folder, "bundle")
            wall, cpu = fit_in_process(fit_args, data, bundle)
            row = {"method": label, "wall s": round(wall, 1), "cpu s": round(cpu, 1)}
            row.update({key: round(value, 4) for key, value in quality(bundle, test_logits, test_labels, test_truth).items()})
            rows.append(row)
            print(json.dumps(row), flush=True)
    keys = ["method", "wall s", "cpu s", "coverage", "set size", "nll_true", "ece"]
    print("\n| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row.get(key, "-")) for key in keys) + " |")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
