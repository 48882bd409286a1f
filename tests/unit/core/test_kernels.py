"""Both kernel paths (the compiled calib/_kernels.c and the pure NumPy one, calib.core.kernels) against
independent formulations: the C library's log (through NumPy), scipy's softmax and log-softmax,
NumPy's weighted moments, on row lengths that are and are not whole vectors; and the two paths
against each other."""

import numpy as np
import pytest
from scipy.special import log_softmax as scipy_log_softmax
from scipy.special import softmax as scipy_softmax

from calib.core.numerics import log_floored, log_of_probs, log_softmax, log_softmax_and_softmax, softmax, tempered_moments


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def backend(request, monkeypatch):
    """Every test runs on both paths (the compiled one skips where the extension is not built)."""
    from calib.core import kernels

    if request.param == "compiled":
        compiled = pytest.importorskip("calib._kernels", reason="the C extension is not built")
        monkeypatch.setattr(kernels, "_compiled", compiled)
        monkeypatch.setattr(kernels, "_COMPILED_LOG", True)  # tested wherever it is built, used where it pays
    else:
        monkeypatch.setattr(kernels, "_compiled", None)
    return request.param


SHAPES = [(30, 1), (30, 2), (30, 3), (30, 4), (30, 5), (30, 7), (7, 1001), (3, 10_000)]


def test_log_is_within_one_ulp_of_the_c_library_on_every_binade(backend):
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.random(200_000),
            10.0 ** rng.uniform(-307.5, 308, 200_000),
            1.0 + rng.normal(size=20_000) * 1e-8,  # log near 0: relative accuracy kept
            np.nextafter(np.sqrt(2), [0, 3]),
            np.nextafter(np.sqrt(0.5), [0, 3]),
            [1.0, 2.0, 0.5],
        ]
    )
    got, expected = log_floored(x), np.log(x)
    assert np.max(np.abs(got - expected) / np.spacing(np.abs(expected))) <= 1.0
    assert np.mean(got == expected) > 0.9 and got[-3] == 0.0


@pytest.mark.parametrize("size", [1, 3, 4, 5, 11])  # tails shorter than a vector, special values in every lane
def test_log_special_values_shift_and_floor(size):
    special = np.array([0.0, -0.0, 5e-324, 1e-310, np.inf, np.nan, -1.0, 1e-12, 1e308, 0.3, -np.inf])
    x = np.resize(special, size * len(special)).reshape(len(special), size)
    with np.errstate(divide="ignore", invalid="ignore"):
        assert np.array_equal(log_floored(x), np.log(x), equal_nan=True)
        assert np.array_equal(log_floored(x, shift=1e-12), np.log(x + 1e-12), equal_nan=True)
        assert np.array_equal(log_of_probs(x), np.log(np.maximum(x, 1e-12)), equal_nan=True)
    scalar = log_floored(np.float32(0.25))
    assert scalar.dtype == np.float64 and scalar.shape == () and scalar == np.log(0.25)
    columns = np.random.default_rng(1).random((50, 6))[:, ::2]  # not contiguous
    assert np.array_equal(log_floored(columns), log_floored(np.ascontiguousarray(columns)))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scale", [1e-3, 3.0, 400.0])
def test_softmax_matches_scipy_to_rounding(shape, scale):
    z = np.random.default_rng(shape[1]).normal(size=shape) * scale
    expected, expected_log = scipy_softmax(z, axis=1), scipy_log_softmax(z, axis=1)
    positive = expected > 1e-300  # below that both flush differently: ours to 0 at exp(-708)
    # exp within a few ulp; the row sums (up to 10,000 terms) round in a different order than scipy's
    assert np.all(np.abs(softmax(z) - expected)[positive] <= 2e-15 * expected[positive])
    assert np.all(softmax(z)[~positive] <= 1e-300)
    assert np.max(np.abs(log_softmax(z) - expected_log) / np.maximum(1.0, np.abs(expected_log))) < 1e-15
    log_probs, probs = log_softmax_and_softmax(z)
    assert np.array_equal(probs, softmax(z)) and np.array_equal(log_probs, log_softmax(z))


def test_softmax_handles_infinities_and_float32_input():
    z = np.array([[-np.inf, 0.0, 1.0], [5.0, 5.0, -np.inf]], dtype=np.float32)
    assert np.allclose(softmax(z), scipy_softmax(z.astype(np.float64), axis=1), rtol=1e-15, atol=0)
    assert np.isneginf(log_softmax(z)[0, 0]) and softmax(np.zeros((0, 4))).shape == (0, 4)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("beta", [1e-7, 0.5, 3.0, np.exp(16.0)])
