"""Evaluating a source: its rows with labels get the metric report (the engine of calib.evaluate), its rows
without labels the estimates under a calibration map (calib.estimate), a directory of shards the
merged report of its shards; and merging the state files of several evaluations."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .inputs import Input, Source, read_source

if TYPE_CHECKING:
    from ..estimation.report import EstimationSettings
    from ..evaluation.request import EvaluationRequest


@dataclass
class Evaluation:
    """What an evaluation returns: ``report``, an :class:`calib.evaluation.EvaluationReport` or,
    where rows were estimated, an :class:`calib.estimation.report.EstimationReport`; ``shown``
    the same report with its input named as a table names it (a directory's files, merged states);
    ``labelled`` the evaluation of an estimated input's rows that have labels (None: none have);
    ``estimated``: the report is an estimation."""

    report: Any
    shown: Any = None
    labelled: Any = None
    estimated: bool = False

    def __post_init__(self):
        if self.shown is None:
            self.shown = self.report


@dataclass
class EvaluationPlan:
    """One evaluation, settled before the work starts: its ``request`` (the gates on labelled
    metrics in it), the ``estimation`` settings (the gates on estimates in them; None where no map
    is given), what it does (``mode``: "evaluate", "estimate", "evaluate shards" or "estimate
    shards"), the labelled ``reference`` rows the map was fitted on (None: the bundle is the map),
    the ``input``'s rows (one input), the estimates' ``calibration`` map, the boosted ``fits`` its
    V-ECE trains, whether they run on a ``subsampled`` sample, and ``notes`` on what was decided.
    :meth:`run` does the work."""

    source: Source
    request: EvaluationRequest
    estimation: EstimationSettings | None
    mode: str
    reference: str | None = None
    input: Input | None = None
    calibration: Any = None
    fits: int = 0
    subsampled: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def estimates(self) -> EstimationSettings:
        """The estimation settings (an estimating plan has them)."""
        if self.estimation is None:
            raise ValueError(f"{self.source.path}: no calibration map, so nothing is estimated")
        return self.estimation

    @property
    def rows(self) -> Input:
        """The one input's rows (a directory of shards has none here: its engine reads them)."""
        if self.input is None:
            raise ValueError(f"{self.source.path}: a directory of shards is read by its engine, not here")
        return self.input

    def run(self, progress=None) -> Evaluation:
        """The evaluation; ``progress`` is called once per boosted fit of V-ECE."""
        if self.mode == "evaluate shards":
            return _evaluate_shards(self)
        if self.mode == "estimate shards":
            return Evaluation(_estimate_shards(self), estimated=True)
        if self.mode == "estimate":
            return _estimate(self)
        from ..evaluation import build_report

        inputs = self.rows
        report = build_report(
            inputs.preds,
            self.request,
            calibrator=inputs.calibrator,
            groups=inputs.groups,
            features=inputs.features,
            bundle_path=self.source.bundle,
            progress=progress,
        )
        return Evaluation(report)


def plan_evaluation(
    source: Source,
    request: EvaluationRequest | None = None,
    *,
    gates: Sequence[str] = (),
    vece_off: bool = False,
    reference: str | None = None,
    reference_method: str = "ts",
    estimator: str = "debiased",
    missing_label: int | None = None,
) -> EvaluationPlan:
    """The plan of evaluating ``source`` as ``request`` (:class:`calib.EvaluationRequest`) asks,
    with ``gates`` (text: a gate on an estimate, ``est_accuracy<0.9``, checks the estimates of rows
    without labels; the others the metrics of rows with labels). ``vece_off``: V-ECE was switched
    off, so a V-ECE key named in the metrics or gates is a contradiction. Rows without labels (a
    null label, or ``missing_label``) are estimated under a calibration map: the source's bundle,
    or ``reference_method`` fitted on the labelled rows of the file ``reference``, as ``estimator``
    (calib.estimation.batch.ESTIMATORS) says. Every setting is checked before a row is read; no
    ``request``: the library's default one (calib.evaluate's table, no V-ECE)."""
    from ..evaluation.request import EvaluationRequest, as_gates

    if request is None:
        request = EvaluationRequest()
    estimate_gates: list[str] = []
    if gates:  # the estimates' module is loaded only where a gate may read one
        estimate_gates, metric_gates = _split_gates(gates)
        thresholds = (*request.gates.thresholds, *as_gates(metric_gates))
        request = dataclasses.replace(request, gates=dataclasses.replace(request.gates, thresholds=thresholds))
    _refuse_switched_off_vece(request, vece_off)
    estimating = source.bundle is not None or reference is not None
    if not estimating and (estimate_gates or missing_label is not None):
        what = f"gate {estimate_gates[0]!r}" if estimate_gates else f"missing label {missing_label}"
        raise UsageError(
            f"{what} is for estimates without labels, which need a calibration map", cli_hint="give --bundle or --reference"
        )
    if reference is not None and source.bundle is not None:
        raise UsageError(
            "a bundle and reference rows both give the calibration map; give one", cli_hint="--bundle or --reference"
        )
    estimation = _estimation_settings(request, estimator, estimate_gates) if estimating else None
    plan = EvaluationPlan(source, request, estimation, "evaluate", reference)
    if source.is_directory:
        if reference is not None or missing_label is not None:
            raise UsageError(
                f"{source.path}: a directory of shards is estimated under a bundle, its rows without labels null ones",
                cli_hint="--reference and --missing-label take one file",
            )
        return _plan_shards(plan, estimating)
    reading = dataclasses.replace(source.reading, require_labels=not estimating)
    if estimating:
        reading = dataclasses.replace(reading, missing_label="null" if missing_label is None else missing_label)
    plan.source = dataclasses.replace(source, reading=reading)
    if estimating:
        plan.calibration = _calibration_map(plan, reference, reference_method)
    plan.input = read_source(plan.source)
    plan.notes.append(f"input kind: {plan.input.kind_line}")
    if estimating:
        return _plan_estimates(plan)
    return _plan_metrics(plan)


def _split_gates(gates: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the gates on estimates, the others): a gate whose key is one of
    :data:`calib.estimation.batch.ESTIMATES` (``est_accuracy<0.9``, ``min_group:est_accuracy<0.8``)
    reads the estimates of the rows without labels; a gate that does not parse is the metrics'
    (where its parsing error is said)."""
    from ..estimation import ESTIMATES
    from ..evaluation.gate_parsing import split_condition

    def on_estimate(expr: str) -> bool:
        try:
            return split_condition(expr)[1] in ESTIMATES
        except UsageError:
            return False

    return [g for g in gates if on_estimate(g)], [g for g in gates if not on_estimate(g)]


def _estimation_settings(request, estimator: str, gates: list[str]):
    """The settings of the estimates (calib.estimation.report.EstimationSettings): the request's
    interval level, seed, inconclusive rule and fewest group rows, the ``estimator``, the ``gates``."""
    from ..estimation.report import EstimationSettings

    return EstimationSettings(
        level=request.bootstrap.level,
        seed=request.bootstrap.seed,
        estimator=estimator,
        gates=tuple(gates),
        inconclusive=request.gates.inconclusive,
        min_group_rows=request.min_group_rows,
    )


def _refuse_switched_off_vece(request, vece_off: bool) -> None:
    """With V-ECE switched off, a V-ECE key among the asked metrics or the gates: one line."""
    if not vece_off:
        return
    from ..metrics import VECE_METRICS

    asked = [*(request.metrics or ()), *request.gates.metrics]
    contradicting = next((key for key in asked if key in VECE_METRICS), None)
    if contradicting is not None:
        raise UsageError(f"{contradicting} is a V-ECE value, which is switched off; drop one of the two", cli_hint="--no-vece")


def _calibration_map(plan: EvaluationPlan, reference: str | None, method: str):
    """The map of the estimates: the bundle, or ``method`` fitted on the file ``reference``'s rows,
    read as the source's rows are but with their own labels."""
    from ..api import calibrator, load

    if reference is None:  # estimating without reference rows: the bundle is the map
        return load(str(plan.source.bundle))
    reading = dataclasses.replace(
        plan.source.reading, labels_path=None, label_column=None, require_labels=True, missing_label=None
    )
    rows = reading.read(reference)
    plan.notes.append(f"calibration map: {method} fitted on {rows.n} rows of {reference}")
    return calibrator(method).fit(rows, seed=plan.request.bootstrap.seed)


def _plan_shards(plan: EvaluationPlan, estimating: bool) -> EvaluationPlan:
    """A directory of shards: estimated when a map is given and its shards lack labels, else evaluated."""
    from ..estimation.shards import shards_lack_labels

    if estimating and shards_lack_labels(plan.source.path, _shard_reading(plan.source)):
        _refuse_label_gates(plan.request, plan.source.path)
        plan.mode = "estimate shards"
    else:
        plan.mode = "evaluate shards"
    return plan


def _shard_reading(source: Source) -> tuple:
    reading = source.reading
    return (reading.input_kind, reading.score_prefix, reading.label_column, reading.scores)


def _plan_estimates(plan: EvaluationPlan) -> EvaluationPlan:
    from ..core.validation import lacks_labels

    preds = plan.rows.preds
    plan.calibration.check_applies(preds)
    if lacks_labels(preds.labels):
        plan.mode = "estimate"
        if not _labelled_rows(preds).size:
            _refuse_label_gates(plan.request, preds.name)
        return plan
    if plan.estimates.gates:
        raise UsageError(
            f"every row of {plan.source.path} has a label: evaluate them (gate {plan.estimates.gates[0]!r} reads an "
            "estimate without labels)"
        )
    plan.rows.calibrator = plan.calibration.fitted
    return _plan_metrics(plan)


def _plan_metrics(plan: EvaluationPlan) -> EvaluationPlan:
    from ..evaluation.report import planned_work

    inputs, request = plan.rows, plan.request
    if request.bootstrap.keep_as_baseline or request.emit_state is not None:  # the outputs that record the sha256
        inputs.preds.hash_in_background()  # on the other core while the metrics stream
    else:
        inputs.preds.skip_digest()
    plan.fits, plan.subsampled = planned_work(inputs.preds, request, inputs.groups, calibrated=inputs.calibrator is not None)
    return plan


def _labelled_rows(preds):
    import numpy as np

    from ..core.validation import MISSING_LABEL

    return np.empty(0, dtype=np.int64) if preds.labels is None else (preds.labels != MISSING_LABEL).nonzero()[0]


def _refuse_label_gates(request, where: str) -> None:
    """Gates on labelled metrics where no row has a label: one line naming the estimates to gate."""
    gates = request.gates
    if gates.any:
        first = gates.thresholds[0].expr if gates.thresholds else gates.changes[0].metric
        raise UsageError(
            f"gate {first!r} reads labels and no row of {where} has one; gate an estimate instead "
            "(est_accuracy, est_nll, est_brier, each also _shifted)"
        )


def _estimate(plan: EvaluationPlan) -> Evaluation:
    """The estimates of the rows without labels (the state written where the request names a
    file), and the evaluation of the rows with labels under the same map."""
    from ..api import estimate
    from ..evaluation import build_report
    from ..io.atomic import write_bytes_atomic

    inputs, source = plan.rows, plan.source
    preds = inputs.preds
    report = estimate(
        preds,
        calibrator=plan.calibration,
        settings=plan.estimates,
        groups=inputs.groups,
        source={"path": preds.name, "bundle": source.bundle, "reference": plan.reference},
        first_row=plan.request.bootstrap.first_row,
    )
    if plan.request.emit_state is not None:
        write_bytes_atomic(plan.request.emit_state, report.state.to_bytes(plan.estimates.recorded()))
    labelled = _labelled_rows(preds)
    if not labelled.size:
        return Evaluation(report, estimated=True)
    evaluation = build_report(preds.take(labelled), plan.request, calibrator=plan.calibration.fitted)
    shown = f"{preds.name} (its {len(labelled)} labelled rows)"
    evaluation = dataclasses.replace(evaluation, input=dataclasses.replace(evaluation.input, path=shown))
    return Evaluation(report, labelled=evaluation, estimated=True)


def _evaluate_shards(plan: EvaluationPlan) -> Evaluation:
    from ..shards import evaluate_shards

    source, reading = plan.source, plan.source.reading
    report = evaluate_shards(
        source.path,
        plan.request,
        bundle=source.bundle,
        input_kind=reading.input_kind,
        score_prefix=reading.score_prefix,
        scores=reading.scores,
        label_column=reading.label_column,
        group_by=source.group_by,
        engine=source.engine,
        scheduler=source.scheduler,
    )
    files = len(report.input.merged_from or ())
    return Evaluation(report, _shown_as(report, f"{source.path} ({files} files, {source.engine})", "shards"))


def _estimate_shards(plan: EvaluationPlan):
    from ..estimation.shards import estimate_shards

    source = plan.source
    return estimate_shards(
        source.path,
        plan.estimates,
        bundle=str(source.bundle),
        reading=_shard_reading(source),
        group_by=source.group_by,
        engine=source.engine,
        scheduler=source.scheduler,
    )


def _shown_as(report, path: str, kind: str):
    """``report`` with the input its table names: ``path`` (what was merged) of ``kind``."""
    return dataclasses.replace(report, input=dataclasses.replace(report.input, path=path, kind=kind))


def merge_states(paths: Sequence[str], min_group_rows: int = 100) -> Evaluation:
    """One report from the state files at ``paths`` (``emit_state`` of several evaluations, shards
    of one dataset): metric states into the metric report of all their rows (V-ECE, which is not
    additive, left out), estimation states into one estimation."""
    from ..estimation.state import is_state_file

    if is_state_file(paths[0]):
        from ..estimation.report import merged_report

        return Evaluation(merged_report(list(paths), min_group_rows), estimated=True)
    from ..evaluation import merge_metric_states, read_metric_state

    report = merge_metric_states([read_metric_state(path) for path in paths], list(paths), min_group_rows)
    return Evaluation(report, _shown_as(report, f"{len(report.input.merged_from or ())} merged states", "state"))
