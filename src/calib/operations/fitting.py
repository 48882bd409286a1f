"""Fitting a calibrator on a source's rows and saving it as a bundle directory."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .inputs import Input, Source, read_source


@dataclass
class Fit:
    """A fit: the fitted :class:`calib.Calibration`, the ``input`` rows it was fitted on, the
    ``train`` rows of a model that trains (None otherwise), and the ``summary`` saved with it
    (:meth:`calib.Calibration.summary`: method, options, rows, fit report, warnings, bundle)."""

    calibration: Any
    input: Input
    train: Input | None
    summary: dict

    @property
    def shape(self) -> dict[str, str]:
        """The rows the summary table names (:meth:`calib.Calibration.fitted_shape`)."""
        return self.calibration.fitted_shape(self.input.preds)


def fit_source(
    source: Source,
    method: str,
    out: str,
    *,
    options: Mapping[str, object] | None = None,
    seed: int = 0,
    train: Source | None = None,
    per_label: bool = False,
    joint: bool = False,
    device: str = "auto",
    force: bool = False,
    progress=None,
) -> Fit:
    """Fit ``method`` (its ``options`` by name, values as given or as text) on the labelled rows of
    ``source`` (with their ``features``), with ``seed``, and save it to the bundle directory ``out``
    (replacing a non-empty one with ``force``). ``train``: the rows a method with a model of its
    own trains on, their labels in the file (and their features where the source has features);
    ``per_label`` / ``joint``: a multi-label input's calibrators (calib.calibrator); ``device``: where
    a torch model trains; ``progress`` receives the fit's reports, one line each."""
    from ..api import calibrator
    from ..core.progress import reporting

    inputs = read_source(
        dataclasses.replace(source, reading=dataclasses.replace(source.reading, require_labels=True)), groups=False
    )
    rows = None
    if train is not None:
        reading = dataclasses.replace(source.reading, require_labels=True, labels_path=None, input_format=None)
        rows = read_source(dataclasses.replace(train, reading=reading), groups=False)
    with reporting(progress):
        fitted = calibrator(method, per_label=per_label, joint=joint, **dict(options or {})).fit(
            inputs.preds,
            seed=seed,
            features=inputs.features,
            train=None if rows is None else rows.preds,
            train_features=None if rows is None else rows.features,
            device=device,
        )
    fitted.save(out, force=force)
    return Fit(fitted, inputs, rows, fitted.summary(inputs.preds, None if rows is None else rows.preds, out))
