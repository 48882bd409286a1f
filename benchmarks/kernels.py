"""The compiled kernels against the pure NumPy path, kernel by kernel, in one process (best of
``--repeat`` runs each, alternating the two paths):

    python -m benchmarks.kernels --rows 20000 --classes 1000

The compiled path stays where it pays on this machine; the ratios are the evidence
(docs/benchmarks.md, "Compiled kernels").
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from calib.calibrators.conformal import nonconformity
from calib.calibrators.select_tau import tempered_distribution
from calib.core import kernels
from calib.core.numerics import log_floored, log_softmax_and_softmax, tempered_moments


def cases(rows: int, classes: int):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(rows, classes)) * 3
    probs = rng.dirichlet(np.ones(classes), rows)
    in_set = np.argsort(np.argsort(-logits, axis=1), axis=1) < rng.integers(1, classes, rows)[:, None]
    target = np.full(rows, 0.9)
    labels = rng.integers(0, classes, rows)
    ordered = np.sort(-probs, axis=1)
    mass = ordered.copy()
    kernels.cumulative_mass(mass)  # the cumulative masses CMCE bins
    first_hit = kernels.label_rank(probs, labels)
    return {
        "softmax + log-softmax": lambda: log_softmax_and_softmax(logits),
        "tempered moments": lambda: tempered_moments(logits, 0.7),
        "log(p + 1e-12)": lambda: log_floored(probs, shift=1e-12),
        "SelectTau (distribution)": lambda: tempered_distribution(logits, in_set, target),
        "raps scores (ranking + pass)": lambda: nonconformity(probs, "raps"),
        "MR update (p times in/out)": lambda: kernels.set_update(probs.copy(), in_set, target, 1.0 - target, add=False),
        "cumulative mass (with a copy)": lambda: kernels.cumulative_mass(ordered.copy()),
        "label rank": lambda: kernels.label_rank(probs, labels),
        "band counts (coverage)": lambda: kernels.range_counts(mass, 0.9 - 1e-12, 0.92 + 1e-12),
        "CMCE bin counts": lambda: _cmce_bins(mass, first_hit),
        "classwise bin counts": lambda: _classwise_bins(probs),
    }


def _cmce_bins(mass, first_hit):
    from calib.core.binning import BinCounter

    BinCounter(25).add(mass, first_hit=first_hit)


def _classwise_bins(probs):
    from calib.core.binning import BinCounter

    BinCounter(15, probs.shape[1]).add(probs, by_column=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--classes", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    compiled = kernels._compiled
    if compiled is None:
        from calib import _kernels as compiled  # raises where the extension is not built
    paths = {"compiled": compiled, "numpy": None}
    print(f"{args.rows} x {args.classes} float64, best of {args.repeat}; numpy {np.__version__}")
    print(f"{'kernel':28s} {'compiled s':>11s} {'numpy s':>9s} {'numpy/compiled':>15s}")
    for name, run in cases(args.rows, args.classes).items():
        best = {path: np.inf for path in paths}
        for _ in range(args.repeat):
            for path, module in paths.items():
                kernels._compiled, kernels._COMPILED_LOG = module, module is not None
                start = time.perf_counter()
                run()
                best[path] = min(best[path], time.perf_counter() - start)
        kernels._compiled, kernels._COMPILED_LOG = compiled, kernels._numpy_has_simd_log() is False
        print(f"{name:28s} {best['compiled']:11.3f} {best['numpy']:9.3f} {best['numpy'] / best['compiled']:15.1f}")


if __name__ == "__main__":
    main()
