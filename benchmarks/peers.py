"""calib against the peers that do the same job, in one process, as ratios (not a test).

    python -m benchmarks.peers --sizes 10000x100 50000x1000 --repeats 3 --out results/

Lines: top-label ECE (15 bins) against netcal and torchmetrics, smooth ECE against relplot,
temperature-scaling fit against probmetrics, each beside the floor (np.load of the float32 .npy
and one np.sort along rows). Every time is the best of --repeats in this process, inputs already in
memory for the peers (they take arrays) and read from the same .npy by calib's own reader for calib
(so calib pays its I/O and validation). Peers are imported from the test extra.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.results import write_results


def best_of(repeats, fn):
    times, value = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["10000x100", "50000x1000"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    from calib.evaluate import compute_metrics
    from calib.io import read_predictions
    from calib.metrics import MetricConfig
    from calib.numerics import softmax
    from calib.registry import calibrator_class

    rows = []
    rng = np.random.default_rng(0)
    for size in args.sizes:
        n, k = map(int, size.split("x"))
        z = (3.0 * rng.normal(size=(n, k))).astype(np.float32)
        labels = (softmax(z.astype(np.float64) / 2.0).cumsum(1) > rng.random((n, 1))).argmax(1)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, "z.npy")
            np.save(path, z)
            np.save(Path(tmp, "y.npy"), labels)
            floor, _ = best_of(args.repeats, lambda: np.sort(np.load(path), axis=1))
            probs = softmax(z.astype(np.float64))

            def calib_metric(key):
                preds = read_predictions(str(path), labels_path=str(Path(tmp, "y.npy")))
                return compute_metrics(preds, [key], MetricConfig())[0][key]["value"]

            lines = {}
            lines["ece: calib"] = best_of(args.repeats, lambda: calib_metric("ece"))

            def netcal_ece():
                from netcal.metrics import ECE

                return float(ECE(bins=15).measure(probs, labels))

            def torchmetrics_ece():
                import torch
                from torchmetrics.functional.classification import multiclass_calibration_error

                return float(multiclass_calibration_error(torch.from_numpy(probs), torch.from_numpy(labels), num_classes=k,
                                                          n_bins=15, norm="l1"))

            lines["ece: netcal"] = best_of(args.repeats, netcal_ece)
            lines["ece: torchmetrics"] = best_of(args.repeats, torchmetrics_ece)
            lines["smece: calib"] = best_of(args.repeats, lambda: calib_metric("smece"))

            def relplot_smece():
                import relplot

                return float(relplot.smECE(probs.max(1), (probs.argmax(1) == labels).astype(float)))

            lines["smece: relplot"] = best_of(args.repeats, relplot_smece)
            lines["ts fit: calib"] = best_of(args.repeats, lambda: calibrator_class("ts")().fit(z.astype(np.float64), labels).temperature_)

            def probmetrics_ts():
                import torch
                from probmetrics.calibrators import get_calibrator
                from probmetrics.distributions import CategoricalLogits

                calibrator = get_calibrator("temp-scaling")
                calibrator.fit_torch(CategoricalLogits(torch.as_tensor(z)), torch.as_tensor(labels))
                return 1.0 / float(calibrator.invtemp_)

            lines["ts fit: probmetrics"] = best_of(args.repeats, probmetrics_ts)
        for name, (seconds, value) in lines.items():
            rows.append({"size": size, "line": name, "seconds": round(seconds, 4), "x floor": round(seconds / floor, 2),
                         "floor s": round(floor, 4), "value": round(float(value), 6)})
            print(json.dumps(rows[-1]), flush=True)
    write_results(args.out, "peers", rows)


if __name__ == "__main__":
    main()
