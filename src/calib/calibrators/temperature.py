"""Temperature scaling (Guo et al. 2017): p = softmax(z / T) with T minimising calibration NLL."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..bundle import State
from ..core import extras
from ..core.numerics import log_softmax, softmax
from .base import Calibrator
from .conditioning import check_conditioning, chosen, conditioning_inputs

#: Bracket for beta = 1/T (docs/calibrators.md): [e^-16, e^16].
LOG_BETA_BOUND = 16.0
#: Relative tolerance on beta (hence on T) at which the root search stops (docs/calibrators.md; 1e-8 would do).
BETA_RTOL = 1e-12
MAX_ITERATIONS = 200


def nll_gradient(beta: float, logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """First and second derivative in beta of NLL(beta) = mean_i [lse(beta z_i) - beta z_{i,y_i}].

    d/dbeta = mean_i (E_{p_beta}[z_i] - z_{i,y_i});  d2/dbeta2 = mean_i Var_{p_beta}(z_i) >= 0,
    so NLL is convex in beta and the derivative is non-decreasing. Chunks of rows run on worker
    threads; their sums are added in row order, so the result does not depend on the thread count.
    """
    from ..core.numerics import map_in_order, row_chunks, tempered_moments

    def chunk_sums(rows):
        z = logits[rows]
        mean_z, var_z = tempered_moments(z, beta)
        return float((mean_z - z[np.arange(len(z)), labels[rows]]).sum()), float(np.maximum(var_z, 0.0).sum())

    grad = curvature = 0.0
    for chunk_grad, chunk_curvature in map_in_order(
        chunk_sums, row_chunks(*logits.shape), values=logits.size
    ):  # summed in row order
        grad += chunk_grad
        curvature += chunk_curvature
    return grad / len(labels), curvature / len(labels)


def fit_inverse_temperature(logits: np.ndarray, labels: np.ndarray, log_bound: float = LOG_BETA_BOUND) -> float:
    """beta = 1/T minimising the NLL on [e^-bound, e^bound] (default 16): safeguarded Newton on the convex NLL.

    Keeps a bracket [lo, hi] with gradient(lo) < 0 < gradient(hi); a Newton step that leaves the
    bracket is replaced by bisection in log beta. Stops at a relative step of :data:`BETA_RTOL`.
    If the gradient has one sign on the whole bracket, the minimum is at that bracket end.
    """
    lo, hi = np.exp(-log_bound), np.exp(log_bound)
    if nll_gradient(lo, logits, labels)[0] >= 0.0:
        return float(lo)
    if nll_gradient(hi, logits, labels)[0] <= 0.0:
        return float(hi)
    beta = 1.0
    for _ in range(MAX_ITERATIONS):
        grad, curvature = nll_gradient(beta, logits, labels)
        if grad == 0.0:
            return beta
        if grad < 0.0:
            lo = beta
        else:
            hi = beta
        step = beta - grad / curvature if curvature > 0.0 else np.nan
        if abs(step - beta) <= BETA_RTOL * beta:  # converged: a step this small may land on a bracket end
            return float(step)
        new = step if lo < step < hi else float(np.sqrt(lo * hi))
        if abs(new - beta) <= BETA_RTOL * beta:  # beta is an end of [lo, hi], so this covers a narrow bracket
            return float(new)
        beta = new
    return float(beta)


class TemperatureScaling(Calibrator):
    """``ts``: p = softmax(z / T), T = 1/beta minimising the calibration NLL (docs/calibrators.md)."""

    name = "ts"
    summary = "temperature scaling: one temperature T minimising NLL (Guo et al. 2017)"
    absent_class_effect = "one temperature serves every class, so their probabilities are scaled like the others'"

    def softmax_only(self):
        return True  # softmax(z / T) of z + c is softmax(z / T)

    def fit(self, logits, labels, *, seed=0, features=None):
        self.temperature_ = 1.0 / fit_inverse_temperature(np.asarray(logits, dtype=np.float64), labels)
        return self

    def transform(self, logits, features=None):
        return log_softmax(np.asarray(logits, dtype=np.float64) / self.temperature_)

    def onnx_outputs(self, graph, inputs):
        return {"probs": graph.softmax(graph.op("Div", inputs.logits, graph.const(self.temperature_)))}

    def warnings(self):
        return bracket_end_warnings(self.temperature_, np.exp(-LOG_BETA_BOUND), np.exp(LOG_BETA_BOUND), "NLL")

    def fit_report(self):
        return {"temperature": self.temperature_}

    def to_state(self):
        return State(params={"temperature": self.temperature_})

    @classmethod
    def from_state(cls, options, state):
        calibrator = cls(options)
        calibrator.temperature_ = float(state.params["temperature"])
        return calibrator


def bracket_end_warnings(temperature: float, lowest: float, highest: float, objective: str) -> list[str]:
    """A sentence when a fitted temperature sits on an end of its search interval [lowest, highest]:
    the optimum was not found inside it. T at the low end: the calibration rows are (nearly)
    separable by the logits, so the NLL falls without bound as T -> 0 and the probabilities become
    0 or 1; at the high end the logits carry no information about the labels."""
    # relative only: NumPy's default atol of 1e-8 would call T = 1.2e-7 "on" the end e^-16 = 1.1e-7
    if np.isclose(temperature, lowest, rtol=1e-9, atol=0.0):
        return [
            f"the {objective} optimum lies on the end of the search interval, T = {temperature:.3g}: "
            "the calibration rows are separable by the logits or too few, and the probabilities it "
            "gives are near 0 or 1; fit on more (or held-out) rows"
        ]
    if np.isclose(temperature, highest, rtol=1e-9, atol=0.0):
        return [
            f"the {objective} optimum lies on the end of the search interval, T = {temperature:.3g}: "
            "the logits carry almost no information about these labels (uniform probabilities)"
        ]
    return []


#: cmce-ts grid (docs/calibrators.md): 301 log-spaced temperatures on [1e-2, 1e2]; the exponent is an
#: exact integer ratio so that T = 1 is on the grid exactly.
CMCE_GRID = 10.0 ** (np.arange(-150, 151) / 75.0)
CMCE_BINS = 25


def cmce_at_temperatures(logits: np.ndarray, labels: np.ndarray, temperatures: np.ndarray, n_bins: int = CMCE_BINS) -> np.ndarray:
    """CMCE (docs/metrics.md, weighted, ``n_bins`` bins) of softmax(z / T) for each T.

    The class order does not depend on T, so each chunk of rows is sorted once (non-increasing,
    ties to the lower index) and its labels' ranks computed once; each T then costs one softmax and
    cumsum per chunk, added to that T's bin counter. Memory is bounded by the chunk size.
    """
    from ..core import kernels
    from ..core.binning import BinCounter
    from ..core.numerics import label_rank, row_chunks

    logits = np.asarray(logits, dtype=np.float64)
    counters = [BinCounter(n_bins) for _ in temperatures]
    for rows in row_chunks(*logits.shape):
        chunk = logits[rows]
        ordered = -np.sort(-chunk, axis=1)
        rank = label_rank(chunk, labels[rows])  # the label is among the top j + 1 from column j = rank on
        for counter, temperature in zip(counters, temperatures):
            mass = np.negative(softmax(ordered / temperature))  # -p, non-decreasing along rows
            kernels.cumulative_mass(mass)
            counter.add(mass, first_hit=rank)
    return np.array([counter.weighted_error()[0] for counter in counters])


class CMCETemperature(Calibrator):
    """``cmce-ts``: the CMCE paper's naive CMCE temperature, T = argmin CMCE on a grid (docs/calibrators.md)."""

    name = "cmce-ts"
    summary = "naive CMCE temperature: T minimising CMCE (25 bins) on a 301-point log grid (Kazantsev et al. 2025)"
    absent_class_effect = "one temperature serves every class, so their probabilities are scaled like the others'"

    def softmax_only(self):
        return True  # softmax(z / T) of z + c is softmax(z / T)

    def fit(self, logits, labels, *, seed=0, features=None):
        values = cmce_at_temperatures(logits, labels, CMCE_GRID)
        best = np.flatnonzero(values == values.min())
        # ties go to the temperature closest to 1 (in log scale)
        self.temperature_ = float(CMCE_GRID[best[np.argmin(np.abs(np.log(CMCE_GRID[best])))]])
        self.cmce_ = float(values.min())
        return self

    def transform(self, logits, features=None):
        return log_softmax(np.asarray(logits, dtype=np.float64) / self.temperature_)

    onnx_outputs = TemperatureScaling.onnx_outputs

    def warnings(self):
        return bracket_end_warnings(self.temperature_, CMCE_GRID[0], CMCE_GRID[-1], "CMCE")

    def fit_report(self):
        return {"temperature": self.temperature_, "cmce on the calibration rows": self.cmce_}

    def to_state(self):
        return State(params={"temperature": self.temperature_, "cmce": self.cmce_})

    @classmethod
    def from_state(cls, options, state):
        calibrator = cls(options)
        calibrator.temperature_ = float(state.params["temperature"])
        calibrator.cmce_ = float(state.params["cmce"])
        return calibrator


