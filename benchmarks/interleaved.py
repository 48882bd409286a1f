"""Conformal fit + apply against the floor in interleaved rounds, optionally against another checkout.

    python -m benchmarks.interleaved --methods mr ats-gq --rounds 5 --out results/
    python -m benchmarks.interleaved --baseline-src /tmp/old/src   # e.g. a `git worktree` of an older commit
    python -m benchmarks.interleaved --methods mr --fit-args "--score raps --threshold classwise"

On a shared machine the floor itself moves by 2x between runs, so a ratio from one run can flatter
or wrong either side. Here every round runs each command once, in a fresh process, in the same
order: the floor (load the N x K float32 `.npy`, sort it along rows), then fit (on the first 20%
of the rows) and apply (to the other 80%, float64 `.npy` out) of each method, for this checkout
and, with --baseline-src, for another one run from its source tree (PYTHONPATH). The report gives
the median and the best of the rounds, and fit + apply over the floor. Not a test.

With --library the same rounds run inside this process through calib's Python API, without the
interpreter's start-up and imports (paid twice by a fit + apply from the shell) and without writing
the output (the floor writes nothing either): read + fit, read + apply into an array, against
np.load + np.sort.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.evaluate_speed import CALIB, FLOOR, measure
from benchmarks.speed import write_inputs


def commands(tmp: Path, methods, baseline_src, fit_args=()):
    """(name, argv) of one round, in the order they run."""
    lines = [("floor", [sys.executable, "-c", FLOOR, str(tmp / "z.npy")])]
    versions = [("now", CALIB)]
    if baseline_src:
        versions.append(("baseline", ["env", f"PYTHONPATH={baseline_src}", sys.executable, "-m", "calib"]))
    for version, calib in versions:
        for method in methods:
            bundle = tmp / f"{version}-{method}"
            lines.append(
                (
                    f"{method} fit ({version})",
                    calib + ["fit", str(tmp / "cal.npz"), "--method", method, *fit_args, "--out", str(bundle), "--force"],
                )
            )
            lines.append(
                (
                    f"{method} apply ({version})",
                    calib + ["apply", str(bundle), str(tmp / "test.npy"), "--out", str(tmp / "out.npy")],
                )
            )
    return lines


def library_round(tmp: Path, methods, times: dict) -> None:
    """One round through the Python API, each step timed with perf_counter."""
    import time

    from calib import apply_calibrator, fit_calibrator, read_predictions

    start = time.perf_counter()
    np.sort(np.load(tmp / "z.npy"), axis=1)
    times["floor"].append(time.perf_counter() - start)
    for method in methods:
        start = time.perf_counter()
        calibrator = fit_calibrator(read_predictions(str(tmp / "cal.npz")), method)
        middle = time.perf_counter()
        apply_calibrator(calibrator, read_predictions(str(tmp / "test.npy")), "probs")
        times[f"{method} fit (now)"].append(middle - start)
        times[f"{method} apply (now)"].append(time.perf_counter() - middle)


def report(times: dict, methods, versions) -> str:
    rows = ["| method | version | statistic | fit s | apply s | fit + apply s | x floor |", "|---|---|---|---|---|---|---|"]
    for name, aggregate in (("median", statistics.median), ("best", min)):
        floor = aggregate(times["floor"])
        rows.append(f"| floor | | {name} | | | {floor:.3f} | 1.0 |")
        for version in versions:
            for method in methods:
                fit = aggregate(times[f"{method} fit ({version})"])
                apply = aggregate(times[f"{method} apply ({version})"])
                rows.append(
                    f"| {method} | {version} | {name} | {fit:.3f} | {apply:.3f} | {fit + apply:.3f} | {(fit + apply) / floor:.2f} |"
                )
    return "\n".join(rows)


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--methods", nargs="+", default=["mr", "ats-gq"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline-src", default=None, help="another checkout's src/ directory, timed beside this one")
    parser.add_argument("--library", action="store_true", help="time calib's Python API in this process instead")
    parser.add_argument("--fit-args", default="", help='more arguments of calib fit, e.g. "--score raps --threshold classwise"')
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    if args.library and (args.baseline_src or args.fit_args):
        parser.error("--library times this checkout's methods with their defaults only")
    versions = ["now"] + (["baseline"] if args.baseline_src else [])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_inputs(tmp, args.rows, args.classes)  # z.npy, cal.npz (20%), test.npy (80%)
        lines = commands(tmp, args.methods, args.baseline_src, shlex.split(args.fit_args))
        times = {name: [] for name, _ in lines}
        for round_ in range(args.rounds):
            if args.library:
                library_round(tmp, args.methods, times)
            else:
                for name, argv_ in lines:
                    times[name].append(measure(argv_)[0])
            print(f"round {round_ + 1} of {args.rounds}", flush=True)
    mode = "library calls in one process" if args.library else "fresh processes"
    if args.fit_args:
        mode += f", fit {args.fit_args}"
    text = f"{args.rows} x {args.classes}, {args.rounds} interleaved rounds, {mode}\n\n" + report(times, args.methods, versions)
    name = "interleaved-library" if args.library else "interleaved"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(times, indent=1))
    (args.out / f"{name}.md").write_text(text + "\n")
    print(text)
    return text


if __name__ == "__main__":
    main()
