"""The comparison of two batches (REF, NEW), put together: the checks of the batches, the
replicates of each (paired when they are the same rows), the comparison of all rows and of each
group (:mod:`calib.drift.sections`), the gates, and the remedy's fate."""

from __future__ import annotations

import numpy as np

from .._version import __version__
from ..bootstrap import BootstrapConfig, independent_seed
from ..errors import InputError, UsageError
from ..evaluation.report_types import InputSection
from ..io.predictions import Predictions
from .analysis import as_batch
from .report import ComparisonGroups, ComparisonReport, ComparisonSection
from .request import MIN_ROWS, ComparisonRequest

#: The progress steps of one comparison of rows with labels on NEW (the metrics, the two
#: decompositions, the remedies' evidence) and without (EM on each batch's replicates)
STEPS = {True: 4, False: 2}


def check_batches(ref: Predictions, new: Predictions) -> None:
    """Refuse two batches that cannot be compared, in one line each."""
    if ref.k != new.k:
        raise InputError(f"{ref.name} has {ref.k} classes and {new.name} {new.k}: a comparison is of one problem's classes")
    if ref.labels is None:
        raise InputError(f"{ref.name}: the reference needs labels", cli_hint="--labels FILE")
    for preds in (ref, new):
        if preds.n < MIN_ROWS:
            raise InputError(
                f"{preds.name}: {preds.n} rows; a comparison needs at least {MIN_ROWS} in each batch for its bootstrap"
            )
    if new.labels is not None and not np.intersect1d(np.unique(ref.labels), np.unique(new.labels)).size:
        raise InputError(f"{ref.name} and {new.name} share no class among their labels: nothing to compare")
    ref_labels, new_labels = ref.output_layout.n_labels, new.output_layout.n_labels  # None: rows of classes
    if (ref_labels is None) != (new_labels is None):
        multi, single = (ref, new) if ref_labels is not None else (new, ref)
        raise InputError(
            f"{multi.name} is a multi-label input and {single.name} is not: compare two multi-label batches "
            "(scores without labels are read as multi-label with the task multilabel)",
            cli_hint="--task multilabel",
        )
    if ref_labels != new_labels:
        raise InputError(f"{ref.name} has {ref_labels} labels and {new.name} {new_labels}")


def same_rows(ref: Predictions, new: Predictions) -> bool:
    """Whether both batches are the same rows (two models scored on one test set): as many rows
    with the same labels in the same order, of more than one class. Their replicates then pair."""
    if ref.labels is None or new.labels is None or ref.n != new.n or len(np.unique(ref.labels)) < 2:
        return False
    return bool(np.array_equal(ref.labels, new.labels))


def compare(ref, new, request: ComparisonRequest | None = None, *, groups=None, progress=None) -> ComparisonReport:
    """What changed from ``ref`` to ``new`` (each validated :class:`~calib.io.Predictions`, a
    (scores, labels) pair, or for ``new`` scores alone), as ``request`` asks
    (:class:`~calib.drift.request.ComparisonRequest`; its defaults when None): the module
    docstring's quantities and verdict, the remedies' held-out evidence, and the gates checked on
    the changes' intervals.

    ``groups`` = (REF's :class:`~calib.evaluation.groups.Groups`, NEW's) adds the same comparison
    within each group both batches hold at least :data:`MIN_ROWS` rows of, each at the Bonferroni
    level 1 - (1 - level) / G over the G groups compared, and the groups left out with the reason;
    a multi-label input's labels are its groups. ``progress`` is called once per step of the work.

    >>> import numpy as np, calib
    >>> test = np.load(calib.sample_path("cifar10_test.npz"))
    >>> logits, labels = test["logits"], test["labels"]
    >>> weaker = logits + np.random.default_rng(0).normal(0.0, 6.0, logits.shape)
    >>> report = calib.compare((logits[:5000], labels[:5000]), (weaker[5000:], labels[5000:]))
    >>> report.verdict, round(report.whole.metrics["accuracy"].new, 3)
    ('performance loss', 0.678)
    """
    from ..evaluation.gates import check_gates
    from ..evaluation.groups import label_groups

    request = request if request is not None else ComparisonRequest()
    ref, new = as_batch(ref, "REF"), as_batch(new, "NEW")
    check_batches(ref, new)
    if new.labels is None and request.needs_labels:
        raise UsageError(
            f"gate on {request.needs_labels[0]}: NEW has no labels, and only prior_shift is measured without them",
            cli_hint="--fail-if prior_shift>T",
        )
    paired = same_rows(ref, new)
    step = progress if progress is not None else (lambda status="": None)
    note = None
    by_label = label_groups(ref), label_groups(new)
    if by_label[0] is not None:  # each label a binary problem: the labels are the groups
        if groups is not None:
            raise UsageError("a multi-label comparison is grouped by its labels; other groups do not apply to it")
        groups = by_label
        note = (
            "multi-label: the whole-batch comparison pools the (row, label) pairs and resamples them by row; "
            "each label's own comparison is under groups"
        )
    calibration = None
    if new.labels is None:
        from .verdict import UNLABELLED_NOTE

        calibration, note = _reference_calibration(ref), UNLABELLED_NOTE if note is None else f"{note}; {UNLABELLED_NOTE}"
    whole = section_of(ref, new, request, request.level, paired, calibration, step)
    compared = None if groups is None else _by_group(ref, new, groups, request, paired, calibration, step)
    report = ComparisonReport(
        __version__,
        InputSection.of(ref),
        InputSection.of(new),
        {
            "bootstrap": request.replicates,
            "level": request.level,
            "seed": request.seed,
            "decay_score": request.decay_score,
            "top_k": list(request.top_k),
            "paired": paired,
            "outcome": "answer (top label; K = 2: class 1)",
        },
        whole,
        compared,
        note=note,
    )
    results, passed = check_gates(report.gate_view(request.keys), request.gates, inconclusive=request.inconclusive)
    report.gates, report.passed = results, passed
    report.inconclusive_counts_as = request.inconclusive if results else None
    return report


