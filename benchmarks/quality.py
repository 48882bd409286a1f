"""Quality suite: the CMCE-paper protocol on real and synthetic predictions (not a test).

    python -m benchmarks.quality --datasets cifar10 cifar100 news20 grid-10 grid-100 grid-1000 --splits 10 --jobs 2 --out results/

Protocol (docs/benchmarks.md; the CMCE paper, section 5): each dataset's evaluation rows are split 20%
calibration / 80% test by a seeded permutation (seeds 0..splits-1); every calibrator is fitted on
the calibration rows and scored on the test rows; tables give mean (std) over the splits.

Datasets: the CIFAR-10 / CIFAR-100 ResNet-110 test logits and the 20 Newsgroups probabilities of
tests/data (10,000, 10,000 and 7,532 rows), and the Gaussian grid (docs/synth.md) with K =
10, 100, 1000: the RFF + MLP classifier's logits on 10,000 fresh points, with the true posterior, so
NLL and Brier against the truth are reported too.

Methods: the uncalibrated model, every baseline, ``cmce-ts``, and the conformal methods (mr,
conformal-ts, ats-gq with the score variant, ats-aq) at alpha 0.1 and 0.01 with msp and aps scores
(constant thresholds, as the CMCE paper's tables), and the alpha-agnostic ats-mgq / ats-maq. Metrics: the
default table of ``calib evaluate`` (accuracy, NLL, Brier, ECE, MCE, cw-ECE, CMCE, both coverage
bands) and, for conformal methods, the empirical set coverage and size. V-ECE (ws-catboost, with the
over/under split) costs 10-40 s per evaluation, so it is computed for three rows (uncalibrated, ts,
conformal-ts at alpha 0.1 msp) on the first three splits only. Dirichlet and SMS (K^2 parameters) are
left out at K = 1000, where one fit takes over ten minutes on two cores.

Writes results/quality-<dataset>.json (one row per method, split) as each dataset finishes.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from calib import calibrator_class
from calib.evaluation import SampleConfig, compute_metrics, sample_results
from calib.io import Predictions
from calib.metrics import DEFAULT_METRICS, MetricConfig

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"  # real data shipped with the tests
DATASETS = ("cifar10", "cifar100", "news20", "grid-10", "grid-100", "grid-1000")
METRICS = list(DEFAULT_METRICS)
TRUTH = ["nll_true", "brier_true"]
SETS = ["set_coverage", "set_size"]
VECE = ["vece_l1", "vece_over", "vece_under"]
BASELINES = ["ts", "platt", "quadratic", "beta", "isotonic", "hist", "dirichlet", "svs", "sms", "adaptive-ts", "venn-abers"]
QUADRATIC_IN_K = ("dirichlet", "sms")
VECE_ROWS = {("uncalibrated", ()), ("ts", ()), ("conformal-ts", (("alpha", 0.1), ("score", "msp")))}
VECE_SPLITS = 3


def configs():
    """(method, options) in table order."""
    rows = [("uncalibrated", {})] + [(name, {}) for name in BASELINES] + [("cmce-ts", {})]
    for alpha in (0.1, 0.01):
        for score in ("msp", "aps"):
            rows += [
                ("mr", {"alpha": alpha, "score": score}),
                ("conformal-ts", {"alpha": alpha, "score": score}),
                ("ats-gq", {"alpha": alpha, "score": score, "variant": "score"}),
                ("ats-aq", {"alpha": alpha, "score": score}),
            ]
    rows += [("ats-mgq", {}), ("ats-maq", {})]
    return rows


def load(dataset: str) -> dict:
    """{"scores", "kind", "labels", "true_probs"?} of the dataset's evaluation rows."""
    if dataset in ("cifar10", "cifar100"):
        data = np.load(SHARED / f"{dataset}_resnet110_test.npz")
        return {"scores": data["logits"], "kind": "logits", "labels": data["labels"]}
    if dataset == "news20":
        data = np.load(SHARED / "news20_probs.npz")
        return {"scores": data["probs"], "kind": "probs", "labels": data["labels"]}
    from calib.synth.gaussian_grid import make_gaussian_grid

    k = int(dataset.split("-")[1])
    grid = make_gaussian_grid(k, 100, 10_000, seed=0)["test"]
    return {"scores": grid["logits"], "kind": "logits", "labels": grid["labels"], "true_probs": grid["true_probs"]}


