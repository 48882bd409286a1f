"""V-ECE's large-K path against the true calibration error (not a test).

    python -m benchmarks.vece_large_k --draws 3
    python -m benchmarks.vece_large_k --coarsening

Data with known C (C ~ Dirichlet(1), f = softmax(log C / 0.5)) at sizes where the warm start's
temperature is fitted on a subsample (training rows x K above 2^23): the default V-ECE (ws-catboost,
default recipe) against the truth, per draw. Run it on two checkouts to compare them (docs/vece.md,
"Memory and time").

``--coarsening``: 3,000 rows at K = 10, 30, 100 (seed 0), the default V-ECE with every class boosted
(exact) and with the top classes and the rest boosted (coarsened, calib's way above
MAX_BOOSTED_CLASSES classes) against the truth (docs/vece.md, "Large K").
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from calib.estimators import variational_calibration_error
from calib.estimators.recalibrators import MAX_BOOSTED_CLASSES
from calib.synth import known_ce_data, true_calibration_errors

SIZES = ((12_000, 1_000), (10_000, 2_000))


def coarsening_table() -> None:
    """Exact against coarsened boosting on 3,000 known-truth rows; exact is left out at K = 100
    (one MultiClass CatBoost over 100 classes takes minutes)."""
    print("| K | truth l1 / l2 / sq | exact WS-CatBoost | coarsened WS-CatBoost | s exact / coarsened |")
    print("|---|---|---|---|---|")
    for k in (10, 30, 100):
        probs, labels, true_probs = known_ce_data(3000, k, 0.5, np.random.default_rng(0))
        cells, seconds = [true_calibration_errors(probs, true_probs)], []
        for max_classes, runs in ((k, k <= 30), (MAX_BOOSTED_CLASSES, k > MAX_BOOSTED_CLASSES)):
            if not runs:
                cells.append(None)
                continue
            started = time.perf_counter()
            cells.append(variational_calibration_error(probs, labels, max_classes=max_classes).values)
            seconds.append(f"{time.perf_counter() - started:.1f}")
        text = ["-" if values is None else " / ".join(f"{values[key]:.3f}" for key in ("l1", "l2", "sq")) for values in cells]
        print(f"| {k} | {' | '.join(text)} | {' / '.join(seconds)} |", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--coarsening", action="store_true", help="exact against coarsened boosting at K = 10, 30, 100")
    args = parser.parse_args(argv)
    if args.coarsening:
        coarsening_table()
        return
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
