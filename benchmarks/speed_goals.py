"""The three speed ratios of docs/benchmarks.md ("Speed goals") in one run, in alternating rounds:

    python -m benchmarks.speed_goals --rounds 5

1. `calib evaluate --no-vece` on 50,000 x 1,000 float32 against the floor (np.load + one sort along
   rows of the same file), and its peak memory against the input's size: whole processes, floor and
   calib alternating (A B A B ...), medians.
2. The default V-ECE (ws-catboost) of CIFAR-100 test logits (10,000 x 100; tests/data): whole
   processes, `calib evaluate --metrics <the V-ECE family>` alternating with the floor of that file;
   its wall time against the 3 s goal.
3. smooth ECE against relplot on the same (confidence, correctness) pairs of 50,000 rows, like with
   like: both given the pairs, in this process (a fresh process would time the imports, 20x the
   computation), alternating, best of the rounds.
Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.evaluate_speed import CALIB, FLOOR, measure

ROOT = Path(__file__).resolve().parents[1]
VECE = "vece_l1,vece_l2,vece_sq,vece_top_l1,vece_over,vece_under"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--classes", type=int, default=1_000)
    args = parser.parse_args(argv)
    cifar100 = ROOT / "tests" / "data" / "cifar100_resnet110_test.npz"
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        rng = np.random.default_rng(0)
        np.save(tmp / "z.npy", (rng.normal(size=(args.rows, args.classes)) * 3).astype(np.float32))
        np.save(tmp / "y.npy", rng.integers(0, args.classes, args.rows))
        data = np.load(cifar100)
        np.save(tmp / "c100.npy", data["logits"])
        input_mib = (tmp / "z.npy").stat().st_size / 2**20
        lines = {
            "floor 50k x 1k": [sys.executable, "-c", FLOOR, str(tmp / "z.npy")],
            "evaluate --no-vece": [*CALIB, "evaluate", str(tmp / "z.npy"), "--labels", str(tmp / "y.npy"), "--no-vece"],
            "floor CIFAR-100": [sys.executable, "-c", FLOOR, str(tmp / "c100.npy")],
            "V-ECE (ws-catboost)": [*CALIB, "evaluate", str(cifar100), "--metrics", VECE],
        }
        runs: dict[str, list] = {name: [] for name in lines}
        for _ in range(args.rounds):
            for name, cmd in lines.items():
                runs[name].append(measure(cmd))
    wall = {name: statistics.median(t for t, _ in values) for name, values in runs.items()}
    peak = max(m for _, m in runs["evaluate --no-vece"])
    smooth_calib, smooth_relplot = _smooth_ece_times(args.rounds)
    print(f"median of {args.rounds} alternating rounds (whole processes); smooth ECE: best of {args.rounds}, in process")
    print(f"{'line':46s} {'calib':>9s} {'reference':>10s} {'ratio':>7s} {'goal':>6s}")
    print(
        f"{'1 evaluate --no-vece / floor, 50k x 1k':46s} {wall['evaluate --no-vece']:8.2f}s "
        f"{wall['floor 50k x 1k']:9.2f}s {wall['evaluate --no-vece'] / wall['floor 50k x 1k']:7.2f} {'<= 2':>6s}"
    )
    print(f"{'1 evaluate peak memory / input (MiB)':46s} {peak:9.0f} {input_mib:10.0f} {peak / input_mib:7.2f} {'<= 2':>6s}")
    print(
        f"{'2 V-ECE ws-catboost, CIFAR-100 test / 3 s':46s} {wall['V-ECE (ws-catboost)']:8.2f}s {3.0:9.2f}s "
        f"{wall['V-ECE (ws-catboost)'] / 3.0:7.2f} {'<= 1':>6s}"
    )
    print(
        f"{'3 smooth ECE / relplot, same pairs':46s} {smooth_calib * 1e3:7.1f}ms {smooth_relplot * 1e3:8.1f}ms "
        f"{smooth_calib / smooth_relplot:7.2f} {'<= 2':>6s}"
    )


def _smooth_ece_times(rounds: int) -> tuple[float, float]:
    import relplot

    from calib.metrics.smooth import smooth_ece

    rng = np.random.default_rng(1)
    confidence = rng.uniform(0.2, 1.0, 50_000)
    correct = (rng.uniform(size=50_000) < confidence**1.2).astype(np.float64)
    best = {"calib": np.inf, "relplot": np.inf}
    for _ in range(rounds):
        for name, run in (
            ("calib", lambda: smooth_ece(confidence, correct)),
            ("relplot", lambda: relplot.smECE(confidence, correct)),
        ):
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best["calib"], best["relplot"]


if __name__ == "__main__":
    main()
