"""Linear maps of log-probabilities followed by a softmax: Dirichlet calibration (ODIR) and
structured vector / matrix scaling (SVS, SMS). docs/calibrators.md; docs/metrics.md (V-ECE recalibrators);
the V-ECE paper appendix E.

All three fit p~ = softmax((I + D) x + b) on log-probabilities x by minimising

  mean NLL + l_b sum_j b_j^2 + l_d sum_j D_jj^2 + l_o sum_{i != j} D_ij^2

by a trust-region Newton method whose conjugate-gradient steps take Hessian-vector products (scipy's
``trust-ncg``): the analytic gradient and H v = (q * (s - q . s)) products with s = x V^T + c, never a
K^2 x K^2 Hessian (K = 1,000 means 10^6 weights and only N x K by K x K products). D is diagonal for
the vector structure. SVS and SMS start at D = 0, b = 0 (the identity map on their temperature-scaled
inputs); Dirichlet starts at I + D = I / T, temperature scaling of log p (a diagonal, which ODIR does
not penalise), on inputs scaled by 1 / T, so its fitted objective is never above TS's and its
curvature is that of the scaled log-probabilities. Every fit reports its iterations
(:func:`calib.core.progress.report`) and stops at its budget: ``max_iter`` Newton steps, 10,000
Hessian-vector products, and ``max_seconds`` when given; a stopped fit says so. A fit has converged when the loss is within 1e-12 of its minimum by the Newton
decrement (:data:`CONVERGED_DECREMENT`), whatever stopped the solver: the loss change alone is no
test (on scikit-learn's digits, L-BFGS stopped by its relative loss change 2.55e-9 above the optimum,
with test probabilities 4e-3 away from the optimum's). ``solver="lbfgs"`` keeps the L-BFGS fit
(ftol 1e-14, gtol 1e-10), judged by the same test.

- ``dirichlet`` (Kull et al. 2019): x = log softmax(z); ODIR: l_o = lambda / (K (K - 1)),
  l_b = mu / K, l_d = 0.
- ``svs`` / ``sms`` (Berta et al. 2026, "structured matrix scaling"): x = the temperature-scaled
  log-probabilities log softmax(z / T) with T fitted by ``ts`` first, clipped below at
  log(float32 tiny) = -87.3 as the reference implementation does (probmetrics); l_b = l_d = K / n,
  l_o = K (K - 1) / n (n calibration rows). SVS has D diagonal, SMS full.
"""

from __future__ import annotations

import abc
import dataclasses

import numpy as np

from ..bundle import State
from ..core.numerics import log_softmax
from .base import Calibrator
from .temperature import fit_inverse_temperature

#: The fitters: trust-region Newton-CG with Hessian-vector products (the default), and L-BFGS.
SOLVERS = ("trust-ncg", "lbfgs")
#: A fit has converged when the objective is within this of its minimum, relative to the objective:
#: the Newton decrement g' H^-1 g / 2 (H s = -g solved by conjugate gradients), the loss a last Newton
#: step would still gain, whatever stopped the solver. A gradient bound alone cannot say it: on digits
#: L-BFGS stopped 2.55e-9 above the minimum (relative 6e-9) with gradient entries of 1e-6, while a
#: well-conditioned fit whose loss can fall no further in float64 ends at 2e-9. Directions the data
#: barely pin (curvature near 0) can leave logits uncertain by far more than the loss shows; no
#: float64 fit resolves them better.
CONVERGED_DECREMENT = 1e-12
#: The conjugate-gradient iterations of that last Newton step, at most.
CHECK_ITERATIONS = 500
#: Newton-CG stops when the gradient's norm is at most this; its iteration budget is a backstop (the
#: default Dirichlet fit on CIFAR-100 takes 13 Newton steps).
NEWTON_GRADIENT_TOLERANCE = 1e-10
NEWTON_MAX_ITERATIONS = 1_000
#: L-BFGS stops when the loss or the projected gradient stops changing (ftol 1e-14, gtol 1e-10); this
#: budget is only a backstop. 500 stopped the default Dirichlet fit on CIFAR-100 short (it converges
#: at 780 iterations) and SMS on a 97-class language-ID model (899): an unconverged fit warns.
MAX_ITERATIONS = 20_000
#: L-BFGS-B stops when the largest projected gradient entry is at most this (scipy's gtol) ...
PROJECTED_GRADIENT_TOLERANCE = 1e-10
#: ... or when a step lowers the loss by at most this, relatively (scipy's ftol).
RELATIVE_LOSS_TOLERANCE = 1e-14
#: Lower clip of the TS log-probabilities SVS/SMS take as input (log of float32's smallest normal).
LOG_PROB_FLOOR = float(np.log(np.finfo(np.float32).tiny))


