"""The evaluation logs of the UK AI Security Institute's Inspect AI (``inspect eval`` writes one log a
task run: ``<date>_<task>_<id>.eval``, a zip of ``header.json`` and ``samples/<id>_epoch_<n>.json``,
or the same as one ``.json``). Each sample (and epoch) is a row; its scorer's value says whether the
answer was right ("C" right; "I" and "N" wrong; 1/0 and true/false as they are). The confidence is
read in one of two ways, by what the log holds:

- **over the choices** (a multiple-choice sample whose output has log-probabilities): the
  answer token's top log-probabilities, each choice's letter ("A", " A", ...: the token stripped of
  white space) summed over its tokens, read as logits over the sample's choices; a choice absent
  from the top log-probabilities is padded :data:`PAD_BELOW` below the least (probability 0). The
  label is the target's letter. The argmax must be the answer the scorer recorded, and right
  exactly where the scorer said so: else the row is refused, naming it (a sampled answer that is not
  the most probable one, a scorer that reads another answer).
- **stated** (the score's metadata, else the sample's, holds ``confidence``): the text or number
  read by :mod:`calib.io.stated`'s rule, against the scorer's verdict: a binary input of answers
  (P(right), right), whose accuracy is the share of right answers.

A folder of logs is one input, each task a group (column ``task``); two logs of one task are
refused. A log that holds several scorers needs one named (the scores option); a sample without a
score, a truncated or unreadable log, a target of several answers, a partial score: one line naming
the file and the sample.
"""

from __future__ import annotations

import glob
import json
import math
import os
import struct
import zipfile

import numpy as np

from ...errors import InputError
from .. import stated
from .base import PAD_BELOW, Contents, padded_rows

#: How a log file is named
SUFFIXES = (".eval", ".json")
#: A scorer's values read as right (1) or wrong (0): Inspect's CORRECT, INCORRECT, NOANSWER
VERDICTS = {"C": 1, "I": 0, "N": 0}
#: The column of the task of each row
TASK_COLUMN = "task"
#: The zip entries' compression methods: stored, deflate (Python's zipfile), zstd (Inspect's default)
ZSTD = 93
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def is_log(path: str) -> bool:
    """Whether ``path`` is an Inspect log: a ``.eval`` zip holding ``header.json``, or a ``.json``
    object whose first key is ``version`` beside ``eval`` (as Inspect writes them)."""
    if not os.path.isfile(path):
        return False
    if path.lower().endswith(".eval"):
        return True
    if not path.lower().endswith(".json"):
        return False
    with open(path, "rb") as handle:
        start = handle.read(4096)
    return b'"eval"' in start and start.lstrip().startswith(b"{")


def log_files(path: str) -> list[str]:
    """The Inspect logs in a folder (not below it), or [path] for one log; [] for neither."""
    if os.path.isdir(path):
        return sorted(p for p in glob.glob(os.path.join(path, "*")) if p.lower().endswith(SUFFIXES) and is_log(p))
    return [path] if is_log(path) else []


