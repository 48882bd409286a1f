"""The one benchmark command: both suites, JSON and Markdown (never part of the tests or CI).

    python -m benchmarks.run --suite quality|speed|all --out results/ [--jobs 2] [--resume]

quality: :mod:`benchmarks.quality` (the CMCE-paper protocol, 10 seeded 20/80 splits, every calibrator)
on CIFAR-10, CIFAR-100, 20 Newsgroups and the Gaussian grid at K = 10, 100, 1000.
speed: :mod:`benchmarks.speed` (calib against the floor and the peers at 10k x 100, 50k x 1000 and
20k x 10000, fresh processes, peak memory). Peers come from the ``bench`` extra:
``pip install -e .[bench]``.

Writes results/quality-<dataset>.json|md, results/speed.json|md and results/benchmarks.md (every
table of the run, with the machine it ran on). --resume reads quality datasets whose results file
already holds every split (a long run interrupted, or run with --jobs elsewhere) instead of rerunning
them. Run the speed suite on an otherwise idle machine: its lines are wall-clock ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

from benchmarks import quality, speed


def machine() -> dict:
    return {
        "python": platform.python_version(),
        "cpus": len(os.sched_getaffinity(0)),
        "processor": platform.processor() or platform.machine(),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=["quality", "speed", "all"], default="all")
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--datasets", nargs="+", default=list(quality.DATASETS), choices=quality.DATASETS)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--sizes", nargs="+", default=["10000x100", "50000x1000", "20000x10000"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    sections = [f"# Benchmark run\n\nMachine: {json.dumps(machine())}\n"]
    if args.suite in ("quality", "all"):
        tables = quality.run_all(args.datasets, args.splits, args.out, args.jobs, args.resume)
        sections += [
            f"## Quality: {dataset} (mean ± std over {args.splits} splits)\n\n{text}\n" for dataset, text in tables.items()
        ]
    if args.suite in ("speed", "all"):
        text = speed.main(["--sizes", *args.sizes, "--repeats", str(args.repeats), "--out", str(args.out)])
        sections.append(
            f"## Speed (best of {args.repeats} fresh processes; x floor = seconds / load-and-sort seconds)\n\n{text}\n"
        )
    (args.out / "benchmarks.md").write_text("\n".join(sections))
    print(f"wrote {args.out / 'benchmarks.md'}")


if __name__ == "__main__":
    main()
