"""ONNX export against `calib apply` on real models (not a test; tests/unit/test_onnx_export.py runs the
same comparison on fewer rows).

    python -m benchmarks.onnx_parity

Every method that exports, fitted on the validation half of CIFAR-10 and CIFAR-100 (ResNet-110
logits) and on 20 Newsgroups probabilities (first half), applied to the other rows by calib and by
onnxruntime: the largest |difference| of the probabilities with the graph in float32 and in
float64, the rows whose sets differ, and the rows with a score within 1e-6 of the threshold (where
a set may differ). docs/export.md has the table.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from calib.registry import onnx_cases

#: Every method with a graph, with the options that exercise its variants (from the registries).
EXPORTED = tuple(onnx_cases())
#: The methods among them that build sets.
SET_METHODS = ("mr", "conformal-ts", "ats-gq")
#: A score this close to the set's threshold may land on either side of it in float32 inputs'
#: rounding or in another library's arithmetic.
NEAR_THRESHOLD = 1e-6
DATA = os.path.join(os.path.dirname(__file__), os.pardir, "tests", "data")


def datasets(rows: int | None = None) -> dict:
    """{name: (calibration scores, labels, test scores)} of the bundled real models; ``rows`` caps
    the calibration and test rows."""
    out = {}
    for name in ("cifar10_resnet110", "cifar100_resnet110"):
        val, test = (np.load(os.path.join(DATA, f"{name}_{part}.npz")) for part in ("val", "test"))
        out[name] = (val["logits"][:rows], val["labels"][:rows], test["logits"][:rows])
    news = np.load(os.path.join(DATA, "news20_probs.npz"))
    half = len(news["labels"]) // 2
    cap = half if rows is None else min(rows, half)
    out["news20_probs"] = (news["probs"][:cap], news["labels"][:cap], news["probs"][half : half + cap])
    return out


def compare(method: str, options: dict, scores, labels, test) -> dict:
    """Fit ``method`` on (scores, labels), apply it to ``test`` with calib and with onnxruntime
    (float32 and float64 graphs); the differences."""
    import onnxruntime

    import calib
    from calib.api import as_predictions
    from calib.calibrators.base import builds_sets
    from calib.calibrators.conformal import nonconformity
    from calib.core.numerics import edge_slack, softmax

    fitted = calib.calibrator(method, **options).fit(scores, labels)
    result = {}
    for dtype in ("float32", "float64"):
        started = time.perf_counter()
        session = onnxruntime.InferenceSession(fitted.to_onnx(dtype=dtype), providers=["CPUExecutionProvider"])
        given = np.asarray(test, dtype=dtype)
        outputs = session.run(None, {session.get_inputs()[0].name: given})
        result[f"{dtype} s"] = time.perf_counter() - started
        reference = fitted.predict_proba(given)
        result[f"{dtype} max |diff|"] = float(np.abs(outputs[0] - reference).max())
        if builds_sets(fitted.fitted) and dtype == "float32":
            sets = fitted.predict_sets(given)
            differ = (outputs[1] != sets).any(axis=1)
            preds = as_predictions(given, kind=fitted.input_kind)
            logits, probs = preds.logits_and_given()
            model_probs = probs if probs is not None else softmax(logits)
            scores_v = nonconformity(model_probs, fitted.fitted.options)
            q = np.asarray(fitted.fitted.threshold_["q"], dtype=np.float64)
            limit = q + edge_slack(q)
            near = (np.abs(scores_v - limit) <= NEAR_THRESHOLD).any(axis=1)
            result["rows with other sets"] = int(differ.sum())
            result["of them near q"] = int((differ & near).sum())
            result["rows near q"] = int(near.sum())
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="cap the calibration and test rows")
    args = parser.parse_args(argv)
    data = datasets(args.rows)
    print("largest |difference| of the probabilities, graph in float32 / float64; sets: rows whose sets differ / rows near q")
    print(f"\n| method | {' | '.join(data)} | sets |")
    print("|---|" + "---|" * (len(data) + 1))
    for method, options in EXPORTED:
        cells, differ, near = [], 0, 0
        for scores, labels, test in data.values():
            r = compare(method, options, scores, labels, test)
            cells.append(f"{r['float32 max |diff|']:.1e} / {r['float64 max |diff|']:.1e}")
            differ += r.get("rows with other sets", 0)
            near += r.get("rows near q", 0)
        label = method + "".join(f" {k}={v}" for k, v in options.items())
        sets = f"{differ} / {near}" if method in SET_METHODS else ""
        print(f"| {label} | {' | '.join(cells)} | {sets} |", flush=True)


if __name__ == "__main__":
    main()
