"""Comparing two sources: a reference batch with labels and a new one with labels or without
(calib.compare), and the remedy bundle fitted where the comparison's held-out evidence says it helps."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .inputs import Input, Source, read_source


@dataclass
class ComparisonPlan:
    """One comparison, settled before the work: the reference and new rows, read (the new ones
    as the reference's task reads them), the ``request`` (:class:`calib.drift.ComparisonRequest`)
    and the ``steps`` the work counts; :meth:`run` does it."""

    ref: Input
    new: Input
    request: object
    steps: int

    def run(self, progress=None, *, remedy: str | None = None, force: bool = False):
        """The :class:`calib.drift.ComparisonReport`; ``progress`` is called once per step. With
        ``remedy``, the remedy the verdict names is fitted and saved there as a bundle (replacing
        one with ``force``), where its held-out evidence says it improves the new rows; the
        report's ``remedy_written`` says what was written, or why nothing was."""
        from ..drift import compare, save_remedy

        report = compare(self.ref.preds, self.new.preds, self.request, groups=_groups(self.ref, self.new), progress=progress)
        if remedy is not None:
            save_remedy(self.ref.preds, self.new.preds, report, remedy, force=force)
        return report


def plan_comparison(ref: Source, new: Source, request=None) -> ComparisonPlan:
    """Read the reference rows (labels required) and the new rows (labels or not, read as the
    reference's task: the new batch of a binary model is binary even where one class is absent)
    of the sources ``ref`` and ``new`` for ``request`` (its defaults when None). Both are grouped
    by the reference's ``group_by`` column when it names one."""
    from ..drift import ComparisonRequest, comparison_steps

    request = ComparisonRequest() if request is None else request
    ref_input = read_source(dataclasses.replace(ref, reading=dataclasses.replace(ref.reading, require_labels=True)))
    task = ref_input.preds.task_of_its_kind
    new_input = read_source(dataclasses.replace(new, reading=dataclasses.replace(new.reading, require_labels=False, task=task)))
    steps = comparison_steps(new_input.preds, _groups(ref_input, new_input))
    return ComparisonPlan(ref_input, new_input, request, steps)


def _groups(ref: Input, new: Input) -> tuple | None:
    """(the reference's groups, the new batch's), or None where the rows are not grouped."""
    return None if ref.groups is None else (ref.groups, new.groups)
