"""Diagnosing a source: findings, curves, the metric table and a ranking of methods (calib.diagnose)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .inputs import Input, Source, read_source


@dataclass
class DiagnosisPlan:
    """One diagnosis, settled before the work: the ``input``'s rows, the ``request`` of its metric
    table, the methods to ``compare`` (``folds``, ``seed``, ranked by ``rank_by``), and the boosted
    ``fits`` its V-ECE trains; :meth:`run` does it."""

    input: Input
    request: object
    compare: list[str] = field(default_factory=list)
    folds: int = 5
    seed: int = 0
    rank_by: str = "cmce"
    fits: int = 0

    def run(self, progress=None):
        """The :class:`calib.diagnose.Diagnosis`; ``progress`` is called once per boosted fit."""
        from ..diagnose import diagnose

        inputs = self.input
        return diagnose(
            inputs.preds,
            self.request,
            calibrator=inputs.calibrator,
            compare=self.compare,
            folds=self.folds,
            seed=self.seed,
            rank_by=self.rank_by,
            groups=inputs.groups,
            bundle_path=inputs.source.bundle,
            progress=progress,
        )


def plan_diagnosis(
    source: Source,
    request=None,
    *,
    compare: Sequence[str] = (),
    folds: int = 5,
    seed: int = 0,
    rank_by: str = "cmce",
    out: str | None = None,
    force: bool = False,
) -> DiagnosisPlan:
    """The plan of diagnosing ``source`` (labels required) as ``request`` asks (calib.diagnose's
    default request when None), comparing the methods ``compare``; a report directory ``out`` is
    checked before any work (an existing non-empty one refused unless ``force``)."""
    import dataclasses
    import inspect

    from ..diagnose import diagnose
    from ..evaluation.report import planned_work
    from ..io.atomic import check_output_directory

    if out is not None:
        check_output_directory(out, force=force)
    if request is None:
        request = inspect.signature(diagnose).parameters["request"].default
    inputs = read_source(dataclasses.replace(source, reading=dataclasses.replace(source.reading, require_labels=True)))
    fits, _ = planned_work(inputs.preds, request, calibrated=inputs.calibrator is not None)
    return DiagnosisPlan(inputs, request, list(compare), folds, seed, rank_by, fits)
