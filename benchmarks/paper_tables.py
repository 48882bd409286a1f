"""Paper-style quality tables (not tests): fit on a calibration split, evaluate on a test split.

    python -m benchmarks.paper_tables cifar100 --out results/   # the CMCE paper Table 1 style, CIFAR-100
    python -m benchmarks.paper_tables cifar10 --out results/
    python -m benchmarks.paper_tables grid --classes 10 100 1000 --out results/   # the CMCE paper figure 1
    python -m benchmarks.paper_tables grid-ovr --classes 10 100 1000 --out results/   # one-vs-rest vs K
    python -m benchmarks.paper_tables grid-ovr-truth --classes 10000 --out results/   # the same at K = 10,000
    python -m benchmarks.paper_tables cifar10-baselines --out results/   # every baseline, through the CLI
    python -m benchmarks.paper_tables ats-cp-tables --seeds 5 --out results/   # the ATS-CP paper Tables 5 and 2

Writes results/<suite>.json and results/<suite>.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from calib import calibrator_class
from calib.evaluation import compute_metrics
from calib.io import Predictions
from calib.metrics import MetricConfig

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"  # real data shipped with the tests
TABLE_METRICS = ["accuracy", "ece", "mce", "cw_ece", "nll", "brier", "cmce", "coverage_0.9_0.92", "coverage_0.99_0.995"]
GRID_METRICS = ["accuracy", "nll_true", "brier_true", "cmce", "cpsme_avg", "ece"]


def conformal_configs(alphas=(0.1, 0.01)):
    """Every conformal method at each alpha, score and threshold."""
    configs = [("uncalibrated", {}), ("ts", {}), ("cmce-ts", {})]
    for alpha in alphas:
        for score in ("msp", "aps"):
            for threshold in ("constant", "adaptive"):
                configs.append(("mr", {"alpha": alpha, "score": score, "threshold": threshold}))
                configs.append(("conformal-ts", {"alpha": alpha, "score": score, "threshold": threshold}))
            configs.append(("ats-gq", {"alpha": alpha, "score": score, "variant": "score"}))
            configs.append(("ats-aq", {"alpha": alpha, "score": score}))
    return configs


def evaluate_config(method, options, cal, test, metrics, seed=0):
    preds = Predictions("test", test["logits"], "logits", "", test["labels"], "", true_probs=test.get("true_probs"))
    start = time.perf_counter()
    calibrator = None
    if method != "uncalibrated":
        cls = calibrator_class(method)
        calibrator = cls(cls.parse_options(options)).fit(np.asarray(cal["logits"], dtype=np.float64), cal["labels"], seed=seed)
    values, before = compute_metrics(preds, metrics, MetricConfig(), calibrator)
    row = {"method": method, **options, "seconds": round(time.perf_counter() - start, 2)}
    row.update({k: v["value"] for k, v in values.items()})
    return row


def markdown(rows, metrics):
    keys = ["method", "alpha", "score", "threshold", "variant"]
    extra = [k for k in ("set_coverage", "set_size") if any(k in r for r in rows)]
    head = keys + metrics + extra
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r.get(k, "")) for k in keys]
        cells += ["n/a" if r.get(k) is None else f"{r[k]:.4f}" for k in metrics + extra]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cifar(name, out):
    cal = dict(np.load(SHARED / f"{name}_resnet110_val.npz"))
    test = dict(np.load(SHARED / f"{name}_resnet110_test.npz"))
    rows = []
    for method, options in conformal_configs():
        rows.append(evaluate_config(method, options, cal, test, TABLE_METRICS))
        print(json.dumps(rows[-1]), flush=True)
    return rows, TABLE_METRICS


BASELINES = ["ts", "platt", "quadratic", "beta", "isotonic", "hist", "dirichlet", "svs", "sms", "adaptive-ts", "venn-abers"]


def cli_baselines(name):
    """fit on val, apply to test, evaluate the applied probabilities: the user's chain, each step a
    ``calib`` process, timed; the metrics come from ``evaluate --json``."""
    val, test = SHARED / f"{name}_resnet110_val.npz", SHARED / f"{name}_resnet110_test.npz"
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for method in ["uncalibrated"] + BASELINES:
            row, applied = {"method": method}, test
            if method != "uncalibrated":
                bundle, applied = Path(scratch, method), Path(scratch, f"{method}.npz")
                for step, command in (
                    ("fit s", ["fit", str(val), "--method", method, "--out", str(bundle), "--force"]),
                    ("apply s", ["apply", str(bundle), str(test), "--out", str(applied)]),
                ):
                    start = time.perf_counter()
                    subprocess.run(["calib", *command], check=True, capture_output=True)
                    row[step] = round(time.perf_counter() - start, 2)
            report = subprocess.run(
                ["calib", "evaluate", str(applied), "--no-vece", "--json", "-"], check=True, capture_output=True, text=True
            ).stdout
            row.update({k: v["value"] for k, v in json.loads(report)["metrics"].items()})
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows, TABLE_METRICS + ["fit s", "apply s"]


GRID_CONFORMAL = [
    ("uncalibrated", {}),
    ("ts", {}),
    ("cmce-ts", {}),
    ("mr", {"alpha": 0.1}),
    ("conformal-ts", {"alpha": 0.1}),
    ("ats-gq", {"alpha": 0.1, "variant": "score"}),
    ("ats-aq", {"alpha": 0.1}),
]
#: One-vs-rest maps as K grows (CMCE paper reports they lose accuracy at K = 10,000).
GRID_ONE_VS_REST = [
    ("uncalibrated", {}),
    ("ts", {}),
    ("platt", {}),
    ("quadratic", {}),
    ("beta", {}),
    ("isotonic", {}),
    ("hist", {}),
    ("venn-abers", {}),
    ("svs", {}),
]


def grid_truth_ovr(classes):
    """One-vs-rest accuracy at K where training the MLP is too slow (K = 10,000): the grid's true
    posterior sharpened by T = 0.5 (logits / 0.5), 5,000 calibration and 5,000 test rows."""
    from calib.synth.gaussian_grid import make_gaussian_grid

    rows = []
    for k in classes:
        data = make_gaussian_grid(k, 5000, 5000, model="truth", seed=0)
        for split in ("cal", "test"):
            data[split]["logits"] = data[split]["logits"] / 0.5
        for method in ("uncalibrated", "ts", "hist", "isotonic", "venn-abers", "platt"):
            row = evaluate_config(method, {}, data["cal"], data["test"], ["accuracy", "nll_true", "ece"])
            row["classes"] = k
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows, ["accuracy", "nll_true", "ece"]


def grid(classes, out, configs=GRID_CONFORMAL, n_cal=5000, n_test=10000):
    from calib.synth.gaussian_grid import make_gaussian_grid

    rows = []
    for k in classes:
        start = time.perf_counter()
        n_c, n_t = (n_cal, n_test) if k <= 1000 else (5000, 5000)
        data = make_gaussian_grid(k, n_c, n_t, seed=0)
        print(
            f"K={k}: data and model in {time.perf_counter() - start:.0f} s, test accuracy {data['meta']['test_accuracy']:.3f}",
            flush=True,
        )
        for method, options in configs:
            row = evaluate_config(method, options, data["cal"], data["test"], GRID_METRICS)
            row["classes"] = k
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows, GRID_METRICS


def alpha_agnostic_configs():
    """the ATS-CP paper's methods: ATS-CP at alpha 0.1 and the alpha-agnostic ones with every aggregate."""
    configs = [
        ("uncalibrated", {}),
        ("ts", {}),
        ("platt", {}),
        ("isotonic", {}),
        ("ats-gq", {"alpha": 0.1, "variant": "prob"}),
        ("ats-gq", {"alpha": 0.1, "variant": "score"}),
        ("ats-aq", {"alpha": 0.1}),
    ]
    for aggregate in ("mean", "geometric", "kl-forward", "kl-reverse"):
        configs.append(("ats-mgq", {"aggregate": aggregate}))
        for model in ("multiqr", "flow"):
            configs.append(("ats-maq", {"model": model, "aggregate": aggregate}))
    # the paper's protocol for the methods with a model: trained on 4,000 separate rows
    configs.append(("ats-aq", {"alpha": 0.1, "train": "split"}))
    for model in ("multiqr", "flow"):
        configs.append(("ats-maq", {"model": model, "aggregate": "mean", "train": "split"}))
    return configs


