"""``bcts``: bias-corrected temperature scaling (Alexandari, Kundaje and Shrikumar 2020),
p = softmax(z / T + b) with one temperature and a bias per class, fitted by minimising the NLL

  mean_i [ -log softmax(beta z_i + b)_{y_i} ],  beta = 1 / T,

with L-BFGS and the analytic gradient (d/d beta = mean_i sum_k (q_ik - y_ik) z_ik, d/d b_k = mean_i
(q_ik - y_ik)), starting from the identity map (beta = 1, b = 0), so the fitted NLL is never above
the model's. softmax ignores a constant added to b, and the gradient in b sums to 0, so b keeps
the mean 0 it starts with. A class without calibration rows gets its bias pushed down until the
iterations stop.
"""

from __future__ import annotations

import numpy as np

from ..bundle import State
from ..core.numerics import log_softmax
from .base import Calibrator
from .matrix_scaling import MAX_ITERATIONS, PROJECTED_GRADIENT_TOLERANCE, RELATIVE_LOSS_TOLERANCE


class BiasCorrectedTemperatureScaling(Calibrator):
    name = "bcts"
    summary = (
        "bias-corrected temperature scaling: softmax(z / T + b), T and a bias per class minimising NLL (Alexandari et al. 2020)"
    )
    absent_class_effect = "their bias falls as far as the iterations allow, so their probabilities shrink towards 0"

    def softmax_only(self):
        return True  # softmax(z / T + b) of z + c is softmax(z / T + b)

    def fit(self, logits, labels, *, seed=0, features=None):
        from scipy.optimize import minimize

        z = np.asarray(logits, dtype=np.float64)
        n, k = z.shape
        onehot = np.zeros((n, k))
        onehot[np.arange(n), labels] = 1.0

        def loss_and_gradient(theta):
            log_q = log_softmax(theta[0] * z + theta[1:])
            residual = (np.exp(log_q) - onehot) / n
            return -np.einsum("ij,ij->", onehot, log_q) / n, np.concatenate(
                [[np.einsum("ij,ij->", residual, z)], residual.sum(axis=0)]
            )

        result = minimize(
            loss_and_gradient,
            np.concatenate([[1.0], np.zeros(k)]),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": MAX_ITERATIONS, "gtol": PROJECTED_GRADIENT_TOLERANCE, "ftol": RELATIVE_LOSS_TOLERANCE},
        )
        self.temperature_, self.bias_ = 1.0 / float(result.x[0]), result.x[1:].copy()
        self.converged_ = bool(result.success)
        return self

    def transform(self, logits, features=None):
        return log_softmax(np.asarray(logits, dtype=np.float64) / self.temperature_ + self.bias_)

    def followed_by(self, shift: "PriorShift") -> "BiasCorrectedTemperatureScaling":
        """A new calibrator: this one followed by the prior correction ``shift``, one map,
        softmax(softmax(z / T + b) reweighted by exp(w)) = softmax(z / T + b + w). Neither fitted
        calibrator is changed."""
        composed = BiasCorrectedTemperatureScaling(self.options)
        composed.temperature_, composed.converged_ = self.temperature_, self.converged_
        composed.bias_ = self.bias_ + shift.log_weights_
        return composed

    def onnx_outputs(self, graph, inputs):
        scaled = graph.op("Div", inputs.logits, graph.const(self.temperature_))
        return {"probs": graph.softmax(graph.op("Add", scaled, graph.const(self.bias_[None, :])))}

    def warnings(self):
        if self.temperature_ <= 0:
            return [
                f"the fitted temperature is {self.temperature_:.3g}: the logits rank the labels against the model's own order"
            ]
        return [] if self.converged_ else ["L-BFGS stopped before converging; the fit may be short of its optimum"]

    def fit_report(self):
        return {"temperature": self.temperature_, "bias_spread": float(np.ptp(self.bias_)), "converged": self.converged_}

    def to_state(self):
        return State(params={"temperature": self.temperature_, "converged": self.converged_}, arrays={"bias": self.bias_})

    @classmethod
    def from_state(cls, options, state):
        calibrator = cls(options)
        calibrator.temperature_ = float(state.params["temperature"])
        calibrator.converged_ = bool(state.params["converged"])
        calibrator.bias_ = np.asarray(state.arrays["bias"], dtype=np.float64)
        return calibrator


class PriorShift(Calibrator):
    """``prior-shift``: the label-shift correction p' = softmax(z + w), one weight per class,
    w_k = log(pi'_k / pi_k) for class priors pi moved to pi' with p(x | y) unchanged (Saerens, Latinne
    and Decaestecker 2002). Fitted on labelled rows of the new priors by minimising the NLL (convex
    in w; d/d w_k = mean_i (q_ik - y_ik), so the fitted q's mean over the rows is each class's share
    of the labels: the maximum-likelihood new priors), or written by ``calib compare --fit-remedy``
    from priors estimated without labels. w is centred (softmax ignores a constant)."""

    name = "prior-shift"
    summary = "label-shift correction: softmax(z + w), w = log(new prior / old prior) per class (Saerens et al. 2002)"
    absent_class_effect = "their weight falls as far as the iterations allow, so their probabilities shrink towards 0"

    def softmax_only(self):
        return True  # softmax(z + w) of z + c is softmax(z + w)

    def fit(self, logits, labels, *, seed=0, features=None):
        from scipy.optimize import minimize

        z = np.asarray(logits, dtype=np.float64)
        n, k = z.shape
        counts = np.bincount(labels, minlength=k)

        def loss_and_gradient(w):
            log_q = log_softmax(z + w)
            return -(log_q[np.arange(n), labels].sum()) / n, (np.exp(log_q).sum(axis=0) - counts) / n

        result = minimize(
            loss_and_gradient,
            np.zeros(k),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": MAX_ITERATIONS, "gtol": PROJECTED_GRADIENT_TOLERANCE, "ftol": RELATIVE_LOSS_TOLERANCE},
        )
        self.log_weights_ = result.x - result.x.mean()
        self.converged_ = bool(result.success)
        return self

    @classmethod
    def from_priors(cls, old: np.ndarray, new: np.ndarray) -> "PriorShift":
        """The correction from priors ``old`` to ``new`` (each positive, summing to 1)."""
        calibrator = cls(cls.Options())
        weights = np.log(np.asarray(new, dtype=np.float64)) - np.log(np.asarray(old, dtype=np.float64))
        calibrator.log_weights_ = weights - weights.mean()
        calibrator.converged_ = True
        return calibrator

    def transform(self, logits, features=None):
        return log_softmax(np.asarray(logits, dtype=np.float64) + self.log_weights_)

    def onnx_outputs(self, graph, inputs):
        return {"probs": graph.softmax(graph.op("Add", inputs.logits, graph.const(self.log_weights_[None, :])))}

    def warnings(self):
        return [] if self.converged_ else ["L-BFGS stopped before converging; the fit may be short of its optimum"]

    def fit_report(self):
        relative = np.exp(self.log_weights_) / np.mean(np.exp(self.log_weights_))
        return {
            "exp(w) / mean exp(w), smallest": float(relative.min()),
            "exp(w) / mean exp(w), largest": float(relative.max()),
            "converged": self.converged_,
        }

    def to_state(self):
        return State(params={"converged": self.converged_}, arrays={"log_weights": self.log_weights_})

    @classmethod
    def from_state(cls, options, state):
        calibrator = cls(options)
        calibrator.converged_ = bool(state.params["converged"])
        calibrator.log_weights_ = np.asarray(state.arrays["log_weights"], dtype=np.float64)
        return calibrator
