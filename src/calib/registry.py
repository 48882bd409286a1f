"""Name -> calibrator class; unknown names list the valid ones."""

from __future__ import annotations

import dataclasses

from .calibrators.alpha_agnostic import AGGREGATES, QUANTILE_MODELS, ATSMultiAdaptive, ATSMultiGlobal
from .calibrators.ats import VARIANTS, ATSAdaptive, ATSGlobal, ConformalTS
from .calibrators.base import Calibrator
from .calibrators.bias_corrected import BiasCorrectedTemperatureScaling, PriorShift
from .calibrators.conformal_mass import MassRescaling
from .calibrators.matrix_scaling import Dirichlet, MatrixScaling, VectorScaling
from .calibrators.onevsrest import Beta, HistogramBinning, Isotonic, Platt, Quadratic
from .calibrators.scores import SCORES
from .calibrators.set_based import THRESHOLDS
from .calibrators.temperature import AdaptiveTemperature, CMCETemperature, TemperatureScaling
from .calibrators.thresholds import FLOWS
from .calibrators.top_label import TopLabelHistogramBinning
from .calibrators.venn_abers import VennAbers
from .errors import UsageError

CALIBRATORS: dict[str, type[Calibrator]] = {
    cls.name: cls
    for cls in (
        TemperatureScaling,
        BiasCorrectedTemperatureScaling,
        PriorShift,
        CMCETemperature,
        AdaptiveTemperature,
        MassRescaling,
        ConformalTS,
        ATSGlobal,
        ATSAdaptive,
        ATSMultiGlobal,
        ATSMultiAdaptive,
        Platt,
        Quadratic,
        Beta,
        Isotonic,
        HistogramBinning,
        TopLabelHistogramBinning,
        Dirichlet,
        VectorScaling,
        MatrixScaling,
        VennAbers,
    )
}


def calibrator_class(name: str) -> type[Calibrator]:
    try:
        return CALIBRATORS[name]
    except KeyError:
        raise UsageError(f"unknown method {name!r}; choose one of {', '.join(sorted(CALIBRATORS))}") from None


#: Method options with a fixed set of values -> the values, in the order help texts list them.
OPTION_CHOICES: dict[str, tuple[str, ...]] = {
    "score": tuple(SCORES),
    "threshold": THRESHOLDS,
    "variant": VARIANTS,
    "flow": FLOWS,
    "aggregate": AGGREGATES,
    "model": QUANTILE_MODELS,
}


def choices_text(option: str) -> str:
    """``option``'s values as a help text lists them: "msp | aps | raps"."""
    return " | ".join(OPTION_CHOICES[option])


#: Option values whose fits have no ONNX graph: an adaptive threshold is a network of the logits,
#: and the flow shapes only an adaptive threshold.
NO_GRAPH_CHOICES = {"threshold": ("adaptive",), "flow": FLOWS}


def has_onnx_graph(cls: type[Calibrator]) -> bool:
    """Whether the method builds an ONNX graph (:mod:`calib.onnx_export`): it has a part of a
    graph and no reason of its own not to."""
    return cls.onnx_outputs is not Calibrator.onnx_outputs and cls.not_exportable is Calibrator.not_exportable


def onnx_cases() -> list[tuple[str, dict]]:
    """Every (method, options) whose export must equal ``calib apply``: each method with a graph at
    its defaults, and once more for every other value of each of its options with a fixed set of
    values (:data:`OPTION_CHOICES`), except :data:`NO_GRAPH_CHOICES`. A new method, score or
    threshold joins the parity checks (tests/unit/test_onnx_export.py, benchmarks/onnx_parity.py) here."""
    cases = []
    for name, cls in CALIBRATORS.items():
        if not has_onnx_graph(cls):
            continue
        cases.append((name, {}))
        defaults = {f.name: f.default for f in dataclasses.fields(cls.Options)}
        for option, values in OPTION_CHOICES.items():
            if option not in defaults:
                continue
            skipped = (defaults[option], *NO_GRAPH_CHOICES.get(option, ()))
            cases += [(name, {option: value}) for value in values if value not in skipped]
    return cases
