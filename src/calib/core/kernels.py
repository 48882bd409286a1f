"""The inner loops behind :mod:`calib.core.numerics` and SelectTau, on one of two paths that compute the
same formulas:

- ``compiled``: the optional C extension ``calib._kernels`` (built by ``pip install`` when a C
  compiler with GCC's vector extensions is present; see ``_kernels.c`` for why it pays);
- ``numpy``: the same computations as whole-array NumPy operations, always available.

The conformal scores by rank (:func:`rank_scores`) are the same on both paths to the bit.

``CALIB_KERNELS=numpy`` (or ``compiled``) chooses a path; by default the compiled one is used when it
is importable. :data:`BACKEND` names the active path (``calib --version`` prints it). Both paths take
the same arguments and write into the same caller-allocated outputs. They agree to a few ulp on the
softmax, moments and log, and SelectTau's temperatures agree within its stopping rule (in-set mass
within 1e-9 of the target, or a bracket relatively narrower than 1e-10): the two paths' exp differ
by an ulp, which can move a Newton iterate across that band's edge.
"""

from __future__ import annotations

import numpy as np

from .backend import choose_backend

#: Row categories of SelectTau, the codes the compiled kernel writes too (calib.calibrators.conformal
#: names them and adds its own).
FEASIBLE, EMPTY, FULL, TOO_LARGE, UNREACHABLE = range(5)


_compiled, BACKEND = choose_backend()


