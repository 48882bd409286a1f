"""Evaluate and apply a bundle over many parquet shards on a local Dask cluster (not a test).

    python -m benchmarks.shards_scale --shards 100 --rows 1000000 --memory-limit 2GiB

Writes ``--shards`` files of ``--rows`` x 10 float32 logits (seeded; kept between runs in
``--dir``), fits temperature scaling on the first 50,000 rows of the first shard, then on a local
cluster of two single-threaded worker processes with a memory limit each: evaluates every shard
after the bundle (additive metrics merged in file order) and applies the bundle to every shard.
Reports rows/s, each worker's peak memory, that the merged metrics of the first three shards equal
one in-process evaluation of their rows, and that a shard applied on the cluster equals the same
shard applied in this process, byte for byte. docs/benchmarks.md, "Shards on Dask", has a run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import tempfile
import time

import numpy as np

KEYS = ["accuracy", "nll", "brier", "ece", "cw_ece", "cmce"]
CLASSES = 10


def write_shards(directory: str, shards: int, rows: int, seed: int = 0, classes: int = CLASSES) -> None:
    """``shards`` parquet files of ``rows`` x ``classes`` float32 logits (list column ``logits``) and
    labels, row groups of 100,000; kept when ``directory`` already holds this many of this size."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    spec = os.path.join(directory, "spec.json")
    wanted = {"shards": shards, "rows": rows, "seed": seed, **({} if classes == CLASSES else {"classes": classes})}
    if os.path.exists(spec) and json.load(open(spec)) == wanted:
        return
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    for i in range(shards):
        rng = np.random.default_rng([seed, i])
        labels = rng.integers(0, classes, rows)
        logits = rng.standard_normal(size=(rows, classes), dtype=np.float32) * 2.0
        logits[np.arange(rows), labels] += 4.0  # the true class raised: a model right about 3 times in 4 (10 classes)
        column = pa.FixedSizeListArray.from_arrays(logits.ravel(), classes)
        pq.write_table(
            pa.table({"logits": column, "label": labels}), os.path.join(directory, f"part{i:04d}.parquet"), row_group_size=100_000
        )
    with open(spec, "w") as handle:
        json.dump(wanted, handle)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=100)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--memory-limit", default="2GiB", help="per worker (Dask's memory_limit)")
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "calib_shards_scale"))
    args = parser.parse_args(argv)

    from distributed import Client, LocalCluster

    import calib
    from calib.evaluation.request import EvaluationRequest
    from calib.shards import apply_shard, apply_shards, evaluate_shards

    shards_dir = os.path.join(args.dir, "shards")
    started = time.perf_counter()
    write_shards(shards_dir, args.shards, args.rows)
    print(f"shards: {args.shards} x {args.rows:,} x {CLASSES} float32 in {shards_dir} ({time.perf_counter() - started:.0f} s)")
    first = calib.read_predictions(os.path.join(shards_dir, "part0000.parquet"), require_labels=True)
    bundle = os.path.join(args.dir, "ts_bundle")
    calib.calibrator("ts").fit(first.logits(slice(0, 50_000)), first.labels[:50_000]).save(bundle, force=True)
    total = args.shards * args.rows
    request = EvaluationRequest(metrics=tuple(KEYS))
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        memory_limit=args.memory_limit,
        host="127.0.0.1",
        dashboard_address=None,
    )
    rows = []
    try:
        with Client(cluster) as client:
            address = cluster.scheduler_address

            def worker_peaks():
                return sorted(client.run(_peak_mb).values())

            started = time.perf_counter()
            report = evaluate_shards(shards_dir, request, bundle=bundle, engine="dask", scheduler=address)
            seconds = time.perf_counter() - started
            rows.append(("evaluate (after the bundle)", seconds, worker_peaks()))
            out_dir = os.path.join(args.dir, "applied")
            started = time.perf_counter()
            applied = apply_shards(bundle, shards_dir, out_dir, engine="dask", scheduler=address, force=True)
            seconds = time.perf_counter() - started
            assert applied.rows == total
            rows.append(("apply (probs, float64 parquet)", seconds, worker_peaks()))
    finally:
        cluster.close()
    print(f"\n| step | rows | s | rows/s | peak memory per worker (MB), limit {args.memory_limit} |")
    print("|---|---|---|---|---|")
    for step, seconds, peaks in rows:
        print(f"| {step} | {total:,} | {seconds:.0f} | {total / seconds:,.0f} | {' / '.join(f'{p:,.0f}' for p in peaks)} |")
    print("\nmerged metrics:", {key: round(value, 6) for key, value in report.values.items()})

    # the first three shards: merged on the cluster against one evaluation of their rows in this process
    subset = os.path.join(args.dir, "subset")
    shutil.rmtree(subset, ignore_errors=True)
    os.makedirs(subset)
    names = sorted(n for n in os.listdir(shards_dir) if n.endswith(".parquet"))[:3]
    for name in names:
        os.symlink(os.path.join(shards_dir, name), os.path.join(subset, name))
    merged = evaluate_shards(subset, request, bundle=bundle, engine="dask").values
    parts = [calib.read_predictions(os.path.join(subset, n), require_labels=True) for n in names]
    logits = np.concatenate([p.logits() for p in parts])
    labels = np.concatenate([p.labels for p in parts])
    whole = calib.evaluate(logits, labels, metrics=KEYS, calibrator=calib.load(bundle), kind="logits").values
    worst = max(abs(merged[k] - whole[k]) for k in KEYS)
    print(f"first {len(names)} shards, merged on Dask vs one process: largest |difference| {worst:.1e} over {', '.join(KEYS)}")
    local_copy = os.path.join(args.dir, "local_part0000.parquet")
    apply_shard(os.path.join(shards_dir, names[0]), local_copy, bundle, "probs", {})
    same = open(local_copy, "rb").read() == open(os.path.join(args.dir, "applied", names[0]), "rb").read()
    print(f"{names[0]} applied on Dask and in this process: {'the same bytes' if same else 'DIFFERENT BYTES'}")


if __name__ == "__main__":
    main()
