"""The sample logs of EleutherAI's lm-evaluation-harness (``lm_eval --log_samples`` writes
``samples_<task>_<date>.jsonl`` beside ``results_<date>.json``): each multiple-choice row's
per-choice log-likelihoods become its scores over its choices, the gold index its label.

Two readings, as the harness scores a row (``Task.process_results``):

- ``acc`` (the default): the log-likelihoods ll_j themselves, read as logits over the row's
  choices, so softmax(ll) is the harness's own ``prob_norm`` and argmax(ll) its ``acc``;
- ``acc_norm``: ll_j / len(c_j), each divided by its choice's length in characters (the
  continuation less the task's target delimiter: the results file's, else the prefix the row's
  choices share), whose argmax is the harness's ``acc_norm``.

Rows may have different numbers of choices: the scores are K = the most choices wide, and a row
with fewer is padded with log-likelihoods :data:`PAD_BELOW` below its least, probability 0 to
float64's precision (exp(-1000) underflows), said in the input-kind line. Every row is checked
(choices and log-likelihoods agree in number, every log-likelihood finite, one gold index within
the row's choices) and, where the harness recorded the row's ``acc`` or ``acc_norm``, the reading's
argmax is checked against it: a row that disagrees is refused, naming it.

A results directory (or a run's folder in it) holding several tasks' sample files is read as one
input, the task of each row carried in a column ``task`` that groups the report.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re

import numpy as np

from ...errors import InputError
from .base import PAD_BELOW, Contents, padded_rows

#: The readings of a row's log-likelihoods, by the harness metric whose argmax they give
READINGS = ("acc", "acc_norm")
#: The fields that tell a harness sample record
SAMPLE_FIELDS = ("doc_id", "arguments", "filtered_resps")
#: How the harness names a task's sample file: samples_<task>_<date>.jsonl
SAMPLE_FILE = re.compile(r"samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.jsonl$")
#: The most bytes of a JSON-lines file's first line read to tell a sample log
FIRST_LINE = 1 << 24
#: The column of the task of each row
TASK_COLUMN = "task"


def is_sample_record(line: bytes | str) -> bool:
    """Whether the first line of a JSON-lines file is a harness sample record."""
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and all(field in record for field in SAMPLE_FIELDS)


def sample_files(directory: str) -> list[tuple[str, str]]:
    """(task, path) of every harness sample file in ``directory`` or one folder below it (a
    results directory holds one folder per model), by task; [] when there are none. Two files of
    one task (two runs) are refused: which one is meant is the user's to say."""
    paths = sorted(
        glob.glob(os.path.join(directory, "samples_*.jsonl")) + glob.glob(os.path.join(directory, "*", "samples_*.jsonl"))
    )
    found: dict[str, str] = {}
    for path in paths:
        match = SAMPLE_FILE.search(os.path.basename(path))
        task = match.group("task") if match else os.path.basename(path)[len("samples_") : -len(".jsonl")]
        if task in found:
            raise InputError(
                f"{directory}: two sample files of task {task!r} ({found[task]} and {path}); name the file to evaluate, or move one away"
            )
        found[task] = path
    return sorted(found.items())


def read_samples(files: list[tuple[str, str]], name: str, reading: str | None) -> Contents:
    """The scores and gold indices of harness sample files ``files`` ((task, path) pairs), as
    ``reading`` (:data:`READINGS`; None: ``acc``) reads them."""
    import pyarrow as pa

    reading = reading or READINGS[0]
    if reading not in READINGS:
        raise InputError(
            f"{name}: harness sample logs are read as {' or '.join(READINGS)}; got {reading!r}", cli_hint="--scores acc_norm"
        )
    rows, tasks, labels = [], [], []
    for task, path in files:
        delimiter = _target_delimiter(path, task)
        for number, record in _records(path):
            where = f"{path}: row {number} (doc_id {record.get('doc_id')})"
            lls, choices = _log_likelihoods(record, where), _choices(record, where)
            if len(lls) != len(choices):
                raise InputError(f"{where}: {len(lls)} log-likelihoods for {len(choices)} choices")
            gold, row_delimiter = _gold(record, choices, delimiter, where)
            scores = lls if reading == "acc" else lls / _lengths(choices, row_delimiter, where)
            _check_recorded(record, reading, scores, gold, where)
            rows.append(scores)
            labels.append(gold)
            tasks.append(task)
    if not rows:
        raise InputError(f"{name}: no sample rows")
    widths = np.array([len(r) for r in rows])
    matrix, absent = padded_rows(rows)
    counts = ", ".join(f"{task}: {tasks.count(task)} rows" for task, _ in files)
    padded = int((widths < matrix.shape[1]).sum())
    what = "log-likelihoods" if reading == "acc" else "log-likelihoods per character of their choice"
    picked = (
        f"lm-evaluation-harness samples ({counts}): each row's {what} over its choices, as the harness's {reading} reads them"
    )
    if padded:
        picked += (
            f"; {widths.min()}-{widths.max()} choices a row, the {padded} rows with fewer than {widths.max()} padded "
            f"{PAD_BELOW:g} below their least (probability 0)"
        )
    carried = pa.table({TASK_COLUMN: pa.array(tasks)})
    by_task = TASK_COLUMN if len(files) > 1 else None
    return Contents(matrix, np.asarray(labels, dtype=np.int64), "logits", carried, (TASK_COLUMN,), picked, True, by_task, absent)


