"""CI gates on pairs of models: how often each gate kind fails between equally calibrated models
(false alarms) and how often it catches a worse one (power). Not a test.

    python -m benchmarks.gate_noise --pairs 200 --rows 500 2000 10000 --out results/

The world: K = 10 classes, true logits z ~ N(0, 2.5^2) per row and class, labels drawn from
softmax(z). A model's logits are z + e with e ~ N(0, 0.5^2) drawn for each model, so two models
are equally calibrated (the same distribution of errors) but differ row by row. Each pair shares
its n test rows (new rows for every pair). The worse model of the power curves multiplies its
logits by s > 1 (over-confidence); its true increase of each metric is the mean over 20 draws of
50,000 rows.

Every report is made as `calib evaluate --json` makes it (200 bootstrap replicates, seed 0; the
baseline's replicates pair with the candidate's), and the gates are checked as the command checks
them: the default (noise-aware: fail only when the one-sided 95% bound is past the threshold,
inconclusive counts as a pass) and `--ignore-noise` (the raw values). Threshold gates use the
expected estimate at that n as threshold (the hardest case: any noise crosses it; the binned
estimators are biased upward at small n, so the population value would measure that bias, not
noise). Group gates split the rows into 4 random groups (each group's replicates at the Bonferroni level). V-ECE (TS recalibration map, not bootstrapped) gets fewer
pairs. Writes results/gate_noise.{json,md}.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.results import write_results
from calib.bootstrap import BootstrapConfig
from calib.evaluation import ChangeGate, Gate, build_report, check_gates
from calib.evaluation.groups import groups_from_values
from calib.evaluation.request import EvaluationRequest
from calib.io import Predictions

K, SPREAD, NOISE = 10, 2.5, 0.5
REPLICATES = 200
METRICS = ["ece", "cmce", "accuracy"]
SCALES = (1.0, 1.05, 1.1, 1.2, 1.3, 1.5)


def world(rng, n):
    z = rng.normal(size=(n, K)) * SPREAD
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    labels = (rng.random((n, 1)) > np.cumsum(p, axis=1)).sum(axis=1)
    return z, np.minimum(labels, K - 1)


def model(rng, z, scale=1.0):
    return (z + rng.normal(size=z.shape) * NOISE) * scale


def expected_at(n, draws=200, seed=7):
    """The expected estimate of each metric on n rows (mean over draws): the binned estimators are
    biased upward at small n, so a threshold gate's fair threshold is this, not the population value."""
    rng = np.random.default_rng([seed, n])
    values = []
    for _ in range(draws):
        z, labels = world(rng, n)
        preds = Predictions("draw", model(rng, z), "logits", "draw", labels, "draw")
        found = build_report(preds, EvaluationRequest(metrics=("ece", "cmce"))).values
        values.append([found["ece"], found["cmce"]])
    return dict(zip(["ece", "cmce"], np.mean(values, axis=0)))


def report(logits, labels, metrics, groups=None, vece=None):
    preds = Predictions("pair", logits, "logits", "pair", labels, "pair")
    keys = metrics + ([] if vece is None else ["vece_l1"])
    vece_recalibrator = "ts" if vece is not None else "ws-catboost"
    request = EvaluationRequest.of(
        metrics=keys, bootstrap=BootstrapConfig(REPLICATES, 0, 0.95), min_group_rows=1, vece_recalibrator=vece_recalibrator
    )
    return build_report(preds, request, groups=groups)


def truth(scale, metrics, draws=20, rows=50_000):
    """The expected value of each metric for a model with this scale (mean over large draws)."""
    rng = np.random.default_rng([99, int(scale * 1000)])
    values = []
    for _ in range(draws):
        z, labels = world(rng, rows)
        values.append([report(model(rng, z, scale), labels, metrics).values[m] for m in metrics])
    return dict(zip(metrics, np.mean(values, axis=0)))


def change(metric, allowed, base, relative=False):
    direction = "decrease" if metric == "accuracy" else "increase"
    return ChangeGate(metric, allowed, base, False, relative, direction)


def outcomes(gates, changes, current):
    """(fails by default, inconclusive by default, fails with --ignore-noise) of each change gate
    (its entry on all rows), then each threshold gate."""
    rows = []
    for gate in [*changes, *gates]:
        pair = ([gate], []) if isinstance(gate, Gate) else ([], [gate])
        default = check_gates(current, *pair)[0][0]
        raw = check_gates(current, *pair, ignore_noise=True)[0][0]
        rows.append((default.outcome == "fail", default.outcome == "inconclusive", raw.outcome == "fail"))
    return rows


