"""Estimates for batches without labels against the truth their labels give, on worlds where the
estimate must hold and worlds where it cannot (docs/estimation.md). Not a test.

    python -m benchmarks.unlabelled_estimates --batches 200 --rows 2000 10000 --out results/

Temperature scaling is fitted on the validation logits of ResNet-110 on CIFAR-10 and CIFAR-100 (the
reference rows, recorded as a bundle records them); each batch draws rows of the test logits:

- ``same priors``: rows uniformly, with replacement;
- ``label shift``: the batch's class shares drawn from Dirichlet(1, ..., 1), rows of each class
  uniformly: the estimate corrected for label shift (``_shifted``) must hold;
- ``another model's labels`` (CIFAR-10): rows uniformly, each label drawn from ResNet-50's softmax
  on the same image (a concept change the scores cannot show);
- ``another model's scores`` (CIFAR-10): rows uniformly, the scores ResNet-50's logits of the same
  images, the labels their own (a new model under the old model's map);
- ``logits x 2``: rows uniformly, their logits doubled before the map (a covariate shift that moves
  rows beyond the fitted support).

Per world and n: how often the realised accuracy (and log loss) lies in the 95% interval, the median
absolute error, and how often the checks call the batch unreliable; for both estimators (debiased,
the default, and cbpe). Writes results/unlabelled_estimates.{json,md}.

Partial labels (results/partial_labels.{json,md}): batches of 5,000 test rows of which 200 keep their
labels, the map sound or decayed (the logits doubled after the fit): how often the labelled rows'
calibration test finds the map broken, holding or cannot tell, and how often the batch is called
unreliable.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from statistics import NormalDist

import numpy as np

import calib
from benchmarks.results import write_results
from calib.core.numerics import softmax
from calib.estimation import estimate_batch
from calib.estimation.reference import ReferenceRows
from calib.estimation.report import EstimationSettings, estimate_report

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def _as(estimator: str, estimate):
    """The as-calibrated estimate as ``estimator`` gives it, from the debiased one (one estimation a
    batch: EM's bootstrap is the cost): cbpe takes the bias correction d off the value and counts d^2
    as noise (calib.estimation.batch; tests/unit/estimation/test_batch.py checks the relation)."""
    if estimator == "debiased":
        return estimate
    d = estimate.bias_correction
    sd = float(np.sqrt(estimate.sd**2 + d * d))
    z = NormalDist().inv_cdf(0.975)
    value = estimate.value - d
    return dataclasses.replace(estimate, value=value, lower=value - z * sd, upper=value + z * sd, sd=sd)


def _world_rows(world: str, n: int, labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if world != "label shift":
        return rng.integers(0, len(labels), n)
    k = labels.max() + 1
    counts = rng.multinomial(n, rng.dirichlet(np.ones(k)))
    by_class = [np.flatnonzero(labels == c) for c in range(k)]
    return np.concatenate([rng.choice(by_class[c], counts[c]) for c in range(k) if counts[c]])


def run_dataset(
    name: str, batches: int, sizes: list[int], chosen: list[str] | None = None, estimators=("debiased", "cbpe")
) -> list[dict]:
    val, test = (np.load(DATA / f"{name}_resnet110_{part}.npz") for part in ("val", "test"))
    fitted = calib.calibrator("ts").fit(calib.api.as_predictions(val["logits"], val["labels"]))
    reference = ReferenceRows.of(fitted.predict_proba(val["logits"]), val["logits"].astype(np.float64), val["labels"])
    logits = test["logits"].astype(np.float64)
    worlds = {
        "same priors": (logits, test["labels"]),
        "label shift": (logits, test["labels"]),
        "logits x 2": (2 * logits, test["labels"]),
    }
    other = None
    if name == "cifar10":
        resnet50 = np.load(DATA / "cifar10_resnet50.npz")["test_logits"]
        worlds["another model's labels"] = (logits, test["labels"])
        worlds["another model's scores"] = (resnet50.astype(np.float64), test["labels"])
        other = softmax(resnet50)
    rows = []
    for world, (scores, labels) in worlds.items():
        if chosen and world not in chosen:
            continue
        probs = fitted.predict_proba(scores)
        for n in sizes:
            found = {est: {"covered": 0, "nll_covered": 0, "errors": [], "unreliable": 0} for est in estimators}
            for b in range(batches):
                rng = np.random.default_rng([b, n, 67])
                take = _world_rows(world, n, labels, rng)
                batch_labels = labels[take]
                if world == "another model's labels":
                    cumulative = other[take].cumsum(axis=1)
                    batch_labels = (rng.random(n)[:, None] > cumulative).sum(axis=1).clip(max=other.shape[1] - 1)
                p = probs[take]
                truth = float(np.mean(p.argmax(axis=1) == batch_labels))
                truth_nll = float(-np.mean(np.log(np.maximum(p[np.arange(n), batch_labels], 1e-12))))
                result = estimate_batch(p, scores[take], reference, seed=b)
                key = "est_accuracy_shifted" if world == "label shift" else "est_accuracy"
                for est, tally in found.items():
                    if world == "label shift" and est == "cbpe":  # the shifted cbpe estimate is its own computation
                        estimates = estimate_batch(p, scores[take], reference, seed=b, estimator=est).estimates
                        acc, nll = estimates[key], estimates[key.replace("accuracy", "nll")]
                    else:
                        acc, nll = (_as(est, result.estimates[k]) for k in (key, key.replace("accuracy", "nll")))
                    tally["covered"] += acc.lower <= truth <= acc.upper
                    tally["nll_covered"] += nll.lower <= truth_nll <= nll.upper
                    tally["errors"].append(abs(acc.value - truth))
                    tally["unreliable"] += not result.reliable
            for est, tally in found.items():
                rows.append(
                    {
                        "data": name,
                        "world": world,
                        "n": n,
                        "estimator": est,
                        "accuracy covered": f"{tally['covered'] / batches:.1%}",
                        "log loss covered": f"{tally['nll_covered'] / batches:.1%}",
                        "median absolute error (points)": f"{100 * np.median(tally['errors']):.2f}",
                        "unreliable": f"{tally['unreliable'] / batches:.1%}",
                    }
                )
                print(rows[-1], flush=True)
    return rows


def run_partial(name: str, batches: int, rows: int = 5000, labelled: int = 200) -> list[dict]:
    val, test = (np.load(DATA / f"{name}_resnet110_{part}.npz") for part in ("val", "test"))
    fitted = calib.calibrator("ts").fit(calib.api.as_predictions(val["logits"], val["labels"]))
    reference = ReferenceRows.of(fitted.predict_proba(val["logits"]), val["logits"].astype(np.float64), val["labels"])
    out = []
    worlds = [("sound", 1.0), ("decayed (logits x 2)", 2.0)]
    other = None
    if name == "cifar10":
        worlds.append(("another model's labels", 1.0))
        other = softmax(np.load(DATA / "cifar10_resnet50.npz")["test_logits"])
    for world, scale in worlds:
        logits = scale * test["logits"].astype(np.float64)
        probs = fitted.predict_proba(logits)
        tally = {"broken": 0, "holds": 0, "inconclusive": 0, "unreliable": 0}
        for b in range(batches):
            rng = np.random.default_rng([b, rows, 69])
            take = rng.choice(len(logits), rows, replace=False)
            truth = test["labels"][take]
            if world == "another model's labels":
                truth = (rng.random(rows)[:, None] > other[take].cumsum(axis=1)).sum(axis=1).clip(max=other.shape[1] - 1)
            labels = np.full(rows, -1)
            keep = rng.choice(rows, labelled, replace=False)
            labels[keep] = truth[keep]
            report = estimate_report(probs[take], logits[take], labels, reference, EstimationSettings(seed=b))
            tally[report.test.outcome] += 1
            tally["unreliable"] += not report.reliable
        out.append(
            {
                "data": name,
                "world": world,
                "rows": rows,
                "labelled": labelled,
                **{k: f"{v / batches:.1%}" for k, v in tally.items()},
            }
        )
        print(out[-1], flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--rows", type=int, nargs="+", default=[2000, 10000])
    parser.add_argument("--data", nargs="+", default=["cifar10", "cifar100"])
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument("--no-partial", action="store_true", help="skip the partial labels' batches")
    parser.add_argument("--suffix", default="", help="appended to the results' names (runs split by data or rows)")
    parser.add_argument("--worlds", nargs="+", default=None, help="only these worlds")
    parser.add_argument("--estimators", nargs="+", default=["debiased", "cbpe"])
    args = parser.parse_args()
    if not args.no_partial:
        write_results(
            args.out, "partial_labels" + args.suffix, [row for name in args.data for row in run_partial(name, args.batches)]
        )
    rows = [row for name in args.data for row in run_dataset(name, args.batches, args.rows, args.worlds, tuple(args.estimators))]
    write_results(args.out, "unlabelled_estimates" + args.suffix, rows)


if __name__ == "__main__":
    main()
