"""V-ECE's large-K path against the true calibration error (not a test).

    python -m benchmarks.vece_large_k --draws 3

Data with known C (C ~ Dirichlet(1), f = softmax(log C / 0.5)) at sizes where the warm start's
temperature is fitted on a subsample (training rows x K above 2^23): the default V-ECE (ws-catboost,
compact recipe) against the truth, per draw. Run it on two checkouts to compare them (docs/vece.md,
"Memory and time").
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from calib.estimators import variational_calibration_error
from calib.synth import known_ce_data, true_calibration_errors

SIZES = ((12_000, 1_000), (10_000, 2_000))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=3)
    args = parser.parse_args(argv)
    print("| N x K | draw | truth l1 / l2 / sq | estimate l1 / l2 / sq | s |")
    print("|---|---|---|---|---|")
    for n, k in SIZES:
        for draw in range(args.draws):
            probs, labels, true_probs = known_ce_data(n, k, 0.5, np.random.default_rng(1000 + draw))
            truth = true_calibration_errors(probs, true_probs)
            started = time.perf_counter()
            estimate = variational_calibration_error(probs, labels, seed=draw).values
            seconds = time.perf_counter() - started
            row = (" / ".join(f"{values[key]:.4g}" for key in ("l1", "l2", "sq")) for values in (truth, estimate))
            print(f"| {n:,} x {k:,} | {draw} | {next(row)} | {next(row)} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
