"""Every command's JSON on the bundled sample data, run as a user runs them (``python -m calib``), for
the golden test (tests/contracts/test_golden.py): a change of structure must leave every key as it was and
every number as it was to the bit on the machine that recorded it. Outputs without JSON (apply's
arrays, synth's files) enter as the SHA-256 of their arrays, with three sums of each floating array
(:func:`float_sums`). Paths become their names relative to the scratch directory.

Across machines the last bits may move: NumPy and OpenBLAS choose their code by the CPU. The
commands run with NumPy's AVX-512 targets off and OpenBLAS's Haswell kernels (the code an AVX2
machine runs), and the test accepts a float within 1e-10 of its record (relative), and an array
whose digest differs when its sums are within 1e-10 (:data:`LAST_BITS`).

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
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"


def golden_path() -> Path:
    """The golden file of the active kernels' path: the C extension and the pure NumPy path compute
    the same formulas but may differ in the last bits, so each has its own record."""
    from calib.core.kernels import BACKEND

    return Path(__file__).resolve().parent / "data" / f"golden_{BACKEND}.json"


VAL = str(SAMPLE / "cifar10_val.npz")
TEST = str(SAMPLE / "cifar10_test.npz")


#: relative difference of a float (or of an array's sums) that counts as the last bits only
LAST_BITS = 1e-10


def same_bits_everywhere() -> str:
    """NumPy's CPU targets to switch off so that a record taken on one x86-64 machine holds on
    another: NumPy dispatches float64 exp, log and reductions to AVX-512 code where the CPU has it,
    and those differ from the AVX2 code in the last bit of some values (seen: a record taken on an
    AVX-512 machine differed on an AVX2 one in 115 numbers and digests on the NumPy path, 100 on the
    compiled one, by up to 1.7e-13 relative). With them off every x86-64 machine with AVX2 runs
    the same code. A target this machine lacks is ignored."""
    from numpy._core._multiarray_umath import __cpu_dispatch__

    return " ".join(target for target in __cpu_dispatch__ if target == "X86_V4" or target.startswith("AVX512"))


def _calib(work: Path, *args: str) -> None:
    env = {
        **os.environ,
        "COLUMNS": "120",
        "NO_COLOR": "1",
        "NPY_DISABLE_CPU_FEATURES": same_bits_everywhere(),
        "OPENBLAS_CORETYPE": "Haswell",
    }
    env.pop("GITHUB_STEP_SUMMARY", None)
    env.pop("GITHUB_OUTPUT", None)
    done = subprocess.run([sys.executable, "-m", "calib", *args], cwd=work, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise AssertionError(f"calib {' '.join(args)} exited {done.returncode}: {done.stderr}")


def float_sums(values: np.ndarray) -> list[float] | None:
    """sum x, sum |x| and sum x_i (i + 1) / n over the flattened floating ``values`` (None for other
    dtypes): a change beyond the last bits moves at least one of them."""
    if values.dtype.kind != "f":
        return None
    flat = values.astype(np.float64).ravel()
    weights = np.arange(1, flat.size + 1) / max(flat.size, 1)
    return [float(flat.sum()), float(np.abs(flat).sum()), float(flat @ weights)]


def _arrays_digest(path: Path) -> dict[str, dict]:
    """SHA-256 of each array (dtype, shape and bytes; a parquet column: its JSON) of a
    .npz/.npy/.parquet output, and its :func:`float_sums`."""
    if path.suffix == ".parquet":
        table = pq.read_table(path)
        out = {}
        for name in table.column_names:
            column = table.column(name).combine_chunks()
            text = json.dumps(column.to_pylist()).encode()
            while pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type):
                column = column.flatten()
            sums = float_sums(column.to_numpy(zero_copy_only=False))
            out[name] = {"sha256": hashlib.sha256(text).hexdigest(), "sums": sums}
        return out
    loaded = np.load(path)
    arrays = {path.stem: loaded} if isinstance(loaded, np.ndarray) else {name: loaded[name] for name in loaded.files}
    return {
        name: {
            "sha256": hashlib.sha256(f"{a.dtype}{a.shape}".encode() + np.ascontiguousarray(a).tobytes()).hexdigest(),
            "sums": float_sums(a),
        }
        for name, a in sorted(arrays.items())
    }


def differences(output: object, record: object, where: str = "") -> list[str]:
    """Where ``output`` differs from ``record`` beyond the last bits (:data:`LAST_BITS`): keys,
    strings, integers and non-floating arrays exactly; floats and floating arrays' sums relatively."""
    if isinstance(record, dict) and isinstance(output, dict):
        if set(record) == {"sha256", "sums"} and set(output) == set(record):
            if output["sha256"] == record["sha256"]:
                return []
            if record["sums"] is None or output["sums"] is None:
                return [f"{where}: digest {output['sha256']} != {record['sha256']}"]
            return differences(output["sums"], record["sums"], f"{where} (sums)")
        if set(output) != set(record):
            return [f"{where}: keys {sorted(output)} != {sorted(record)}"]
        return [line for key in record for line in differences(output[key], record[key], f"{where}/{key}")]
    if isinstance(record, list) and isinstance(output, list) and len(record) == len(output):
        return [line for i, (a, b) in enumerate(zip(output, record)) for line in differences(a, b, f"{where}[{i}]")]
    if isinstance(record, float) and isinstance(output, float):
        close = output == record or abs(output - record) <= LAST_BITS * max(abs(output), abs(record))
        return [] if close else [f"{where}: {output!r} != {record!r}"]
    return [] if output == record and type(output) is type(record) else [f"{where}: {output!r} != {record!r}"]


def _not_json(constant: str):
    raise ValueError(f"{constant} is not JSON: an undefined value is null")


def _json(work: Path, name: str) -> object:
    """A command's JSON output, read as strictly as other tools read it (NaN and Infinity refused)."""
    text = (work / name).read_text().replace(str(work) + "/", "").replace(str(SAMPLE) + "/", "sample_data/")
    report = json.loads(text, parse_constant=_not_json)
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
    np.save(work / "unlabelled.npy", np.load(TEST)["logits"])
    _calib(work, "evaluate", "unlabelled.npy", "--bundle", "b_ts", "--fail-if", "est_accuracy<0.9", "--json", "ev_estimates.json")
    out["evaluate without labels"] = _json(work, "ev_estimates.json")
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
