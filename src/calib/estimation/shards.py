"""The estimation of a directory of shards without labels (or with some): one task a shard on an
engine (calib.task_engines), each shard's state keyed by its rows' global indices, the states merged
into the numbers of one estimation of all the rows (:mod:`.state`)."""

from __future__ import annotations

from ..io.readers import Reading
from ..shards import shard_files
from ..task_engines import task_runner
from .report import EstimationReport, report_of_state
from .state import BatchState, lacks_labels, merge_states


def _reading(reading: tuple) -> Reading:
    """How a shard is read from (input kind, score prefix, label column, scores): a null label marks
    a row without one."""
    input_kind, score_prefix, label_column, scores = reading
    return Reading(
        input_kind=input_kind, score_prefix=score_prefix, label_column=label_column, scores=scores, missing_label="null"
    )


def shards_lack_labels(directory: str, reading: tuple) -> bool:
    """True when the first shard of ``directory`` has rows without labels: its shards are estimated."""
    return lacks_labels(_reading(reading).read(shard_files(directory)[0]).labels)


def shard_rows(path: str, reading: tuple) -> int:
    return _reading(reading).read(path).n


def shard_state(path: str, bundle: str, reading: tuple, group_by: str | None, first_row: int) -> BatchState:
    """The state of one file's rows under the bundle directory ``bundle`` (verified), read as
    ``reading`` says, its rows keyed from the global index ``first_row``."""
    from ..evaluation.groups import read_groups
    from ..pipeline import check_fits, load_calibrator
    from .reference import ReferenceRows
    from .state import batch_state

    calibrator, saved = load_calibrator(bundle)
    preds = _reading(reading).read(path)
    check_fits(preds, saved.n_classes, saved.input_kind, f"bundle {bundle}", saved.manifest.get("n_labels"), calibrator)
    reference = ReferenceRows.from_bundle(saved.manifest, saved.state.arrays, bundle)
    groups = read_groups(preds, path, group_by, None, reading[2])
    return batch_state(calibrator, reference, preds, groups=groups, first_row=first_row, n_labels=saved.manifest.get("n_labels"))


def estimate_shards(
    directory: str,
    settings,
    *,
    bundle: str,
    reading: tuple,
    group_by: str | None = None,
    engine: str = "local",
    scheduler: str | None = None,
) -> EstimationReport:
    """The estimation of every shard of ``directory`` under ``bundle`` as ``settings``
    (calib.estimation.report.EstimationSettings) ask: the shards' states merged, on ``engine``.
    ``reading``: (input kind, score prefix, label column, scores)."""
    settings.parsed_gates()
    files = shard_files(directory)
    with task_runner(engine, scheduler) as run:
        rows = run(shard_rows, [(path, reading) for path in files])
        first_rows = [sum(rows[:i]) for i in range(len(files))]
        states = run(shard_state, [(path, bundle, reading, group_by, first) for path, first in zip(files, first_rows)])
    return report_of_state(merge_states(states, files), settings, {"path": directory, "bundle": bundle, "files": len(files)})
