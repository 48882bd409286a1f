"""Evaluation by groups against the ungrouped evaluation and the floor, in alternating rounds of
whole processes (docs/groups.md, "Cost"):

    python -m benchmarks.groups_speed --rows 50000 --classes 1000 --groups 1000 --rounds 3

Each round runs, each in a fresh process: the floor (np.load + one sort along rows of the scores),
`calib evaluate --no-vece`, and the same with `--groups` (a random group per row). Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.evaluate_speed import CALIB, FLOOR, measure


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--classes", type=int, default=1_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        rng = np.random.default_rng(0)
        np.save(tmp / "z.npy", (rng.normal(size=(args.rows, args.classes)) * 3).astype(np.float32))
        np.save(tmp / "y.npy", rng.integers(0, args.classes, args.rows))
        np.save(tmp / "g.npy", rng.integers(0, args.groups, args.rows))
        evaluate = [*CALIB, "evaluate", str(tmp / "z.npy"), "--labels", str(tmp / "y.npy"), "--no-vece"]
        lines = {
            "floor": [sys.executable, "-c", FLOOR, str(tmp / "z.npy")],
            "evaluate": evaluate,
            f"evaluate --groups ({args.groups} groups)": [*evaluate, "--groups", str(tmp / "g.npy")],
        }
        times: dict[str, list] = {name: [] for name in lines}
        for _ in range(args.rounds):
            for name, cmd in lines.items():
                times[name].append(measure(cmd))
    floor = statistics.median(t for t, _ in times["floor"])
    plain = statistics.median(t for t, _ in times["evaluate"])
    print(f"{args.rows} x {args.classes} float32, {args.groups} groups, median of {args.rounds} rounds")
    print(f"{'command':34s} {'wall s':>7s} {'peak MiB':>9s} {'/ floor':>8s} {'/ evaluate':>11s}")
    for name, runs in times.items():
        wall = statistics.median(t for t, _ in runs)
        peak = max(m for _, m in runs)
        print(f"{name:34s} {wall:7.2f} {peak:9.0f} {wall / floor:8.2f} {wall / plain:11.2f}")


if __name__ == "__main__":
    main()
