"""Pictures of a :class:`calib.diagnose.Diagnosis` (matplotlib, headless, imported only here), and
the report directory of ``calib diagnose --out``: report.json, a PNG and an SVG per figure, and
report.html (calib.reporting.html) with the SVGs inline.

Every figure: labelled axes, a legend under the axes (never over the data), white paper (legible on
a dark page too), over-confidence in :data:`OVER_COLOUR` and under-confidence in
:data:`UNDER_COLOUR` as in the terminal, no dates (the same inputs give the same bytes).
"""

from __future__ import annotations

import io
import json
import os

from ..core.binning import MIN_BIN_ROWS
from ..io.atomic import atomic_directory
from .text import OVER_COLOUR, UNDER_COLOUR, format_value

#: The model's own probabilities and the calibrated ones, in every figure.
MODEL_COLOUR, CALIBRATED_COLOUR = "#555555", "#2ca02c"


def _legend_below(ax, columns: int = 2, source=None) -> None:
    """The legend of ``source``'s curves (default: ``ax``'s) under ``ax``, outside the data."""
    handles, labels = (source or ax).get_legend_handles_labels()
    ax.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.3 if source else -0.16),
        ncol=columns,
        frameon=False,
        fontsize="small",
    )


def _figures(result):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "calib", "figure.facecolor": "white", "axes.facecolor": "white"})
    figures = {
        "reliability": _reliability_figure(plt, result),
        "cumulative_mass": _cumulative_mass_figure(plt, result),
        "over_under": _over_under_figure(plt, result),
    }
    if result.groups is not None and result.groups["worst"]:
        figures["reliability_groups"] = _groups_figure(plt, result)
    if result.conformal is not None:
        figures["conformal_sets"] = _conformal_figure(plt, result)
    if result.risk_coverage is not None:
        figures["risk_coverage"] = _risk_coverage_figure(plt, result)
    return figures, plt


def _reliability_figure(plt, result):
    """Top-label reliability diagram with the over/under gaps, and the rows per bin under it."""
    conf = [r["confidence"] for r in result.reliability]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(5.5, 6.2), gridspec_kw={"height_ratios": [3, 1]}, sharex=True)
    top.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    for r in result.reliability:
        colour = OVER_COLOUR if r["observed"] < r["confidence"] else UNDER_COLOUR
        top.plot([r["confidence"]] * 2, [r["confidence"], r["observed"]], color=colour, lw=2, alpha=0.7)
    _bands(top, result.reliability, "confidence")
    read = [r for r in result.reliability if not r.get("few_rows")]
    top.plot(
        [r["confidence"] for r in read],
        [r["observed"] for r in read],
        "o-",
        color=MODEL_COLOUR,
        label="accuracy per confidence bin",
    )
    few = [r for r in result.reliability if r.get("few_rows")]
    if few:
        top.plot(
            [r["confidence"] for r in few],
            [r["observed"] for r in few],
            "o",
            markerfacecolor="none",
            color=MODEL_COLOUR,
            label=f"bin with fewer than {MIN_BIN_ROWS} rows",
        )
    top.plot([], [], color=OVER_COLOUR, lw=2, label="over-confident gap")
    top.plot([], [], color=UNDER_COLOUR, lw=2, label="under-confident gap")
    top.set_ylabel("accuracy")
    top.set_xlim(0, 1)
    top.set_ylim(0, 1.02)
    top.set_title(
        "Reliability diagram (P(y_l = 1), pairs pooled)" if "ece_pos" in result.metrics else "Reliability diagram (top label)"
    )
    bottom.bar(conf, [r["count"] for r in result.reliability], width=0.05, color=MODEL_COLOUR)
    bottom.set_xlabel("confidence")
    bottom.set_ylabel("rows")
    _legend_below(bottom, source=top)
    return fig


def _bands(ax, rows: list[dict], key: str) -> None:
    """Each bin's 95% interval of its observed rate (Clopper-Pearson), as a band around the curve."""
    banded = [r for r in rows if "interval" in r]
    if banded:
        ax.fill_between(
            [r[key] for r in banded],
            [r["interval"][0] for r in banded],
            [r["interval"][1] for r in banded],
            color=MODEL_COLOUR,
            alpha=0.18,
            lw=0,
            label="95% interval per bin (Clopper-Pearson)",
        )


def _cumulative_mass_figure(plt, result):
    """The cumulative mass calibration curve (before and after a bundle)."""
    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="ideal")
    calibrated = bool(result.cumulative_mass_uncalibrated)
    if calibrated:
        before = result.cumulative_mass_uncalibrated
        ax.plot([r["mass"] for r in before], [r["observed"] for r in before], "s-", color=MODEL_COLOUR, label="uncalibrated")
    ax.plot(
        [r["mass"] for r in result.cumulative_mass],
        [r["observed"] for r in result.cumulative_mass],
        "o-",
        color=CALIBRATED_COLOUR if calibrated else MODEL_COLOUR,
        label=f"{'calibrated, ' if calibrated else ''}CMCE {result.metrics['cmce']:.4g}",
    )
    ax.set_xlabel("cumulative mass of the top-k set")
    ax.set_ylabel("coverage of the label")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_title("Cumulative mass calibration curve")
    _legend_below(ax)
    return fig


