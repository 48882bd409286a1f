"""`calib compare REF NEW`: what changed between two batches of one model's predictions."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import api
from ..reporting.text import COMPARISON_TERMS
from . import options, render


def compare(
    ref: Annotated[str, typer.Argument(metavar="REF", help="The reference batch, with labels.", show_default=False)],
    new: Annotated[str, typer.Argument(metavar="NEW", help="The new batch, with labels or without.", show_default=False)],
    label_column: options.LabelColumn = None,
    input_kind: options.InputKind = "auto",
    group_by: options.GroupBy = None,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Bootstrap replicates of each batch.")] = 200,
    level: Annotated[float, typer.Option("--level", help="The intervals' level, and 1 - the tests' size.")] = 0.99,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap and of the recalibration's halves.")] = 0,
    decay_score: Annotated[
        Optional[str],
        typer.Option(
            "--decay-score",
            help="The proper score whose miscalibration the decay test reads: log_loss (the default) or brier.",
            show_default=False,
        ),
    ] = None,
    fail_if: Annotated[
        Optional[list[str]],
        typer.Option(
            "--fail-if",
            help="Fail (exit 1) when a change holds beyond noise, e.g. 'miscalibration_increase>0.005'; keys: "
            "miscalibration_increase, discrimination_decrease, recalibrated_score_increase, score_change, uncertainty_change.",
            show_default=False,
        ),
    ] = None,
    json_path: options.json_option("the comparison") = None,
    fit_remedy: Annotated[
        Optional[str],
        typer.Option(
            "--fit-remedy",
            help="Write the bundle that undoes what was found: a prior correction (label shift) or a recalibration (decay).",
            show_default=False,
        ),
    ] = None,
    html_path: Annotated[
        Optional[str], typer.Option("--html", help="Also write the comparison as a self-contained HTML page.", show_default=False)
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --fit-remedy bundle.")] = False,
    table_format: options.TableFormat = "auto",
) -> None:
    """Compare two batches of one model's predictions: the change of each proper score split into
    miscalibration, discrimination and uncertainty, and a verdict: label shift, calibration decay,
    a new concept, or none.

    Example: calib compare last_month.npz this_week.npz --fit-remedy fix_bundle
    """
    from ..api import check_not_an_input, read_predictions

    render.resolve_format(table_format)
    for path in (json_path, fit_remedy, html_path):
        if path not in (None, "-"):
            check_not_an_input(path, [ref, new])
    read = {"label_column": label_column, "input_kind": input_kind}
    ref_preds = read_predictions(ref, require_labels=True, **read)
    new_preds = read_predictions(new, task=ref_preds.task_of_its_kind, **read)
    groups = None
    if group_by is not None:
        groups = tuple(api.read_groups(preds, path, group_by, None) for preds, path in ((ref_preds, ref), (new_preds, new)))
    settings = {"decay_score": decay_score} if decay_score is not None else {}
    report = api.compare(
        ref_preds, new_preds, bootstrap=bootstrap, level=level, seed=seed, gates=fail_if or (), groups=groups, **settings
    )
    if fit_remedy is not None:
        fixed = api.remedy(ref_preds, new_preds, report)
        if fixed is None:
            render.note("nothing moved beyond noise: no remedy written")
        else:
            fixed.save(fit_remedy, force=force)
            report["remedy_bundle"] = fit_remedy
            render.note(f"wrote the {report['remedy']} ({fixed.method}) to {fit_remedy}")
    if json_path is not None:
        render.write_json(report, json_path)
    if html_path is not None:
        from ..api import write_bytes_atomic
        from ..reporting.html import comparison_page

        write_bytes_atomic(html_path, comparison_page(report).encode())
    if json_path != "-":
        _render(report, table_format)
    if not report["passed"]:
        raise typer.Exit(1)


def _render(report: dict, style: str) -> None:
    title = f"calib compare: {report['ref']['path']} ({report['ref']['n']} rows) -> {report['new']['path']} ({report['new']['n']} rows)"
    if "changes" in report:
        rows = []
        for term, name in COMPARISON_TERMS.items():
            change = report["changes"]["brier"][term]
            ref_value = report["decomposition"]["brier"]["ref"][term]
            new_value = report["decomposition"]["brier"]["new"][term]
            lo, hi = change["ci"]
            rows.append([name, f"{ref_value:.4g}", f"{new_value:.4g}", f"{change['value']:+.4g}", f"[{lo:+.4g}, {hi:+.4g}]"])
        level = report["settings"]["level"]
        render.table(
            title, ["Brier", "REF", "NEW", "change", f"{level:.0%} interval"], rows, [False, True, True, True, False], style
        )
        decay = report["settings"]["decay_score"]
        if decay != "brier":
            change = report["changes"][decay]["mcb"]
            lo, hi = change["ci"]
            render.note(
                f"the decay test reads {decay}'s miscalibration (MCB): change {change['value']:+.4g}, [{lo:+.4g}, {hi:+.4g}]"
            )
    priors = report["priors"]
    noise = f"; its sampling noise alone about {priors['l1_noise']:.2g} (L1)" if "l1_noise" in priors else ""
    render.note(f"class priors: L1 distance {priors['l1']:.4g} ({priors['from']}){noise}")
    for name, effect in report.get("remedies", {}).items():
        render.note(f"{name}: NEW's miscalibration {effect['miscalibration_before']:.4g} -> {effect['miscalibration_after']:.4g}")
    if "predicted_ece_under_label_shift" in report:
        render.note(f"predicted ECE of NEW under the estimated label shift: {report['predicted_ece_under_label_shift']:.4g}")
    if "groups" in report:
        _render_groups(report["groups"], report["settings"]["decay_score"], style)
    if "note" in report:
        render.note(report["note"])
    remedy = f" (remedy: {report['remedy']})" if report.get("remedy") else ""
    render.note(f"verdict: {report['verdict']}{remedy}")
    for gate in report["gates"]:
        shown = (
            f" = {gate['value']:.4g} in [{gate['ci'][0]:.4g}, {gate['ci'][1]:.4g}]" if "value" in gate else f": {gate.get('why')}"
        )
        render.note(f"gate {gate['expr']}: {gate['result']}{shown}")


def _render_groups(groups: dict, decay_score: str, style: str) -> None:
    """One row a group: its rows, the changes the verdict reads, its verdict."""
    rows = []
    for name, found in groups["values"].items():
        changes = found.get("changes", {})
        read = [(decay_score, "mcb"), ("brier", "recalibrated")]
        shown = [f"{changes[score][term]['value']:+.4g}" if score in changes else "-" for score, term in read]
        rows.append([name, str(found["ref_n"]), str(found["new_n"]), *shown, found["verdict"]])
    header = [groups["source"], "REF n", "NEW n", f"MCB change ({decay_score})", "UNC - DSC change (brier)", "verdict"]
    render.table(f"by group, each at level {groups['level']:.4g}", header, rows, [False, True, True, True, True, False], style)
    for name, why in groups["skipped"].items():
        render.note(f"group {name} not compared: {why}")