#: adaptive-ts (docs/calibrators.md): MLP hidden sizes, optimiser and schedule; T(x) floor.
ADAPTIVE_HIDDEN = (128, 64)
ADAPTIVE_LR = 5e-4
ADAPTIVE_EPOCHS = 100
ADAPTIVE_BATCH = 256
TEMPERATURE_FLOOR = 1e-6


@dataclasses.dataclass(frozen=True)
class AdaptiveOptions:
    """adaptive-ts's one option: what T(x) is a function of (calib.calibrators.conditioning)."""

    conditioning: str = "auto"

    def __post_init__(self):
        check_conditioning(self.conditioning)


class AdaptiveTemperature(Calibrator):
    """``adaptive-ts`` (sample-dependent temperature, Joy et al. 2023; docs/calibrators.md):
    p = softmax(z / T(x)), T(x) = softplus(MLP(z)) + 1e-6, MLP (128, 64) ReLU on the logits, trained on
    the NLL with Adam (lr 5e-4), 100 epochs' worth of minibatches of 256 drawn with replacement, seeded.
    The argmax is kept. Weights are stored as arrays and applied in numpy."""

    name = "adaptive-ts"
    Options = AdaptiveOptions
    requires = ("torch",)
    not_exportable = "its temperature is a neural network of the logits, which the export does not translate"
    summary = "adaptive temperature: T(x) = softplus(MLP(z)) + 1e-6 trained on NLL (Joy et al. 2023)"
    absent_class_effect = "each row's temperature serves every class, so their probabilities are scaled like the others'"

    def fit(self, logits, labels, *, seed=0, features=None):
        torch = extras.torch()

        from . import mlp

        z = np.asarray(logits, dtype=np.float64)
        k = z.shape[1]
        self.conditioning_, self.n_conditioning_ = chosen(self.options.conditioning, k, None)
        # the target carries the raw logits (the loss needs them) and the label in its last column
        target = np.concatenate([z, labels[:, None].astype(np.float64)], axis=1)

        def nll(out, batch):
            temperature = torch.nn.functional.softplus(out[:, 0]) + TEMPERATURE_FLOOR
            log_q = torch.log_softmax(batch[:, :k] / temperature[:, None], dim=1)
            return -log_q.gather(1, batch[:, k:].long()).mean()

        steps = max(1, ADAPTIVE_EPOCHS * len(z) // ADAPTIVE_BATCH)
        self.arrays_ = mlp.train(
            self._inputs(z),
            target,
            (*ADAPTIVE_HIDDEN, 1),
            nll,
            prefix="temperature",
            steps=steps,
            lr=ADAPTIVE_LR,
            batch_size=ADAPTIVE_BATCH,
            seed=seed,
            bad_loss=np.inf,
        )
        return self

    def temperatures(self, logits) -> np.ndarray:
        from . import mlp

        return np.logaddexp(0.0, mlp.forward(self.arrays_, "temperature", self._inputs(logits))[:, 0]) + TEMPERATURE_FLOOR

    def _inputs(self, logits):
        return conditioning_inputs(self.conditioning_, self.n_conditioning_, logits, None, "this bundle's temperature")

    def transform(self, logits, features=None):
        z = np.asarray(logits, dtype=np.float64)
        return log_softmax(z / self.temperatures(z)[:, None])

    def fit_report(self):
        return {"conditioned on": self.conditioning_}

    def to_state(self):
        return State(params={"conditioning": self.conditioning_, "n_conditioning": self.n_conditioning_}, arrays=self.arrays_)

    @classmethod
    def from_state(cls, options, state):
        calibrator = cls(options)
        calibrator.arrays_ = dict(state.arrays)
        # bundles written before the ranked conditioning: the logits, as wide as the first layer
        calibrator.conditioning_ = state.params.get("conditioning", "logits")
        calibrator.n_conditioning_ = int(state.params.get("n_conditioning", calibrator.arrays_["temperature_w0"].shape[0]))
        return calibrator
