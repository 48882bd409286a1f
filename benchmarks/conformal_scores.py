"""Every conformal score and threshold on CIFAR-100 (validation -> test, alpha 0.1): the sets'
coverage, mean size, CovGap and SSCV, and the calibrated ECE and CMCE of MR and ATS-GQ built on
them (docs/benchmarks.md, "Conformal scores and thresholds"):

    python -m benchmarks.conformal_scores

Not a test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import calib

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
SCORES = ("msp", "aps", "raps", "saps", "topk")
THRESHOLDS = ("constant", "classwise", "clustered")
SET_KEYS = ("set_coverage", "set_size", "set_covgap", "set_sscv")


def main() -> None:
    val, test = np.load(DATA / "cifar100_resnet110_val.npz"), np.load(DATA / "cifar100_resnet110_test.npz")
    base = calib.evaluate(test["logits"], test["labels"], metrics=["ece", "cmce"]).values
    print(f"CIFAR-100 test, the model's own probabilities: ECE {base['ece']:.4f}, CMCE {base['cmce']:.4f}")
    print("| score | threshold | coverage | mean size | CovGap | SSCV | MR ECE | MR CMCE | ATS-GQ ECE | ATS-GQ CMCE |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    cases = [(score, "constant", False) for score in SCORES]
    cases += [(score, "constant", True) for score in SCORES if score != "msp"]
    cases += [(score, threshold, False) for threshold in THRESHOLDS[1:] for score in ("msp", "aps")]
    for score, threshold, randomize in cases:
        row = [score + (", randomised" if randomize else ""), threshold]
        for method in ("mr", "ats-gq"):
            fitted = calib.calibrator(method, alpha=0.1, score=score, threshold=threshold, randomize=randomize)
            fitted.fit(val["logits"], val["labels"])
            values = calib.evaluate(test["logits"], test["labels"], metrics=["ece", "cmce"], calibrator=fitted).values
            if method == "mr":
                row += [f"{values[key]:.4f}" if key != "set_size" else f"{values[key]:.2f}" for key in SET_KEYS]
            row += [f"{values['ece']:.4f}", f"{values['cmce']:.4f}"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
