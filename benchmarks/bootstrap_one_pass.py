"""The bootstrap in the evaluation's own pass: what it costs beside an evaluation without replicates,
how fast calib starts, and its intervals against the textbook row bootstrap. Not a test.

    python -m benchmarks.bootstrap_one_pass --rounds 5 [--skip-large] [--seeds 20] [--baseline OLD/src] --out results/

1. Cost: ``calib evaluate X.npy --no-vece --bootstrap B`` for B = 0, 200 and 1,000, whole processes
   in alternating rounds (0, 200, 1000, 0, 200, ...), medians; on synthetic float32 logits of
   50,000 x 1,000 and 1,000,000 x 1,000 (4 GB; ``--skip-large`` leaves it out). Goals: 200
   replicates at most 1.3x none, 1,000 at most 1.6x.
2. Start: the default evaluate (with V-ECE) of CIFAR-100 test (10,000 x 100, tests/data; goal 2.0 s)
   and of CIFAR-10 val's first 2,000 rows (goal 1.0 s), and ``calib --version`` (goal 0.15 s):
   medians of ``--rounds`` whole processes, alternating.
3. Same intervals: for each of ``--seeds`` seeds, the 95% intervals of 200 one-pass replicates of
   accuracy, NLL, ECE, classwise ECE and CMCE on 2,000 CIFAR-10 test rows (the seed's own rows),
   beside the textbook row bootstrap of the same rows (rows drawn with replacement, the metrics
   computed again, 200 replicates, the same centred percentile interval,
   :func:`calib.bootstrap.centred_interval`): per end, the mean over seeds of each, and their paired
   difference (one pass - textbook, seed by seed) with its standard error; the same distribution
   puts the difference within about 2 standard errors of 0.
"""

from __future__ import annotations

import argparse
import compileall
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.evaluate_speed import CALIB, measure

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
REPLICATES = (0, 200, 1000)
INTERVAL_KEYS = ("accuracy", "nll", "ece", "cw_ece", "cmce")


def synthetic_logits(path: Path, rows: int, classes: int, seed: int = 0, block: int = 50_000) -> Path:
    """A float32 .npy of ``rows`` x ``classes`` logits (N(0, 1.5^2), the label's raised by N(3, 2^2)),
    written block by block (the 4 GB one never whole in memory), labels in a .npy beside it."""
    if path.exists():
        return path
    rng = np.random.default_rng(seed)
    labels = rng.integers(classes, size=rows)
    logits = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, classes))
    for start in range(0, rows, block):
        stop = min(rows, start + block)
        part = rng.normal(size=(stop - start, classes)).astype(np.float32) * 1.5
        part[np.arange(stop - start), labels[start:stop]] += rng.normal(3, 2, size=stop - start).astype(np.float32)
        logits[start:stop] = part
    logits.flush()
    np.save(path.with_name(path.stem + "_labels.npy"), labels)
    return path


def cost(folder: Path, rows: int, rounds: int, baseline: Path | None = None) -> dict:
    """{replicates: median wall seconds} of ``calib evaluate --no-vece --bootstrap B`` at ``rows`` x
    1,000; with ``baseline`` (the ``src`` folder of another checkout, its kernels built) also
    {"B earlier": seconds} of that code, run in the same alternating rounds."""
    data = synthetic_logits(folder / f"logits_{rows}.npy", rows, 1000)
    labels = data.with_name(data.stem + "_labels.npy")
    programs = {"": CALIB}
    if baseline is not None:
        compileall.compile_dir(str(baseline / "calib"), quiet=1)
        programs[" earlier"] = ["env", f"PYTHONPATH={baseline}", *CALIB]
    times = {f"{count}{name}": [] for count in REPLICATES for name in programs}
    for _ in range(rounds):
        for count in REPLICATES:
            for name, program in programs.items():
                cmd = [*program, "evaluate", str(data), "--labels", str(labels), "--no-vece", "--bootstrap", str(count)]
                times[f"{count}{name}"].append(measure(cmd)[0])
    return {key: statistics.median(values) for key, values in times.items()}


def start(folder: Path, rounds: int) -> dict:
    """{what: median wall seconds} of the default evaluate of CIFAR-100 test and of 2,000 x 10, and of ``calib --version``."""
    val = np.load(DATA / "cifar10_resnet110_val.npz")
    small = folder / "cifar10_2000.npz"
    np.savez(small, logits=val["logits"][:2000], labels=val["labels"][:2000])
    commands = {
        "evaluate CIFAR-100 test (10,000 x 100), V-ECE default": [*CALIB, "evaluate", str(DATA / "cifar100_resnet110_test.npz")],
        "evaluate 2,000 x 10, V-ECE default": [*CALIB, "evaluate", str(small)],
        "calib --version": ["calib", "--version"] if _console_script() else [*CALIB, "--version"],
    }
    times = {name: [] for name in commands}
    for _ in range(rounds):
        for name, cmd in commands.items():
            times[name].append(measure(cmd)[0])
    return {name: statistics.median(values) for name, values in times.items()}


def _console_script() -> bool:
    """Whether the installed ``calib`` console script is on PATH (what users run)."""
    import shutil

    return shutil.which("calib") is not None


