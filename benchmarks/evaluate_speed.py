"""Speed and memory of `calib evaluate` against the floor (load the array + one sort along rows).

    python -m benchmarks.evaluate_speed [--rows 50000] [--classes 1000] [--repeats 3] [--out results/]

Every measurement runs in a fresh process started by a minimal wrapper, which reports the child's
wall time and peak RSS (RUSAGE_CHILDREN of a process that ran nothing else). Reports ratios, not
absolute times: this is a benchmark, never a unit test.
"""

from __future__ import annotations

import argparse
import compileall
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np

FLOOR = "import numpy as np, sys; a = np.load(sys.argv[1]); np.sort(a, axis=1)"
#: calib as a whole process, started like the floor and the peers (this interpreter, no launcher
#: in between: a version manager's shim on PATH adds 0.15-0.25 s to every run).
CALIB = [sys.executable, "-m", "calib"]
WRAPPER = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n"
)


@functools.cache
def write_calib_bytecode() -> None:
    """Compile calib's modules to bytecode once, as ``pip install`` does: a checkout installed in
    editable mode, run where PYTHONDONTWRITEBYTECODE is set, would otherwise compile every module
    again in every timed process (50-70 ms each here), which no installed copy does."""
    import calib

    compileall.compile_dir(os.path.dirname(calib.__file__), quiet=1)


def measure(cmd: list[str], timeout: float | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of ``cmd`` run alone in a fresh process; raises
    subprocess.TimeoutExpired past ``timeout`` seconds."""
    write_calib_bytecode()
    # its own process group, so a timeout kills the measured command too, not only the wrapper
    with subprocess.Popen(
        [sys.executable, "-c", WRAPPER, *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, cmd, stdout, stderr)
    done = subprocess.CompletedProcess(cmd, 0, stdout, stderr)
    seconds, mib = map(float, done.stdout.split())
    return seconds, mib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="results")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        scores, labels = os.path.join(tmp, "logits.npy"), os.path.join(tmp, "labels.npy")
        np.save(scores, (rng.normal(size=(args.rows, args.classes)) * 3).astype(np.float32))
        np.save(labels, rng.integers(0, args.classes, args.rows))
        input_mib = os.path.getsize(scores) / 2**20
        runs = []
        for _ in range(args.repeats):
            floor_s, floor_mib = measure([sys.executable, "-c", FLOOR, scores])
            calib_s, calib_mib = measure(
                [
                    *CALIB,
                    "evaluate",
                    scores,
                    "--labels",
                    labels,
                    "--no-vece",
                    "--bootstrap",  # --json alone would draw the gates' 200 replicates: time the metrics only
                    "0",
                    "--json",
                    os.path.join(tmp, "report.json"),
                ]
            )
            runs.append(
                {
                    "floor_s": floor_s,
                    "calib_s": calib_s,
                    "ratio": calib_s / floor_s,
                    "floor_peak_mib": floor_mib,
                    "calib_peak_mib": calib_mib,
                }
            )
    median = float(np.median([r["ratio"] for r in runs]))
    peak = max(r["calib_peak_mib"] for r in runs)
    result = {
        "command": "calib evaluate (default metrics)",
        "rows": args.rows,
        "classes": args.classes,
        "input_mib": input_mib,
        "runs": runs,
        "median_ratio_to_floor": median,
        "calib_peak_mib": peak,
        "peak_over_input": peak / input_mib,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "evaluate_speed.json"), "w") as handle:
        json.dump(result, handle, indent=2)
    print(
        f"evaluate {args.rows} x {args.classes} float32 ({input_mib:.0f} MiB): median {median:.2f}x the floor "
        f"({'; '.join('%.2f s vs %.2f s' % (r['calib_s'], r['floor_s']) for r in runs)}); "
        f"peak memory {peak:.0f} MiB = {peak / input_mib:.2f}x the input"
    )


if __name__ == "__main__":
    main()
