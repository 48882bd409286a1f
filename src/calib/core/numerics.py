"""Numerical primitives shared by metrics and calibrators: one stable copy of each."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, TypeVar

import numpy as np

from . import kernels

T = TypeVar("T")
R = TypeVar("R")

#: Probabilities are clipped below at this value before a log is taken (docs/metrics.md: log p >= log 1e-12).
PROB_FLOOR = 1e-12
LOG_PROB_FLOOR = float(np.log(PROB_FLOOR))


def _softmax(logits, probs: bool, log_probs: bool):
    """Row softmax of (N, K) ``logits`` in float64 (:func:`calib.core.kernels.softmax`): per row
    c = z - max z, w = exp(c), p = w / sum w, log p = c - log sum w."""
    z = np.ascontiguousarray(logits, dtype=np.float64)
    if z.ndim != 2:
        raise ValueError(f"softmax takes an (N, K) matrix; got shape {z.shape}")
    out = (np.empty(z.shape) if probs else None), (np.empty(z.shape) if log_probs else None)
    kernels.softmax(z, z.shape[0], z.shape[1], *out)
    return out


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise ``z - logsumexp(z)`` in float64, stable for any finite ``z`` (max subtracted first)."""
    return _softmax(logits, False, True)[1]


def log_softmax_and_softmax(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both ``log_softmax(z)`` and ``softmax(z)`` from a single ``exp`` pass."""
    probs, log_probs = _softmax(logits, True, True)
    return log_probs, probs


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64, one ``exp`` (rows sum to 1 within float rounding)."""
    return _softmax(logits, True, False)[0]


def tempered_moments(logits: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """Per row, E[z] and Var[z] under p = softmax(beta z), beta > 0 (:func:`calib.core.kernels.moments`):
    w = exp(beta (z - max z)), E[z] = max z + sum w c / sum w (c = z - max z),
    Var[z] = sum w c^2 / sum w - (sum w c / sum w)^2."""
    z = np.ascontiguousarray(logits, dtype=np.float64)
    if z.ndim != 2:
        raise ValueError(f"tempered_moments takes an (N, K) matrix; got shape {z.shape}")
    if not beta > 0.0:
        raise ValueError(f"tempered_moments takes beta > 0; got {beta}")
    mean, variance = np.empty(len(z)), np.empty(len(z))
    kernels.moments(z, z.shape[0], z.shape[1], float(beta), mean, variance)
    return mean, variance


def logsumexp_rows(values: np.ndarray) -> np.ndarray:
    """Row-wise log-sum-exp in float64."""
    v = np.asarray(values, dtype=np.float64)
    top = v.max(axis=1)
    return top + np.log(np.exp(v - top[:, None]).sum(axis=1))


def log_floored(values: np.ndarray, shift: float = 0.0, floor: float = -np.inf) -> np.ndarray:
    """``log(max(values + shift, floor))`` in float64, any shape (:func:`calib.core.kernels.log`; the
    compiled path is fdlibm's log on four lanes, under 1 ulp from the C library's). 0 gives -inf,
    inf inf, NaN NaN."""
    v = np.asarray(values, dtype=np.float64, order="C")  # keeps a 0-d input 0-d
    out = np.empty(v.shape)
    kernels.log(v, float(shift), float(floor), out)
    return out


def log1mexp(log_p: np.ndarray) -> np.ndarray:
    """log(1 - e^l) for l <= 0, accurate at both ends (Maechler 2012): log(-expm1(l)) for
    l > -log 2, log1p(-exp(l)) below; 0 gives -inf. The log of a complement that 1 - p would round."""
    log_p = np.asarray(log_p, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(log_p > -np.log(2.0), np.log(-np.expm1(log_p)), np.log1p(-np.exp(log_p)))


def log_of_probs(probs: np.ndarray) -> np.ndarray:
    """``log(max(p, PROB_FLOOR))`` in float64: the log-space view of a probability matrix."""
    return log_floored(probs, floor=PROB_FLOOR)


#: A value within this fraction of an edge's magnitude counts as on the edge (docs/metrics.md,
#: "Edges"): v is on e when |v - e| <= r |e|, r = 2^-44 (5.7e-14, 512 units of float64 rounding).
#: The compiled and NumPy kernels (and NumPy on different CPUs) differ in the last bits of exp, log
#: and the order of their sums, and calibrators put values exactly on edges (MR puts exactly
#: 1 - alpha = 0.9 of the mass in its sets), so a rule that read the last bits would count such
#: rows differently on different machines. Measured between the two paths: softmax probabilities
#: and cumulative masses differ by at most 10 units at K = 100 (CIFAR-100), 27 at K = 1,000 and
#: 56 at K = 10,000 (peaked rows), relative to the value; r is 9 times the largest. Relative, so
#: scores of 1e-14 and 1e-13 (or 1 - 1e-13 and 1 - 2e-13) stay different numbers: an absolute
#: tolerance merged them. Values used exactly as the input gives them (probabilities as given)
#: are compared exactly where the rule knows it (Venn-Abers runs, the conformal set rule).
EDGE_RTOL = 2.0**-44
#: u, float64's unit roundoff: a correctly rounded operation's relative error is at most u.
UNIT_ROUNDOFF = 2.0**-53
#: 1 + r, exact in float64: v counts at or above e when v (1 + r) >= e, for e >= 0.
EDGE_STRETCH = 1.0 + EDGE_RTOL


def edge_slack(edge, scale: float = 0.0):
    """How far above an edge e (a threshold, a calibration score) a value still counts as on it:
    r max(|e|, ``scale``), r = :data:`EDGE_RTOL`. ``scale`` is the size of the numbers the value was
    computed from, where that exceeds the value: a conformal score 1 - p_y or p_1 - p_y of
    probabilities near 1 carries their rounding (r 1), however small it is."""
    return EDGE_RTOL * np.maximum(scale, np.abs(edge))


def bin_index(values: np.ndarray, n_bins: int) -> np.ndarray:
    """Equal-width bin of each value in [0, 1]: ``b = min(floor(v B (1 + r)), B - 1)``, r =
    :data:`EDGE_RTOL`, with B (1 + r) one float64 constant (one rounding).

    Bins are [l, u) with the last one closed, so 1.0 falls in bin B - 1; a value within r u below
    an edge u counts as on it (in the upper bin): the tolerance is relative to the edge, so it is
    at most 5.7e-14 at any edge of [0, 1] and scores near 0 are never moved. Values are assumed in
    [0, 1]; a value a rounding error below 0 truncates to bin 0. int32 indices: float64 -> int32
    conversion is vectorised on AVX2, float64 -> int64 only on AVX-512.
    """
    scaled = np.multiply(values, n_bins * EDGE_STRETCH, dtype=np.float64)
    idx = scaled.astype(np.int32)
    np.minimum(idx, n_bins - 1, out=idx)
    return idx


def edge_index(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin of each value for sorted, distinct, non-negative ``edges`` e_0 < ... < e_B (uneven bins,
    e.g. quantiles): ``b = min(max(#{j : e_j <= v (1 + r)} - 1, 0), B - 1)``, r =
    :data:`EDGE_RTOL`, i.e. bins [e_b, e_{b+1}) with the last one closed, a value within r e below
    an edge e on it, values below e_0 in bin 0 and above e_B in bin B - 1. Equal-width bins on
    [0, 1] use :func:`bin_index` (the same rule, without a search)."""
    n_bins = max(len(edges) - 1, 1)
    return np.clip(np.searchsorted(edges, np.multiply(values, EDGE_STRETCH), side="right") - 1, 0, n_bins - 1)


def isotonic_fit(values: np.ndarray, targets: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Non-decreasing least-squares fit of ``targets`` on ``values``, ties in ``values`` pooled first.

    Returns ``(x, level)``: the distinct values in increasing order and the fitted level at each.
    Rows with equal values are one point of the fit with weight ``sum w`` and target
    ``sum w t / sum w`` (de Leeuw, Hornik & Mair 2009, the secondary approach to ties; scikit-learn's
    and R isotone's), then the pool-adjacent-violators algorithm (Ayer et al. 1955) fits
    ``min sum_j W_j (T_j - level_j)^2`` subject to ``level_0 <= level_1 <= ...``. Pooling first
    makes the fit a function of the (value, target) pairs alone, independent of row order.
    """
    problem = IsotonicProblem(values, targets)
    w = np.ones(len(problem.row_runs)) if weights is None else np.asarray(weights, dtype=np.float64)
    run_weights = np.bincount(problem.row_runs, weights=w, minlength=problem.n_runs)
    run_sums = np.bincount(problem.row_runs, weights=w * problem.targets, minlength=problem.n_runs)
    return problem.values, problem.run_levels(run_weights[None, :], run_sums[None, :])[0, problem.run_of_value]


class IsotonicProblem:
    """The isotonic fit of :func:`isotonic_fit` of fixed (value, target) rows, reduced once to runs
    of rows, so that it is refitted under any row weights (bootstrap replicates) from each run's
    sums of weights and of weight x target alone.

    Two exact reductions make the runs. Rows of one value are one point (the ties pooled).
    Adjacent points of one target (between two rows labelled 1, every row labelled 0) are merged
    too: their cumulative sum diagram is a straight segment, and a convex minorant that touches a
    straight segment inside it contains all of it, so PAV gives the whole run one level. A
    one-vs-rest fit of a class with 50 rows among 5,000 is then a fit of about 100 points. A point of
    mixed targets (tied values, some rows 0 and some 1) is a run of its own, its target set by each
    weighting. A run that a weighting does not draw (weight 0) is left out of that fit; its level is
    then 0, which its rows' zero weight multiplies."""

    def __init__(self, values: np.ndarray, targets: np.ndarray):
        values = np.asarray(values, dtype=np.float64)
        self.targets = np.asarray(targets, dtype=np.float64)
        order = np.argsort(values, kind="stable")
        ordered, ordered_targets = values[order], self.targets[order]
        first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        #: the distinct values, increasing
        self.values = ordered[first]
        low, high = np.minimum.reduceat(ordered_targets, first), np.maximum.reduceat(ordered_targets, first)
        pure = low == high
        starts_run = np.r_[True, ~(pure[1:] & pure[:-1] & (low[1:] == low[:-1]))]
        #: each distinct value's run, and each row's
        self.run_of_value = np.cumsum(starts_run) - 1
        self.n_runs = int(self.run_of_value[-1]) + 1 if len(first) else 0
        self.row_runs = np.empty(len(values), dtype=np.int64)
        self.row_runs[order] = np.repeat(self.run_of_value, np.diff(np.r_[first, len(values)]))

    def run_levels(self, run_weights: np.ndarray, run_sums: np.ndarray) -> np.ndarray:
        """(R, runs) fitted levels from each weighting's (R, runs) sums of weights and of weight x
        target over each run's rows: one PAV per weighting over the runs it draws."""
        from scipy.optimize import isotonic_regression

        levels = np.zeros_like(run_weights)
        for row, (weight, total) in enumerate(zip(run_weights, run_sums)):
            drawn = weight > 0
            levels[row, drawn] = isotonic_regression(total[drawn] / weight[drawn], weights=weight[drawn]).x
        return levels


#: float64 numbers in a 4 KiB memory page.
PAGE_DOUBLES = 512


def zeros_in_order(size: int) -> np.ndarray:
    """np.zeros(size), its memory pages touched in order: a large array's pages are mapped at their
    first write, and first writes scattered over them (the per-cluster bins of many classes, 24 MB
    an array at 1,000 classes) cost 9.7 ms of page faults a 24 MB array in a fresh process, where
    touching them in order first costs 1.4 ms and the scattered writes 1.4 ms more."""
    array = np.zeros(size)
    array[::PAGE_DOUBLES] = 0.0
    return array


def linear_percentiles(values: np.ndarray, percents) -> np.ndarray:
    """NumPy's default ("linear", Hyndman & Fan 1996 type 7) percentiles of 1-D ``values`` (at
    least one), to the bit: with x the sorted values, q = p / 100 and h = (n - 1) q, x[j] + (x[j +
    1] - x[j]) g for j = floor(h) and g = h - j, computed as x[j + 1] - (x[j + 1] - x[j]) (1 - g)
    where g >= 0.5, and the largest value where h >= n - 1 (np.percentile's own steps); NaN
    everywhere when a value is NaN. np.percentile's first call imports numpy.ma (7 ms: its partition
    asks np.unique, which asks whether the array is masked); the intervals and gate floors at the
    end of every evaluation with replicates need not wait for it."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    count = len(ordered)
    if np.isnan(ordered[-1]):  # NaN sorts last
        return np.full(np.shape(percents), np.nan)
    virtual = (count - 1) * np.true_divide(np.asarray(percents, dtype=np.float64), 100)
    previous = np.floor(virtual)
    following = previous + 1
    beyond = virtual >= count - 1
    previous[beyond] = following[beyond] = -1
    previous, following = previous.astype(np.intp), following.astype(np.intp)
    gamma = virtual - previous
    low, high = ordered[previous], ordered[following]
    step = high - low
    return np.where(gamma >= 0.5, high - step * (1 - gamma), low + step * gamma)


def replicate_sums(weights: np.ndarray, per_cluster: np.ndarray) -> np.ndarray:
    """sum_c w_rc s_c for every bootstrap replicate r: the (R, clusters) ``weights`` times the
    clusters' sums s ``per_cluster`` (clusters, ...), one matrix product, shaped (R, ...)."""
    array = np.asarray(per_cluster)
    return (weights @ array.reshape(len(array), -1)).reshape((len(weights),) + array.shape[1:])


def cluster_totals(cluster: np.ndarray, values: np.ndarray | None, clusters: int) -> np.ndarray:
    """sum_{i in c} x_i for each cluster c in [0, ``clusters``): (clusters,) for ``values`` (N,),
    (clusters, M) for (N, M); the rows' counts for None. ``cluster`` (N,): each row's cluster."""
    if values is None or np.ndim(values) == 1:
        return np.bincount(cluster, weights=values, minlength=clusters).astype(np.float64)
    values = np.asarray(values, dtype=np.float64)
    width = values.shape[1]
    cell = (np.asarray(cluster, dtype=np.int64) * width)[:, None] + np.arange(width)
    return np.bincount(cell.reshape(-1), weights=values.reshape(-1), minlength=clusters * width).reshape(clusters, width)


def label_rank(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """0-based rank of each row's label in the non-increasing order of ``scores``.

    Ties go to the lower class index: rank = #{j : s_j > s_y} + #{j < y : s_j = s_y}
    (:func:`calib.core.kernels.label_rank`). Vectorised over rows; no sort needed.
    """
    return kernels.label_rank(scores, labels)


#: Elements (rows x classes) processed at once by streaming code: 2**20 float64 values = 8 MiB per
#: temporary, so a pass over any input holds a few tens of MiB whatever N is (2**21 took 25% more
#: peak memory in evaluate at 50,000 x 1,000 for no gain in time).
CHUNK_ELEMENTS = 1 << 20


def row_chunks(n_rows: int, n_cols: int, chunk_elements: int = CHUNK_ELEMENTS):
    """Yield ``slice`` objects covering ``range(n_rows)`` with about ``chunk_elements`` values each."""
    step = max(1, chunk_elements // max(1, n_cols))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def release_rows(array: np.ndarray, rows) -> None:
    """Let the OS take back the pages that hold ``rows`` (a slice) of a memory-mapped ``array``
    once they have been read: they stay in the page cache, and a later read maps them again (the
    mapping is read-only, so nothing is lost). A pass over a .npy file then holds about one chunk of
    it at a time rather than all of it: ``calib evaluate`` of a 200 MB file peaked at 335 MB,
    the input's own pages counted (docs/benchmarks.md, "Memory"). Other arrays: nothing to do."""
    mapped = getattr(array, "_mmap", None)
    if mapped is None or not isinstance(rows, slice) or not array.flags.c_contiguous or not hasattr(mapped, "madvise"):
        return
    import mmap

    first_row, end_row, _ = rows.indices(len(array))
    offset = array.ctypes.data - np.frombuffer(mapped, dtype=np.uint8).ctypes.data
    start, stop = offset + first_row * array.strides[0], offset + end_row * array.strides[0]
    first, last = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE, stop // mmap.PAGESIZE * mmap.PAGESIZE  # whole pages inside
    if last > first:
        mapped.madvise(mmap.MADV_DONTNEED, first, last - first)


def worker_count() -> int:
    """Threads for chunk-parallel work: ``CALIB_THREADS`` if set, else the CPUs this process may use."""
    configured = os.environ.get("CALIB_THREADS", "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


#: What one chunk being computed holds: its values and a pass's temporaries, about four float64
#: arrays of :data:`CHUNK_ELEMENTS` (32 MiB).
CHUNK_WORKING_SET = 4 * 8 * CHUNK_ELEMENTS
#: The memory the chunks being computed may hold together, whatever the number of workers: 64 MiB,
#: or 30% of the values' size as float32 (the form exports take) when that is more, so that a pass
#: stays within 1.3x its input or the input + 64 MiB, whichever is larger.
MIN_CHUNK_BUDGET = 64 << 20
CHUNK_BUDGET_SHARE = 0.3


def chunk_threads(workers: int, values: int) -> int:
    """Threads that compute chunks at once in a pass over ``values`` numbers: ``workers``, within the
    budget of :data:`MIN_CHUNK_BUDGET` or :data:`CHUNK_BUDGET_SHARE` of the values as float32 (at least 1).
    With two chunks in flight per worker and no budget, `calib evaluate --no-vece` of 50,000 x 1,000
    float32 (191 MiB) peaked at 106, 400 and 692 MiB with 2, 16 and 64 workers, and of 20,000 x 1,000
    (76 MiB) at 327 MiB with 16 (docs/benchmarks.md, "Memory"); so did any pass on a many-core
    machine. A pass of 50,000 x 1,000 gets 2 threads, of 1,000,000 x 1,000 (3.7 GiB) 35."""
    budget = max(MIN_CHUNK_BUDGET, CHUNK_BUDGET_SHARE * 4 * values)
    return max(1, min(workers, int(budget // CHUNK_WORKING_SET)))


class Turns:
    """Sections that run one at a time in the order of their items, on whichever thread holds an
    item: :meth:`take` (item i) waits until the sections of items 0 .. i - 1 have run, runs its own
    and hands the turn on, whether it ran or raised. Beside :func:`map_in_order` (whose pool starts
    items in order, so the item a worker waits for is running already), a worker adds its chunk to
    a running sum in row order itself: the same additions in the same order as the consuming thread
    adding the chunks as they come, without a third busy thread on the cores. Every item from 0 on
    takes its turn once, else the ones after it wait for ever: a worker that failed before its
    section takes it with ``section=None``."""

    def __init__(self):
        self._next = 0
        self._changed = threading.Condition()

    def take(self, item: int, section: Callable[[], R] | None) -> R | None:
        """Run ``section`` (None: nothing) as item ``item``'s turn; returns what it returns."""
        with self._changed:
            while self._next != item:
                self._changed.wait()
        try:
            return None if section is None else section()
        finally:
            with self._changed:
                self._next = item + 1
                self._changed.notify_all()


def map_in_order(function: Callable[[T], R], items: Iterable[T], *, values: int, workers: int | None = None) -> Iterator[R]:
    """``map(function, items)`` on a pool of threads, yielding results in input order.

    numpy releases the GIL inside its loops over large arrays, so chunks of rows run in parallel
    on several cores: :func:`chunk_threads` of them for a pass over ``values`` numbers (memory within
    one budget, whatever the number of workers), each with two chunks pending so that none waits
    (bounded memory whatever the number of chunks). The output is the same, in the same order, for
    any worker count: the chunks do not depend on it.
    """
    workers = chunk_threads(worker_count() if workers is None else workers, values)
    if workers <= 1:
        yield from map(function, items)
        return
    pending = []
    with ThreadPoolExecutor(workers, thread_name_prefix="calib") as pool:
        for item in items:
            pending.append(pool.submit(function, item))
            if len(pending) >= 2 * workers:
                yield pending.pop(0).result()
        for future in pending:
            yield future.result()
