"""Change gates against a baseline report of other rows (the unpaired comparison): how often they
fail between two random halves of one model's test set (false alarms), and how often they catch
the same halves after the candidate's logits are sharpened (power). Not a test.

    python -m benchmarks.unpaired_gates --pairs 40 --out results/

For each pair the test set is split in random halves; `calib evaluate HALF_A --json a.json` writes
the baseline (200 bootstrap replicates, the default with --json), and `calib evaluate HALF_B
--baseline a.json --max-increase METRIC=AMOUNT` is the gate, run as a user runs it (a subprocess),
with the default noise reading (the unpaired bootstrap: the two reports' rows differ) and with
--ignore-noise (the raw values, which is what a baseline of other rows got before). Writes
results/unpaired_gates.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.results import write_results

ROOT = Path(__file__).resolve().parents[1]
DATASETS = {
    "CIFAR-10 test": ROOT / "tests" / "data" / "cifar10_resnet110_test.npz",
    "CIFAR-100 test": ROOT / "tests" / "data" / "cifar100_resnet110_test.npz",
}
GATES = (("ece", "10%"), ("ece", "0"), ("cmce", "0.001"), ("nll", "0"))
SHARPENED = 1.5  # the candidate half's logits times this: over-confident, a true worsening


def evaluate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "calib", "evaluate", *args], capture_output=True, text=True)


def gate_outcome(folder: Path, candidate: Path, metric: str, amount: str, *extra: str) -> str:
    out = folder / "gate.json"
    done = evaluate(
        str(candidate), "--no-vece", "--metrics", metric, "--baseline", str(folder / "base.json"),
        "--max-increase", f"{metric}={amount}", "--json", str(out), *extra,
    )  # fmt: skip
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stderr)
    return json.loads(out.read_text())["gates"][0]["outcome"]


def run(pairs: int, seed: int) -> list[dict]:
    rows = []
    for dataset, path in DATASETS.items():
        data = np.load(path)
        logits, labels = data["logits"].astype(np.float64), data["labels"]
        rng = np.random.default_rng(seed)
        counts = {}
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            for _ in range(pairs):
                order = rng.permutation(len(labels))
                base, cand = order[: len(order) // 2], order[len(order) // 2 :]
                np.savez(folder / "a.npz", logits=logits[base], labels=labels[base])
                np.savez(folder / "b.npz", logits=logits[cand], labels=labels[cand])
                np.savez(folder / "worse.npz", logits=logits[cand] * SHARPENED, labels=labels[cand])
                for metric, amount in GATES:
                    done = evaluate(str(folder / "a.npz"), "--no-vece", "--metrics", metric, "--json", str(folder / "base.json"))
                    if done.returncode != 0:
                        raise RuntimeError(done.stderr)
                    key = (metric, amount)
                    tally = counts.setdefault(key, {"fail": 0, "inconclusive": 0, "pass": 0, "raw_fail": 0, "caught": 0})
                    tally[gate_outcome(folder, folder / "b.npz", metric, amount)] += 1
                    tally["raw_fail"] += gate_outcome(folder, folder / "b.npz", metric, amount, "--ignore-noise") == "fail"
                    tally["caught"] += gate_outcome(folder, folder / "worse.npz", metric, amount) == "fail"
        for (metric, amount), tally in counts.items():
            rows.append({"dataset": dataset, "gate": f"--max-increase {metric}={amount}", "pairs": pairs, **tally})
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| data (halves of) | gate | pairs | fail (false alarm) | inconclusive | pass | raw values: fail | "
        f"caught, candidate's logits x {SHARPENED} |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | `{r['gate']}` | {r['pairs']} | {r['fail']} | {r['inconclusive']} | {r['pass']} | "
            f"{r['raw_fail']} | {r['caught']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results")
    args = parser.parse_args()
    rows = run(args.pairs, args.seed)
    write_results(Path(args.out), "unpaired_gates", rows)
    print(table(rows))


if __name__ == "__main__":
    main()