def same_intervals(seeds: int, rows: int = 2000) -> dict:
    """{metric: {"lower"/"upper": {"one_pass": (mean, se), "textbook": (mean, se)}}} over ``seeds``."""
    import calib
    from calib.bootstrap import centred_interval

    test = np.load(DATA / "cifar10_resnet110_test.npz")
    logits, labels = test["logits"].astype(np.float64), test["labels"]
    ends = {key: {"one_pass": [], "textbook": []} for key in INTERVAL_KEYS}
    for seed in range(seeds):
        rng = np.random.default_rng([seed, 11])
        chosen = rng.choice(len(labels), rows, replace=False)
        z, y = logits[chosen], labels[chosen]
        report = calib.evaluate(
            z, y, request=calib.EvaluationRequest.of(metrics=list(INTERVAL_KEYS), bootstrap=200, seed=seed)
        ).to_dict()["metrics"]
        replicates = {key: [] for key in INTERVAL_KEYS}
        for _ in range(200):
            drawn = rng.integers(0, rows, rows)
            values = calib.evaluate(
                z[drawn], y[drawn], request=calib.EvaluationRequest.of(metrics=list(INTERVAL_KEYS), bootstrap=0)
            ).values
            for key in INTERVAL_KEYS:
                replicates[key].append(values[key])
        for key in INTERVAL_KEYS:
            ends[key]["one_pass"].append(report[key]["ci"])
            lower, upper, _ = centred_interval(replicates[key], 0.95, report[key]["value"])
            ends[key]["textbook"].append([lower, upper])
    out = {}
    for key, by_method in ends.items():
        out[key] = {}
        for side, index in (("lower", 0), ("upper", 1)):
            one_pass = np.array([pair[index] for pair in by_method["one_pass"]])
            textbook = np.array([pair[index] for pair in by_method["textbook"]])
            difference = one_pass - textbook  # paired: the same rows, so their own spread cancels
            out[key][side] = {
                "one_pass": float(one_pass.mean()),
                "textbook": float(textbook.mean()),
                "difference": float(difference.mean()),
                "difference_se": float(difference.std(ddof=1) / np.sqrt(len(difference))),
                "textbook_sd": float(textbook.std(ddof=1)),
            }
    return out


def _markdown(results: dict) -> str:
    lines = []
    for label, timings in results.get("cost", {}).items():
        earlier = "0 earlier" in timings
        lines.append(f"**{label}** (median wall seconds, whole processes)\n")
        lines.append("| replicates | seconds | x none | goal |" + (" earlier code | x none |" if earlier else ""))
        lines.append("|---:|---:|---:|---:|" + ("---:|---:|" if earlier else ""))
        for count in map(str, REPLICATES):
            goal = {"0": "", "200": "1.3x", "1000": "1.6x"}[count]
            row = f"| {count} | {timings[count]:.2f} | {timings[count] / timings['0']:.2f} | {goal} |"
            if earlier:
                before = timings[f"{count} earlier"]
                row += f" {before:.2f} | {before / timings['0 earlier']:.2f} |"
            lines.append(row)
        lines.append("")
    if "start" in results:
        goals = [2.0, 1.0, 0.15]
        lines.append("| command | median s | goal s |")
        lines.append("|---|---:|---:|")
        for (name, seconds), goal in zip(results["start"].items(), goals):
            lines.append(f"| {name} | {seconds:.2f} | {goal} |")
        lines.append("")
    if "intervals" in results:
        lines.append("| metric | end | one pass (mean over seeds) | textbook | paired difference +- se | difference / se |")
        lines.append("|---|---|---:|---:|---:|---:|")
        for key, sides in results["intervals"].items():
            for side, found in sides.items():
                z = found["difference"] / max(found["difference_se"], 1e-300)
                lines.append(
                    f"| {key} | {side} | {found['one_pass']:.5g} | {found['textbook']:.5g} | "
                    f"{found['difference']:+.2g} +- {found['difference_se']:.2g} | {z:+.2f} |"
                )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--skip-large", action="store_true")
    parser.add_argument("--parts", nargs="+", default=["cost", "start", "intervals"], choices=["cost", "start", "intervals"])
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "calib_bootstrap_bench")
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument("--baseline", type=Path, help="the src folder of an earlier checkout (kernels built), timed beside")
    args = parser.parse_args(argv)
    args.data.mkdir(parents=True, exist_ok=True)
    results: dict = {"machine": {"python": sys.version.split()[0]}}
    if "cost" in args.parts:
        results["cost"] = {}
        for rows in (50_000,) if args.skip_large else (50_000, 1_000_000):
            timings = cost(args.data, rows, args.rounds if rows == 50_000 else max(1, args.rounds // 2), args.baseline)
            results["cost"][f"{rows:,} x 1,000"] = {str(count): seconds for count, seconds in timings.items()}
            print(rows, timings, flush=True)
    if "start" in args.parts:
        results["start"] = start(args.data, args.rounds)
        print(results["start"], flush=True)
    if "intervals" in args.parts:
        results["intervals"] = same_intervals(args.seeds)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bootstrap_one_pass.json").write_text(json.dumps(results, indent=1))
    (args.out / "bootstrap_one_pass.md").write_text(_markdown(results))
    print(_markdown(results))


if __name__ == "__main__":
    main()