@dataclasses.dataclass(frozen=True)
class Penalties:
    """Ridge weights on the intercept, the diagonal and the off-diagonal of D."""

    bias: float
    diagonal: float
    off_diagonal: float


#: The Hessian-vector products a Newton-CG fit makes at most (its conjugate-gradient steps, the
#: bulk of its work): a deterministic bound on its time. The default Dirichlet fit on CIFAR-100
#: makes about 1,200; a nearly separable one (2,000 rows of 97 classes with log-probabilities down
#: to -900) kept asking for thousands a Newton step, and stops here in about a minute on 2 cores.
MAX_HESSIAN_PRODUCTS = 10_000


@dataclasses.dataclass(frozen=True)
class Budget:
    """Where a fit stops at the latest: ``iterations`` (Newton steps, or L-BFGS iterations),
    ``products`` (Hessian-vector products of Newton-CG), and ``seconds`` of wall time (0: none).
    A fit stopped by any says so, unconverged, with the last point it accepted."""

    iterations: int
    products: int = MAX_HESSIAN_PRODUCTS
    seconds: float = 0.0


class _OutOfBudget(Exception):
    """Raised inside a fit whose budget ran out (caught by :func:`fit_linear_map`)."""


def fit_linear_map(
    x: np.ndarray,
    labels: np.ndarray,
    penalties: Penalties,
    *,
    full: bool,
    solver: str = "trust-ncg",
    start_scale: float = 1.0,
    budget: Budget | None = None,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Minimise the penalised NLL of softmax((I + D) x + b) over D (K x K if ``full``, else its
    diagonal as a K-vector) and b, from (I + D) = s I, b = 0 with s = ``start_scale`` (a
    temperature, on the diagonal, which no penalty may then weigh); returns (D, b, report). The
    fit runs on x' = s x with (I + D) = s (I + D'), D' from 0, its penalties on D' those on D (x
    s^2): the same objective, its curvature in D' that of the scaled logits (log-probabilities of
    -12,000 made the identity's Newton-CG crawl). The report's "converged" is the Newton
    decrement's test (:data:`CONVERGED_DECREMENT`), not the solver's own stopping rule. Each
    iteration is reported (:func:`calib.core.progress.report`); ``budget`` caps the iterations and
    the seconds."""
    if start_scale != 1.0 and penalties.diagonal:
        raise ValueError("a fit that starts from a temperature leaves the diagonal unpenalised")
    x = start_scale * x
    penalties = Penalties(penalties.bias, penalties.diagonal, penalties.off_diagonal * start_scale**2)
    n, k = x.shape
    onehot = np.zeros((n, k))
    onehot[np.arange(n), labels] = 1.0
    size = k * k if full else k
    diagonal_index = np.arange(k) * (k + 1) if full else np.arange(k)
    penalty_weight = np.full(size, penalties.off_diagonal)
    penalty_weight[diagonal_index] = penalties.diagonal
    at = {"theta": None, "q": None}  # the softmax q at the last point evaluated, for the Hessian products

    def mapped(weights, shift):
        """x D^T + b for the weights of D (a K x K matrix, or its diagonal) and the intercepts b."""
        return (x @ weights.reshape(k, k).T if full else x * weights) + shift

    def softmax_at(theta):
        log_q = log_softmax(x + mapped(theta[:size], theta[size:]))
        at["theta"], at["q"] = theta.copy(), np.exp(log_q)
        return log_q

    def loss_and_gradient(theta):
        delta, bias = theta[:size], theta[size:]
        log_q = softmax_at(theta)
        residual = (at["q"] - onehot) / n
        grad_delta = (residual.T @ x).ravel() if full else np.einsum("ij,ij->j", residual, x)
        loss = -np.einsum("ij,ij->", onehot, log_q) / n + np.dot(penalty_weight, delta**2) + penalties.bias * np.dot(bias, bias)
        grad_delta += 2.0 * penalty_weight * delta
        return loss, np.concatenate([grad_delta, residual.sum(axis=0) + 2.0 * penalties.bias * bias])

    def hessian_product(theta, v):
        """H v: with s = x V^T + c the logits' change (V, c = v), the NLL part is the gradient formula
        applied to q * (s - sum_j q_j s_j) / n; the ridge adds 2 w v."""
        if at["theta"] is None or not np.array_equal(theta, at["theta"]):
            softmax_at(theta)
        q, step, shift = at["q"], v[:size], v[size:]
        s = mapped(step, shift)
        change = q * (s - np.einsum("ij,ij->i", q, s)[:, None]) / n
        grad_step = (change.T @ x).ravel() if full else np.einsum("ij,ij->j", change, x)
        return np.concatenate([grad_step + 2.0 * penalty_weight * step, change.sum(axis=0) + 2.0 * penalties.bias * shift])

    if budget is None:
        budget = Budget(MAX_ITERATIONS if solver == "lbfgs" else NEWTON_MAX_ITERATIONS)
    # the gradient in D' is s times the gradient in D: the same stopping point in D
    gtol = PROJECTED_GRADIENT_TOLERANCE if solver == "lbfgs" else NEWTON_GRADIENT_TOLERANCE * min(start_scale, 1.0)
    result, products = _minimize_within(budget, solver, loss_and_gradient, hessian_product, np.zeros(size + k), gtol)
    gradient = loss_and_gradient(result.x)[1]
    largest_gradient = float(np.abs(gradient).max())
    step = newton_step(lambda v: hessian_product(result.x, v), gradient)
    decrement = max(0.0, -0.5 * float(gradient @ step))
    delta = result.x[:size].reshape(k, k) if full else result.x[:size]
    delta = start_scale * (delta + (np.eye(k) if full else 1.0)) - (np.eye(k) if full else 1.0)  # I + D = s (I + D')
    report = {
        "solver": solver,
        "weights": int(size + k),
        "rows": int(n),
        "iterations": int(result.nit),
        "converged": decrement <= CONVERGED_DECREMENT * max(1.0, abs(float(result.fun))),
        "largest gradient entry": largest_gradient,
        "loss above the minimum (Newton decrement)": decrement,
        "loss": float(result.fun),
    }
    if solver != "lbfgs":
        report["Hessian-vector products"] = products
    if not report["converged"]:
        report["stopped because"] = str(result.message)
    return delta, result.x[size:], report


def _minimize_within(budget: Budget, solver: str, loss_and_gradient, hessian_product, start: np.ndarray, gtol: float):
    """(the solver's result, the Hessian-vector products it made) of minimising from ``start`` with
    ``solver`` ("lbfgs" or Newton-CG, "trust-ncg") within ``budget``: each accepted step is reported
    (:func:`calib.core.progress.report`); a budget run out ends the fit at its last accepted step,
    its message saying which budget."""
    import time

    from scipy.optimize import OptimizeResult, minimize

    from ..core.progress import report as report_progress

    began, accepted, products = time.monotonic(), {"theta": None, "steps": 0}, [0]

    def step_done(intermediate_result):
        accepted["theta"], accepted["steps"] = intermediate_result.x.copy(), accepted["steps"] + 1
        report_progress(f"{'L-BFGS iteration' if solver == 'lbfgs' else 'Newton step'}, loss {intermediate_result.fun:.10g}")
        if budget.seconds and time.monotonic() - began > budget.seconds:
            raise _OutOfBudget(f"its time budget of {budget.seconds:g} s ran out")

    def counted_product(theta, v):
        products[0] += 1
        if products[0] > budget.products and accepted["theta"] is not None:
            raise _OutOfBudget(f"its budget of {budget.products} Hessian-vector products ran out")
        return hessian_product(theta, v)

    try:
        if solver == "lbfgs":
            options = {"maxiter": budget.iterations, "gtol": gtol, "ftol": RELATIVE_LOSS_TOLERANCE}
            result = minimize(loss_and_gradient, start, jac=True, method="L-BFGS-B", options=options, callback=step_done)
        else:
            options = {"maxiter": budget.iterations, "gtol": gtol}
            result = minimize(
                loss_and_gradient, start, jac=True, hessp=counted_product, method="trust-ncg", options=options, callback=step_done
            )
    except _OutOfBudget as exc:
        theta = accepted["theta"]
        result = OptimizeResult(x=theta, fun=loss_and_gradient(theta)[0], nit=accepted["steps"], message=str(exc))
    return result, products[0]


def newton_step(hessian_product, gradient: np.ndarray) -> np.ndarray:
    """s with H s = -g by conjugate gradients (H positive definite: the NLL's Hessian plus the ridge),
    at most :data:`CHECK_ITERATIONS` products."""
    from scipy.sparse.linalg import LinearOperator, cg

    size = len(gradient)
    operator = LinearOperator((size, size), matvec=hessian_product, dtype=np.float64)
    step, _ = cg(operator, -gradient, rtol=1e-10, atol=0.0, maxiter=CHECK_ITERATIONS)
    return step


class LinearMapCalibrator(Calibrator):
    """softmax((I + D) x + b) on the log-probabilities x that :meth:`inputs` makes from logits."""

    absent_class_effect = "their weights and bias are fitted without a row of them, which pushes their probabilities towards 0"

    full: bool = True

    @abc.abstractmethod
    def inputs(self, logits: np.ndarray) -> np.ndarray:
        """The log-probabilities x the map acts on."""

    @abc.abstractmethod
    def penalties(self, n: int, k: int) -> Penalties:
        """The ridge weights for n calibration rows and K classes."""

    def softmax_only(self):
        return True  # the map acts on log softmax(z) (or log softmax(z / T)), the same for z + c

    def fit(self, logits, labels, *, seed=0, features=None):
        logits = np.asarray(logits, dtype=np.float64)
        self.prepare(logits, labels)
        x = self.inputs(logits)
        iterations = self.options.max_iter or (MAX_ITERATIONS if self.options.solver == "lbfgs" else NEWTON_MAX_ITERATIONS)
        fitted = fit_linear_map(
            x,
            labels,
            self.penalties(*x.shape),
            full=self.full,
            solver=self.options.solver,
            start_scale=self.start_scale(x, labels),
            budget=Budget(iterations, seconds=self.options.max_seconds),
        )
        self.delta_, self.bias_, self.report_ = fitted
        return self

    def start_scale(self, x: np.ndarray, labels: np.ndarray) -> float:
        """The scale of x the fit starts from (1: the identity map)."""
        return 1.0

    def prepare(self, logits: np.ndarray, labels: np.ndarray) -> None:
        """Fit whatever :meth:`inputs` needs (nothing by default)."""

    def transform(self, logits, features=None):
        x = self.inputs(np.asarray(logits, dtype=np.float64))
        return log_softmax(x + (x @ self.delta_.T if self.full else x * self.delta_) + self.bias_)

    @abc.abstractmethod
    def onnx_inputs(self, graph, logits: str) -> str:
        """:meth:`inputs` in an ONNX graph (:mod:`calib.onnx_export`)."""

    def onnx_outputs(self, graph, inputs):
        x = self.onnx_inputs(graph, inputs.logits)
        if self.full:
            mapped = graph.op("MatMul", x, graph.const(np.asarray(self.delta_).T))
        else:
            mapped = graph.op("Mul", x, graph.const(np.asarray(self.delta_)[None, :]))
        return {"probs": graph.softmax(graph.op("Add", graph.op("Add", x, mapped), graph.const(self.bias_[None, :])))}

    def fit_report(self):
        return dict(self.report_)

    def warnings(self):
        found = []
        weights, rows = self.report_.get("weights"), self.report_.get("rows")
        if self.full and weights is not None and rows is not None and weights > rows:
            found.append(
                f"{weights} weights fitted on {rows} rows: the ridge penalty, not the data, shapes most of the "
                "matrix; the vector structure (svs: 2 K weights) or more calibration rows fit fewer weights per row"
            )
        return found + self._convergence_warnings()

    def _convergence_warnings(self):
        if self.report_.get("converged", True):
            return []
        solver = "L-BFGS" if self.report_.get("solver", "lbfgs") == "lbfgs" else "Newton-CG"
        step = self.report_.get("loss above the minimum (Newton decrement)")
        return [
            f"the {solver} fit stopped after {self.report_['iterations']} iterations without converging "
            f"({self.report_.get('stopped because', 'no reason given')}"
            + (
                f"; the loss is {step:.2g} above its minimum by the Newton decrement, more than {CONVERGED_DECREMENT:g} of it"
                if step is not None
                else ""
            )
            + "); its probabilities may be off the optimum's"
        ]

    def to_state(self):
        return State(params=self.report_, arrays={"delta": self.delta_, "bias": self.bias_})

    @classmethod
    def from_state(cls, options, state):
        calibrator = cls(options)
        calibrator.delta_, calibrator.bias_ = state.arrays["delta"], state.arrays["bias"]
        calibrator.report_ = {key: value for key, value in state.params.items() if key != "temperature"}
        if "temperature" in state.params:
            calibrator.temperature_ = float(state.params["temperature"])
        return calibrator


@dataclasses.dataclass(frozen=True)
class LinearMapOptions:
    """``solver``: trust-ncg (Newton-CG with Hessian-vector products, the default) or lbfgs;
    ``max_iter``: the most Newton steps (L-BFGS iterations), 0 for the solver's backstop (1,000;
    20,000); ``max_seconds``: a wall-time budget, 0 for none. A fit stopped by either is
    unconverged and says so."""

    solver: str = "trust-ncg"
    max_iter: int = 0
    max_seconds: float = 0.0

    def __post_init__(self):
        if self.solver not in SOLVERS:
            raise ValueError(f"'solver' must be one of {', '.join(SOLVERS)}; got {self.solver!r}")
        if self.max_iter < 0 or self.max_seconds < 0:
            raise ValueError(
                f"'max_iter' and 'max_seconds' must be >= 0 (0: no cap of one's own); got {self.max_iter}, {self.max_seconds}"
            )


@dataclasses.dataclass(frozen=True)
class DirichletOptions(LinearMapOptions):
    """Penalty weights on the *mean* squared off-diagonal weight and intercept. The defaults were
    picked on CIFAR-100 (lambda in {1, 10, 100}: test NLL 1.56, 1.14, 1.05; TS 1.10); Kull et al.
    choose them by cross-validation, which calib does not do yet. ``solver`` as for
    :class:`LinearMapOptions`."""

    odir_lambda: float = 100.0
    odir_mu: float = 100.0


class Dirichlet(LinearMapCalibrator):
    name = "dirichlet"
    summary = "Dirichlet calibration (ODIR): softmax(W log p + b), Newton-CG (Kull et al. 2019)"
    Options = DirichletOptions

    def inputs(self, logits):
        return log_softmax(logits)

    def onnx_inputs(self, graph, logits):
        return graph.log_softmax(logits)

    def penalties(self, n, k):
        return Penalties(bias=self.options.odir_mu / k, diagonal=0.0, off_diagonal=self.options.odir_lambda / max(k * (k - 1), 1))

    def start_scale(self, x, labels):
        """1 / T of temperature scaling on log p: the fit starts from TS (a diagonal W, which ODIR
        does not penalise), so its NLL is never above TS's. From the identity, logits of -12,000
        (their log p as extreme) left Newton-CG 1,000 steps short of the optimum after 10 minutes."""
        return fit_inverse_temperature(x, labels)


class StructuredScaling(LinearMapCalibrator):
    """Temperature scaling first, then the penalised linear map on the clipped TS log-probabilities."""

    Options = LinearMapOptions

    def prepare(self, logits, labels):
        self.temperature_ = 1.0 / fit_inverse_temperature(logits, labels)

    def inputs(self, logits):
        return np.maximum(log_softmax(logits / self.temperature_), LOG_PROB_FLOOR)

    def onnx_inputs(self, graph, logits):
        tempered = graph.log_softmax(graph.op("Div", logits, graph.const(self.temperature_)))
        return graph.op("Max", tempered, graph.const(LOG_PROB_FLOOR))

    def penalties(self, n, k):
        return Penalties(bias=k / n, diagonal=k / n, off_diagonal=k * (k - 1) / n)

    def fit_report(self):
        return {"temperature": self.temperature_, **self.report_}

    def to_state(self):
        state = super().to_state()
        return State(params={"temperature": self.temperature_, **state.params}, arrays=state.arrays)


class VectorScaling(StructuredScaling):
    name = "svs"
    summary = "structured vector scaling: TS, then softmax((I + diag v) x + b), ridge k/n (Berta et al. 2026)"
    full = False


class MatrixScaling(StructuredScaling):
    name = "sms"
    summary = "structured matrix scaling: TS, then softmax((I + diag v + M) x + b), ridge k/n, k(k-1)/n on M"
