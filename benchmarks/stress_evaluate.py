"""The default `calib evaluate` (V-ECE on) run many times in fresh processes, counting crashes:

    python -m benchmarks.stress_evaluate --runs 300 --out results/

Three inputs, each with a temperature-scaling bundle fitted on its own validation rows: a
2,000 x 97 synthetic language-ID-like export (Gaussian logits with a peaked true class, float32),
CIFAR-10 test and CIFAR-100 test (tests/data). The runs cycle through the inputs; every process runs
under ``python -X faulthandler`` with the default thread count, and any exit code other than 0, or
a report that differs from the first run's on the same input, is counted and its stderr kept.
Writes results/stress_evaluate.{json,md}. Not a test (the slow suite runs a short version:
tests/guarantees/test_dependable.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.results import write_results

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def language_id_like(folder: Path, rows: int = 2000, classes: int = 97, seed: int = 0) -> Path:
    """val.npz and test.npz of float32 logits shaped like a language-ID model's (overconfident)."""
    rng = np.random.default_rng(seed)
    for name in ("val", "test"):
        labels = rng.integers(0, classes, rows)
        logits = rng.normal(size=(rows, classes)) * 2.0
        logits[np.arange(rows), labels] += rng.gamma(2.0, 2.0, rows)
        np.savez(folder / f"lid_{name}.npz", logits=(1.7 * logits).astype(np.float32), labels=labels)
    return folder / "lid_test.npz"


def prepare(folder: Path) -> list[tuple[str, Path, Path]]:
    """(name, test file, ts bundle) for each input."""
    language_id_like(folder)
    inputs = [("2,000 x 97", folder / "lid_val.npz", folder / "lid_test.npz")]
    for name in ("cifar10", "cifar100"):
        inputs.append((f"{name} test", DATA / f"{name}_resnet110_val.npz", DATA / f"{name}_resnet110_test.npz"))
    prepared = []
    for name, val, test in inputs:
        bundle = folder / f"bundle_{len(prepared)}"
        subprocess.run(
            [sys.executable, "-m", "calib", "fit", str(val), "--method", "ts", "--out", str(bundle), "--force"],
            check=True,
            capture_output=True,
        )
        prepared.append((name, test, bundle))
    return prepared


def evaluate_once(test: Path, bundle: Path, report: Path) -> tuple[int, str, float]:
    """One default `calib evaluate` in a fresh process: (exit code, stderr, seconds)."""
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "faulthandler",
            "-m",
            "calib",
            "evaluate",
            str(test),
            "--bundle",
            str(bundle),
            "--json",
            str(report),
        ],
        capture_output=True,
        text=True,
    )
    return done.returncode, done.stderr, time.perf_counter() - start


def stress(runs: int, folder: Path, log=print) -> list[dict]:
    """``runs`` evaluations cycling through the inputs; one summary row per input."""
    inputs = prepare(folder)
    rows = {
        name: {"input": name, "runs": 0, "crashes": 0, "other failures": 0, "reports differ": 0, "seconds": []}
        for name, _, _ in inputs
    }
    first: dict[str, str] = {}
    for i in range(runs):
        name, test, bundle = inputs[i % len(inputs)]
        report = folder / f"report_{i % len(inputs)}.json"
        code, stderr, seconds = evaluate_once(test, bundle, report)
        row = rows[name]
        row["runs"] += 1
        row["seconds"].append(seconds)
        if code < 0 or code >= 128:  # killed by a signal (subprocess gives -N; a shell would give 128 + N)
            row["crashes"] += 1
            log(f"run {i} ({name}): crashed with exit {code}\n{stderr[-3000:]}")
            continue
        if code != 0:
            row["other failures"] += 1
            log(f"run {i} ({name}): exit {code}: {stderr.strip()[-500:]}")
            continue
        values = json.dumps({key: entry.get("value") for key, entry in json.loads(report.read_text())["metrics"].items()})
        if first.setdefault(name, values) != values:
            row["reports differ"] += 1
            log(f"run {i} ({name}): the report differs from the first run's")
    out = []
    for row in rows.values():
        seconds = row.pop("seconds")
        out.append({**row, "median s": round(float(np.median(seconds)), 2) if seconds else None})
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="evaluations in all, cycling through the three inputs")
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        rows = stress(args.runs, Path(folder), log=lambda line: print(line, flush=True))
    write_results(args.out, "stress_evaluate", rows)
    for row in rows:
        print(row)
    if any(row["crashes"] or row["other failures"] or row["reports differ"] for row in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
