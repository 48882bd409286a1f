"""`calib fit PRED --method NAME --out BUNDLE_DIR`."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from .. import api
from ..errors import UsageError
from ..io import read_features, read_predictions
from . import options, render

#: Method options with a flag of their own; every other option is set with -O NAME=VALUE.
FLAG_OPTIONS = ("alpha", "score", "threshold", "variant", "flow")


def fit(
    pred: options.Pred,
    method: Annotated[str, typer.Option("--method", "-m", help="Calibrator; `calib methods` lists them.", show_default=False)],
    out: Annotated[str, typer.Option("--out", "-o", help="Bundle directory to write.", show_default=False)],
    labels: options.Labels = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for every random choice of the method.")] = 0,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing non-empty bundle directory.")] = False,
    alpha: Annotated[
        Optional[float], typer.Option("--alpha", help="Miscoverage level of conformal methods.", show_default=False)
    ] = None,
    score: Annotated[
        Optional[str], typer.Option("--score", help="Nonconformity score of conformal methods: msp | aps.", show_default=False)
    ] = None,
    threshold: Annotated[
        Optional[str], typer.Option("--threshold", help="Conformal threshold: constant | adaptive.", show_default=False)
    ] = None,
    variant: Annotated[Optional[str], typer.Option("--variant", help="ATS-CP variant: prob | score.", show_default=False)] = None,
    flow: Annotated[
        Optional[str], typer.Option("--flow", help="Flow of the adaptive threshold: er | gauss.", show_default=False)
    ] = None,
    option: Annotated[
        Optional[list[str]],
        typer.Option("--option", "-O", help="Any method option as KEY=VALUE (repeatable).", show_default=False),
    ] = None,
    features: options.Features = None,
    input_kind: options.InputKind = "auto",
    score_prefix: options.ScorePrefix = None,
) -> None:
    """Fit a calibrator on PRED and its labels and save it as a bundle directory.

    Example: calib fit val.npz --method ts --out ts_bundle
    Conformal: calib fit val.npz --method ats-gq --alpha 0.1 --score aps --out ats_bundle
    """
    flags = dict(zip(FLAG_OPTIONS, (alpha, score, threshold, variant, flow)))
    given = {name: value for name, value in flags.items() if value is not None}
    for item in option or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--option {item!r}: expected KEY=VALUE")
        given[key.strip()] = value.strip()
    start = time.perf_counter()
    preds = read_predictions(pred, labels_path=labels, input_kind=input_kind, score_prefix=score_prefix, require_labels=True)
    fitted = api.calibrator(method, **given).fit(preds, seed=seed, features=read_features(features, preds.n))
    fitted.save(out, force=force)
    calibrator = fitted.fitted
    render.note(f"input kind: {preds.kind} ({preds.kind_reason})")
    render.fit_summary(
        method, calibrator.fit_report(), n=preds.n, k=preds.k, kind=preds.kind, seconds=time.perf_counter() - start, out=out
    )
    for warning in calibrator.warnings():
        render.note(f"warning: {warning}")
