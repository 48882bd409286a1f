"""Gates on the worst of many labels or slices, on perfectly calibrated worlds (false alarms and
passes) and on worlds with one bad label or slice (catches). Not a test.

    python -m benchmarks.group_gates --draws 100 --out results/

Worlds (every draw new rows, seeded):

- labels: a multi-label model over 50 labels, z ~ N(0, 2^2) per (row, label), y ~ Bernoulli(sigmoid(z)),
  scores z: every label's true ECE is 0. Gate ``max_label:ece_pos>T``.
- slices: a 10-class model, z ~ N(0, 2^2) per (row, class), y ~ Categorical(softmax(z)), scores z,
  rows dealt into 20 random slices: every slice's true ECE is 0. Gates ``max_group:ece>T`` and
  ``max_group:cmce>T``.
- bad: the same with one label's (one slice's) logits divided by 2 (under-confident), gated at half
  its true error (ECE of label or slice, measured on 10^6 rows of that world).
- change: per-label change gates between two perfectly calibrated models of the same rows (the
  baseline sees z = u + v, the candidate only u, its probabilities E[sigmoid(u + v) | u]):
  ``--max-increase ece_pos=D`` per label.

Every gate runs through ``calib.evaluate`` as a notebook does (the command line gives the same
outcome: tests/contracts/test_api_cli_parity.py). Writes results/group_gates.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from scipy.special import expit, softmax

import calib
from benchmarks.results import write_results
from calib.evaluation.gate_parsing import parse_change_gates

LABELS, SLICES, CLASSES, SCALE = 50, 20, 10, 2.0
THRESHOLDS = (0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.1, 0.15, 0.2, 0.3, 0.45)
ALLOWED = (0.0, 0.005, 0.01, 0.02)


def label_world(n: int, rng: np.random.Generator, bad: bool = False):
    z = rng.normal(0.0, SCALE, (n, LABELS))
    y = (rng.random((n, LABELS)) < expit(z)).astype(np.int64)
    if bad:
        z[:, 0] /= 2.0
    return z, y


def slice_world(n: int, rng: np.random.Generator, bad: bool = False):
    z = rng.normal(0.0, SCALE, (n, CLASSES))
    p = softmax(z, axis=1)
    y = (rng.random((n, 1)) > np.cumsum(p, axis=1)).sum(axis=1).clip(0, CLASSES - 1)
    groups = rng.integers(SLICES, size=n)
    if bad:
        z[groups == 0] /= 2.0
    return z, y, groups


def true_bad_errors() -> dict[str, float]:
    """The true ECE of the bad label (exact: sigmoid(z / 2) is monotone in z) and of the bad slice
    (top-label: |confidence - E[correct | confidence]|, the expectation in 200 equal-mass bins of
    10^6 rows, with no label noise)."""
    rng = np.random.default_rng(12345)
    z = rng.normal(0.0, SCALE, 1_000_000)
    label = float(np.abs(expit(z / 2.0) - expit(z)).mean())
    logits = rng.normal(0.0, SCALE, (1_000_000, CLASSES))
    top = logits.argmax(axis=1)
    confidence = softmax(logits / 2.0, axis=1).max(axis=1)
    correct = softmax(logits, axis=1)[np.arange(len(top)), top]
    order = np.argsort(confidence)
    bins = np.array_split(order, 200)
    slice_error = sum(np.abs(confidence[b] - correct[b].mean()).sum() for b in bins) / len(top)
    return {"ece_pos": label, "ece": float(slice_error)}


def outcomes(report) -> list[str]:
    return [gate.outcome for gate in report.entries.gates]


def run_thresholds(world: str, n: int, draws: int, seed: int) -> list[dict]:
    rng = np.random.default_rng([seed, n, len(world)])
    metrics = ("ece_pos",) if world == "labels" else ("ece", "cmce")
    tallies = {(m, t): {"fail": 0, "inconclusive": 0, "pass": 0} for m in metrics for t in THRESHOLDS}
    floors = {m: [] for m in metrics}
    aggregate = "max_label" if world == "labels" else "max_group"
    for _ in range(draws):
        if world == "labels":
            z, y = label_world(n, rng)
            groups = None
        else:
            z, y, groups = slice_world(n, rng)
        gates = [f"{aggregate}:{m}>{t}" for m in metrics for t in THRESHOLDS]
        report = calib.evaluate(
            z, y, groups=groups, kind="logits", request=calib.EvaluationRequest.of(metrics=list(metrics), gates=gates)
        )
        for gate, result in zip(report.entries.gates, outcomes(report)):
            tallies[(gate.metric, gate.fields["threshold"])][result] += 1
        section = report.entries.bootstrap.floor_table()["by_group"]
        for m in metrics:
            floors[m].append(max(section[m]["values"].values()))
    rows = []
    for (m, t), tally in tallies.items():
        floor = float(np.median(floors[m]))
        rows.append(
            {"world": world, "n": n, "gate": f"{aggregate}:{m}>{t:g}", "draws": draws, **tally,
             "floor (median of the largest)": round(floor, 4), "threshold / floor": round(t / floor, 2)}
        )  # fmt: skip
    return rows


def run_bad(world: str, n: int, draws: int, seed: int, truth: dict) -> list[dict]:
    rng = np.random.default_rng([seed, n, len(world), 1])
    metric = "ece_pos" if world == "labels" else "ece"
    aggregate = "max_label" if world == "labels" else "max_group"
    threshold = round(truth[metric] / 2.0, 4)
    tally = {"fail": 0, "inconclusive": 0, "pass": 0}
    for _ in range(draws):
        if world == "labels":
            z, y = label_world(n, rng, bad=True)
            groups = None
        else:
            z, y, groups = slice_world(n, rng, bad=True)
        report = calib.evaluate(
            z, y, groups=groups, request=calib.EvaluationRequest.of(metrics=[metric], gates=[f"{aggregate}:{metric}>{threshold}"])
        )
        tally[outcomes(report)[0]] += 1
    return [
        {"world": f"{world}, one bad", "n": n, "gate": f"{aggregate}:{metric}>{threshold:g}", "draws": draws, **tally,
         "true error of the bad one": round(truth[metric], 4)}
    ]  # fmt: skip


def run_change(n: int, draws: int, seed: int) -> list[dict]:
    """Per-label change gates between two perfectly calibrated models of the same rows."""
    rng = np.random.default_rng([seed, n, 7])
    nodes, weights = np.polynomial.hermite.hermgauss(40)
    tallies = {allowed: {"fail": 0, "inconclusive": 0, "pass": 0} for allowed in ALLOWED}
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "base.json"
        for _ in range(draws):
            u = rng.normal(0.0, SCALE / np.sqrt(2), (n, LABELS))
            v = rng.normal(0.0, SCALE / np.sqrt(2), (n, LABELS))
            y = (rng.random((n, LABELS)) < expit(u + v)).astype(np.int64)
            spread = np.sqrt(2.0) * SCALE / np.sqrt(2)
            coarse = np.einsum("j,nlj->nl", weights / np.sqrt(np.pi), expit(u[..., None] + spread * nodes))
            base = calib.evaluate(u + v, y, kind="logits", request=calib.EvaluationRequest.of(metrics=["ece_pos"], bootstrap=200))
            path.write_text(json.dumps(base.to_dict()))
            specs = [f"ece_pos={allowed}" for allowed in ALLOWED]
            change = parse_change_gates(specs, str(path))
            report = calib.evaluate(
                coarse,
                y,
                kind="probs",
                request=calib.EvaluationRequest.of(metrics=["ece_pos"], increase_gates=change, bootstrap=200),
            )
            for allowed in ALLOWED:
                per_label = [g for g in report.entries.gates if g.to_json().get("allowed") == allowed and "group" in g.to_json()]
                results = [g.outcome for g in per_label]
                worst = "fail" if "fail" in results else "inconclusive" if "inconclusive" in results else "pass"
                tallies[allowed][worst] += 1
    return [
        {
            "world": "change, both perfect",
            "n": n,
            "gate": f"--max-increase ece_pos={allowed:g} per label",
            "draws": draws,
            **tally,
        }
        for allowed, tally in tallies.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parts", nargs="+", default=["labels", "slices", "bad", "change"])
    parser.add_argument("--out", default="results")
    args = parser.parse_args()
    rows = []
    truth = true_bad_errors() if "bad" in args.parts else {}
    for n in args.sizes:
        for world in ("labels", "slices"):
            if world in args.parts:
                rows += run_thresholds(world, n, args.draws, args.seed)
        if "change" in args.parts:
            rows += run_change(n, args.draws, args.seed)
    if "bad" in args.parts:
        for world in ("labels", "slices"):
            rows += run_bad(world, max(args.sizes), args.draws, args.seed, truth)
    write_results(Path(args.out), "group_gates", rows)
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