def _numpy_has_simd_log() -> bool:
    """Whether NumPy's float64 log runs on AVX-512 here (then it is as fast as the compiled one,
    2.0 against 2.2 ns a value on an AVX-512 EPYC; without AVX-512 NumPy's is scalar)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # an older NumPy or another platform: keep the compiled log
        return False
    return bool(__cpu_features__.get("AVX512F") and __cpu_features__.get("AVX512_SKX"))


#: The compiled log is used only where NumPy's is scalar (docs/benchmarks.md, "Compiled kernels").
_COMPILED_LOG = _compiled is not None and not _numpy_has_simd_log()


def softmax(z: np.ndarray, n: int, k: int, probs: np.ndarray | None, log_probs: np.ndarray | None) -> None:
    """Row softmax of the C-contiguous float64 (n, k) ``z`` into ``probs`` and/or ``log_probs``:
    c = z - max z, w = exp(c), p = w / sum w, log p = c - log sum w."""
    if _compiled is not None:
        return _compiled.softmax(z, n, k, probs, log_probs)
    c = z - z.max(axis=1, keepdims=True)
    w = np.exp(c)
    total = w.sum(axis=1, keepdims=True)
    if probs is not None:
        np.divide(w, total, out=probs)
    if log_probs is not None:
        np.subtract(c, np.log(total), out=log_probs)


def moments(z: np.ndarray, n: int, k: int, beta: float, mean: np.ndarray, variance: np.ndarray) -> None:
    """Per row, E[z] and Var[z] under softmax(beta z): with c = z - max z and w = exp(beta c),
    E[z] = max z + sum w c / sum w, Var[z] = sum w c^2 / sum w - (sum w c / sum w)^2."""
    if _compiled is not None:
        return _compiled.moments(z, n, k, beta, mean, variance)
    top = z.max(axis=1, keepdims=True)
    c = z - top
    w = np.exp(beta * c)
    total = w.sum(axis=1)
    weighted = w * c
    shift = weighted.sum(axis=1) / total
    mean[:] = top[:, 0] + shift
    variance[:] = np.einsum("ij,ij->i", weighted, c) / total - shift * shift


def log(values: np.ndarray, shift: float, floor: float, out: np.ndarray) -> None:
    """``out = log(max(values + shift, floor))``, elementwise, any shape; 0 gives -inf, NaN NaN."""
    if _compiled is not None and _COMPILED_LOG:
        return _compiled.log(values, shift, floor, out)
    if shift:
        np.add(values, shift, out=out)
    else:
        out[...] = values
    np.maximum(out, floor, out=out)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.log(out, out=out)


#: How :func:`rank_scores` starts a rank's score: the cumulative sum of the ranked probabilities up to
#: and including the rank, the top probability, or nothing (the table alone).
CUMULATIVE, TOP, NO_BASE = range(3)


def by_rank_values(ranked: np.ndarray, base: int, table: np.ndarray | None) -> np.ndarray:
    """Scores in rank order from probabilities sorted non-increasing along rows: base + table[r],
    with base the cumulative sum (``CUMULATIVE``), the top probability (``TOP``) or 0 (``NO_BASE``)."""
    if base == NO_BASE:
        return np.broadcast_to(table, ranked.shape).copy()
    by_rank = np.cumsum(ranked, axis=1) if base == CUMULATIVE else np.repeat(ranked[:, :1], ranked.shape[1], axis=1)
    if table is not None:
        by_rank += table
    return by_rank


def rank_scores(
    probs: np.ndarray,
    ranking: np.ndarray,
    column_mask: int,
    base: int,
    table: np.ndarray | None,
    out: np.ndarray,
    misranked: np.ndarray,
) -> None:
    """:func:`by_rank_values` of each row ranked by ``ranking`` (uint64; per row, the columns by
    non-increasing probability, each in the bits under ``column_mask``), written at each class's
    own column of ``out`` (float64, C-contiguous like ``probs``). ``misranked`` (uint8) marks the
    rows whose ranking is not exactly non-increasing with equal probabilities in column order (their
    scores are then to be computed again from such a ranking). The compiled path does it in one pass
    per row, in cache; here it is a gather, the sums and a scatter."""
    n, k = probs.shape
    if _compiled is not None:
        return _compiled.rank_scores(probs, ranking, column_mask, n, k, base, table, out, misranked)
    order = (ranking & np.uint64(column_mask)).astype(np.intp)
    ranked = np.take_along_axis(probs, order, axis=1)
    after, before = ranked[:, 1:], ranked[:, :-1]
    misranked[:] = ((after > before) | ((after == before) & (order[:, 1:] < order[:, :-1]))).any(axis=1)
    np.put_along_axis(out, order, by_rank_values(ranked, base, table), axis=1)


def set_update(values: np.ndarray, in_set: np.ndarray, inside: np.ndarray, outside: np.ndarray, add: bool) -> None:
    """In place, per row: ``values`` (float64, C-contiguous) + (``add``) or * ``inside`` where
    ``in_set`` holds and ``outside`` elsewhere; the same bits on both paths (one operation a value).
    Compiled, one pass without the (N, K) array of factors NumPy builds."""
    if _compiled is not None and values.flags.c_contiguous and values.dtype == np.float64 and in_set.dtype == bool:
        inside, outside = (np.ascontiguousarray(v, dtype=np.float64) for v in (inside, outside))
        return _compiled.set_update(values, np.ascontiguousarray(in_set), inside, outside, add)
    (np.add if add else np.multiply)(values, np.where(in_set, inside[:, None], outside[:, None]), out=values)


def bin_counts(
    values: np.ndarray,
    hits: np.ndarray | None,
    n_bins: int,
    scale: float,
    by_column: bool,
    first_hit: np.ndarray | None = None,
    row_cluster: np.ndarray | None = None,
    clusters: int = 1,
    out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    first_bin: tuple[np.ndarray, np.ndarray] | None = None,
    plain: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    hit_column: np.ndarray | None = None,
):
    """Equal-width bin counts of ``values`` (N, K) float64 in [0, 1], compiled: bin b = min(floor(v
    ``scale``), B - 1) (:func:`calib.core.numerics.bin_index`'s rule, ``scale`` = B (1 + r) per
    :data:`calib.core.numerics.EDGE_STRETCH`) in group j (the column) when ``by_column``, else group
    0; returns (count, sum of the values, count of hits), float64 each of ``clusters`` x (K if
    ``by_column`` else 1) x ``n_bins``, or None where the compiled path is not available
    (calib.core.binning then takes NumPy's bincounts). The hits are ``hits`` (N, K) or, in group 0,
    the columns j >= ``first_hit[i]`` of each row i. ``row_cluster`` (N,): each bin is kept per
    cluster (the bootstrap's per-cluster sums), the cluster innermost (index (group n_bins + bin)
    ``clusters`` + cluster), row i's in its cluster. ``out``: three C-contiguous float64 arrays the
    counts are added into (returned), else fresh zeroed ones. ``first_bin`` (by column, with
    ``row_cluster``): two C-contiguous float64 arrays of ``clusters`` x K, the count of values
    outside the first bin and the first bin's sums, which ``out`` then leaves out
    (:class:`calib.core.binning.BinCounter`'s: one cluster's K numbers contiguous, so a row adds its
    values along them where ``out``'s layout writes each to another cache line; the first bin's
    count is the cluster's rows less the values outside it). ``plain`` (with ``row_cluster``, in group 0 or by column with ``first_bin``): three
    float64 arrays of ``n_bins`` (K ``n_bins`` by column, zeroed) that the counts over all rows are
    added into in the same pass. Each bin's values are
    added in element order, as np.bincount (into zeros) and np.add.at (into ``out``) add them, so
    the same bits; one pass without NumPy's index array and its three bincounts. ``hit_column``
    (N,) (by column, without ``hits``): row i's one hit is its value in column hit_column[i], such
    as its label's probability among a row's classes."""
    if _compiled is None or not values.flags.c_contiguous or values.dtype != np.float64:
        return None
    if hits is not None and hits.dtype != bool:
        return None
    n, k = values.shape
    size = clusters * (k if by_column else 1) * n_bins
    if out is None:
        out = np.zeros(size), np.zeros(size), np.zeros(size)
    flags = None if hits is None else np.ascontiguousarray(hits).view(np.uint8)
    first = None if first_hit is None else np.ascontiguousarray(first_hit, dtype=np.int64)
    cluster = None if row_cluster is None else np.ascontiguousarray(row_cluster, dtype=np.int64)
    column = None if hit_column is None else np.ascontiguousarray(hit_column, dtype=np.int64)
    _compiled.bin_counts(
        values,
        flags,
        first,
        cluster,
        n,
        k,
        n_bins,
        scale,
        by_column,
        clusters,
        *out,
        *(first_bin or (None, None)),
        *(plain or (None, None, None)),
        column,
    )
    return out


def cumulative_mass(mass: np.ndarray) -> None:
    """In place on ``mass`` (N, K) float64, each row -p sorted non-decreasing (p non-increasing): the
    cumulative sums m_k = p_1 + ... + p_k, added left to right and clipped to [0, 1]. The same bits on
    both paths: the compiled one adds -(-p_j), and rounding to nearest is symmetric. Compiled, one pass
    instead of NumPy's cumulative sum, negation and clip."""
    if _compiled is not None and mass.flags.c_contiguous and mass.flags.writeable and mass.dtype == np.float64:
        return _compiled.cumulative_mass(mass, *mass.shape)
    np.cumsum(mass, axis=1, out=mass)
    np.negative(mass, out=mass)
    np.clip(mass, 0.0, 1.0, out=mass)


def label_rank(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """0-based rank of each row's label in the non-increasing order of ``scores`` (N, K), ties to the
    lower class index: #{j < y : s_j >= s_y} + #{j > y : s_j > s_y} (NaN compares false). Compiled
    for float64, one pass a row without the (N, K) boolean matrices NumPy builds."""
    n, k = scores.shape
    if _compiled is not None and scores.flags.c_contiguous and scores.dtype == np.float64:
        rank = np.empty(n, dtype=np.int64)
        _compiled.label_rank(scores, np.ascontiguousarray(labels, dtype=np.int64), n, k, rank)
        return rank
    own = scores[np.arange(n), labels][:, None]
    above = np.count_nonzero(scores > own, axis=1)  # count_nonzero: 3x faster than a sum of booleans
    tied_before = np.count_nonzero((scores == own) & (np.arange(k)[None, :] < labels[:, None]), axis=1)
    return above + tied_before


def range_counts(values: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``values`` (N, K) float64, how many entries are below ``lo`` and how many at most
    ``hi`` (NaN counts in neither). Compiled, one pass a row for each without boolean matrices."""
    n, k = values.shape
    if _compiled is not None and values.flags.c_contiguous and values.dtype == np.float64:
        below, at_most = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        _compiled.range_counts(values, n, k, float(lo), float(hi), below, at_most)
        return below, at_most
    return np.count_nonzero(values < lo, axis=1), np.count_nonzero(values <= hi, axis=1)


def select_tau(
    scores,
    in_set,
    target,
    beta,
    category,
    dist,
    log_space: bool,
    beta_min: float,
    beta_max: float,
    mass_tol: float,
    rel_width: float,
    max_iterations: int,
) -> None:
    """SelectTau for every row (the algorithm of :mod:`calib.calibrators.select_tau`): ``beta`` (n,)
    and ``category`` (n,) int8 are written, and ``dist`` (n, k) or None receives softmax(beta u)
    per row, or its log when ``log_space``."""
    if _compiled is not None:
        return _compiled.select_tau(
            scores, in_set, target, beta, category, dist, log_space, beta_min, beta_max, mass_tol, rel_width, max_iterations
        )
    n, k = scores.shape
    centred = scores - scores.max(axis=1, keepdims=True)
    mask = in_set.astype(np.float64)
    size = in_set.sum(axis=1)
    category[:] = FEASIBLE
    category[size == 0] = EMPTY
    category[size == k] = FULL
    beta[:] = 1.0
    open_rows = np.flatnonzero(category == FEASIBLE)
    if len(open_rows):
        rows_c, rows_m, rows_t = centred[open_rows], mask[open_rows], target[open_rows]
        too_large = _mass(np.full(len(open_rows), beta_min), rows_c, rows_m)[0] >= rows_t
        unreachable = ~too_large & (_mass(np.full(len(open_rows), beta_max), rows_c, rows_m)[0] < rows_t)
        category[open_rows[too_large]] = TOO_LARGE
        category[open_rows[unreachable]] = UNREACHABLE
        beta[open_rows[too_large]] = beta_min
        beta[open_rows[unreachable]] = beta_max
        solve = ~(too_large | unreachable)
        if solve.any():
            beta[open_rows[solve]] = _newton(
                rows_c[solve], rows_m[solve], rows_t[solve], beta_min, beta_max, mass_tol, rel_width, max_iterations
            )
    if dist is None:
        return
    tempered = centred * beta[:, None]
    weights = np.exp(tempered)
    total = weights.sum(axis=1, keepdims=True)
    if log_space:
        np.subtract(tempered, np.log(total), out=dist)
    else:
        np.divide(weights, total, out=dist)


def _mass(beta, centred, mask):
    """(in-set mass, S_in, S_out, sum_in w c, sum_out w c) of softmax(beta c) per row."""
    weights = np.exp(beta[:, None] * centred)
    inside = weights * mask
    outside = weights - inside  # the mask is 0 or 1: exact
    s_in, s_out = inside.sum(axis=1), outside.sum(axis=1)
    return s_in / (s_in + s_out), s_in, s_out, np.einsum("ij,ij->i", inside, centred), np.einsum("ij,ij->i", outside, centred)


def _newton(centred, mask, target, beta_min, beta_max, mass_tol, rel_width, max_iterations):
    """The compiled kernel's safeguarded Newton on g(beta) = log S_in - log S_out, all rows at once:
    steps aim at the middle of the accepted band [target, target + mass_tol]; a step that leaves the
    bracket [lo, hi] is replaced by sqrt(lo hi); a row stops at an evaluated beta whose mass is in the
    band, or returns hi once the bracket is relatively narrower than ``rel_width``."""
    logit_target = np.log(target) - np.log1p(-target)
    aim = target + mass_tol / 2
    logit_aim = np.log(aim) - np.log1p(-aim)
    n = len(centred)
    lo, hi = np.full(n, beta_min), np.full(n, beta_max)
    beta = np.ones(n)
    result = np.full(n, np.nan)
    active = np.arange(n)
    for _ in range(max_iterations):
        if not len(active):
            break
        b = beta[active]
        mass, s_in, s_out, weighted_in, weighted_out = _mass(b, centred[active], mask[active])
        with np.errstate(divide="ignore", invalid="ignore"):
            log_odds = np.log(s_in) - np.log(s_out)
            above = log_odds >= logit_target[active]
            hi[active] = np.where(above, b, hi[active])
            lo[active] = np.where(above, lo[active], b)
            in_band = above & (mass - target[active] <= mass_tol)
            narrow = ~in_band & (hi[active] - lo[active] <= rel_width * lo[active])
            result[active[in_band]] = b[in_band]
            result[active[narrow]] = hi[active[narrow]]
            slope = weighted_in / s_in - weighted_out / s_out
            step = b - (log_odds - logit_aim[active]) / slope
        a_lo, a_hi = lo[active], hi[active]
        beta[active] = np.where(np.isfinite(step) & (step > a_lo) & (step < a_hi), step, np.sqrt(a_lo * a_hi))
        active = active[~(in_band | narrow)]
    result[active] = hi[active]
    return result
