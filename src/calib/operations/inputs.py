"""A command's input, read once: one file of predictions (or a folder of evaluation logs, which
is one input) with its calibration map, per-row features, true probabilities and groups; or a
directory of shards, which the operations hand on whole to the engine that reads them."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..io.readers import Reading

if TYPE_CHECKING:
    from ..evaluation.groups import Groups
    from ..io import Predictions


@dataclass(frozen=True)
class Source:
    """Where a command's rows come from and how they are read.

    ``path`` the predictions (a file, ``-`` for stdin, a folder of evaluation logs, a directory of
    shards); ``reading`` how they are read (:class:`calib.io.readers.Reading`); ``bundle`` a
    calibration map to apply; ``features`` per-row features; ``true_probs`` the rows' true
    probabilities; ``group_by`` / ``groups_file`` the rows' groups (a column of ``path`` or of the
    file); ``engine`` / ``scheduler`` where a directory's shards run (calib.task_engines)."""

    path: str
    reading: Reading = field(default_factory=Reading)
    bundle: str | None = None
    features: str | None = None
    true_probs: str | None = None
    group_by: str | None = None
    groups_file: str | None = None
    engine: str = "local"
    scheduler: str | None = None

    @functools.cached_property
    def is_directory(self) -> bool:
        """A directory of shards (a folder of evaluation logs is one input, read as one file);
        found once (the logs' readers look through the folder)."""
        from ..io.logs import is_log_folder

        return os.path.isdir(self.path) and not is_log_folder(self.path)

    def files(self) -> list[str | None]:
        """Every file the source reads, which no output may overwrite."""
        reading = self.reading
        return [self.path, reading.labels_path, self.features, self.true_probs, self.groups_file]

    def check_outputs(self, outputs: Sequence[str | None], others: Sequence[str | None] = ()) -> None:
        """Refuse an output (None and ``-``, stdout, skipped) that is one of the source's files or
        one of ``others`` (a baseline, reference rows)."""
        from ..io.writers import check_not_an_input

        for path in outputs:
            if path not in (None, "-"):
                check_not_an_input(path, [*self.files(), *others])


@dataclass
class Input:
    """A source's rows, read and checked: the validated predictions (:class:`calib.io.Predictions`),
    the bundle's fitted calibrator (None without one), the per-row features (None without them)
    and the rows' groups (:class:`calib.evaluation.groups.Groups`, None without them)."""

    source: Source
    preds: Predictions
    calibrator: Any = None
    features: Any = None
    groups: Groups | None = None

    @property
    def kind_line(self) -> str:
        """The input kind and why it was read so: "probs (rows sum to 1)"."""
        return f"{self.preds.kind} ({self.preds.kind_reason})"


def read_source(source: Source, *, groups: bool = True) -> Input:
    """The rows of a one-input ``source``: its bundle loaded and verified first, then the
    predictions read as its reading says and checked against the bundle (calib.pipeline.read_with_bundle),
    then the features, true probabilities and (``groups``) groups, each checked against the rows."""
    from ..evaluation.groups import read_groups
    from ..io.readers import read_features, read_true_probs
    from ..pipeline import read_with_bundle

    if source.engine != "local" or source.scheduler is not None:
        from ..io.formats import listed, shard_formats

        raise UsageError(
            f"{source.path}: is one input; an engine runs the files of a directory of {listed(shard_formats())} files",
            cli_hint="--engine and --scheduler take a directory",
        )
    preds, calibrator = read_with_bundle(source.path, source.bundle, source.reading)
    if source.true_probs is not None:
        preds.true_probs = read_true_probs(source.true_probs, preds)
    rows = read_groups(preds, source.path, source.group_by, source.groups_file, source.reading.label_column) if groups else None
    return Input(source, preds, calibrator, read_features(source.features, preds), rows)
