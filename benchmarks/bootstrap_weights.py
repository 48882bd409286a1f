"""Multinomial cluster counts against Poisson(1) weights for the one-pass bootstrap, for the choice
of a default (not a test).

    python -m benchmarks.bootstrap_weights --draws 200 --rows 2000 10000 --out results/

calib's replicates resample G = 200 clusters of rows (calib.bootstrap): a replicate's weights are
multinomial counts c ~ Multinomial(G, 1/G) of the clusters, every row of cluster g weighted c_g.
The common streaming alternative draws each weight as Poisson(1) (independent, so the total weight
varies from replicate to replicate). Both cost the same here: either way one (R, G) matrix of
counts is drawn and multiplied with the per-cluster sums after the pass; only the counts differ.
This measures what differs, the intervals: on a world with known truth (the known-CE generator,
K = 10, T = 0.5: over-confident probabilities, labels drawn from the true probabilities), each
draw's 90% and 95% intervals of accuracy, NLL, Brier and ECE (200 replicates, as the gates draw)
by both weightings, and how often each interval holds the population value (accuracy, NLL and
Brier: their expectation given the true probabilities over 1,000,000 rows; ECE: its value on
4,000,000 rows). Poisson counts replace ``calib.bootstrap.cluster_counts`` in this process only.
Writes results/bootstrap_weights.{json,md}.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import calib
import calib.bootstrap as bootstrap_module
from benchmarks.results import write_results
from calib.synth import known_ce_data

K, TEMPERATURE = 10, 0.5
KEYS = ("accuracy", "nll", "brier", "ece")
MULTINOMIAL = bootstrap_module.cluster_counts


def poisson_counts(config, clusters: int) -> np.ndarray:
    """(replicates, G) independent Poisson(1) weights of the G clusters, seeded as the multinomial's."""
    return np.random.default_rng([config.seed, 2]).poisson(1.0, size=(config.replicates, clusters))


WEIGHTINGS = {"multinomial": MULTINOMIAL, "poisson": poisson_counts}


def population_values(seed: int = 99) -> dict[str, float]:
    """Accuracy, NLL and Brier as expectations given the true probabilities C (1,000,000 rows), and
    ECE (15 bins) on 4,000,000 rows."""
    rng = np.random.default_rng(seed)
    probs, _, truth = known_ce_data(1_000_000, K, TEMPERATURE, rng)
    top = probs.argmax(axis=1)
    values = {
        "accuracy": float(truth[np.arange(len(top)), top].mean()),
        "nll": float(-(truth * np.log(probs)).sum(axis=1).mean()),
        "brier": float(((probs**2).sum(axis=1) - 2 * (probs * truth).sum(axis=1) + truth.sum(axis=1)).mean()),
    }
    eces = []
    for part in range(4):
        probs, labels, _ = known_ce_data(1_000_000, K, TEMPERATURE, np.random.default_rng([seed, part]))
        eces.append(calib.evaluate(probs, labels, metrics=["ece"], kind="probs").values["ece"])
    values["ece"] = float(np.mean(eces))
    return values


def intervals(probs, labels, level: float, weighting: str) -> tuple[dict, float]:
    """({key: [lo, hi]}, seconds) of one evaluation with 200 replicates under ``weighting``."""
    bootstrap_module.cluster_counts = WEIGHTINGS[weighting]
    try:
        request = calib.EvaluationRequest.of(metrics=list(KEYS), bootstrap=200, level=level)
        started = time.perf_counter()
        report = calib.evaluate(probs, labels, kind="probs", request=request).to_dict()
        seconds = time.perf_counter() - started
    finally:
        bootstrap_module.cluster_counts = MULTINOMIAL
    return {key: report["metrics"][key]["ci"] for key in KEYS}, seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--rows", type=int, nargs="+", default=[2000, 10000])
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    truth = population_values()
    print({key: round(value, 5) for key, value in truth.items()}, flush=True)
    rows = []
    for n in args.rows:
        for level in (0.90, 0.95):
            held = {w: {key: 0 for key in KEYS} for w in WEIGHTINGS}
            width = {w: {key: [] for key in KEYS} for w in WEIGHTINGS}
            seconds = {w: [] for w in WEIGHTINGS}
            for draw in range(args.draws):
                probs, labels, _ = known_ce_data(n, K, TEMPERATURE, np.random.default_rng([n, draw]))
                for weighting in WEIGHTINGS:
                    found, spent = intervals(probs, labels, level, weighting)
                    seconds[weighting].append(spent)
                    for key in KEYS:
                        lo, hi = found[key]
                        held[weighting][key] += lo <= truth[key] <= hi
                        width[weighting][key].append(hi - lo)
            for weighting in WEIGHTINGS:
                row = {"rows": n, "level": level, "weights": weighting}
                for key in KEYS:
                    row[f"{key} covered"] = round(held[weighting][key] / args.draws, 3)
                    row[f"{key} width"] = round(float(np.median(width[weighting][key])), 5)
                row["seconds (median)"] = round(float(np.median(seconds[weighting])), 3)
                rows.append(row)
                print(row, flush=True)
    write_results(args.out, "bootstrap_weights", rows)


if __name__ == "__main__":
    main()
