"""ATS-CP with an alpha-specific threshold (ATS-CP paper; docs/calibrators.md): ``ats-gq``, its prob-variant
alias ``conformal-ts`` (CMCE paper's "TS (ours)"), and ``ats-aq``.

For each row, SelectTau finds tau with sum_{y in C(x)} p~_y(tau) = 1 - alpha, where
  prob variant:  p~(tau) = softmax(z / tau)
  score variant: p~(tau) = softmax(-log V(x, .) / tau),  V clamped >= 1e-12.
The ranking is kept, so the argmax is unchanged (prob variant). Empty or full sets leave the row
unchanged; other infeasible rows take the bracket end nearest the target (select_tau).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .conformal import EMPTY, FULL, check_choice
from .select_tau import select_temperature, tempered_distribution
from .set_based import ConformalOptions, SetCalibrator, SetOptions
from .thresholds import SCORE_FLOOR

VARIANTS = ("prob", "score")


def _with_variant(base: type) -> type:
    """``base`` options plus ``variant`` (prob | score): ats-gq's (with the threshold choice) and
    ats-aq's (whose threshold is always the conformalised quantile regression)."""

    @dataclasses.dataclass(frozen=True)
    class WithVariant(base):
        variant: str = "prob"

        def __post_init__(self):
            super().__post_init__()
            check_choice("variant", self.variant, VARIANTS)

    WithVariant.__name__ = WithVariant.__qualname__ = f"{base.__name__}WithVariant"
    return WithVariant


ATSOptions = _with_variant(SetOptions)
AQOptions = _with_variant(ConformalOptions)


class ATSGlobal(SetCalibrator):
    name = "ats-gq"
    summary = "ATS-CP, global quantile: per-row temperature giving the conformal set 1 - alpha mass (Kotelevskii et al. 2025)"
    Options = ATSOptions

    @property
    def variant(self) -> str:
        return self.options.variant

    def _base(self, logits, scores):
        """The scores u that SelectTau tempers: the logits (prob variant) or -log V (score variant)."""
        return logits if self.variant == "prob" else -np.log(np.maximum(scores, SCORE_FLOOR))

    def _tempered(self, logits, kept, scores, in_set, log_space):
        """softmax(u / tau(x)) per row, or its log; rows with an empty or full set keep ``kept``
        (the model's own log-probs or probs)."""
        out, _, category = tempered_distribution(self._base(logits, scores), in_set, 1.0 - self.mass_alpha, log_space)
        unchanged = (category == EMPTY) | (category == FULL)
        out[unchanged] = kept[unchanged]
        return out, category

    def calibrate(self, logits, log_probs, probs, scores, in_set):
        return self._tempered(logits, log_probs, scores, in_set, log_space=True)

    def categories(self, logits, log_probs, probs, scores, in_set):
        """The fit's row counts: the temperature search alone, no distribution written."""
        return select_temperature(self._base(logits, scores), in_set, 1.0 - self.mass_alpha)[1]

    def calibrate_probs(self, logits, log_probs, probs, scores, in_set):
        return self._tempered(logits, probs, scores, in_set, log_space=False)

    def onnx_calibrate(self, graph, logits, probs, scores, in_set):
        """softmax(beta u) with beta = 1 / tau from :func:`calib.calibrators.select_tau.onnx_inverse_temperature`;
        rows with an empty or full set keep the model's probabilities."""
        from .select_tau import onnx_inverse_temperature

        if self.variant == "prob":
            base = logits
        else:
            base = graph.op("Neg", graph.op("Log", graph.op("Max", scores, graph.const(SCORE_FLOOR))))
        centred = graph.op("Sub", base, graph.row_max(base))
        weights = graph.op(
            "Exp", graph.op("Mul", onnx_inverse_temperature(graph, centred, in_set, 1.0 - self.mass_alpha), centred)
        )
        tempered = graph.op("Div", weights, graph.row_sum(weights))
        size = graph.row_sum(graph.as_float(in_set))
        unchanged = graph.op(
            "Or", graph.op("Equal", size, graph.const(0.0)), graph.op("Equal", size, graph.const(float(graph.n_classes)))
        )
        return graph.where(unchanged, probs, tempered)

    def fit_report(self):
        return {**super().fit_report(), "variant": self.variant}


class ConformalTS(ATSGlobal):
    name = "conformal-ts"
    summary = "conformal temperature scaling, Kazantsev et al. 2025's TS (ours): ats-gq with the prob variant"
    Options = SetOptions

    @property
    def variant(self) -> str:
        return "prob"


class ATSAdaptive(ATSGlobal):
    name = "ats-aq"
    requires = ("torch",)
    summary = "ATS-CP, adaptive quantile: conformalised quantile-regression MLP threshold (Kotelevskii et al. 2025)"
    Options = AQOptions
    not_exportable = "its threshold is a neural network of the logits, which the export does not translate"

    @property
    def threshold_kind(self) -> str:
        return "qr"
