"""The estimation path of `calib evaluate` (and of `calib merge-states` on estimation states): rows
without labels (or with some), given a calibration map (--bundle, or --reference labelled rows to
fit one on), get the estimates of calib.estimate."""

from __future__ import annotations

import dataclasses

import typer

from .. import api
from ..api import UsageError
from . import render


def calibration_map(flags: dict, reading: api.Reading) -> api.Calibration:
    """The map of the estimates: the bundle, or ``--reference-method`` fitted on --reference's rows."""
    if flags["reference"] is None:
        return api.load(flags["bundle"])
    reference = dataclasses.replace(reading, labels_path=None, label_column=None, require_labels=True, missing_label=None).read(
        flags["reference"]
    )
    render.note(f"calibration map: {flags['reference_method']} fitted on {reference.n} rows of {flags['reference']}")
    return api.calibrator(flags["reference_method"]).fit(reference, seed=flags["seed"])


def needs_estimates(preds) -> bool:
    """True when some row of ``preds`` has no label."""
    return api.lacks_labels(preds.labels)


def settings_of(flags: dict, estimate_gates: list[str]):
    """The estimation settings (calib.estimation.report.EstimationSettings) the flags ask for."""
    return api.EstimationSettings(
        level=flags["confidence"],
        seed=flags["seed"],
        estimator=flags["estimator"],
        gates=tuple(estimate_gates),
        inconclusive=flags["inconclusive"],
        min_group_rows=flags["min_group_rows"],
    )


def refuse_label_gates(request, where: str) -> None:
    """Gates on labelled metrics where no row has a label: one line naming the estimates to gate."""
    gates = request.gates
    if gates.any:
        first = gates.thresholds[0].expr if gates.thresholds else gates.changes[0].metric
        raise UsageError(
            f"gate {first!r} reads labels and no row of {where} has one; gate an estimate instead "
            "(est_accuracy, est_nll, est_brier, each also _shifted)"
        )


def estimate(preds, calibration: api.Calibration, flags: dict, estimate_gates: list[str], request) -> None:
    """Estimate PRED's rows without labels, evaluate its rows with labels (as without a map), print or
    write the reports (and the state, --emit-state), and exit 1 when a gate failed."""
    labelled = None if preds.labels is None else (preds.labels != api.MISSING_LABEL).nonzero()[0]
    if labelled is None or len(labelled) == 0:
        refuse_label_gates(request, preds.name)
    settings = settings_of(flags, estimate_gates)
    render.note(f"input kind: {preds.kind} ({preds.kind_reason})")
    groups = api.read_groups(preds, flags["pred"], flags["group_by"], flags["groups_file"], flags["label_column"])
    source = {"path": preds.name, "bundle": flags["bundle"], "reference": flags["reference"]}
    report = api.estimate(
        preds, calibrator=calibration, settings=settings, groups=groups, source=source, first_row=flags["first_row"]
    )
    if flags["emit_state"] is not None:
        api.write_bytes_atomic(flags["emit_state"], report.state.to_bytes(settings.recorded()))
    evaluation = None
    if labelled is not None and len(labelled):
        evaluation = api.evaluate(preds.take(labelled), request=request, calibrator=calibration).entries
        shown = f"{preds.name} (its {len(labelled)} labelled rows)"
        evaluation = dataclasses.replace(evaluation, input=dataclasses.replace(evaluation.input, path=shown))
    show(report, flags, evaluation)


def show(report, flags: dict, evaluation=None) -> None:
    """The JSON (--json), the HTML page (--html) and the tables of an estimation (after the labelled
    rows' evaluation, when there is one); exit 1 when a gate of either failed."""
    from ..reporting.estimation import estimate_notes, estimate_table, estimation_page, gate_lines, group_rows

    document = report.to_json()
    if evaluation is not None:
        document["labelled_evaluation"] = evaluation.to_json()
    if flags["json_path"] is not None:
        render.write_json(document, flags["json_path"])
    if flags.get("html") is not None:
        api.write_bytes_atomic(flags["html"], estimation_page(report).encode())
    if flags["json_path"] != "-":
        if evaluation is not None:
            render.report_table(evaluation, flags["table_format"])
        title, header, rows, right = estimate_table(report)
        render.table(title, header, rows, right, flags["table_format"])
        if report.groups:
            group_header, body = group_rows(report)
            render.table("Estimates per group", group_header, body, [False, True, True, True, False], flags["table_format"])
        render.lines(estimate_notes(report) + gate_lines(report))
    passed = [gate["passed"] for gate in report.gates] + (
        [] if evaluation is None else [gate.passed for gate in evaluation.gates]
    )
    if not all(passed):
        render.error(f"gate failed: {passed.count(False)} of {len(passed)}")
        raise typer.Exit(1)


def shards(flags: dict, estimate_gates: list[str], request) -> bool:
    """Estimate a directory of shards without labels under --bundle (False, doing nothing, when its
    shards have labels or no bundle is given: they are evaluated)."""
    reading = (flags["input_kind"], flags["score_prefix"], flags["label_column"], flags["scores"])
    if flags["bundle"] is None or not api.shards_lack_labels(flags["pred"], reading):
        return False
    refuse_label_gates(request, flags["pred"])
    report = api.estimate_shards(
        flags["pred"],
        settings_of(flags, estimate_gates),
        bundle=flags["bundle"],
        reading=reading,
        group_by=flags["group_by"],
        engine=flags["engine"],
        scheduler=flags["scheduler"],
    )
    show(report, flags)
    return True


def merged(paths: list[str], flags: dict) -> bool:
    """Merge estimation states into one estimation and show it (False, doing nothing, when the
    first file is not an estimation state: metric states merge as they always did)."""
    if not api.is_state_file(paths[0]):
        return False
    show(api.merged_report(paths, flags["min_group_rows"]), {**flags, "html": None})
    return True