def read_logs(files: list[str], name: str, scorer: str | None, missing: str | None) -> Contents:
    """The rows of Inspect logs ``files``: over the choices or stated (module docstring), each
    file's task in a column ``task`` that groups the report when there are several."""
    import pyarrow as pa

    rows, labels, tasks, readings, stated_rows = [], [], [], set(), []
    seen: dict[str, str] = {}
    for path in files:
        header, samples = _load(path)
        task = str(header.get("eval", {}).get("task", os.path.basename(path)))
        if task in seen:
            raise InputError(
                f"{name}: two logs of task {task!r} ({seen[task]} and {path}); name the log to evaluate, or move one away"
            )
        seen[task] = path
        if header.get("status") not in (None, "success"):
            raise InputError(f"{path}: the run's status is {header.get('status')!r}, not success: its samples are not all scored")
        chosen = _scorer(header, samples, scorer, path)
        for sample in samples:
            where = f"{path}: sample {sample.get('id')!r} (epoch {sample.get('epoch')})"
            score = (sample.get("scores") or {}).get(chosen)
            if not isinstance(score, dict):
                raise InputError(f"{where}: no score by {chosen!r}")
            right = _verdict(score.get("value"), where)
            choice_scores = _choice_scores(sample, score, where)
            if choice_scores is not None:
                scores, gold = choice_scores
                if bool(np.argmax(scores) == gold) != bool(right):
                    raise InputError(
                        f"{where}: the scorer says {'right' if right else 'wrong'}, the log-probabilities' most probable "
                        "choice says otherwise"
                    )
                readings.add("choices")
                rows.append(scores)
                labels.append(gold)
            else:
                readings.add("stated")
                stated_rows.append((where, _stated_value(sample, score)))
                labels.append(right)
            tasks.append(task)
    if not labels:
        raise InputError(f"{name}: no samples")
    if len(readings) > 1:
        raise InputError(
            f"{name}: some samples hold log-probabilities over their choices and others a stated confidence; "
            "evaluate each log on its own"
        )
    counts = ", ".join(f"{task}: {tasks.count(task)} rows" for task in seen)
    carried = pa.table({TASK_COLUMN: pa.array(tasks)})
    by_task = TASK_COLUMN if len(seen) > 1 else None
    if readings == {"stated"}:
        values, said = stated.confidences(stated_rows, missing, name)
        picked = f"Inspect AI logs ({counts}): {said}, read as P(right) against the scorer's verdict"
        confidence = np.asarray(values, dtype=np.float64)
        return Contents(
            confidence, np.asarray(labels, dtype=np.int64), "probs", carried, (TASK_COLUMN,), picked, True, by_task, answers=True
        )
    matrix, absent = padded_rows(rows)
    padded = sum(1 for row in rows if not np.isfinite(row).all())
    picked = f"Inspect AI logs ({counts}): the answer token's log-probabilities over each sample's choices, read as logits"
    if padded:
        picked += f"; {padded} rows padded {PAD_BELOW:g} below their least where a choice was not among the top log-probabilities"
    return Contents(matrix, np.asarray(labels, dtype=np.int64), "logits", carried, (TASK_COLUMN,), picked, True, by_task, absent)


def _load(path: str) -> tuple[dict, list[dict]]:
    """(the log's header, its samples) from a ``.eval`` zip or a ``.json`` log."""
    try:
        if path.lower().endswith(".json"):
            with open(path, encoding="utf-8") as handle:
                log = json.load(handle)
            if not isinstance(log, dict) or "eval" not in log:
                raise InputError(f"{path}: not an Inspect log (no 'eval' section)")
            return log, _in_order(list(log.get("samples") or []))
        with zipfile.ZipFile(path) as archive:
            entries = {info.filename: info for info in archive.infolist()}
            if "header.json" not in entries:
                raise InputError(f"{path}: not a finished Inspect log (no header.json in the zip)")
            header = json.loads(_entry(path, archive, entries["header.json"]))
            names = [n for n in entries if n.startswith("samples/") and n.endswith(".json")]
            return header, _in_order([json.loads(_entry(path, archive, entries[n])) for n in names])
    except InputError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, KeyError, struct.error, EOFError) as exc:
        raise InputError(
            f"{path}: not a readable Inspect log ({type(exc).__name__}: {exc}); a truncated or damaged file?"
        ) from None


def _in_order(samples: list) -> list:
    """The samples in the order Inspect reads them (its ``sort_samples``): by epoch, then id, a
    text id as it is, a number's digits padded to 20 places."""
    if not all(isinstance(sample, dict) for sample in samples):
        raise InputError("a sample of the log is not a JSON object")
    return sorted(
        samples, key=lambda s: (s.get("epoch") or 0, s.get("id") if isinstance(s.get("id"), str) else str(s.get("id")).zfill(20))
    )