def comparison_steps(new: Predictions, groups=None) -> int:
    """The progress steps :func:`compare` takes on NEW (with or without labels) and ``groups`` (a
    multi-label input's labels when it is one), for a progress bar."""
    from ..evaluation.groups import label_groups

    by_label = label_groups(new)
    count = len(by_label.names) if by_label is not None else 0 if groups is None else len(groups[0].names)
    return STEPS[new.labels is not None] * (1 + count)


def _configs(request: ComparisonRequest, level: float, paired: bool) -> tuple[BootstrapConfig, BootstrapConfig]:
    """The replicates of REF and NEW: one seed for the same rows (paired), independent seeds otherwise."""
    ref = BootstrapConfig(request.replicates, request.seed, level)
    return ref, ref if paired else BootstrapConfig(request.replicates, independent_seed(request.seed), level)


def section_of(ref, new, request, level: float, paired: bool, calibration, step) -> ComparisonSection:
    """The comparison of ``ref``'s and ``new``'s rows at ``level``."""
    from .sections import labelled_section, unlabelled_section

    ref_config, new_config = _configs(request, level, paired)
    if new.labels is None:
        return unlabelled_section(ref, new, calibration, ref_config, new_config, request, step)
    return labelled_section(ref, new, ref_config, new_config, request, step)


def _by_group(ref, new, groups, request: ComparisonRequest, paired: bool, calibration, step) -> ComparisonGroups:
    """Each group's comparison at the Bonferroni level over the groups compared; the rest skipped."""
    from ..evaluation.gate_noise import bonferroni_level

    ref_groups, new_groups = groups
    ref_rows = {name: np.flatnonzero(ref_groups.codes == i) for i, name in enumerate(ref_groups.names)}
    new_rows = {name: np.flatnonzero(new_groups.codes == i) for i, name in enumerate(new_groups.names)}
    skipped, kept = {}, []
    for name in sorted(set(ref_rows) | set(new_rows)):
        counts = (len(ref_rows.get(name, ())), len(new_rows.get(name, ())))
        if min(counts) < MIN_ROWS:
            skipped[name] = f"{counts[0]} rows in REF and {counts[1]} in NEW; each needs {MIN_ROWS}"
        else:
            kept.append(name)
    level = bonferroni_level(request.level, len(kept))
    sections = {}
    for name in kept:
        in_ref, in_new = ref.take(ref_rows[name]), new.take(new_rows[name])
        try:
            sections[name] = section_of(in_ref, in_new, request, level, paired and same_rows(in_ref, in_new), calibration, step)
        except InputError as exc:
            skipped[name] = str(exc)
    return ComparisonGroups(ref_groups.source, level, sections, skipped, ref_groups.of_labels)


def _reference_calibration(ref: Predictions):
    """bcts fitted on the reference rows: EM takes calibrated probabilities (Alexandari et al. 2020
    found bias-corrected calibration then EM hard to beat; on CIFAR-10 it brought EM's median L1
    error from 0.033 to 0.021)."""
    from ..calibrators.bias_corrected import BiasCorrectedTemperatureScaling

    return BiasCorrectedTemperatureScaling(BiasCorrectedTemperatureScaling.Options()).fit(ref.all_logits(), ref.labels)


def remedy(ref, new, report: ComparisonReport):
    """(the fitted calibrator that undoes what ``report`` found, or None; one sentence saying what
    it is or why there is none): :func:`calib.drift.remedies.remedy`."""
    from .remedies import remedy as fitted_remedy

    return fitted_remedy(ref, new, report)


def save_remedy(ref, new, report: ComparisonReport, path: str, *, force: bool = False) -> dict:
    """Write the remedy of ``report`` (:func:`remedy`) as a bundle at ``path`` where there is one, and
    record its fate in the report (``remedy_written``: the path and what was written, or why
    nothing was); returns that record."""
    fitted, sentence = remedy(ref, new, report)
    if fitted is None:
        report.remedy_written = {"path": None, "why": sentence}
    else:
        fitted.save(path, force=force)
        report.remedy_written = {"path": path, "what": sentence}
    return report.remedy_written