def _over_under_figure(plt, result):
    """Each confidence bin's over- and under-confidence share of the top-label ECE."""
    conf = [r["confidence"] for r in result.reliability]
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.bar(conf, [r["over"] for r in result.reliability], width=0.05, color=OVER_COLOUR, label="over-confidence")
    ax.bar(conf, [-r["under"] for r in result.reliability], width=0.05, color=UNDER_COLOUR, label="under-confidence")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("confidence")
    ax.set_ylabel("share of the top-label ECE")
    ax.set_title("Over- and under-confidence by confidence bin")
    _legend_below(ax)
    return fig


def _risk_coverage_figure(plt, result):
    """Selective risk against coverage, answering the most confident rows first, beside the oracle's."""
    points = result.risk_coverage["points"]
    coverage = [p["coverage"] for p in points]
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.plot(coverage, [p["risk"] for p in points], color=MODEL_COLOUR, lw=1.6, label="by confidence")
    ax.plot(coverage, [p["oracle"] for p in points], color="k", lw=1.0, ls="--", label="oracle (every right answer first)")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("coverage (share of rows answered, most confident first)")
    ax.set_ylabel("selective risk (error rate of those rows)")
    ax.set_title(
        f"Risk-coverage: AURC {format_value(result.risk_coverage['aurc'])}, E-AURC {format_value(result.risk_coverage['eaurc'])}"
    )
    _legend_below(ax)
    return fig


def _groups_figure(plt, result):
    """The worst groups' reliability curves beside all rows'."""
    conf = [r["confidence"] for r in result.reliability]
    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    everything = "all pairs" if result.groups.get("unit") == "label" else "all rows"
    ax.plot(conf, [r["observed"] for r in result.reliability], "o-", color=MODEL_COLOUR, label=everything)
    for curve in result.groups["worst"]:
        points = curve["reliability"]
        label = f"{curve['group']} ({curve['n']} rows, ECE {curve['ece']:.3g})"
        ax.plot([r["confidence"] for r in points], [r["observed"] for r in points], "o-", alpha=0.8, label=label)
    labels = result.groups.get("unit") == "label"  # a multi-label input: P(y_l = 1) against y_l
    ax.set_xlabel("P(y = 1)" if labels else "confidence")
    ax.set_ylabel("share of y = 1" if labels else "accuracy")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_title("Reliability of the worst labels" if labels else f"Reliability of the worst groups of {result.groups['source']}")
    _legend_below(ax, 1)
    return fig


def _conformal_figure(plt, result):
    """A conformal bundle's coverage and set size against alpha, and its per-class coverage."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    curve, own = result.conformal, result.conformal["bundle"]
    fig, (left, right, classes) = plt.subplots(1, 3, figsize=(13.5, 4.2))
    left.plot(curve["alphas"], [1 - a for a in curve["alphas"]], "k--", lw=1, label="target 1 - alpha")
    left.plot(curve["alphas"], curve["coverage"], "o-", color=MODEL_COLOUR, label=f"split conformal ({curve['score']})")
    left.plot([own["alpha"]], [own["coverage"]], "*", color=CALIBRATED_COLOUR, ms=13, label="this bundle")
    left.set_xlabel("alpha")
    left.set_ylabel("coverage of the label")
    _legend_below(left, 1)
    right.plot(curve["alphas"], curve["set_size"], "o-", color=MODEL_COLOUR)
    right.plot([own["alpha"]], [own["set_size"]], "*", color=CALIBRATED_COLOUR, ms=13)
    right.set_xlabel("alpha")
    right.set_ylabel("mean set size (classes)")
    right.set_yscale("log")
    right.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    right.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    right.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: ""))
    per_class = sorted(c for c in own["class_coverage"] if c is not None)
    classes.plot(range(1, len(per_class) + 1), per_class, ".-", color=MODEL_COLOUR, label="the bundle's sets, per class")
    classes.axhline(1 - own["alpha"], color="k", ls="--", lw=1, label=f"1 - alpha = {1 - own['alpha']:g}")
    classes.set_xlabel("classes, lowest coverage first")
    classes.set_ylabel("coverage of the class's rows")
    _legend_below(classes, 1)
    fig.suptitle(
        "Conformal sets: coverage and size against alpha (constant threshold refitted per alpha, two-fold), per-class coverage"
    )
    fig.tight_layout()
    return fig


def write_report(result, directory: str, *, force: bool = False) -> list[str]:
    """report.json, a PNG and an SVG per figure, and report.html (the SVGs inline), written into a
    temporary directory that then replaces ``directory`` whole (:func:`atomic_directory`: its
    parent must exist; an existing non-empty one is replaced only with ``force``); returns the names
    written."""
    from .html import report_page

    written = []
    with atomic_directory(directory, force=force) as tmp:

        def write(name: str, data: bytes) -> None:
            with open(os.path.join(tmp, name), "wb") as handle:
                handle.write(data)
            written.append(name)

        write("report.json", (json.dumps(result.to_json(), indent=2) + "\n").encode())
        figures, plt = _figures(result)
        inline = {}
        for name, fig in figures.items():
            for fmt in ("png", "svg"):
                buffer = io.BytesIO()
                fig.savefig(
                    buffer,
                    format=fmt,
                    bbox_inches="tight",
                    dpi=110,
                    metadata={"Date": None} if fmt == "svg" else {"Software": None},
                )
                write(f"{name}.{fmt}", buffer.getvalue())
                if fmt == "svg":
                    inline[name] = buffer.getvalue().decode()
            plt.close(fig)
        write("report.html", report_page(result, inline).encode())
    return written