def _fit_shared(method, options, cal, seed, fitted, train=None):
    """Fit, reusing an alpha-agnostic calibrator fitted with the same levels (the aggregate only
    changes the transform): the state is re-read under the new options. ``options["train"]`` =
    "split": the method's model is fitted on the ``train`` rows, not on half of ``cal``."""
    from calib.calibrators.base import TrainingRows

    cls = calibrator_class(method)
    parsed = cls.parse_options({k: v for k, v in options.items() if k != "train"})
    key = (method, tuple(sorted((k, v) for k, v in options.items() if k != "aggregate")))
    if method in ("ats-mgq", "ats-maq") and key in fitted:
        return cls.from_state(parsed, fitted[key].to_state())
    extra = {}
    if options.get("train") == "split":
        extra["train"] = TrainingRows(np.asarray(train["logits"], dtype=np.float64), train["labels"])
    calibrator = cls(parsed).fit(np.asarray(cal["logits"], dtype=np.float64), cal["labels"], seed=seed, **extra)
    fitted[key] = calibrator
    return calibrator


def ats_cp_tables(seeds, first_seed=0, cifar100_flow=True):
    """Table 5 (K = 10 Gaussians on a circle, sigma 0.75, the true posterior contaminated; CPSME per
    alpha) and Table 2 (contaminated CIFAR-100, ECE), mean and std over seeds ``first_seed`` ..
    ``first_seed + seeds - 1``. ``cifar100_flow=False`` leaves out ats-maq's flow on CIFAR-100: its
    loss cannot reach the restart bound there, so each fit runs all 11 attempts (minutes)."""
    from calib.synth.contamination import contaminate, contamination_temperatures
    from calib.synth.gaussian_grid import make_gaussian_grid

    cpsme = [f"cpsme_{a:g}" for a in (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)] + ["cpsme_avg"]
    suites = {"synthetic": cpsme + ["ece", "nll_true"], "cifar100": ["accuracy", "ece", "nll", "cmce"]}
    rows = []
    for seed in range(first_seed, first_seed + seeds):
        rng = np.random.default_rng(1000 + seed)
        grid = make_gaussian_grid(10, 4000, 2000, sigma=0.75, layout="circle", model="truth", seed=seed)
        # training rows for the methods with a model (the paper's 4,000): fresh rows of the same Gaussians
        grid["train"] = make_gaussian_grid(10, 4000, 1, sigma=0.75, layout="circle", model="truth", seed=10_000 + seed)["cal"]
        c100 = {
            split: dict(np.load(SHARED / f"cifar100_resnet110_{name}.npz")) for split, name in (("cal", "val"), ("test", "test"))
        }
        # CIFAR-100 has no third split: 4,000 seeded test rows train, the other 6,000 test every method
        held = np.random.default_rng(seed).permutation(len(c100["test"]["labels"]))
        c100["train"] = {key: value[held[:4000]] for key, value in c100["test"].items()}
        c100["test"] = {key: value[held[4000:]] for key, value in c100["test"].items()}
        for suite, data in (("synthetic", grid), ("cifar100", c100)):
            for split in ("cal", "train", "test"):
                part = data[split]
                k = part["logits"].shape[1]
                part["logits"] = contaminate(
                    part["logits"].astype(np.float64), contamination_temperatures(part["labels"], k, rng)
                )
            fitted = {}
            for method, options in alpha_agnostic_configs():
                if suite == "cifar100" and options.get("model") == "flow" and not cifar100_flow:
                    continue
                start = time.perf_counter()
                preds = Predictions(
                    "test",
                    data["test"]["logits"],
                    "logits",
                    "",
                    data["test"]["labels"],
                    "",
                    true_probs=data["test"].get("true_probs"),
                )
                calibrator = (
                    None if method == "uncalibrated" else _fit_shared(method, options, data["cal"], seed, fitted, data["train"])
                )
                values, _ = compute_metrics(preds, suites[suite], MetricConfig(), calibrator)
                row = {
                    "suite": suite,
                    "seed": seed,
                    "method": method,
                    **options,
                    "seconds": round(time.perf_counter() - start, 2),
                }
                row.update({key: v["value"] for key, v in values.items()})
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows, suites


