"""Every command's JSON on the bundled sample data, run as a user runs them (``python -m calib``), for
the golden test (tests/test_golden.py): a change of structure must leave every number and key as it
was, to the bit. Outputs without JSON (apply's arrays, synth's files) enter as the SHA-256 of their
arrays. Paths become their names relative to the scratch directory.

``python tests/golden.py`` (and again with ``CALIB_KERNELS=numpy``) rewrites tests/data/golden_*.json: only for a change meant to move numbers,
said in its commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"


def golden_path() -> Path:
    """The golden file of the active kernels' path: the C extension and the pure NumPy path compute
    the same formulas but may differ in the last bits, so each has its own record."""
    from calib.kernels import BACKEND

    return Path(__file__).resolve().parent / "data" / f"golden_{BACKEND}.json"


VAL = str(SAMPLE / "cifar10_val.npz")
TEST = str(SAMPLE / "cifar10_test.npz")


def _calib(work: Path, *args: str) -> None:
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}
    env.pop("GITHUB_STEP_SUMMARY", None)
    env.pop("GITHUB_OUTPUT", None)
    done = subprocess.run([sys.executable, "-m", "calib", *args], cwd=work, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise AssertionError(f"calib {' '.join(args)} exited {done.returncode}: {done.stderr}")


def _arrays_digest(path: Path) -> dict[str, str]:
    """SHA-256 of each array (dtype, shape and bytes) of a .npz/.npy/.parquet output."""
    if path.suffix == ".parquet":
        table = pq.read_table(path)
        return {
            name: hashlib.sha256(json.dumps(table.column(name).to_pylist()).encode()).hexdigest() for name in table.column_names
        }
    loaded = np.load(path)
    arrays = {path.stem: loaded} if isinstance(loaded, np.ndarray) else {name: loaded[name] for name in loaded.files}
    return {
        name: hashlib.sha256(f"{a.dtype}{a.shape}".encode() + np.ascontiguousarray(a).tobytes()).hexdigest()
        for name, a in sorted(arrays.items())
    }


def _json(work: Path, name: str) -> object:
    text = (work / name).read_text().replace(str(work) + "/", "").replace(str(SAMPLE) + "/", "sample_data/")
    report = json.loads(text)
    if isinstance(report, dict):
        report.pop("calib_version", None)
    return report


def run_all(work: Path) -> dict[str, object]:
    """Run each command in ``work`` and collect its JSON (or its arrays' digests) by a short name."""
    out: dict[str, object] = {}
    fits = {
        "ts": ["--method", "ts"],
        "ats-gq": ["--method", "ats-gq", "--alpha", "0.1", "--score", "aps"],
        "mr": ["--method", "mr"],
        "isotonic": ["--method", "isotonic"],
        "venn-abers": ["--method", "venn-abers"],
    }
    for name, options in fits.items():
        _calib(work, "fit", VAL, *options, "--out", f"b_{name}", "--json", f"fit_{name}.json")
        out[f"fit {name}"] = _json(work, f"fit_{name}.json")
        out[f"bundle {name}"] = {
            p.name: _json(work, f"b_{name}/{p.name}") if p.suffix == ".json" else _arrays_digest(p)
            for p in sorted((work / f"b_{name}").iterdir())
        }
    _calib(work, "apply", "b_ts", TEST, "--out", "ts.npz")
    out["apply ts"] = _arrays_digest(work / "ts.npz")
    _calib(work, "apply", "b_ats-gq", TEST, "--out", "sets.parquet")
    out["apply ats-gq"] = _arrays_digest(work / "sets.parquet")
    _calib(work, "apply", "b_mr", TEST, "--out", "mr.npy")
    out["apply mr"] = _arrays_digest(work / "mr.npy")
    _calib(work, "evaluate", TEST, "--bundle", "b_ts", "--json", "ev_default.json")
    out["evaluate --bundle ts"] = _json(work, "ev_default.json")
    _calib(
        work,
        "evaluate",
        TEST,
        "--no-vece",
        "--fail-if",
        "cmce>0.01",
        "--fail-if",
        "ece>0.0129",
        "--json",
        "ev_gates.json",
        "--junit",
        "gates.xml",
    )
    out["evaluate --fail-if"] = _json(work, "ev_gates.json")
    out["evaluate --junit"] = (work / "gates.xml").read_text().count("<testcase")
    _calib(
        work,
        "evaluate",
        TEST,
        "--bundle",
        "b_isotonic",
        "--no-vece",
        "--baseline",
        "ev_gates.json",
        "--max-increase",
        "cmce=0.001",
        "--max-decrease",
        "accuracy=0.5%",
        "--json",
        "ev_baseline.json",
    )
    out["evaluate --baseline"] = _json(work, "ev_baseline.json")
    labels = np.load(TEST)["labels"]
    np.save(work / "groups.npy", labels % 3)
    _calib(
        work,
        "evaluate",
        TEST,
        "--groups",
        "groups.npy",
        "--fail-if",
        "max_group:ece>0.02",
        "--bins",
        "10",
        "--metrics",
        "ece,cmce,nll,brier,accuracy,smece,isotonic_ece,debiased_ece_sq,ece_quantile,kde_ece_l1,vece_is_l1",
        "--bootstrap",
        "50",
        "--json",
        "ev_groups.json",
    )
    out["evaluate --groups"] = _json(work, "ev_groups.json")
    _calib(work, "evaluate", TEST, "--vece-recalibrator", "ts", "--bootstrap", "0", "--seed", "3", "--json", "ev_vece_ts.json")
    out["evaluate --vece-recalibrator ts"] = _json(work, "ev_vece_ts.json")
    logits = np.load(TEST)["logits"]
    np.savez(work / "part1.npz", logits=logits[:6000], labels=labels[:6000])
    np.savez(work / "part2.npz", logits=logits[6000:], labels=labels[6000:])
    for part in ("part1", "part2"):
        _calib(work, "evaluate", f"{part}.npz", "--no-vece", "--bootstrap", "0", "--emit-state", f"{part}_state.npz")
    _calib(work, "merge-states", "part1_state.npz", "part2_state.npz", "--json", "merged.json")
    out["merge-states"] = _json(work, "merged.json")
    _calib(work, "diagnose", VAL, "--compare", "ts,isotonic,mr", "--out", "diag", "--bootstrap", "20")
    out["diagnose --compare"] = _json(work, "diag/report.json")
    _calib(work, "synth", "known-ce", "--classes", "4", "--n", "500", "--seed", "7", "--out", "synth.npz")
    out["synth known-ce"] = _arrays_digest(work / "synth.npz")
    return out


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        results = run_all(Path(tmp))
    golden_path().write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(f"wrote {golden_path()} ({len(results)} outputs)")
