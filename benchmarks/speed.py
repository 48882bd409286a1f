"""Speed suite: calib against the peers and against the floor, each line a fresh process (not a test).

    python -m benchmarks.speed --sizes 10000x100 50000x1000 20000x10000 --repeats 3 --out results/
    python -m benchmarks.speed --sizes 50000x1000 --tasks probabilities --repeats 5 --out results/conformal

Every line is one command in a fresh Python process, started by the wrapper of
:mod:`benchmarks.evaluate_speed`, which reports its wall time and peak RSS; a line's time is the
best of --repeats. Every process starts from the same files: float32 logits ``z.npy`` (N x K, z ~ 3
N(0, 1)) with labels drawn from softmax(z / 2), and for the conformal lines a 20% calibration file
and the 80% test logits. So start-up, reading and the softmax are paid by calib and peers alike; the
floor is a process that loads ``z.npy`` and sorts it once along rows. Above 10^8 values (20k x 10000)
each line runs once.

Lines: top-label ECE (15 bins; calib evaluate, netcal, torchmetrics), smooth ECE (calib, relplot),
temperature-scaling fit (calib fit, probmetrics), V-ECE squared with the TS recalibrator, 5 folds
(calib, probmetrics calib-err_brier_ts-mix_cv-5), split-conformal sets at alpha 0.1 with the LAC /
msp and APS scores (calib fit mr + apply --what sets, MAPIE SplitConformalClassifier on the
probabilities through a pass-through estimator, its defaults: MAPIE's APS sets also take the label
that crosses the threshold, so they differ from docs/calibrators.md's {y : V(x, y) <= q} by design; the
"agreement" line gives the share of rows whose sets are identical), and calib's conformal calibrators (fit and apply
of mr and ats-gq, probabilities out). Each line reports its value so the agreement is visible.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.calibrator_speed import draw
from benchmarks.evaluate_speed import CALIB, FLOOR, measure

PY = sys.executable
LOAD = (
    "import numpy as np, sys, json\n"
    "z = np.load(sys.argv[1]).astype(np.float64); y = np.load(sys.argv[2])\n"
    "p = np.exp(z - z.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)\n"
)
PEERS = {
    "netcal": LOAD + "from netcal.metrics import ECE\nprint(json.dumps(float(ECE(bins=15).measure(p, y))))",
    "torchmetrics": (
        "import numpy as np, sys, json, torch\n"
        "from torchmetrics.functional.classification import multiclass_calibration_error\n"
        "z = torch.from_numpy(np.load(sys.argv[1])); y = torch.from_numpy(np.load(sys.argv[2]))\n"
        "p = torch.softmax(z.double(), 1)\n"
        "print(json.dumps(float(multiclass_calibration_error(p, y, num_classes=p.shape[1], n_bins=15, norm='l1'))))"
    ),
    "relplot": LOAD + "import relplot\nprint(json.dumps(float(relplot.smECE(p.max(1), (p.argmax(1) == y).astype(float)))))",
    "probmetrics ts": (
        "import numpy as np, sys, json, torch\n"
        "from probmetrics.calibrators import get_calibrator\n"
        "from probmetrics.distributions import CategoricalLogits\n"
        "c = get_calibrator('temp-scaling')\n"
        "c.fit_torch(CategoricalLogits(torch.from_numpy(np.load(sys.argv[1]))), torch.from_numpy(np.load(sys.argv[2])))\n"
        "print(json.dumps(1.0 / float(c.invtemp_)))"
    ),
    "probmetrics vece": (
        "import numpy as np, sys, json, torch\n"
        "from probmetrics.metrics import Metrics\n"
        "m = Metrics.from_names(['calib-err_brier_ts-mix_cv-5'])\n"
        "z = torch.from_numpy(np.load(sys.argv[1])); y = torch.from_numpy(np.load(sys.argv[2]))\n"
        "print(json.dumps(float(m.compute_all_from_labels_logits(y, z)['calib-err_brier_ts-mix_cv-5'])))"
    ),
    "mapie": (
        "import numpy as np, sys, json\n"
        "from sklearn.base import BaseEstimator, ClassifierMixin\n"
        "from mapie.classification import SplitConformalClassifier\n"
        "class Given(ClassifierMixin, BaseEstimator):\n"
        "    def fit(self, X, y): self.classes_ = np.arange(X.shape[1]); return self\n"
        "    def predict_proba(self, X): return X\n"
        "    def predict(self, X): return X.argmax(1)\n"
        "def softmax(z):\n"
        "    p = np.exp(z - z.max(1, keepdims=True)); return p / p.sum(1, keepdims=True)\n"
        "cal = np.load(sys.argv[1]); zt = np.load(sys.argv[2]).astype(np.float64)\n"
        "pc, pt = softmax(cal['logits'].astype(np.float64)), softmax(zt)\n"
        "m = SplitConformalClassifier(Given().fit(pc, cal['labels']), confidence_level=0.9, conformity_score=sys.argv[3], prefit=True)\n"
        "m.conformalize(pc, cal['labels'])\n"
        "sets = m.predict_set(pt)[1][:, :, 0]\n"
        "np.save(sys.argv[4], sets)\n"
        "print(json.dumps(float(sets.sum(1).mean())))"
    ),
}
MAPIE_SCORE = {"msp": "lac", "aps": "aps"}


def timed(command, repeats, timeout):
    """(best seconds, peak MiB of that run, stdout of the last run) or a note when it failed."""
    best = None
    for _ in range(repeats):
        try:
            seconds, mib = measure(command, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"note": f"over {timeout:.0f} s"}
        except subprocess.CalledProcessError as error:
            last = (error.stderr or "").strip().splitlines()
            return {"note": "failed: " + (last[-1] if last else f"exit {error.returncode}")}
        if best is None or seconds < best[0]:
            best = (seconds, mib)
    return {"seconds": best[0], "peak MiB": best[1]}


def value_of(command):
    """The JSON a command prints: a peer script's value, or calib's ``evaluate --json -`` report."""
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def write_inputs(tmp: Path, n: int, k: int) -> tuple[Path, Path, Path, Path]:
    """The suite's files in ``tmp``: float32 logits z.npy (N x K, seed 0) and labels y.npy, and for the
    conformal lines cal.npz (the first 20% of the rows, with labels) and test.npy (the other 80%)."""
    z, labels = draw(np.random.default_rng(0), n, k)
    zp, yp, cal, test = tmp / "z.npy", tmp / "y.npy", tmp / "cal.npz", tmp / "test.npy"
    np.save(zp, z)
    np.save(yp, labels)
    n_cal = n // 5
    np.savez(cal, logits=z[:n_cal], labels=labels[:n_cal])
    np.save(test, z[n_cal:])
    return zp, yp, cal, test


def size_lines(tmp: Path, n: int, k: int, repeats: int, timeout: float, tasks=None):
    zp, yp, cal, test = write_inputs(tmp, n, k)
    # --bootstrap 0: --json alone would draw the gates' 200 replicates; time the metrics only
    evaluate = [*CALIB, "evaluate", str(zp), "--labels", str(yp), "--bootstrap", "0", "--json", "-"]
    lines = [("floor", "load + sort", [PY, "-c", FLOOR, str(zp)], None)]

    def metric(key, *extra):
        command = evaluate + ["--metrics", key, *extra]
        return command, lambda: value_of(command)["metrics"][key]["value"]

    for task, key, extra, peers in (
        ("top-label ECE", "ece", [], ["netcal", "torchmetrics"]),
        ("smooth ECE", "smece", [], ["relplot"]),
        ("V-ECE sq (ts, 5 folds)", "vece_sq", ["--vece-recalibrator", "ts"], ["probmetrics vece"]),
    ):
        command, value = metric(key, *extra)
        lines.append((task, "calib", command, value))
        for peer in peers:
            peer_command = [PY, "-c", PEERS[peer], str(zp), str(yp)]
            lines.append((task, peer, peer_command, lambda c=peer_command: value_of(c)))
    ts_bundle = tmp / "ts"
    lines.append(
        (
            "TS fit",
            "calib",
            [*CALIB, "fit", str(zp), "--labels", str(yp), "--method", "ts", "--out", str(ts_bundle), "--force"],
            lambda: json.loads((ts_bundle / "manifest.json").read_text())["fit_report"]["temperature"],
        )
    )
    command = [PY, "-c", PEERS["probmetrics ts"], str(zp), str(yp)]
    lines.append(("TS fit", "probmetrics", command, lambda c=command: value_of(c)))
    for score in ("msp", "aps"):
        bundle, sets = tmp / f"mr-{score}", tmp / f"sets-{score}.npz"
        fit = [*CALIB, "fit", str(cal), "--method", "mr", "--option", f"score={score}", "--out", str(bundle), "--force"]
        apply = [*CALIB, "apply", str(bundle), str(test), "--what", "sets", "--out", str(sets), "--force"]
        task = f"conformal sets ({score} / {MAPIE_SCORE[score]})"
        lines.append((task, "calib fit", fit, None))
        lines.append((task, "calib apply", apply, lambda s=sets: float(np.load(s)["sets"].sum(1).mean())))
        mapie_sets = tmp / f"mapie-{score}.npy"
        command = [PY, "-c", PEERS["mapie"], str(cal), str(test), MAPIE_SCORE[score], str(mapie_sets)]
        lines.append((task, "mapie", command, lambda c=command: value_of(c)))
    for method in ("mr", "ats-gq"):
        bundle, out = tmp / f"{method}-probs", tmp / f"{method}.npy"
        lines.append(
            (
                f"{method} probabilities",
                "calib fit (20% rows)",
                [*CALIB, "fit", str(cal), "--method", method, "--out", str(bundle), "--force"],
                None,
            )
        )
        lines.append(
            (
                f"{method} probabilities",
                "calib apply (80% rows)",
                [*CALIB, "apply", str(bundle), str(test), "--out", str(out), "--force"],
                None,
            )
        )
    rows, floor = [], None
    if n * k > 10**8:
        repeats = 1  # one run of each line at 20,000 x 10,000: some peers take minutes
    if tasks:
        lines = [line for line in lines if line[0] == "floor" or any(word in line[0] for word in tasks)]
    for task, who, command, value in lines:
        row = {"size": f"{n}x{k}", "task": task, "tool": who, **timed(command, repeats, timeout)}
        if "seconds" in row:
            floor = row["seconds"] if task == "floor" else floor
            row["x floor"] = round(row["seconds"] / floor, 2)
            row["seconds"] = round(row["seconds"], 3)
            row["peak MiB"] = round(row["peak MiB"])
            if value is not None:
                try:
                    row["value"] = round(float(value()), 6)
                except (subprocess.CalledProcessError, KeyError, OSError, ValueError) as error:
                    row["value note"] = f"{error.__class__.__name__}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    for score in ("msp", "aps"):
        mine, theirs = tmp / f"sets-{score}.npz", tmp / f"mapie-{score}.npy"
        if mine.exists() and theirs.exists():
            a, b = np.load(mine)["sets"], np.load(theirs)
            rows.append(
                {
                    "size": f"{n}x{k}",
                    "task": f"conformal sets ({score} / {MAPIE_SCORE[score]})",
                    "tool": "agreement",
                    "value": round(float(np.mean(np.all(a == b, axis=1))), 6),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def markdown(rows):
    head = ["size", "task", "tool", "seconds", "x floor", "peak MiB", "value"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r.get(h, "")) for h in head]
        if "note" in r:
            cells[3] = r["note"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["10000x100", "50000x1000", "20000x10000"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=400)
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        help="run only the lines whose task contains one of these words (the floor always runs)",
    )
    args = parser.parse_args(argv)
    rows = []
    for size in args.sizes:
        n, k = map(int, size.split("x"))
        with tempfile.TemporaryDirectory() as tmp:
            rows += size_lines(Path(tmp), n, k, args.repeats, args.timeout, args.tasks)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "speed.json").write_text(json.dumps(rows, indent=1))
    text = markdown(rows)
    (args.out / "speed.md").write_text(text + "\n")
    print(text)
    return text


if __name__ == "__main__":
    main()