def false_alarms(n, pairs, seed):
    """Every gate kind between equally calibrated models."""
    expected, group_expected = expected_at(n), expected_at(n // 4)
    gate_names = [
        "--max-increase cmce=0.001 (README)",
        "--max-increase cmce=0",
        "--max-increase ece=0",
        "--max-increase ece=10%",
        "--max-decrease accuracy=0",
        f"--fail-if cmce>{expected['cmce']:.4f} (its expectation at n)",
        f"--fail-if ece>{expected['ece']:.4f} (its expectation at n)",
        f"max_group:cmce>{group_expected['cmce']:.4f} (4 groups; expectation at n/4)",
        "--max-increase cmce=0, per group (4 groups)",
    ]
    counts = np.zeros((len(gate_names), 3))
    rng = np.random.default_rng([seed, n])
    for _ in range(pairs):
        z, labels = world(rng, n)
        groups = groups_from_values(rng.integers(0, 4, n), n, "group")
        base = report(model(rng, z), labels, METRICS, groups)
        current = report(model(rng, z), labels, METRICS, groups)
        changes = [
            change("cmce", 0.001, base),
            change("cmce", 0.0, base),
            change("ece", 0.0, base),
            change("ece", 0.1, base, relative=True),
            change("accuracy", 0.0, base),
        ]
        gates = [
            Gate("cmce>t", "cmce", ">", expected["cmce"]),
            Gate("ece>t", "ece", ">", expected["ece"]),
            Gate("max_group:cmce>t", "cmce", ">", group_expected["cmce"], "max_group"),
        ]
        counts[:-1] += np.array(outcomes(gates, changes, current), dtype=float)
        # the per-group entries of a change gate: the pair fails when any group's entry fails
        group_gate = ChangeGate("cmce", 0.0, base)
        default = group_gate.check_groups(current)
        raw = group_gate.check_groups(current, ignore_noise=True)
        counts[-1] += (
            any(e["outcome"] == "fail" for e in default),
            any(e["outcome"] == "inconclusive" for e in default) and not any(e["outcome"] == "fail" for e in default),
            any(e["outcome"] == "fail" for e in raw),
        )
    return [
        {
            "n": n,
            "pairs": pairs,
            "gate": name,
            "fails (default)": f"{100 * c[0] / pairs:.1f}%",
            "inconclusive (default)": f"{100 * c[1] / pairs:.1f}%",
            "fails (--ignore-noise)": f"{100 * c[2] / pairs:.1f}%",
        }
        for name, c in zip(gate_names, counts)
    ]


def power(n, pairs, truths, seed, vece_pairs):
    """Detection rate of `--max-increase METRIC=0` against a model scaled by s (true increase)."""
    rows = []
    rng = np.random.default_rng([seed, n, 1])
    for scale in SCALES:  # 1.0: no increase (the false alarms of V-ECE's gate, which has no replicates)
        hits = {m: np.zeros(2) for m in ("cmce", "ece", "vece_l1")}
        for pair in range(pairs):
            z, labels = world(rng, n)
            with_vece = pair < vece_pairs
            base = report(model(rng, z), labels, ["ece", "cmce"], vece=True if with_vece else None)
            current = report(model(rng, z, scale), labels, ["ece", "cmce"], vece=True if with_vece else None)
            for metric in ("cmce", "ece") + (("vece_l1",) if with_vece else ()):
                ((default, _, raw),) = outcomes([], [change(metric, 0.0, base)], current)
                hits[metric] += (default, raw)
        for metric in ("cmce", "ece", "vece_l1"):
            count = pairs if metric != "vece_l1" else min(pairs, vece_pairs)
            if count == 0:
                continue
            true_increase = truths[scale].get(metric, float("nan")) - truths[1.0].get(metric, float("nan"))
            rows.append(
                {
                    "n": n,
                    "metric": metric,
                    "scale": scale,
                    "population increase": f"{true_increase:.4f}" if np.isfinite(true_increase) else "",
                    "pairs": count,
                    "detected (default)": f"{100 * hits[metric][0] / count:.1f}%",
                    "detected (--ignore-noise)": f"{100 * hits[metric][1] / count:.1f}%",
                }
            )
    return rows


def readme_gate_through_the_command(n, pairs, seed, workdir):
    """The README's two commands on equally calibrated pairs, as a user runs them:
    `calib evaluate base.npz --no-vece --json main.json`, then `calib evaluate test.npz --baseline
    main.json --max-increase cmce=0.001 --no-vece`; counts exit codes."""
    import subprocess
    import sys

    rng = np.random.default_rng([seed, n, 2])
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    codes = []
    for _ in range(pairs):
        z, labels = world(rng, n)
        np.savez(workdir / "base.npz", logits=model(rng, z), labels=labels)
        np.savez(workdir / "test.npz", logits=model(rng, z), labels=labels)
        command = [sys.executable, "-m", "calib", "evaluate"]
        subprocess.run(
            [*command, workdir / "base.npz", "--no-vece", "--json", workdir / "main.json"], check=True, capture_output=True
        )
        gate = [workdir / "test.npz", "--baseline", workdir / "main.json", "--max-increase", "cmce=0.001", "--no-vece"]
        codes.append(subprocess.run([*command, *gate], capture_output=True).returncode)
    return {
        "n": n,
        "pairs": pairs,
        "exit 0": codes.count(0),
        "exit 1 (false alarm)": codes.count(1),
        "other": len(codes) - codes.count(0) - codes.count(1),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--power-pairs", type=int, default=100)
    parser.add_argument("--vece-pairs", type=int, default=20)
    parser.add_argument("--rows", type=int, nargs="+", default=[500, 2000, 10000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--readme-pairs",
        type=int,
        default=0,
        help="also run the README's gate through the command on this many pairs (n = 2,000)",
    )
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    if args.readme_pairs:
        row = readme_gate_through_the_command(2000, args.readme_pairs, args.seed, args.out / "readme_gate")
        write_results(args.out, "gate_readme", [row])
        print(row, flush=True)
        return
    truths = {scale: truth(scale, ["ece", "cmce"]) for scale in SCALES}
    print("true values:", {s: {m: round(v, 5) for m, v in t.items()} for s, t in truths.items()}, flush=True)
    alarms, curves = [], []
    for n in args.rows:
        alarms += false_alarms(n, args.pairs, args.seed)
        write_results(args.out, "gate_noise", alarms)
        print("\n".join(str(row) for row in alarms[-8:]), flush=True)
        curves += power(n, args.power_pairs, truths, args.seed, args.vece_pairs)
        if curves:
            write_results(args.out, "gate_power", curves)
        print("\n".join(str(row) for row in curves[-15:]), flush=True)


if __name__ == "__main__":
    main()