def test_tempered_moments_match_the_weighted_mean_and_variance(shape, beta):
    z = np.random.default_rng(7 * shape[1]).normal(size=shape) * 4.0
    p = scipy_softmax(beta * z, axis=1)
    mean = (p * z).sum(axis=1)
    variance = (p * (z - mean[:, None]) ** 2).sum(axis=1)  # the two-pass form: no cancellation
    got_mean, got_variance = tempered_moments(z, beta)
    assert np.max(np.abs(got_mean - mean)) < 1e-12
    assert np.max(np.abs(got_variance - variance)) < 1e-11


def test_kernels_refuse_what_they_cannot_compute():
    with pytest.raises(ValueError):
        tempered_moments(np.zeros((2, 3)), 0.0)
    with pytest.raises(ValueError):
        softmax(np.zeros(3))


def test_the_two_paths_agree(monkeypatch):
    """softmax, moments and log to a few ulp; SelectTau's temperatures within its stopping rule and
    the same categories (see calib.core.kernels)."""
    from calib.calibrators.select_tau import tempered_distribution
    from calib.core import kernels

    compiled = pytest.importorskip("calib._kernels", reason="the C extension is not built")
    rng = np.random.default_rng(3)
    z = rng.normal(size=(400, 37)) * 3
    in_set = np.argsort(np.argsort(-z, axis=1), axis=1) < rng.integers(0, 38, 400)[:, None]
    target = rng.uniform(0.05, 0.99, 400)
    results = {}
    for name, module in (("compiled", compiled), ("numpy", None)):
        monkeypatch.setattr(kernels, "_compiled", module)
        monkeypatch.setattr(kernels, "_COMPILED_LOG", module is not None)
        results[name] = (
            softmax(z),
            log_softmax(z),
            tempered_moments(z, 0.7),
            log_floored(np.abs(z)),
            tempered_distribution(z, in_set, target),
        )
    a, b = results["compiled"], results["numpy"]
    np.testing.assert_allclose(a[0], b[0], rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(a[2][0], b[2][0], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(a[2][1], b[2][1], rtol=1e-12, atol=1e-12)
    assert np.max(np.abs(a[3] - b[3]) / np.spacing(np.abs(b[3]) + 1e-300)) <= 1.0
    (dist_a, tau_a, cat_a), (dist_b, tau_b, cat_b) = a[4], b[4]
    np.testing.assert_array_equal(cat_a, cat_b)
    np.testing.assert_allclose(tau_a, tau_b, rtol=1e-6)
    mass_a, mass_b = (dist_a * in_set).sum(axis=1), (dist_b * in_set).sum(axis=1)
    feasible = cat_a == 0
    assert np.all(np.abs(mass_a - mass_b)[feasible] <= 2e-9)
    assert np.all(mass_b[feasible] >= target[feasible] - 1e-12)


def test_set_update_is_the_where_formula_to_the_bit(backend):
    """MR's update, values + or * (inside on the set, outside off it), one operation a value: the
    same bits as NumPy's where-then-op, on contiguous rows and on a strided view of columns."""
    from calib.core import kernels

    rng = np.random.default_rng(4)
    values = rng.random((50, 1001))
    in_set = rng.random((50, 1001)) < 0.3
    inside, outside = rng.random(50) * 3, rng.random(50) / 3
    for add, op in ((True, np.add), (False, np.multiply)):
        for columns in (slice(None), slice(None, None, 2)):
            expected = op(values[:, columns], np.where(in_set[:, columns], inside[:, None], outside[:, None]))
            target = values.copy()[:, columns]
            kernels.set_update(target, in_set[:, columns], inside, outside, add)
            assert np.array_equal(target.view(np.uint64), expected.view(np.uint64)), (add, columns)
    # float32 values and a 0/1 integer mask take the NumPy formula on both paths (the compiled
    # update reads float64 values and a bool mask only)
    small = values[:4, :7].astype(np.float32)
    mask = in_set[:4, :7].astype(np.uint8)
    expected = small * np.where(mask, inside[:4, None], outside[:4, None])
    kernels.set_update(small, mask, inside[:4], outside[:4], False)
    np.testing.assert_array_equal(small, expected.astype(np.float32))
    wide = values[:4, :7].copy()
    kernels.set_update(wide, mask, inside[:4], outside[:4], True)
    np.testing.assert_array_equal(wide, values[:4, :7] + np.where(mask, inside[:4, None], outside[:4, None]))
    # float32 values with a bool mask, and float64 values with an int64 mask, likewise
    small = values[:4, :7].astype(np.float32)
    kernels.set_update(small, mask.astype(bool), inside[:4], outside[:4], False)
    np.testing.assert_array_equal(small, expected.astype(np.float32))
    wide = values[:4, :7].copy()
    kernels.set_update(wide, mask.astype(np.int64), inside[:4], outside[:4], True)
    np.testing.assert_array_equal(wide, values[:4, :7] + np.where(mask, inside[:4, None], outside[:4, None]))


@pytest.mark.parametrize("n_bins", [1, 2, 10, 15])
def test_bin_counts_are_the_definition_on_edges_and_just_below(backend, n_bins):
    """Both paths count what the definition says, from a direct loop comparing with the edges: v in
    bin b with b/B (1 - r) <= v < (b + 1)/B (1 - r) (r = 2^-44, the last bin closed), a value exactly
    on an edge in the upper bin, r e / 2 below an edge e as on it, 1e-13 (above r e for every edge)
    or 1e-9 below in the lower one, 1.0 in the last bin; each bin's sum in element order, to the bit;
    the columns as groups, and group 0 of a counter with more groups."""
    from reference import edge_bin

    from calib.core.binning import BinCounter

    rng = np.random.default_rng(n_bins)
    edges = np.arange(n_bins + 1) / n_bins
    values = np.concatenate([edges, edges[1:] * (1 - 2.0**-45), edges[1:] - 1e-13, edges[1:] - 1e-9, rng.random(300), [0.0, 1.0]])
    values = np.clip(values, 0.0, 1.0)
    values = values[: len(values) // 3 * 3].reshape(-1, 3)
    hits = rng.random(values.shape) < 0.5
    expected = np.zeros((3, n_bins, 3))  # column, bin, (count, sum, hits)
    for i in range(len(values)):
        for j in range(3):
            expected[j, edge_bin(values[i, j], n_bins)] += (1, values[i, j], hits[i, j])
    pooled = BinCounter(n_bins)
    pooled.add(values, hits)
    assert pooled.count.tolist() == expected[:, :, 0].sum(axis=0).tolist()
    assert pooled.sum_true.tolist() == expected[:, :, 2].sum(axis=0).tolist()
    flat_sums = np.zeros(n_bins)
    for v in values.reshape(-1):  # element order, as np.bincount adds them
        flat_sums[edge_bin(v, n_bins)] += v
    assert pooled.sum_pred.tolist() == flat_sums.tolist()
    by_class = BinCounter(n_bins, 3)
    by_class.add(values, hits, by_column=True)
    assert by_class.count.tolist() == expected[:, :, 0].reshape(-1).tolist()
    assert by_class.sum_true.tolist() == expected[:, :, 2].reshape(-1).tolist()
    np.testing.assert_array_equal(by_class.sum_pred, expected[:, :, 1].reshape(-1))
    first_group = BinCounter(n_bins, 2)
    first_group.add(values[:, 0], hits[:, 0])
    assert first_group.count.tolist() == expected[0, :, 0].tolist() + [0.0] * n_bins


def test_bin_counts_by_column_add_in_turn_into_running_sums_and_into_empty_ones(backend):
    """By column over every row the first bin's values are summed apart when the buffers' first
    bins are empty (most values of many classes lie there): the bits of adding each value in turn,
    rows all in the first bin, values on its edge and just below; and into buffers whose first bins
    already hold sums, each value added to the running sum in turn as before."""
    from reference import edge_bin

    from calib.core import kernels
    from calib.core.numerics import EDGE_STRETCH

    rng = np.random.default_rng(5)
    edge = 1 / 15
    values = rng.choice(np.r_[0.0, edge, edge * (1 - 2.0**-45), edge - 1e-13, rng.random(8) * 0.1, 0.7, 1.0], size=(120, 9))
    values[::4] = rng.random((30, 9)) * 0.05  # rows all in the first bin
    hits = rng.random(values.shape) < 0.3
    for start in (np.zeros(9 * 15), rng.random(9 * 15)):
        expected = [start.copy(), start * 3, start.copy()]
        for i in range(len(values)):
            for j in range(9):
                cell = j * 15 + edge_bin(values[i, j], 15)
                expected[0][cell] += 1.0
                expected[1][cell] += values[i, j]
                expected[2][cell] += hits[i, j]
        out = (start.copy(), start * 3, start.copy())
        found = kernels.bin_counts(values, hits, 15, 15 * EDGE_STRETCH, True, out=out)
        if backend == "numpy":
            assert found is None  # NumPy's bincounts (calib.core.binning), tested beside
            continue
        for got, want in zip(found, expected):
            assert np.array_equal(got, want)


def test_bin_counts_first_hit_is_the_hits_matrix_with_runs_in_and_out_of_bins(backend):
    """Hits given as each row's first hit column count what the (N, K) matrix 1{j >= first[i]}
    counts, with first = 0 (every column), K (none) and in between; and the sums in element order
    (a direct loop) when group 0's values run up through bins, stay in one, and jump back down
    (rows of cumulative masses, then unsorted rows), on the edges and just below them."""
    from reference import edge_bin

    from calib.core.binning import BinCounter

    n_bins, k = 4, 6
    rows = np.array(
        [
            [0.1, 0.25, 0.25, 0.5 * (1 - 2.0**-45), 0.75, 1.0],  # runs up, edges and just below
            [0.9, 0.1, 0.9, 0.9, 0.0, 0.25 - 1e-9],  # jumps back down, a run after a jump
            [0.3, 0.3, 0.3, 0.3, 0.3, 0.3],  # one run the whole row
            [1.0, 0.0, 1.0, 0.0, 0.75, 0.5],
        ]
    )
    first = np.array([0, 6, 3, 5])
    hits = np.arange(k)[None, :] >= first[:, None]
    count, sums, hit_count = np.zeros(n_bins), np.zeros(n_bins), np.zeros(n_bins)
    for i in range(len(rows)):
        for j in range(k):
            b = edge_bin(rows[i, j], n_bins)
            count[b] += 1
            sums[b] += rows[i, j]
            hit_count[b] += j >= first[i]
    by_rank, by_matrix = BinCounter(n_bins), BinCounter(n_bins)
    by_rank.add(rows, first_hit=first)
    by_matrix.add(rows, hits)
    for counter in (by_rank, by_matrix):
        assert counter.count.tolist() == count.tolist()
        assert counter.sum_pred.tolist() == sums.tolist()
        assert counter.sum_true.tolist() == hit_count.tolist()
    with pytest.raises(ValueError, match="first_hit"):
        BinCounter(n_bins).add(rows, hits, first_hit=first)
    with pytest.raises(ValueError, match="first_hit"):
        BinCounter(n_bins, k).add(rows, by_column=True, first_hit=first)
    with pytest.raises(ValueError, match="first_hit"):
        BinCounter(n_bins).add(rows[0], first_hit=first[:1])  # a row of values without its columns
    with pytest.raises(ValueError, match="first_hit"):
        BinCounter(n_bins, 2).add(rows, group=np.zeros((len(rows), 1), dtype=int), first_hit=first)


def test_first_hit_runs_per_cluster_add_each_value_in_turn_across_rows_of_one_cluster(backend):
    """Per cluster with the plain counts beside (the bootstrap's CMCE bins): each value added in
    element order to its cluster's bin and to the plain bin, counts and hits 1{j >= first} a value,
    by a direct loop; rows of one cluster in a row whose last bin is the next row's first (a run
    across two rows), first hits at 0, inside a run, at the row's end (none) and beyond it."""
    from reference import edge_bin

    from calib.core.binning import BinCounter

    n_bins, k, clusters = 4, 5, 3
    rows = np.array(
        [
            [0.1, 0.3, 0.3, 0.9, 1.0],
            [0.8, 0.9, 0.95, 1.0, 1.0],  # same cluster, starts in the bin the last row ended in
            [0.2, 0.25, 0.5 * (1 - 2.0**-45), 0.5, 0.75],  # edges and just below
            [0.6, 0.1, 0.7, 0.0, 0.75],  # not sorted: runs broken by jumps down
            [0.3, 0.3, 0.3, 0.3, 0.3],  # one run, its hits from the middle of it
            [0.0, 0.0, 1.0, 1.0, 1.0],
        ]
    )
    first = np.array([0, 2, 5, 7, 3, 1])
    cluster = np.array([1, 1, 0, 2, 2, 1])
    chunks = (range(0, 2), range(2, 6))  # into running sums per cluster, a chunk's plain sums added to the last
    count, sums, hit_count = (np.zeros((clusters, n_bins)) for _ in range(3))
    plain = [np.zeros(n_bins) for _ in range(3)]
    for chunk in chunks:
        chunk_plain = [np.zeros(n_bins) for _ in range(3)]
        for i in chunk:
            for j in range(k):
                b, c = edge_bin(rows[i, j], n_bins), cluster[i]
                count[c, b] += 1
                sums[c, b] += rows[i, j]
                hit_count[c, b] += j >= first[i]
                chunk_plain[0][b] += 1
                chunk_plain[1][b] += rows[i, j]
                chunk_plain[2][b] += j >= first[i]
        for total, part in zip(plain, chunk_plain):
            total += part
    beside, counter = BinCounter(n_bins), BinCounter(n_bins, clusters=clusters)
    for chunk in chunks:
        part = slice(chunk.start, chunk.stop)
        counter.add(rows[part], first_hit=first[part], cluster=cluster[part], plain=beside)
    state = counter.state()
    for name, want, plain_want in zip(("count", "sum_pred", "sum_true"), (count, sums, hit_count), plain):
        assert state[name].tolist() == want.tolist(), name
        assert getattr(beside, name).tolist() == plain_want.tolist(), name


def test_cumulative_mass_is_the_running_sum_of_the_sorted_row_clipped(backend):
    """Each row of -p sorted non-decreasing becomes p_1 + ... + p_k added left to right and clipped
    to [0, 1], to the bit: by hand on [0.5, 0.25, 0.25]; a row whose sum rounds above 1 clipped to 1;
    ties, exact zeros and float16-rounded rows against a direct loop."""
    from calib.core import kernels

    mass = -np.array([[0.5, 0.25, 0.25]])
    kernels.cumulative_mass(mass)
    assert mass.tolist() == [[0.5, 0.75, 1.0]]
    tenth = np.full((1, 10), -0.1)  # 0.1 added ten times is 0.9999999999999999: kept, not rounded to 1
    over = -np.array([[0.5000000000000004, 0.5]])  # sums to 1.0000000000000004: clipped to 1
    kernels.cumulative_mass(tenth)
    kernels.cumulative_mass(over)
    assert tenth[0, -1] == sum([0.1] * 10) and over.tolist() == [[0.5000000000000004, 1.0]]
    rng = np.random.default_rng(5)
    probs = np.concatenate(
        [
            rng.dirichlet(np.ones(9) * 0.2, 40),
            np.round(rng.dirichlet(np.ones(9), 40), 1),  # ties and exact zeros
            rng.dirichlet(np.ones(9), 40).astype(np.float16).astype(np.float64),
        ]
    )
    ordered = np.sort(-probs, axis=1)
    expected = np.empty_like(ordered)
    for i, row in enumerate(-ordered):
        total = 0.0
        for j, p in enumerate(row):
            total = p if j == 0 else total + p
            expected[i, j] = min(max(total, 0.0), 1.0)
    kernels.cumulative_mass(ordered)
    assert np.array_equal(ordered.view(np.uint64), expected.view(np.uint64))


def test_label_rank_counts_higher_scores_and_ties_before_the_label(backend):
    """rank = #{j : s_j > s_y} + #{j < y : s_j = s_y}: by hand on a tie on both sides of the label,
    the label on the first and last column, a row of equal scores, one column; and on float32
    scores (the NumPy formula on both paths) and random ties against the definition."""
    from calib.core.numerics import label_rank

    scores = np.array([[0.3, 0.3, 0.4, 0.3], [0.3, 0.3, 0.4, 0.3], [0.25] * 4, [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    labels = np.array([1, 3, 2, 0, 3])
    assert label_rank(scores, labels).tolist() == [2, 3, 2, 3, 3]
    assert label_rank(scores.astype(np.float32), labels).tolist() == [2, 3, 2, 3, 3]
    assert label_rank(np.ones((3, 1)), np.zeros(3, dtype=np.int32)).tolist() == [0, 0, 0]
    rng = np.random.default_rng(6)
    ties = rng.integers(0, 5, size=(200, 13)) / 4.0
    y = rng.integers(0, 13, 200)
    expected = [int(np.sum(row > row[t]) + np.sum(row[:t] == row[t])) for row, t in zip(ties, y)]
    assert label_rank(ties, y).tolist() == expected


def test_range_counts_count_below_lo_strictly_and_up_to_hi_inclusively(backend):
    """Per row, #(v < lo) and #(v <= hi): values exactly on lo (not below) and on hi (counted), an
    ulp either side, rows shorter and longer than a vector."""
    from calib.core import kernels

    lo, hi = 0.9, 0.92
    for k in (1, 3, 4, 9):
        values = np.tile(
            np.array([np.nextafter(lo, 0), lo, np.nextafter(lo, 1), hi, np.nextafter(hi, 2), 0.0, 1.0, 0.5, 0.91]), 2
        )[:k]
        values = np.vstack([values, values[::-1]])
        below, at_most = kernels.range_counts(values, lo, hi)
        assert below.tolist() == [int(np.sum(row < lo)) for row in values]
        assert at_most.tolist() == [int(np.sum(row <= hi)) for row in values]
    assert [c.tolist() for c in kernels.range_counts(np.array([[np.nextafter(lo, 0), lo, hi, np.nextafter(hi, 2)]]), lo, hi)] == [
        [1],
        [3],
    ]