def _records(path: str):
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise InputError(f"{path}: row {number}: not JSON ({exc})") from None
            if not isinstance(record, dict) or any(field not in record for field in SAMPLE_FIELDS):
                raise InputError(f"{path}: row {number}: not a harness sample record (no {', '.join(SAMPLE_FIELDS)})")
            yield number, record


def _log_likelihoods(record: dict, where: str) -> np.ndarray:
    """The row's per-choice log-likelihoods: the first element of each filtered response (the
    harness writes them as text)."""
    values = []
    for j, response in enumerate(record["filtered_resps"]):
        value = response[0] if isinstance(response, (list, tuple)) and response else response
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InputError(f"{where}: choice {j}: log-likelihood {value!r} is not a number") from None
        if not math.isfinite(number):
            raise InputError(f"{where}: choice {j}: log-likelihood is {number}")
        values.append(number)
    if not values:
        raise InputError(f"{where}: no log-likelihoods (not a multiple-choice task?)")
    return np.asarray(values)


def _choices(record: dict, where: str) -> list[str]:
    """The row's continuations, in choice order (gen_args_0, gen_args_1, ...)."""
    arguments = record["arguments"]
    if not isinstance(arguments, dict):
        raise InputError(f"{where}: arguments are not the harness's gen_args_j mapping")
    ordered = sorted(arguments.items(), key=lambda item: int(re.sub(r"\D", "", item[0]) or 0))
    try:
        continuations = [args["arg_1"] for _, args in ordered]
    except (KeyError, TypeError):
        raise InputError(f"{where}: a choice has no continuation (arg_1)") from None
    if any(isinstance(continuation, dict) for continuation in continuations):  # generate_until: (context, generation settings)
        raise InputError(
            f"{where}: a generation task's row (its arguments hold generation settings, not choices to score): calib "
            "reads multiple-choice tasks, whose rows hold a log-likelihood for each choice; a generation task's "
            "confidence is a stated one (a column of confidences beside whether each answer was right)"
        )
    return [str(continuation) for continuation in continuations]


def _gold(record: dict, choices: list[str], delimiter: str | None, where: str) -> tuple[int, str]:
    """(the gold index, the target delimiter of the row): the target as an index, or as the text of
    one of the choices less the task's target delimiter; where no results file says the delimiter,
    the longest prefix all the choices share that leaves the target one of them (for an index:
    their shared leading white space)."""
    target = record.get("target")
    if isinstance(target, list):
        raise InputError(f"{where}: several gold answers {target}; calib reads one label a row")
    if isinstance(target, str) and target.strip().lstrip("-").isdigit():
        target = int(target)
    if isinstance(target, str):
        used = delimiter if delimiter is not None else _shared_prefix(choices, target)
        texts = [_less_delimiter(c, used) for c in choices]
        if target not in texts:
            said = "the results file's" if delimiter is not None else "any prefix the choices share as the"
            raise InputError(
                f"{where}: the target {target[:60]!r} is none of the row's {len(choices)} choices (with {said} target delimiter)"
            )
        return texts.index(target), used
    if not isinstance(target, int) or isinstance(target, bool) or not 0 <= target < len(choices):
        raise InputError(f"{where}: gold index {target!r} outside the row's {len(choices)} choices")
    return target, delimiter if delimiter is not None else _shared_prefix(choices)


def _less_delimiter(choice: str, delimiter: str) -> str:
    return choice[len(delimiter) :] if choice.startswith(delimiter) else choice


def _shared_prefix(choices: list[str], target: str | None = None) -> str:
    """The target delimiter a row's choices show when no results file says it: the longest prefix
    they all share that leaves ``target`` one of them (without a target: the shared leading white
    space, the harness's default delimiter being one space)."""
    common = os.path.commonprefix(choices)
    if target is None:
        return common[: len(common) - len(common.lstrip())]
    for cut in range(len(common), -1, -1):
        if target in [c[cut:] for c in choices]:
            return common[:cut]
    return ""


def _lengths(choices: list[str], delimiter: str, where: str) -> np.ndarray:
    """Each choice's length in characters, its continuation less the target delimiter."""
    lengths = np.array([len(_less_delimiter(c, delimiter)) for c in choices], dtype=np.float64)
    if (lengths <= 0).any():
        raise InputError(f"{where}: an empty choice, whose length-normalised log-likelihood is undefined")
    return lengths


def _target_delimiter(path: str, task: str) -> str | None:
    """The task's target delimiter from the run's results file beside the samples (its configs),
    else None: each row's choices show it (:func:`_shared_prefix`)."""
    for results in sorted(glob.glob(os.path.join(os.path.dirname(path) or ".", "results_*.json")), reverse=True):
        try:
            with open(results, encoding="utf-8") as handle:
                config = json.load(handle).get("configs", {}).get(task)
        except (OSError, ValueError):
            continue
        if isinstance(config, dict) and isinstance(config.get("target_delimiter"), str):
            return config["target_delimiter"]
    return None


def _check_recorded(record: dict, reading: str, scores: np.ndarray, gold: int, where: str) -> None:
    """The harness's own verdict on the row (its ``acc`` or ``acc_norm`` field) must be what the
    reading's argmax gives: else the file is not what this reader takes it for."""
    recorded = record.get(reading)
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool):
        ours = float(np.argmax(scores) == gold)
        if ours != float(recorded):
            raise InputError(
                f"{where}: the harness recorded {reading} {recorded:g}, the log-likelihoods as read give {ours:g}; "
                "the file does not hold what a harness sample log holds"
            )
