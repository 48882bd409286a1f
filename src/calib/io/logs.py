"""Evaluation tools' outputs read as one input: each tool's reader (one module of
:mod:`calib.io.formats`) says which files of a path are its own and reads them whole. A new tool is
one module and one entry of :data:`LOG_READERS` (docs/architecture.md)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from .formats import helm_runs, inspect_logs, lighteval_details
from .formats.base import Contents
from .formats.harness_samples import read_samples, sample_files


@dataclass(frozen=True)
class LogReader:
    """One tool's outputs: ``find(path)`` its files in a path ([] when none), ``read(found, name,
    scores, missing_confidence)`` their contents, ``files(found)`` the files read (their digest)."""

    find: Callable[[str], list]
    read: Callable[[list, str, str | None, str | None], Contents]
    files: Callable[[list], list[str]]


#: The tools, in the order a path is offered to them
LOG_READERS = (
    LogReader(  # lm-evaluation-harness: a results directory (one sample file is a JSON-lines file)
        lambda path: sample_files(path) if os.path.isdir(path) else [],
        lambda found, name, scores, missing: read_samples(found, name, scores),
        lambda found: [file for _, file in found],
    ),
    LogReader(
        helm_runs.run_folders,
        lambda found, name, scores, missing: helm_runs.read_runs(found, name),
        lambda found: [os.path.join(run, helm_runs.RUN_FILE) for run in found],
    ),
    LogReader(
        lighteval_details.details_files,
        lambda found, name, scores, missing: lighteval_details.read_details(found, name),
        list,
    ),
    LogReader(inspect_logs.log_files, inspect_logs.read_logs, list),
)


def find_log(path: str) -> tuple[LogReader, list] | None:
    """(the reader, what it found) of the first tool whose outputs ``path`` holds, or None."""
    for reader in LOG_READERS:
        found = reader.find(path)
        if found:
            return reader, found
    return None


def is_log_folder(path: str) -> bool:
    """Whether ``path`` is a folder that is one input: an evaluation tool's outputs (an
    lm-evaluation-harness results directory, Inspect AI logs, a HELM run or suite, lighteval's
    details), not a directory of shards."""
    return os.path.isdir(path) and find_log(path) is not None
