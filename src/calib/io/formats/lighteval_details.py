"""The details of Hugging Face's lighteval (``lighteval ... --save-details`` writes
``details/<model>/<date>/details_<task>_<date>.parquet``: one row a sample, with columns ``doc``,
``model_response`` and ``metric``). Each multiple-choice sample is a row: its choices'
log-likelihoods (``model_response.logprobs``, the first as many as the sample has choices, as
lighteval's ``LoglikelihoodAcc`` reads them) as logits over its choices, its ``doc.gold_index`` the
label. Where lighteval recorded the row's ``acc``, the argmax must agree with it, else the row is
refused naming it; rows of fewer choices are padded (probability 0), said in the input-kind line.

A details file, a run's folder of them, or a model's folder of one run is one input, each task a
group (column ``task``); two files of one task (two runs) are refused. A generation task's sample
(no choices, or no log-likelihoods) is refused: its confidence is a stated one.
"""

from __future__ import annotations

import glob
import os

import numpy as np

from ...errors import InputError
from .base import PAD_BELOW, PARSE_ERRORS, Contents, padded_rows

#: The columns that tell a lighteval details file
COLUMNS = ("doc", "model_response", "metric")
#: The column of the task of each row
TASK_COLUMN = "task"


def is_details(path: str) -> bool:
    """Whether ``path`` is a lighteval details parquet (its columns are :data:`COLUMNS`)."""
    if not (os.path.isfile(path) and path.lower().endswith(".parquet")):
        return False
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except PARSE_ERRORS:
        return False
    return all(column in names for column in COLUMNS)


def details_files(path: str) -> list[str]:
    """The details files of ``path``: [path] for one, those of a run's folder (or of a model's
    folder, one folder a run, below it); [] when there are none."""
    if os.path.isfile(path):
        return [path] if is_details(path) else []
    if not os.path.isdir(path):
        return []
    found = sorted(glob.glob(os.path.join(path, "details_*.parquet")) + glob.glob(os.path.join(path, "*", "details_*.parquet")))
    return [file for file in found if is_details(file)]


def read_details(files: list[str], name: str) -> Contents:
    """The rows of lighteval details files ``files``, each file's task in a column ``task``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, labels, tasks = [], [], []
    seen: dict[str, str] = {}
    for path in files:
        try:
            table = pq.read_table(path, columns=list(COLUMNS)).to_pylist()
        except PARSE_ERRORS as exc:
            raise InputError(f"{path}: not a readable parquet file ({exc}); a truncated file?") from None
        task = _task(table, path)
        if task in seen:
            raise InputError(f"{name}: two details files of task {task!r} ({seen[task]} and {path}); name the file to evaluate")
        seen[task] = path
        for number, record in enumerate(table):
            scores, gold = _row(record, f"{path}: row {number} (doc id {(record.get('doc') or {}).get('id')!r})")
            rows.append(scores)
            labels.append(gold)
            tasks.append(task)
    if not rows:
        raise InputError(f"{name}: no samples")
    matrix, absent = padded_rows(rows)
    widths = [len(row) for row in rows]
    counts = ", ".join(f"{task}: {tasks.count(task)} rows" for task in seen)
    picked = f"lighteval details ({counts}): each sample's log-likelihoods over its choices, as lighteval's acc reads them"
    if absent is not None:
        padded = sum(1 for width in widths if width < matrix.shape[1])
        picked += (
            f"; {padded} rows of fewer than {matrix.shape[1]} choices padded {PAD_BELOW:g} below their least (probability 0)"
        )
    carried = pa.table({TASK_COLUMN: pa.array(tasks)})
    by_task = TASK_COLUMN if len(seen) > 1 else None
    return Contents(matrix, np.asarray(labels, dtype=np.int64), "logits", carried, (TASK_COLUMN,), picked, True, by_task, absent)


def _task(table: list[dict], path: str) -> str:
    """The file's task: its samples' ``doc.task_name``, else its name's."""
    names = {str(task) for record in table if (task := (record.get("doc") or {}).get("task_name")) is not None}
    if len(names) > 1:
        raise InputError(f"{path}: samples of several tasks {sorted(names)}; lighteval writes one task a file")
    if names:
        return names.pop()
    stem = os.path.basename(path)[len("details_") : -len(".parquet")]
    return stem.rsplit("_", 1)[0]


def _row(record: dict, where: str) -> tuple[np.ndarray, int]:
    """(the sample's log-likelihoods over its choices, its gold index), checked against the ``acc``
    lighteval recorded."""
    doc, response, metric = record.get("doc") or {}, record.get("model_response") or {}, record.get("metric") or {}
    choices, logprobs = doc.get("choices") or [], response.get("logprobs") or []
    if not choices or not logprobs:
        raise InputError(
            f"{where}: no choices with log-likelihoods (a generation task's sample?); calib reads multiple-choice "
            "samples, or a stated confidence beside whether each answer was right"
        )
    if len(logprobs) < len(choices):
        raise InputError(f"{where}: {len(logprobs)} log-likelihoods for {len(choices)} choices")
    scores = np.asarray(logprobs[: len(choices)], dtype=np.float64)
    if not np.isfinite(scores).all():
        raise InputError(f"{where}: a log-likelihood is not a finite number")
    gold = doc.get("gold_index")
    if isinstance(gold, list):
        if len(gold) != 1:
            raise InputError(f"{where}: several gold answers {gold}; calib reads one label a row")
        gold = gold[0]
    if not isinstance(gold, int) or isinstance(gold, bool) or not 0 <= gold < len(choices):
        raise InputError(f"{where}: gold index {gold!r} outside the sample's {len(choices)} choices")
    recorded = metric.get("acc")
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool) and float(np.argmax(scores) == gold) != recorded:
        raise InputError(
            f"{where}: lighteval recorded acc {recorded:g}, the log-likelihoods as read give {float(np.argmax(scores) == gold):g}"
        )
    return scores, gold
