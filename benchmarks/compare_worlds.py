"""``calib compare`` against worlds whose truth is known (docs/compare.md, "Measured"):

    python -m benchmarks.compare_worlds --draws 200

1. The synthetic worlds of calib.synth.shift (none, label shift, calibration decay, new concept),
   ``--draws`` pairs of batches of 5,000 rows each: how often each verdict is called, with labels
   on NEW; and without them, how often label shift is called and how far EM's priors are from the
   truth (L1).
2. Real logits (tests/data: CIFAR-10 and CIFAR-100 ResNet-110 test sets), ``--real-draws`` seeded
   random halves (:func:`real`); ``--draws 0`` runs these alone. Beside EM's error, the error of
   the same EM on probabilities that are exactly calibrated by construction (:func:`oracle`): what
   the predictions' own uncertainty allows at this many rows.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from calib.api import as_predictions
from calib.drift import compare
from calib.synth.shift import WORLDS, shift_world

DATA = os.path.join(os.path.dirname(__file__), os.pardir, "tests", "data")


def _verdicts(pairs, bootstrap: int) -> dict:
    counts: dict = {}
    for i, (ref_logits, ref_labels, new_logits, new_labels) in enumerate(pairs):
        report = compare(
            as_predictions(ref_logits, ref_labels), as_predictions(new_logits, new_labels), bootstrap=bootstrap, seed=i
        )
        counts[report["verdict"]] = counts.get(report["verdict"], 0) + 1
    return counts


def synthetic(draws: int, unlabelled_draws: int, bootstrap: int, n: int) -> None:
    print(f"| world | {' | '.join(WORLDS)} | seconds |\n|---|" + "---:|" * (len(WORLDS) + 1))
    rng = np.random.default_rng(2026)
    for world in WORLDS:
        start = time.perf_counter()
        worlds = [shift_world(world, n, rng) for _ in range(draws)]
        counts = _verdicts([(w["ref_logits"], w["ref_labels"], w["new_logits"], w["new_labels"]) for w in worlds], bootstrap)
        cells = " | ".join(str(counts.get(v, 0)) for v in WORLDS)
        print(f"| {world} | {cells} | {time.perf_counter() - start:.0f} |", flush=True)
    if not unlabelled_draws:
        return
    print(
        "\nWithout labels on NEW:\n\n| world | label shift called | none called | EM priors' L1 error: median, 95th percentile |\n|---|---:|---:|---|"
    )
    for world in ("none", "label shift"):
        called, errors = 0, []
        for i in range(unlabelled_draws):
            w = shift_world(world, n, rng)
            report = compare(
                as_predictions(w["ref_logits"], w["ref_labels"]), as_predictions(w["new_logits"]), bootstrap=bootstrap, seed=i
            )
            called += report["verdict"] == "label shift"
            errors.append(np.abs(np.array(report["priors"]["new"]) - w["new_priors"]).sum())
        print(
            f"| {world} | {called} | {unlabelled_draws - called} | {np.median(errors):.4f}, {np.quantile(errors, 0.95):.4f} |",
            flush=True,
        )


def real(name: str, draws: int, bootstrap: int, decay: float = 1.5) -> None:
    """Each draw splits the 10,000 test rows in seeded random halves: the first is the reference;
    the new batch is the second half as it is (none), resampled to Dirichlet(1) class priors
    (label shift, 5,000 rows), or with its logits times ``decay`` (calibration decay)."""
    data = np.load(os.path.join(DATA, f"{name}_resnet110_test.npz"))
    logits, labels = data["logits"].astype(np.float64), data["labels"]
    k = logits.shape[1]
    rng = np.random.default_rng(7)
    worlds: dict = {"none": [], "label shift": [], "calibration decay": []}
    prior_errors, stated = [], []
    for _ in range(draws):
        order = rng.permutation(len(labels))
        ref, rest = order[:5000], order[5000:]
        priors = rng.dirichlet(np.ones(k))
        new_labels = rng.choice(k, size=5000, p=priors)
        pools = [rest[labels[rest] == c] for c in range(k)]
        rows = np.array([rng.choice(pools[c]) for c in new_labels])
        worlds["none"].append((logits[ref], labels[ref], logits[rest], labels[rest]))
        worlds["label shift"].append((logits[ref], labels[ref], logits[rows], labels[rows]))
        worlds["calibration decay"].append((logits[ref], labels[ref], decay * logits[rest], labels[rest]))
        unlabelled = compare(as_predictions(logits[ref], labels[ref]), as_predictions(logits[rows]), bootstrap=bootstrap)
        prior_errors.append(np.abs(np.array(unlabelled["priors"]["new"]) - np.bincount(labels[rows], minlength=k) / 5000).sum())
        stated.append(unlabelled["priors"]["l1_noise"])
    for world, pairs in worlds.items():
        shown = f"{world} (logits x {decay:g})" if world == "calibration decay" else world
        print(f"| {name} | {shown} | {_verdicts(pairs, bootstrap)} |", flush=True)
    print(
        f"| {name} | EM priors without labels | L1 error to the batch's label shares: median {np.median(prior_errors):.4f}, max {np.max(prior_errors):.4f}; stated sampling noise (l1_noise) median {np.median(stated):.4f} |"
    )


def oracle(name: str, draws: int, rows: int = 5000) -> list[float]:
    """EM's L1 error to the batch's label shares when the probabilities are the truth: the test
    set's logits temperature-scaled on its own labels are taken as each row's true probabilities,
    labels are drawn from them, and the halves are resampled to Dirichlet(1) priors as in
    :func:`real`. No estimator from these predictions does much better (EM is the maximum-likelihood
    estimate, and its fixed point is the expected share given the rows)."""
    from calib.calibrators.temperature import fit_inverse_temperature
    from calib.core.numerics import softmax
    from calib.drift import em_priors

    data = np.load(os.path.join(DATA, f"{name}_resnet110_test.npz"))
    logits, labels = data["logits"].astype(np.float64), data["labels"]
    k = logits.shape[1]
    probs = softmax(fit_inverse_temperature(logits, labels) * logits)
    rng = np.random.default_rng(11)
    errors = []
    for _ in range(draws):
        drawn = (rng.random((len(probs), 1)) > np.cumsum(probs, axis=1)).sum(axis=1).clip(0, k - 1)
        order = rng.permutation(len(drawn))
        ref, rest = order[:rows], order[rows:]
        new_labels = rng.choice(k, size=rows, p=rng.dirichlet(np.ones(k)))
        pools = [rest[drawn[rest] == c] for c in range(k)]
        picked = np.array([rng.choice(pools[c] if len(pools[c]) else rest) for c in new_labels])
        estimate, _ = em_priors(probs[picked], np.bincount(drawn[ref], minlength=k) / rows)
        errors.append(float(np.abs(estimate - np.bincount(drawn[picked], minlength=k) / rows).sum()))
    return errors


def decay_scores(draws: int, factors=(1.2, 1.3)) -> None:
    """The decay test with each score (``decay_score``): ``draws`` seeded random halves of each test
    set unchanged, and ``draws`` // 2 of CIFAR-10 with the second half's logits times each factor;
    how often each verdict is called."""
    for name in ("cifar100", "cifar10"):
        data = np.load(os.path.join(DATA, f"{name}_resnet110_test.npz"))
        logits, labels = data["logits"].astype(np.float64), data["labels"]
        worlds = [("none", 1.0, draws)] + ([(f"logits x {f:g}", f, draws // 2) for f in factors] if name == "cifar10" else [])
        for world, factor, count in worlds:
            rng = np.random.default_rng(99)
            calls: dict = {"log_loss": {}, "brier": {}}
            for i in range(count):
                order = rng.permutation(len(labels))
                ref, rest = order[:5000], order[5000:]
                for score, tally in calls.items():
                    found = compare((logits[ref], labels[ref]), (factor * logits[rest], labels[rest]), decay_score=score, seed=i)
                    tally[found["verdict"]] = tally.get(found["verdict"], 0) + 1
            print(f"| {name} | {world} | {count} | {calls['log_loss']} | {calls['brier']} |", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--unlabelled-draws", type=int, default=100)
    parser.add_argument("--real-draws", type=int, default=10)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--datasets", nargs="+", default=["cifar10", "cifar100"])
    parser.add_argument("--decay", type=float, default=1.5, help="the factor of the real logits' decay")
    parser.add_argument("--score-draws", type=int, default=0, help="also compare the decay test's two scores on this many halves")
    args = parser.parse_args(argv)
    if args.draws:
        synthetic(args.draws, args.unlabelled_draws, args.bootstrap, args.rows)
    if args.real_draws:
        print("\n| data | world | verdicts |\n|---|---|---|")
        for name in args.datasets:
            real(name, args.real_draws, args.bootstrap, args.decay)
        for name in args.datasets:
            errors = oracle(name, max(args.real_draws, 20))
            print(
                f"| {name} | EM on exactly calibrated probabilities | L1 error to the batch's label shares: "
                f"median {np.median(errors):.4f}, max {np.max(errors):.4f} |"
            )
    if args.score_draws:
        print("\n| data | world | halves | verdicts, log loss | verdicts, Brier |\n|---|---|---:|---|---|")
        decay_scores(args.score_draws)


if __name__ == "__main__":
    main()
