"""WS-CatBoost recipes against each other, for the choice of a default (not a test).

    python -m benchmarks.vece_recipes --seeds 3 --draws 5 --out results/

For each recipe (inner folds, CatBoost depth; everything else as documented): V-ECE on CIFAR-10 and
CIFAR-100 test (the ResNet-110 logits under tests/data) for seeds 0 .. seeds - 1, with the mean of
each estimate and the seconds one estimate takes in this process (CatBoost already imported), and
on data with a known true error (the binary demo and the known-CE generator at K = 10 and K = 30,
3,000 rows, ``--draws`` draws): the median ratio estimate / truth. V-ECE is a lower bound in
expectation, so on real data a larger estimate is a tighter one.

The named recipes (``paper``, ``compact``, ``compact-es10``, ``quick``: calib.estimators.RECIPES)
and the others of OTHER_RECIPES (in between), added to that table for the run;
``--recipes "a;b"`` runs only the named ones. Writes results/vece_recipes_real.{json,md} and
results/vece_recipes_truth.{json,md}.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.results import write_results
from benchmarks.vece_recalibrators import binary_demo
from calib.core.numerics import softmax
from calib.estimators import recalibrators, variational_calibration_error
from calib.synth import known_ce_data, true_calibration_errors

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
#: recipes measured beside the named ones
OTHER_RECIPES = {
    "4 inner folds, depth 6": recalibrators.BoostingRecipe(inner_folds=4, depth=6),
    "8 inner folds, depth 4": recalibrators.BoostingRecipe(inner_folds=8, depth=4),
    # cheaper than compact: fewer boosting rounds in all
    "compact, lr 0.3, early stopping 10": recalibrators.BoostingRecipe(4, 4, learning_rate=0.3, early_stopping_rounds=10),
    "2 inner folds, depth 4": recalibrators.BoostingRecipe(inner_folds=2, depth=4),
}
KEYS = ("l1", "l2", "sq", "top_l1")


def real_data(name: str):
    data = np.load(DATA / f"{name}_resnet110_test.npz")
    return softmax(data["logits"].astype(np.float64)), data["labels"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument("--recipes", help="semicolon-separated names to run (default: all)")
    args = parser.parse_args(argv)
    names = ["paper", *OTHER_RECIPES, "compact", "compact-es10", "quick"] if args.recipes is None else args.recipes.split(";")
    import catboost  # noqa: F401 - imported once, outside the timings

    real = {name: real_data(name) for name in ("cifar10", "cifar100")}
    known = {
        "binary": [binary_demo(3000, np.random.default_rng(1000 + d)) for d in range(args.draws)],
        "K=10": [known_ce_data(3000, 10, 0.5, np.random.default_rng(1000 + d)) for d in range(args.draws)],
        "K=30": [known_ce_data(3000, 30, 0.5, np.random.default_rng(1000 + d)) for d in range(args.draws)],
    }
    real_rows, truth_rows = [], []
    recalibrators.RECIPES.update(OTHER_RECIPES)
    for name in names:
        for data, (probs, labels) in real.items():
            estimates, seconds = [], []
            for seed in range(args.seeds):
                started = time.perf_counter()
                estimates.append(variational_calibration_error(probs, labels, "ws-catboost", seed=seed, recipe=name).values)
                seconds.append(time.perf_counter() - started)
            row = {"recipe": name, "data": data, "seconds": round(statistics.median(seconds), 2)}
            row.update({key: round(float(np.mean([e[key] for e in estimates])), 4) for key in KEYS})
            row.update({f"{key} sd": round(float(np.std([e[key] for e in estimates])), 4) for key in ("l1", "sq")})
            real_rows.append(row)
            print(row, flush=True)
        for case, draws in known.items():
            ratios = {key: [] for key in ("l1", "l2", "sq")}
            for draw, (probs, labels, true_probs) in enumerate(draws):
                truth = true_calibration_errors(probs, true_probs)
                estimate = variational_calibration_error(probs, labels, "ws-catboost", seed=draw, recipe=name).values
                for key in ratios:
                    ratios[key].append(estimate[key] / truth[key])
            row = {"recipe": name, "data": case}
            row.update({f"{key} ratio": round(float(np.median(values)), 3) for key, values in ratios.items()})
            truth_rows.append(row)
            print(row, flush=True)
    write_results(args.out, "vece_recipes_real", real_rows)
    write_results(args.out, "vece_recipes_truth", truth_rows)


if __name__ == "__main__":
    main()
