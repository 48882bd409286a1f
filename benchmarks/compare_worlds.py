"""``calib compare`` against worlds whose truth is known (docs/compare.md, "Measured"):

    python -m benchmarks.compare_worlds --draws 200 --real-draws 200

1. The synthetic worlds of calib.synth.shift (none, label shift, calibration decay, new concept, a
   worse model by 5, 20 and 60 accuracy points, a better one by 5), ``--draws`` pairs of batches of
   ``--rows`` rows each: how often each verdict is called, with labels on NEW; and without them,
   how often label shift is called and how far EM's priors are from the truth (L1).
2. Real logits (tests/data: CIFAR-10 and CIFAR-100 ResNet-110 test sets), ``--real-draws`` seeded
   random halves (:func:`real_worlds`): unchanged, resampled to other class priors, decayed, and a
   weaker (stronger) model: the logits with part of their signal replaced by noise. Beside EM's
   error, the error of the same EM on probabilities that are exactly calibrated by construction
   (:func:`oracle`): what the predictions' own uncertainty allows at this many rows.

Every table row says how often the world's own verdict (calib.synth.shift.EXPECTED) was called and
how often "none" was, and the largest accuracy change, in standard errors, that was called "none".
``--jobs 2`` runs the pairs on two processes.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from calib.drift import ComparisonRequest, compare
from calib.synth.shift import EXPECTED, WORLDS, shift_world

DATA = os.path.join(os.path.dirname(__file__), os.pardir, "tests", "data")
#: The accuracy points the weaker models of the real worlds lose (and the stronger one gains)
DROPS = (5, 20, 60)
#: The real worlds and the verdict each must get
REAL_EXPECTED = {
    "none": "none",
    "label shift": "label shift",
    "calibration decay (logits x 1.5)": "calibration decay",
    **{f"worse model (-{d} points)": "performance loss" for d in DROPS},
    "better model (+5 points)": "performance gain",
}


def _verdict(pair) -> tuple[str, float]:
    """(the verdict of one pair, its accuracy change in standard errors)."""
    seed, ref_logits, ref_labels, new_logits, new_labels = pair
    report = compare((ref_logits, ref_labels), (new_logits, new_labels), ComparisonRequest(seed=seed))
    accuracy = report.whole.metrics["accuracy"]
    sd = np.std(report.whole.replicates["accuracy"], ddof=1)
    return report.verdict, abs(accuracy.value) / sd if sd > 0 else 0.0


def _tally(world: str, expected: str, pairs, jobs: int, started: float, label: str = "") -> None:
    with ProcessPoolExecutor(jobs) as pool:
        found = list(pool.map(_verdict, pairs, chunksize=4))
    verdicts = [verdict for verdict, _ in found]
    counts = {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}
    missed = [z for verdict, z in found if verdict == "none"]
    largest = f"{max(missed):.2f}" if missed else "-"
    shown = ", ".join(f"{v} {c}" for v, c in sorted(counts.items(), key=lambda item: -item[1]))
    print(
        f"| {label}{world} | {expected} | **{counts.get(expected, 0)}** of {len(pairs)} | {counts.get('none', 0)} | {largest} | "
        f"{shown} | {time.perf_counter() - started:.0f} |",
        flush=True,
    )


HEADER = "| world | its verdict | called | called none | largest accuracy change called none (SE) | all verdicts | seconds |\n|---|---|---:|---:|---:|---|---:|"


def synthetic(draws: int, unlabelled_draws: int, n: int, jobs: int) -> None:
    print(HEADER)
    rng = np.random.default_rng(2026)
    for world in WORLDS:
        started = time.perf_counter()
        worlds = [shift_world(world, n, rng) for _ in range(draws)]
        pairs = [(i, w["ref_logits"], w["ref_labels"], w["new_logits"], w["new_labels"]) for i, w in enumerate(worlds)]
        _tally(world, EXPECTED[world], pairs, jobs, started)
    if not unlabelled_draws:
        return
    print(
        "\nWithout labels on NEW:\n\n| world | label shift called | none called | EM priors' L1 error: median, 95th percentile | seconds |\n|---|---:|---:|---|---:|"
    )
    for world in ("none", "label shift"):
        started, called, errors = time.perf_counter(), 0, []
        for i in range(unlabelled_draws):
            w = shift_world(world, n, rng)
            report = compare((w["ref_logits"], w["ref_labels"]), w["new_logits"], ComparisonRequest(seed=i))
            called += report.verdict == "label shift"
            errors.append(np.abs(np.array(report.whole.priors["new"]) - w["new_priors"]).sum())
        print(
            f"| {world} | {called} | {unlabelled_draws - called} | {np.median(errors):.4f}, {np.quantile(errors, 0.95):.4f} | "
            f"{time.perf_counter() - started:.0f} |",
            flush=True,
        )


def _load(name: str) -> tuple[np.ndarray, np.ndarray]:
    data = np.load(os.path.join(DATA, f"{name}_resnet110_test.npz"))
    return data["logits"].astype(np.float64), data["labels"]


def weaker_noise(logits: np.ndarray, labels: np.ndarray, drop: float, seed: int = 3) -> float:
    """The noise sd s for which logits + s N(0, I) (one seeded draw) is ``drop`` less accurate on these rows."""
    from scipy.optimize import brentq

    noise = np.random.default_rng(seed).standard_normal(logits.shape)
    base = (logits.argmax(axis=1) == labels).mean()

    def short(s):
        return ((logits + s * noise).argmax(axis=1) == labels).mean() - (base - drop)

    return brentq(short, 0.0, 1000.0, xtol=1e-4)


def shifted_rows(rows: np.ndarray, labels: np.ndarray, priors: np.ndarray, rng) -> np.ndarray:
    """As many of ``rows`` as can be drawn without repeating one at class shares ``priors`` (each
    class's count round(n pi_k) at most its rows): a batch of another label distribution whose rows
    are as independent as the reference's (rows drawn twice would make any test on the batch
    understate its noise)."""
    pools = [rng.permutation(rows[labels == c]) for c in range(len(priors))]
    available = np.array([len(pool) for pool in pools])
    n = int(min(len(rows), np.min(np.where(priors > 0, available / np.maximum(priors, 1e-300), np.inf))))
    counts = np.minimum(np.round(n * priors).astype(int), available)
    return np.concatenate([pool[:count] for pool, count in zip(pools, counts)])


def real_worlds(name: str, draws: int) -> dict[str, list]:
    """Each draw splits the 10,000 test rows in seeded random halves: the first is REF. NEW is the
    second half as it is (none); as many of its rows as make Dirichlet(1) class priors without
    repeating a row (label shift, :func:`shifted_rows`); its logits x 1.5 (decay); its logits + s N(0, I), s setting the accuracy D points lower
    on the whole test set (a weaker model: part of the signal replaced by noise, fresh noise each
    draw); and REF that weaker model by 5 points with NEW as it is (a stronger model)."""
    logits, labels = _load(name)
    k = logits.shape[1]
    noise = {d: weaker_noise(logits, labels, d / 100.0) for d in DROPS}
    rng = np.random.default_rng(7)
    worlds: dict = {world: [] for world in REAL_EXPECTED}
    for i in range(draws):
        order = rng.permutation(len(labels))
        ref, rest = order[:5000], order[5000:]
        rows = shifted_rows(rest, labels[rest], rng.dirichlet(np.ones(k)), rng)
        worlds["none"].append((i, logits[ref], labels[ref], logits[rest], labels[rest]))
        worlds["label shift"].append((i, logits[ref], labels[ref], logits[rows], labels[rows]))
        worlds["calibration decay (logits x 1.5)"].append((i, logits[ref], labels[ref], 1.5 * logits[rest], labels[rest]))
        for d in DROPS:
            weaker = logits[rest] + noise[d] * rng.standard_normal(logits[rest].shape)
            worlds[f"worse model (-{d} points)"].append((i, logits[ref], labels[ref], weaker, labels[rest]))
        weaker_ref = logits[ref] + noise[5] * rng.standard_normal(logits[ref].shape)
        worlds["better model (+5 points)"].append((i, weaker_ref, labels[ref], logits[rest], labels[rest]))
    return worlds


def real(name: str, draws: int, jobs: int) -> None:
    for world, pairs in real_worlds(name, draws).items():
        _tally(world, REAL_EXPECTED[world], pairs, jobs, time.perf_counter(), f"{name}: ")


def unlabelled_real(name: str, draws: int) -> None:
    """EM's priors of NEW without its labels, on the label-shift halves of :func:`real_worlds`."""
    logits, labels = _load(name)
    k = logits.shape[1]
    rng = np.random.default_rng(7)
    errors, stated = [], []
    for _ in range(draws):
        order = rng.permutation(len(labels))
        ref, rest = order[:5000], order[5000:]
        shifted = rng.choice(k, size=5000, p=rng.dirichlet(np.ones(k)))
        pools = [rest[labels[rest] == c] for c in range(k)]
        rows = np.array([rng.choice(pools[c]) for c in shifted])
        report = compare((logits[ref], labels[ref]), logits[rows])
        errors.append(np.abs(np.array(report.whole.priors["new"]) - np.bincount(labels[rows], minlength=k) / 5000).sum())
        stated.append(report.whole.priors["l1_noise"])
    print(
        f"| {name} | EM priors without labels | L1 error to the batch's label shares: median {np.median(errors):.4f}, "
        f"max {np.max(errors):.4f}; stated sampling noise (l1_noise) median {np.median(stated):.4f} |"
    )