def split(data: dict, seed: int) -> tuple[Predictions, Predictions]:
    """(calibration, test) predictions: a seeded 20% / 80% split of the rows."""
    n = len(data["labels"])
    order = np.random.default_rng(seed).permutation(n)
    parts = []
    for rows in (np.sort(order[: n // 5]), np.sort(order[n // 5 :])):
        truth = data.get("true_probs")
        parts.append(
            Predictions(
                "split",
                np.asarray(data["scores"][rows], dtype=np.float64),
                data["kind"],
                "",
                data["labels"][rows],
                "",
                true_probs=None if truth is None else truth[rows],
            )
        )
    return parts[0], parts[1]


def run_dataset(dataset: str, splits: int, out: Path, vece_only: bool = False) -> list[dict]:
    """Every method's row of every split, written to quality-<dataset>.json as each split ends.
    ``vece_only``: only the V-ECE cells (their rows and splits, the same fits and seeds), to rerun
    them alone when V-ECE's default changes; written to quality-<dataset>-vece.json."""
    start = time.perf_counter()
    data = load(dataset)
    k = data["scores"].shape[1]
    print(f"{dataset}: {len(data['labels'])} x {k} loaded in {time.perf_counter() - start:.0f} s", flush=True)
    metrics = METRICS + (TRUTH if "true_probs" in data else [])
    rows = []
    for seed in range(VECE_SPLITS if vece_only else splits):
        cal, test = split(data, seed)
        for method, options in configs():
            with_vece = (method, tuple(options.items())) in VECE_ROWS and seed < VECE_SPLITS
            if (method in QUADRATIC_IN_K and k >= 1000) or (vece_only and not with_vece):
                continue
            row = {"dataset": dataset, "split": seed, "method": method, **options}
            began = time.perf_counter()
            calibrator = None
            if method != "uncalibrated":
                cls = calibrator_class(method)
                calibrator = cls(cls.parse_options(options)).fit(cal.all_logits(), cal.labels, seed=seed)
            values = {} if vece_only else compute_metrics(test, metrics, MetricConfig(), calibrator)[0]
            if with_vece:
                values.update(sample_results(test, VECE, SampleConfig(seed=seed), calibrator))
            row["seconds"] = round(time.perf_counter() - began, 2)
            row.update({key: entry["value"] for key, entry in values.items()})
            rows.append(row)
        print(f"{dataset}: split {seed} done at {time.perf_counter() - start:.0f} s", flush=True)
        Path(out, f"quality-{dataset}{'-vece' if vece_only else ''}.json").write_text(json.dumps(rows, indent=1))
    return rows


def label(row: dict) -> str:
    options = [f"{key} {row[key]}" for key in ("alpha", "score", "variant") if key in row]
    return row["method"] + (f" ({', '.join(options)})" if options else "")


def table(rows: list[dict]) -> str:
    """Markdown: mean (std) over splits per method; V-ECE columns over the splits that have them."""
    columns = [c for c in METRICS + TRUTH + SETS + VECE + ["seconds"] if any(r.get(c) is not None for r in rows)]
    lines = [
        "| method | " + " | ".join(c.replace("coverage_", "cov ") for c in columns) + " |",
        "|" + "---|" * (len(columns) + 1),
    ]
    for name in dict.fromkeys(label(r) for r in rows):
        group = [r for r in rows if label(r) == name]
        cells = []
        for column in columns:
            values = [r[column] for r in group if r.get(column) is not None]
            if not values:
                cells.append("")
            elif column == "seconds":
                cells.append(f"{np.mean(values):.1f}")
            else:
                cells.append(f"{np.mean(values):.4f} ± {np.std(values):.4f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def finished(dataset: str, splits: int, out: Path) -> list[dict] | None:
    """The rows of an earlier run of ``dataset`` that completed every split, else None."""
    path = Path(out, f"quality-{dataset}.json")
    if not path.exists():
        return None
    rows = json.loads(path.read_text())
    return rows if {r["split"] for r in rows} >= set(range(splits)) else None


def run_all(datasets, splits: int, out: Path, jobs: int = 1, resume: bool = False) -> dict:
    """{dataset: Markdown table}; datasets run ``jobs`` at a time in separate processes, and with
    ``resume`` a dataset whose results file already holds every split is read, not rerun."""
    os.makedirs(out, exist_ok=True)
    results = {d: finished(d, splits, out) if resume else None for d in datasets}
    todo = [d for d in datasets if results[d] is None]
    if jobs > 1 and len(todo) > 1:
        from concurrent.futures import ProcessPoolExecutor

        os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per dataset: torch and BLAS threads would collide
        with ProcessPoolExecutor(jobs) as pool:
            for dataset, rows in zip(todo, pool.map(run_dataset, todo, [splits] * len(todo), [out] * len(todo))):
                results[dataset] = rows
    else:
        for dataset in todo:
            results[dataset] = run_dataset(dataset, splits, out)
    tables = {}
    for dataset in datasets:
        tables[dataset] = table(results[dataset])
        Path(out, f"quality-{dataset}.md").write_text(tables[dataset] + "\n")
    return tables


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=1, help="datasets run at once, each in its own process")
    parser.add_argument("--resume", action="store_true", help="read datasets whose results file has every split")
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument("--vece-only", action="store_true", help="rerun only the V-ECE cells (quality-<dataset>-vece.json)")
    args = parser.parse_args(argv)
    if args.vece_only:
        os.makedirs(args.out, exist_ok=True)
        tables = {dataset: table(run_dataset(dataset, args.splits, args.out, vece_only=True)) for dataset in args.datasets}
        for dataset, text in tables.items():
            print(f"{dataset}\n\n{text}\n", flush=True)
        return tables
    tables = run_all(args.datasets, args.splits, args.out, args.jobs, args.resume)
    for dataset, text in tables.items():
        print(f"{dataset}\n\n{text}\n", flush=True)
    return tables


if __name__ == "__main__":
    main()
