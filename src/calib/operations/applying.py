"""Applying a bundle to a source and writing the calibrated output: a file in a writable format
(or a binary stream), or for a directory of shards a directory of outputs, one per shard."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UsageError
from .inputs import Source, read_source


@dataclass
class Applied:
    """What an apply wrote: ``rows`` (as the output lays them out: "5000 rows x 10 classes"), the
    method's summed row ``counts`` (infeasible rows, ...), ``warnings``, the input kind line
    (``kind_line``, one input), and for a directory the shards ``written`` and ``skipped``."""

    rows: str
    counts: dict
    warnings: list[str] = field(default_factory=list)
    kind_line: str | None = None
    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def apply_source(source: Source, out, *, what: str = "probs", force: bool = False) -> Applied:
    """Apply the source's bundle to its rows and write ``what`` (probs, log-probs or sets) to
    ``out``: a path (atomically; an existing file replaced only with ``force``) or a binary stream
    (.npy). A directory of shards writes the directory ``out``, one output per shard in the shard's
    format; shards already written with this bundle are skipped unless ``force``."""
    if source.is_directory:
        return _apply_directory(source, out, what, force)
    if isinstance(out, str):
        from ..io.atomic import check_output_file
        from ..io.writers import check_output_path

        check_output_path(out, source.files())
        check_output_file(out, force=force)
    from ..calibrators.base import absent_class_rows
    from ..pipeline import write_applied

    inputs = read_source(source, groups=False)
    preds = inputs.preds
    counts = write_applied(inputs.calibrator, preds, out, what, inputs.features)
    absent = absent_class_rows(inputs.calibrator, preds)
    return Applied(preds.output_layout.describe(), counts, [] if absent is None else [absent], inputs.kind_line)


def _apply_directory(source: Source, out, what: str, force: bool) -> Applied:
    import os

    from ..shards import apply_shards

    if not isinstance(out, str) or out == "-" or (os.path.exists(out) and not os.path.isdir(out)):
        raise UsageError(f"{out}: a directory of shards is written to a directory of outputs; name a directory")
    if source.bundle is None:
        raise UsageError(f"{source.path}: applying needs a bundle")
    done = apply_shards(
        source.bundle,
        source.path,
        out,
        what=what,
        reading=source.reading,
        engine=source.engine,
        scheduler=source.scheduler,
        force=force,
    )
    return Applied(f"{done.rows} rows", done.counts, written=done.written, skipped=done.skipped)