def oracle(name: str, draws: int, rows: int = 5000) -> list[float]:
    """EM's L1 error to the batch's label shares when the probabilities are the truth: the test
    set's logits temperature-scaled on its own labels are taken as each row's true probabilities,
    labels are drawn from them, and the halves are resampled to Dirichlet(1) priors as in
    :func:`real_worlds`. No estimator from these predictions does much better (EM is the
    maximum-likelihood estimate, and its fixed point is the expected share given the rows)."""
    from calib.calibrators.temperature import fit_inverse_temperature
    from calib.core.numerics import softmax
    from calib.drift.priors import em_priors

    logits, labels = _load(name)
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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--unlabelled-draws", type=int, default=100)
    parser.add_argument("--real-draws", type=int, default=200)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--datasets", nargs="+", default=["cifar10", "cifar100"])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--em-draws", type=int, default=10, help="label-shift halves for EM's error without labels")
    args = parser.parse_args(argv)
    if args.draws:
        synthetic(args.draws, args.unlabelled_draws, args.rows, args.jobs)
    if args.real_draws:
        print("\n" + HEADER)
        for name in args.datasets:
            real(name, args.real_draws, args.jobs)
    if args.em_draws:
        print("\n| data | what | measured |\n|---|---|---|")
        for name in args.datasets:
            unlabelled_real(name, args.em_draws)
            errors = oracle(name, max(args.em_draws, 20))
            print(
                f"| {name} | EM on exactly calibrated probabilities | L1 error to the batch's label shares: "
                f"median {np.median(errors):.4f}, max {np.max(errors):.4f} |"
            )


if __name__ == "__main__":
    main()
