"""Pictures of a :class:`calib.diagnose.Diagnosis` (matplotlib, headless, imported only here)."""

from __future__ import annotations

import base64
import html
import io
import json
import os

from .io.atomic import write_bytes_atomic


def _figures(result):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = {}
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(5, 6), gridspec_kw={"height_ratios": [3, 1]}, sharex=True)
    conf = [r["confidence"] for r in result.reliability]
    top.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    top.plot(conf, [r["observed"] for r in result.reliability], "o-", label="accuracy per bin")
    top.set_ylabel("accuracy")
    top.set_title("Reliability diagram (top label)")
    top.legend(loc="upper left")
    bottom.bar(conf, [r["count"] for r in result.reliability], width=0.05)
    bottom.set_xlabel("confidence")
    bottom.set_ylabel("rows")
    figures["reliability"] = fig
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="ideal")
    if result.cumulative_mass_uncalibrated:
        before = result.cumulative_mass_uncalibrated
        ax.plot(
            [r["mass"] for r in before], [r["observed"] for r in before], "s-", color="tab:gray", alpha=0.8, label="uncalibrated"
        )
    ax.plot(
        [r["mass"] for r in result.cumulative_mass],
        [r["observed"] for r in result.cumulative_mass],
        "o-",
        label=f"{'calibrated, ' if result.cumulative_mass_uncalibrated else ''}CMCE {result.metrics['cmce']:.4f}",
    )
    ax.set_xlabel("cumulative mass of the top-k set")
    ax.set_ylabel("coverage of the label")
    ax.set_title("Cumulative mass calibration curve (CMCE paper)")
    ax.legend(loc="upper left")
    figures["cumulative_mass"] = fig
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar(conf, [r["over"] for r in result.reliability], width=0.05, label="over-confidence")
    ax.bar(conf, [-r["under"] for r in result.reliability], width=0.05, label="under-confidence")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("confidence")
    ax.set_ylabel("share of the calibration error")
    ax.set_title("Over / under-confidence by confidence bin")
    ax.legend()
    figures["over_under"] = fig
    if result.groups is not None and result.groups["worst"]:
        fig, ax = plt.subplots(figsize=(5, 5))
        ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
        ax.plot(conf, [r["observed"] for r in result.reliability], "o-", color="black", label="all rows")
        for curve in result.groups["worst"]:
            points = curve["reliability"]
            label = f"{curve['group']} ({curve['n']} rows, ECE {curve['ece']:.3g})"
            ax.plot([r["confidence"] for r in points], [r["observed"] for r in points], "o-", alpha=0.8, label=label)
        ax.set_xlabel("confidence")
        ax.set_ylabel("accuracy")
        ax.set_title(f"Reliability of the worst groups of {result.groups['source']}")
        ax.legend(loc="upper left", fontsize="small")
        figures["reliability_groups"] = fig
    if result.conformal is not None:
        curve, own = result.conformal, result.conformal["bundle"]
        fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
        left.plot(curve["alphas"], [1 - a for a in curve["alphas"]], "k--", lw=1, label="target 1 - alpha")
        left.plot(curve["alphas"], curve["coverage"], "o-", label=f"split conformal ({curve['score']})")
        left.plot([own["alpha"]], [own["coverage"]], "r*", ms=12, label="this bundle")
        left.set_xlabel("alpha")
        left.set_ylabel("coverage of the label")
        left.legend()
        right.plot(curve["alphas"], curve["set_size"], "o-")
        right.plot([own["alpha"]], [own["set_size"]], "r*", ms=12)
        right.set_xlabel("alpha")
        right.set_ylabel("mean set size")
        right.set_yscale("log")
        fig.suptitle("Conformal sets against alpha (constant threshold refitted per alpha, two-fold)")
        figures["conformal_sets"] = fig
    return figures, plt


def write_report(result, directory: str) -> list[str]:
    """report.json, a PNG and an SVG per figure, and report.html with the images embedded."""
    os.makedirs(directory, exist_ok=True)
    written = []
    write_bytes_atomic(os.path.join(directory, "report.json"), (json.dumps(result.to_json(), indent=2) + "\n").encode())
    written.append("report.json")
    figures, plt = _figures(result)
    embedded = []
    for name, fig in figures.items():
        for fmt in ("png", "svg"):
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, bbox_inches="tight", metadata={"Date": None} if fmt == "svg" else None)
            write_bytes_atomic(os.path.join(directory, f"{name}.{fmt}"), buffer.getvalue())
            written.append(f"{name}.{fmt}")
            if fmt == "png":
                embedded.append((name, base64.b64encode(buffer.getvalue()).decode()))
        plt.close(fig)
    items = "".join(f"<li>{html.escape(line)}</li>" for line in result.findings)
    images = "".join(
        f'<h2>{html.escape(name.replace("_", " "))}</h2><img src="data:image/png;base64,{data}">' for name, data in embedded
    )
    worst = "".join(
        f"<tr><td>{r['class']}</td><td>{r['cw_ece']:.4f}</td><td>{r['support']}</td></tr>" for r in result.worst_classes
    )
    advice = f"<p><b>{html.escape(result.recommendation)}</b></p>" if result.recommendation else ""
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>calib diagnose</title></head><body>"
        f"<h1>calib diagnose: {result.n} x {result.k} ({html.escape(result.kind)})</h1><ul>{items}</ul>{advice}"
        f"{images}<h2>worst classes</h2><table><tr><th>class</th><th>cw-ECE</th><th>support</th></tr>{worst}</table>"
        f"</body></html>\n"
    )
    write_bytes_atomic(os.path.join(directory, "report.html"), page.encode())
    written.append("report.html")
    return written
