"""V-ECE with each recalibration map against the TRUE calibration error (not a test).

    python -m benchmarks.vece_recalibrators --draws 5 --out results/

Data with known C: the V-ECE paper's binary demo (p ~ Beta(0.5, 0.5), C = sigmoid(0.4 logit p + 0.3)) and
the multiclass known-CE generator (C ~ Dirichlet(1), f = softmax(log C / T)). For each map: the
median ratio estimate / truth over draws, the share of draws that overestimate, and the fit time.
Writes results/vece_recalibrators.{json,md}.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.results import write_results
from calib.estimators import variational_calibration_error
from calib.estimators.recalibrators import RECALIBRATORS
from calib.synth import known_ce_data, true_calibration_errors


def binary_demo(n: int, rng: np.random.Generator):
    p1 = np.clip(rng.beta(0.5, 0.5, n), 1e-6, 1 - 1e-6)
    c1 = 1 / (1 + np.exp(-(0.4 * np.log(p1 / (1 - p1)) + 0.3)))
    labels = (rng.random(n) < c1).astype(int)
    probs = np.stack([1 - p1, p1], 1)
    return probs, labels, np.stack([1 - c1, c1], 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    cases = {
        "binary": lambda rng: binary_demo(args.rows, rng),
        f"K={args.classes}": lambda rng: known_ce_data(args.rows, args.classes, 0.5, rng),
    }
    rows = []
    for case, make in cases.items():
        draws = [make(np.random.default_rng(1000 + d)) for d in range(args.draws)]
        truths = [true_calibration_errors(probs, true_probs) for probs, _, true_probs in draws]
        for name in RECALIBRATORS:
            started = time.perf_counter()
            estimates = [
                variational_calibration_error(probs, labels, name, seed=d).values for d, (probs, labels, _) in enumerate(draws)
            ]
            seconds = (time.perf_counter() - started) / args.draws
            row = {"case": case, "recalibrator": name, "seconds": round(seconds, 2)}
            for key in ("l1", "l2", "sq"):
                ratios = [e[key] / t[key] for e, t in zip(estimates, truths)]
                row[f"{key} ratio"] = round(float(np.median(ratios)), 3)
                row[f"{key} over"] = round(float(np.mean(np.array(ratios) > 1)), 2)
            rows.append(row)
            print(row, flush=True)
    write_results(args.out, "vece_recalibrators", rows)


if __name__ == "__main__":
    main()
