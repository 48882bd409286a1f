"""`calib compare REF NEW`: what changed between two batches of predictions, and what undoes it."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import operations
from ..reporting.text import comparison_lines, comparison_parts, comparison_title, gate_text
from . import options, render


def _default(name: str):
    """The library's default of the comparison setting ``name`` (calib.drift.ComparisonRequest)."""
    return options.library_default(operations.ComparisonRequest, name)


def compare(
    ref: Annotated[str, typer.Argument(metavar="REF", help="The reference batch, with labels.", show_default=False)],
    new: Annotated[str, typer.Argument(metavar="NEW", help="The new batch, with labels or without.", show_default=False)],
    label_column: options.LabelColumn = None,
    input_kind: options.InputKind = "auto",
    group_by: options.GroupBy = None,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Bootstrap replicates of each batch.")] = _default("replicates"),
    level: Annotated[
        float, typer.Option("--level", help="The intervals' level; the verdict's tests share 1 - level.")
    ] = _default("level"),
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap and of the remedies' held-out halves.")] = _default(
        "seed"
    ),
    decay_score: Annotated[
        str, typer.Option("--decay-score", help="The proper score whose miscalibration the decay test reads: log_loss or brier.")
    ] = _default("decay_score"),
    top_k: Annotated[
        Optional[list[int]],
        typer.Option("--top-k", help="Also compare top-k accuracy (k in 2, 3, 5, 10); repeatable.", show_default=False),
    ] = None,
    fail_if: Annotated[
        Optional[list[str]],
        typer.Option(
            "--fail-if",
            help="Fail (exit 1) when a change holds beyond noise, e.g. 'accuracy_decrease>0.01' or "
            "'log_loss_miscalibration_increase>0.005' (docs/compare.md lists the keys); repeatable.",
            show_default=False,
        ),
    ] = None,
    inconclusive: Annotated[
        str,
        typer.Option(
            "--inconclusive", help="What a gate whose interval straddles its threshold counts as: pass (exit 0) | fail (exit 1)."
        ),
    ] = _default("inconclusive"),
    junit: Annotated[
        Optional[str], typer.Option("--junit", help="Also write the gates as JUnit XML.", show_default=False)
    ] = None,
    json_path: options.ComparisonJson = None,
    fit_remedy: Annotated[
        Optional[str],
        typer.Option(
            "--fit-remedy",
            help="Write the bundle that undoes what was found (a prior correction for label shift, a recalibration for "
            "decay), where its held-out evidence says it improves NEW.",
            show_default=False,
        ),
    ] = None,
    html_path: Annotated[
        Optional[str], typer.Option("--html", help="Also write the comparison as a self-contained HTML page.", show_default=False)
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --fit-remedy bundle.")] = False,
    table_format: options.TableFormat = "auto",
) -> None:
    """Compare two batches of predictions (one model over time, or two models on the same kind of
    rows): accuracy, Brier score and log loss with their changes, each score's decomposition into
    miscalibration, discrimination and uncertainty, the class priors, and a verdict: performance
    loss or gain, label shift, calibration decay or improvement, another change, or none.

    Example: calib compare last_month.npz this_week.npz --fit-remedy fix_bundle
    """
    style = render.resolve_format(table_format)
    request = operations.ComparisonRequest(
        replicates=bootstrap,
        level=level,
        seed=seed,
        gates=tuple(fail_if or ()),
        inconclusive=inconclusive,
        decay_score=decay_score,
        top_k=tuple(top_k or ()),
    )
    reading = options.reading(locals())
    batches = operations.Source(ref, reading, group_by=group_by), operations.Source(new, reading, group_by=group_by)
    batches[0].check_outputs([json_path, fit_remedy, html_path, junit], [new])
    plan = operations.plan_comparison(*batches, request)
    with render.progress("compare", plan.steps, "steps") as advance:
        report = plan.run(advance, remedy=fit_remedy, force=force)
    if json_path is not None:
        render.write_json(report.to_json(), json_path)
    if html_path is not None:
        from ..reporting.html import comparison_page

        operations.write_output(html_path, comparison_page(report))
    if json_path != "-":
        _render(report, style)
    from .ci_output import write_ci_outputs

    write_ci_outputs(report.gate_view(request.keys), junit, summary=comparison_lines(report, "md"))
    failed = [gate for gate in report.gates if not gate.passed]
    if failed:
        render.error("gate failed: " + "; ".join(gate_text(gate.fields) for gate in failed))
        raise typer.Exit(1)


def _render(report, style: str) -> None:
    """The comparison on stdout: its tables, the priors and remedies, the verdict and its evidence,
    the gates; plain text or markdown as every rendering lines them up, rich tables on a terminal."""
    if style != "table":
        render.lines(comparison_lines(report, style), style="")
        return
    tables, notes, verdict, gates = comparison_parts(report)
    render.lines([comparison_title(report)], style="bold")
    for title, header, rows, right in tables:
        render.table(title, header, rows, right, style)
    render.lines(notes)
    render.lines(verdict, style="bold")
    render.lines(gates, style="")
