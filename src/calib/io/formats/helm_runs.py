"""The run folders of Stanford CRFM's HELM (``helm-run`` writes
``benchmark_output/runs/<suite>/<run>/per_instance_stats.json`` beside ``stats.json``): each
evaluated instance is a row, its confidence HELM's own per-instance ``max_prob`` (the probability
the model gave its answer), its correctness HELM's ``exact_match`` truncated to 0 or 1 as HELM's
``compute_calibration_metrics`` truncates it. So the rows are answers (P(right), right), and calib's
``helm_*`` metrics on them are HELM's calibration numbers.

As HELM does, an instance without both stats is left out (counted in the input-kind line), and a
run whose model gave no log-probability (every ``logprob`` stat 0) has no calibration numbers:
refused. A run of several train trials is refused (HELM's numbers are means over trials; name one
trial's rows by evaluating a run of one). A suite folder (whose folders are runs) is one input,
each run a group (column ``task``).
"""

from __future__ import annotations

import json
import os

import numpy as np

from ...errors import InputError
from .base import Contents

#: The file that makes a folder a HELM run
RUN_FILE = "per_instance_stats.json"
#: The column of the run of each row
TASK_COLUMN = "task"


def run_folders(path: str) -> list[str]:
    """[path] for a HELM run folder (or its per-instance stats file), its run folders for a suite
    folder, else []."""
    if os.path.isfile(path) and os.path.basename(path) == RUN_FILE:
        return [os.path.dirname(path) or "."]
    if not os.path.isdir(path):
        return []
    if os.path.isfile(os.path.join(path, RUN_FILE)):
        return [path]
    found = (os.path.join(path, name) for name in sorted(os.listdir(path)))
    return [folder for folder in found if os.path.isfile(os.path.join(folder, RUN_FILE))]


def read_runs(folders: list[str], name: str) -> Contents:
    """The answers of HELM run folders ``folders``: max_prob against exact_match per instance."""
    import pyarrow as pa

    confidence: list[float] = []
    correct: list[int] = []
    tasks: list[str] = []
    counts, left_out = [], 0
    for folder in folders:
        run = os.path.basename(os.path.normpath(folder))
        values, skipped = _run_answers(os.path.join(folder, RUN_FILE))
        left_out += skipped
        confidence.extend(v for v, _ in values)
        correct.extend(c for _, c in values)
        tasks.extend([run] * len(values))
        counts.append(f"{run}: {len(values)} rows")
    if not correct:
        raise InputError(f"{name}: no instance holds both max_prob and exact_match")
    picked = f"HELM runs ({', '.join(counts)}): each instance's max_prob read as P(right) against its exact_match (truncated to 0 or 1)"
    if left_out:
        picked += f"; {left_out} instances without both left out, as HELM leaves them"
    carried = pa.table({TASK_COLUMN: pa.array(tasks)})
    by_task = TASK_COLUMN if len(folders) > 1 else None
    return Contents(
        np.asarray(confidence, dtype=np.float64),
        np.asarray(correct, dtype=np.int64),
        "probs",
        carried,
        (TASK_COLUMN,),
        picked,
        True,
        by_task,
        answers=True,
    )


def _run_answers(path: str) -> tuple[list[tuple[float, int]], int]:
    """((max_prob, correct) per instance of the run's per-instance stats, how many instances lack one)."""
    try:
        with open(path, encoding="utf-8") as handle:
            entries = json.load(handle)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not readable JSON ({exc}); a truncated file?") from None
    if not isinstance(entries, list):
        raise InputError(f"{path}: not HELM's per-instance stats (a list of instances)")
    trials = {entry.get("train_trial_index", 0) for entry in entries if isinstance(entry, dict)}
    if len(trials) > 1:
        raise InputError(
            f"{path}: {len(trials)} train trials; HELM's calibration numbers are means over trials, calib reads a run of one"
        )
    values, skipped, any_logprob = [], 0, False
    for number, entry in enumerate(entries):
        stats = _stats(entry, path, number)
        any_logprob = any_logprob or stats.get("logprob", 0.0) < 0.0
        if "max_prob" not in stats or "exact_match" not in stats:
            skipped += 1
            continue
        where = f"{path}: instance {entry.get('instance_id')!r}"
        max_prob, exact_match = stats["max_prob"], stats["exact_match"]
        if not 0.0 <= max_prob <= 1.0:
            raise InputError(f"{where}: max_prob {max_prob!r} outside [0, 1]")
        if not 0.0 <= exact_match <= 1.0:
            raise InputError(f"{where}: exact_match {exact_match!r} outside [0, 1]")
        values.append((max_prob, int(exact_match)))
    if not any_logprob:
        raise InputError(
            f"{path}: the model gave no log-probabilities (every logprob stat is 0), so HELM computes no calibration numbers"
        )
    return values, skipped


def _stats(entry, path: str, number: int) -> dict[str, float]:
    """An instance's stats by name: the mean of each of max_prob and exact_match, the sum of logprob
    (the stat HELM tests for log-probabilities), without perturbation names."""
    if not isinstance(entry, dict) or not isinstance(entry.get("stats"), list):
        raise InputError(f"{path}: entry {number} is not an instance's stats")
    found: dict[str, float] = {}
    for stat in entry["stats"]:
        named = stat.get("name") if isinstance(stat, dict) else None
        if not isinstance(named, dict) or named.get("perturbation") is not None:
            continue
        key = named.get("name")
        field = "sum" if key == "logprob" else "mean"
        if key in ("max_prob", "exact_match", "logprob"):
            if not isinstance(stat.get(field), (int, float)) or isinstance(stat.get(field), bool):
                raise InputError(f"{path}: instance {entry.get('instance_id')!r}: {key} has no {field}")
            found[key] = float(stat[field])
    return found
