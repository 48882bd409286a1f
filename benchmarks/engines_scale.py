"""Apply and evaluate parquet shards on every engine: local, Dask, Spark and Ray (not a test).

    python -m benchmarks.engines_scale --rows 10000000 --classes 100 --shards 20

Writes ``--shards`` files of ``--rows`` x ``--classes`` float32 logits in all (seeded; kept between
runs in ``--dir``), fits temperature scaling on the first 50,000 rows of the first shard, then runs,
each in a fresh process as a user runs it: ``calib evaluate DIR --bundle B --engine E`` and ``calib
apply B DIR --out OUT --engine E`` for E in local, dask, spark and ray (one task per file), and the
library's DataFrame and Dataset paths (``calib.spark.evaluate`` of ``spark.read.parquet(DIR)``,
``calib.ray.evaluate`` of ``ray.data.read_parquet(DIR)``: one state per partition or block). For
each: the wall time from the process's start to its end (engine start-up included), rows/s, and the
peak resident memory of the driver, of the largest Python worker process and of the engine's other
processes (Spark's JVM, Ray's raylet and object store), polled every 0.5 s over the process tree.
Every engine's evaluation must print the local engine's numbers; the rounds alternate engines.
docs/benchmarks.md, "Shards on Spark and Ray", has a run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from .shards_scale import write_shards

#: What each run is: (label, the engine, the operation, how it is started).
RUNS = (
    ("local", "local", "evaluate", "cli"),
    ("dask", "dask", "evaluate", "cli"),
    ("spark", "spark", "evaluate", "cli"),
    ("ray", "ray", "evaluate", "cli"),
    ("spark DataFrame", "spark", "evaluate", "library"),
    ("ray Dataset", "ray", "evaluate", "library"),
    ("local", "local", "apply", "cli"),
    ("dask", "dask", "apply", "cli"),
    ("spark", "spark", "apply", "cli"),
    ("ray", "ray", "apply", "cli"),
)

LIBRARY = {
    "spark": (
        "import json, sys, calib.spark\n"
        "with calib.spark.session() as spark:\n"
        "    df = spark.read.parquet(sys.argv[1] + '/*.parquet')\n"
        "    report = calib.spark.evaluate(df, bundle=sys.argv[2])\n"
        "print(json.dumps(report.to_json()))\n"
    ),
    "ray": (
        "import json, sys, calib.ray\n"
        "with calib.ray.started() as ray:\n"
        "    ds = ray.data.read_parquet(sys.argv[1], file_extensions=['parquet'])\n"
        "    report = calib.ray.evaluate(ds, bundle=sys.argv[2])\n"
        "print(json.dumps(report.to_json()))\n"
    ),
}


def _command(engine: str, operation: str, how: str, directory: str, bundle: str, out: str) -> list[str]:
    if how == "library":
        return [sys.executable, "-c", LIBRARY[engine], directory, bundle]
    calib = [sys.executable, "-m", "calib"]
    if operation == "evaluate":
        return [*calib, "evaluate", directory, "--bundle", bundle, "--engine", engine, "--json", "-", "--bootstrap", "0"]
    return [*calib, "apply", bundle, directory, "--out", out, "--engine", engine, "--force"]


def _tree_peaks(process, peaks: dict, stop: threading.Event) -> None:
    """Poll the resident memory of ``process`` and its descendants every 0.5 s into ``peaks``:
    {"driver", "worker" (the largest Python descendant: a Dask or Spark Python worker, a Ray worker
    "ray::..."), "other" (the largest other descendant: Spark's JVM, Ray's raylet)} in MB."""
    import psutil

    root = psutil.Process(process.pid)
    while not stop.is_set():
        try:
            peaks["driver"] = max(peaks["driver"], root.memory_info().rss / 2**20)
            for child in root.children(recursive=True):
                try:
                    name = child.name().lower()
                    kind = "worker" if "python" in name or name.startswith("ray::") else "other"
                    peaks[kind] = max(peaks[kind], child.memory_info().rss / 2**20)
                except psutil.Error:
                    continue
        except psutil.Error:
            return
        time.sleep(0.5)


def measure(command: list[str]) -> dict:
    """{"seconds", "driver", "worker", "other", "stdout"} of one run of ``command``."""
    peaks = {"driver": 0.0, "worker": 0.0, "other": 0.0}
    stop = threading.Event()
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    poller = threading.Thread(target=_tree_peaks, args=(process, peaks, stop))
    poller.start()
    out, err = process.communicate()
    seconds = time.perf_counter() - start
    stop.set()
    poller.join()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command[:6])} ...: exit {process.returncode}\n{err[-2000:]}")
    return {"seconds": seconds, **peaks, "stdout": out}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows in all the shards together")
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "calib-engines-scale"))
    parser.add_argument("--only", default=None, help="comma-separated run labels (default: all)")
    args = parser.parse_args(argv)

    import calib

    directory = os.path.join(args.dir, f"shards-{args.rows}x{args.classes}")
    write_shards(directory, args.shards, args.rows // args.shards, classes=args.classes)
    bundle = os.path.join(args.dir, f"ts-{args.classes}")
    if not os.path.exists(bundle):
        import pyarrow.parquet as pq

        first = pq.read_table(os.path.join(directory, "part0000.parquet")).slice(0, 50_000)
        logits = np.stack(first.column("logits").to_numpy(zero_copy_only=False))
        calib.calibrator("ts").fit(logits, first.column("label").to_numpy()).save(bundle)
    out = os.path.join(args.dir, "applied")
    wanted = None if args.only is None else set(args.only.split(","))
    results: dict = {}
    for _ in range(args.rounds):
        for label, engine, operation, how in RUNS:
            if wanted is not None and label not in wanted:
                continue
            shutil.rmtree(out, ignore_errors=True)
            found = measure(_command(engine, operation, how, directory, bundle, out))
            results.setdefault((label, operation), []).append(found)
            print(f"{operation:9s}{label:17s}{found['seconds']:8.1f} s", file=sys.stderr, flush=True)
    shutil.rmtree(out, ignore_errors=True)
    local = results.get(("local", "evaluate"))
    expected = None if local is None else json.loads(local[0]["stdout"])["metrics"]
    print(f"{args.rows:,} rows x {args.classes} classes in {args.shards} parquet shards, median of {args.rounds}\n")
    print("| operation | engine | seconds | rows/s | vs local | driver MB | largest worker MB | engine's other processes MB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for (label, operation), runs in results.items():
        seconds = float(np.median([run["seconds"] for run in runs]))
        base = (
            float(np.median([run["seconds"] for run in results[("local", operation)]]))
            if ("local", operation) in results
            else seconds
        )
        peak = {kind: max(run[kind] for run in runs) for kind in ("driver", "worker", "other")}
        if operation == "evaluate" and expected is not None:
            metrics = json.loads(runs[0]["stdout"])["metrics"]
            assert all(abs(metrics[key]["value"] - entry["value"]) <= 1e-9 for key, entry in expected.items()), label
        print(
            f"| {operation} | {label} | {seconds:.1f} | {args.rows / seconds:,.0f} | {base / seconds:.2f} | "
            f"{peak['driver']:.0f} | {peak['worker']:.0f} | {peak['other']:.0f} |"
        )


if __name__ == "__main__":
    main()
