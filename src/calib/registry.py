"""Name -> calibrator class; unknown names list the valid ones."""

from __future__ import annotations

from .calibrators.alpha_agnostic import ATSMultiAdaptive, ATSMultiGlobal
from .calibrators.ats import ATSAdaptive, ATSGlobal, ConformalTS
from .calibrators.base import Calibrator
from .calibrators.bias_corrected import BiasCorrectedTemperatureScaling
from .calibrators.conformal_mass import MassRescaling
from .calibrators.matrix_scaling import Dirichlet, MatrixScaling, VectorScaling
from .calibrators.onevsrest import Beta, HistogramBinning, Isotonic, Platt, Quadratic
from .calibrators.temperature import AdaptiveTemperature, CMCETemperature, TemperatureScaling
from .calibrators.venn_abers import VennAbers
from .errors import UsageError

CALIBRATORS: dict[str, type[Calibrator]] = {
    cls.name: cls
    for cls in (
        TemperatureScaling,
        BiasCorrectedTemperatureScaling,
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
