"""Every calibration-error estimator against the TRUE error on data where it is known (not a test).

    python -m benchmarks.estimator_truth --seeds 10 --rows 2000 --out results/

Known-CE data (C ~ Dirichlet(1), f = softmax(log C / T), labels drawn from C) for K = 2, 4, 10, 100
and T in {0.5, 2}. Each estimator is compared with the truth it targets: top-label estimators (ECE,
equal-mass ECE, smECE, isotonic ECE) with the true top-label L1 error, debiased_ece_sq with the true
top-label squared error, canonical ones (KDE-ECE, V-ECE) with the true L1 / L2 / squared errors.
Reports the median ratio estimate / truth over seeds and the share of seeds that overestimate.
Writes results/estimator_truth.{json,md}.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.results import write_results
from calib.estimators import kde_calibration_errors, variational_calibration_error
from calib.evaluation import compute_metrics
from calib.io import Predictions
from calib.metrics import MetricConfig
from calib.synth import known_ce_data, true_calibration_errors

TOP_LABEL = ["ece", "ece_quantile", "smece", "isotonic_ece"]


def estimates(probs, labels, seed):
    """{(estimator, target): value} for one draw, and seconds per estimator family."""
    preds = Predictions("draw", probs, "probs", "draw", labels, "draw")
    values, _ = compute_metrics(preds, TOP_LABEL + ["debiased_ece_sq"], MetricConfig())
    out = {(key, "top_l1"): values[key]["value"] for key in TOP_LABEL}
    out[("debiased_ece_sq", "top_sq")] = values["debiased_ece_sq"]["value"]
    seconds = {}
    start = time.perf_counter()
    kde, _ = kde_calibration_errors(probs, labels)
    seconds["kde"] = time.perf_counter() - start
    out.update({(f"kde_ece_{key}", key): value for key, value in kde.items()})
    for name, recalibrator, folds in (
        ("vece", "ws-catboost", 5),
        ("vece[ts]", "ts", 5),
        ("vece[sms]", "sms", 5),
        ("vece_is[isotonic]", "isotonic", 1),
    ):
        start = time.perf_counter()
        estimate = variational_calibration_error(probs, labels, recalibrator, folds=folds, seed=seed).values
        seconds[name] = time.perf_counter() - start
        out.update({(f"{name} {key}", key): estimate[key] for key in ("l1", "l2", "sq", "top_l1")})
    return out, seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--classes", type=int, nargs="+", default=[2, 4, 10, 100])
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.5, 2.0])
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    rows = []
    for k in args.classes:
        for temperature in args.temperatures:
            ratios, timing = {}, {}
            for seed in range(args.seeds):
                probs, labels, truth_probs = known_ce_data(args.rows, k, temperature, np.random.default_rng(seed))
                truth = true_calibration_errors(probs, truth_probs)
                top = probs.argmax(1)
                truth["top_sq"] = float(((probs.max(1) - truth_probs[np.arange(len(top)), top]) ** 2).mean())
                found, seconds = estimates(probs, labels, seed)
                for (name, target), value in found.items():
                    ratios.setdefault((name, target), []).append(value / truth[target])
                for name, s in seconds.items():
                    timing.setdefault(name, []).append(s)
            for (name, target), values in ratios.items():
                family = "kde" if name.startswith("kde") else name.split(" ")[0]
                rows.append(
                    {
                        "K": k,
                        "T": temperature,
                        "estimator": name,
                        "truth": target,
                        "median ratio": round(float(np.median(values)), 3),
                        "share over": round(float(np.mean(np.array(values) > 1)), 2),
                        "seconds": round(float(np.median(timing[family])), 2) if family in timing else None,
                    }
                )
            print(f"K={k} T={temperature} done", flush=True)
    write_results(args.out, "estimator_truth", rows)


if __name__ == "__main__":
    main()
