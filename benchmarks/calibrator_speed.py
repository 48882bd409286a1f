"""`calib fit` and `calib apply` time per method at N x K (default 50,000 x 1,000), not a test.

    python -m benchmarks.calibrator_speed --methods ts platt dirichlet --timeout 900 --out results/

Synthetic float32 logits z ~ 3 N(0, 1) with labels drawn from softmax(z / 2) (an over-confident
model, so every method has something to fix); fit on one N-row split, apply to another. Each
command runs in a fresh process (start-up included) under the wrapper of evaluate_speed, next to
the floor (load + one sort along rows) measured in the same run. A method that runs past
--timeout is reported as such.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.evaluate_speed import CALIB, FLOOR, measure
from benchmarks.results import write_results


def draw(rng, rows, classes):
    z = (3.0 * rng.normal(size=(rows, classes))).astype(np.float32)
    tempered = z / 2.0
    probs = np.exp(tempered - tempered.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    labels = (probs.cumsum(1) > rng.random((rows, 1))).argmax(1)
    return z, labels


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["ts", "platt", "quadratic", "beta", "isotonic", "hist", "venn-abers", "svs", "adaptive-ts", "dirichlet", "sms"],
    )
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cal, test = Path(tmp, "cal.npz"), Path(tmp, "test.npy")
        z, labels = draw(rng, args.rows, args.classes)
        np.savez(cal, logits=z, labels=labels)
        np.save(test, draw(rng, args.rows, args.classes)[0])
        floor_s, _ = measure([sys.executable, "-c", FLOOR, str(test)])
        for method in args.methods:
            bundle, out = Path(tmp, method), Path(tmp, f"{method}.npy")
            row = {"method": method, "floor s": round(floor_s, 2)}
            try:
                row["fit s"], row["fit MiB"] = measure(
                    [*CALIB, "fit", str(cal), "--method", method, "--out", str(bundle)], timeout=args.timeout
                )
                row["apply s"], row["apply MiB"] = measure(
                    [*CALIB, "apply", str(bundle), str(test), "--out", str(out)], timeout=args.timeout
                )
                row["apply / floor"] = round(row["apply s"] / floor_s, 1)
                row["bundle MiB"] = round(sum(f.stat().st_size for f in bundle.iterdir()) / 2**20, 1)
            except subprocess.TimeoutExpired:
                row["note"] = f"over {args.timeout:.0f} s"
            except subprocess.CalledProcessError as error:
                row["note"] = f"failed: {error.stderr.strip().splitlines()[-1] if error.stderr else error}"
            rows.append({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()})
            print(json.dumps(rows[-1]), flush=True)
    write_results(args.out, "calibrator_speed", rows)


if __name__ == "__main__":
    main()