def _entry(path: str, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """One zip entry's bytes: zipfile's for stored and deflate, pyarrow's zstd codec for Inspect's
    zstd entries (method 93, which Python's zipfile does not read)."""
    if info.compress_type != ZSTD:
        return archive.read(info)
    import pyarrow as pa

    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        local = handle.read(30)
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise InputError(f"{path}: entry {info.filename}: no local header where the zip's directory says")
        name_length, extra_length = struct.unpack("<HH", local[26:30])
        handle.seek(info.header_offset + 30 + name_length + extra_length)
        raw = handle.read(info.compress_size)
    if len(raw) != info.compress_size:
        raise InputError(f"{path}: entry {info.filename} is cut short")
    try:
        return pa.decompress(raw, decompressed_size=info.file_size, codec="zstd", asbytes=True)
    except (pa.ArrowException, ValueError) as exc:
        raise InputError(f"{path}: entry {info.filename} does not decompress ({exc})") from None


def _scorer(header: dict, samples: list[dict], named: str | None, path: str) -> str:
    """The scorer whose values say right or wrong: the one named, else the log's only one."""
    listed = [s.get("name") for s in (header.get("results") or {}).get("scores", []) if isinstance(s, dict)]
    found = listed or sorted({key for sample in samples for key in (sample.get("scores") or {})})
    if named is not None:
        if named not in found:
            raise InputError(f"{path}: no scorer {named!r}; the log's scorers are {', '.join(map(str, found)) or 'none'}")
        return named
    if len(found) != 1:
        raise InputError(
            f"{path}: {'no scorer' if not found else 'scorers ' + ', '.join(map(str, found))}; name the one whose verdict "
            "says right or wrong",
            cli_hint="--scores NAME",
        )
    return str(found[0])


def _verdict(value, where: str) -> int:
    if isinstance(value, str) and value in VERDICTS:
        return VERDICTS[value]
    if isinstance(value, (bool, int, float)) and float(value) in (0.0, 1.0):
        return int(value)
    raise InputError(
        f"{where}: score {value!r} is not right or wrong (C, I, N, 1, 0, true, false); calib reads answers that are either"
    )


def _choice_scores(sample: dict, score: dict, where: str) -> tuple[np.ndarray, int] | None:
    """(the log-probabilities over the sample's choices, the target's index), or None where the
    sample has no choices or its output no log-probabilities."""
    choices = sample.get("choices")
    outputs = (sample.get("output") or {}).get("choices") or []
    logprobs = (outputs[0].get("logprobs") or {}).get("content") if outputs else None
    if not choices or not logprobs:
        return None
    letters = _LETTERS[: len(choices)]
    target = sample.get("target")
    if isinstance(target, list):
        if len(target) != 1:
            raise InputError(f"{where}: several targets {target}; calib reads one right answer a sample")
        target = target[0]
    if not isinstance(target, str) or target.strip() not in letters:
        raise InputError(f"{where}: target {target!r} is none of the choices' letters {', '.join(letters)}")
    answer = score.get("answer")
    answer = answer.strip() if isinstance(answer, str) and answer.strip() in letters else None
    position = next((t for t in reversed(logprobs) if isinstance(t, dict) and str(t.get("token", "")).strip() in letters), None)
    if position is None or not position.get("top_logprobs"):
        raise InputError(f"{where}: no answer token with top log-probabilities among the output's tokens")
    found = np.full(len(letters), -math.inf)
    for top in position["top_logprobs"]:
        letter = str(top.get("token", "")).strip()
        if letter in letters:
            found[letters.index(letter)] = np.logaddexp(found[letters.index(letter)], float(top["logprob"]))
    if not np.isfinite(found).any():
        raise InputError(f"{where}: none of the choices' letters is among the answer token's top log-probabilities")
    if answer is not None and np.argmax(found) != letters.index(answer):
        raise InputError(
            f"{where}: the answer {answer} is not the most probable choice of its log-probabilities (a sampled answer?); "
            "calib reads the most probable choice as the answer"
        )
    return found, letters.index(target.strip())


def _stated_value(sample: dict, score: dict):
    """The sample's stated confidence as written: its score's metadata, else its own; None if neither."""
    for metadata in (score.get("metadata"), sample.get("metadata")):
        if isinstance(metadata, dict) and "confidence" in metadata:
            return metadata["confidence"]
    return None