def summarise(rows, suites):
    """Markdown: mean (std) over seeds per method and metric, one table per suite."""
    text = []
    for suite, metrics in suites.items():
        mine = [r for r in rows if r["suite"] == suite]
        names = list(dict.fromkeys(_label(r) for r in mine))
        lines = ["| method | " + " | ".join(metrics) + " |", "|" + "---|" * (len(metrics) + 1)]
        for name in names:
            group = [r for r in mine if _label(r) == name]
            cells = [f"{np.mean([r[m] for r in group]):.4f} ({np.std([r[m] for r in group]):.4f})" for m in metrics]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        text.append(f"{suite}\n\n" + "\n".join(lines))
    return "\n\n".join(text)


def _label(row):
    options = {k: v for k, v in row.items() if k in ("alpha", "variant", "model", "aggregate")}
    if row.get("train") == "split":
        options["train"] = "4,000 training rows"
    return row["method"] + ("" if not options else " (" + ", ".join(f"{v}" for v in options.values()) + ")")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "suite",
        choices=[
            "cifar10",
            "cifar100",
            "grid",
            "grid-ovr",
            "cifar10-baselines",
            "cifar100-baselines",
            "ats-cp-tables",
            "grid-ovr-truth",
        ],
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0, help="ats-cp-tables: the first seed")
    parser.add_argument(
        "--no-cifar100-flow", action="store_true", help="ats-cp-tables: leave out ats-maq's flow on CIFAR-100 (minutes a fit)"
    )
    parser.add_argument("--classes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--out", default="results")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.suite == "grid-ovr-truth":
        rows, metrics = grid_truth_ovr(args.classes)
        text = "\n\n".join(f"K = {k}\n\n" + markdown([r for r in rows if r["classes"] == k], metrics) for k in args.classes)
    elif args.suite == "ats-cp-tables":
        rows, suites = ats_cp_tables(args.seeds, args.first_seed, cifar100_flow=not args.no_cifar100_flow)
        text = summarise(rows, suites)
    elif args.suite.startswith("grid"):
        rows, metrics = grid(args.classes, args.out, GRID_ONE_VS_REST if args.suite == "grid-ovr" else GRID_CONFORMAL)
        text = "\n\n".join(f"K = {k}\n\n" + markdown([r for r in rows if r["classes"] == k], metrics) for k in args.classes)
    elif args.suite.endswith("-baselines"):
        rows, metrics = cli_baselines(args.suite.split("-")[0])
        text = markdown(rows, metrics)
    else:
        rows, metrics = cifar(args.suite, args.out)
        text = markdown(rows, metrics)
    Path(args.out, f"{args.suite}.json").write_text(json.dumps(rows, indent=2))
    Path(args.out, f"{args.suite}.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
