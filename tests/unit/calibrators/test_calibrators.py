"""The calibrators' details pinned by hand: temperature scaling's solver on inputs that force each
of its branches (an end of the bracket, a Newton step with zero curvature, logits on a tiny scale),
the naive CMCE temperature's grid and bins, the row hash behind randomised scores against a plain
Python splitmix64, the ranking keys, the score options' ranges and defaults, and mass rescaling's
row categories."""

from __future__ import annotations

import numpy as np
import pytest

import calib
from calib import CALIBRATORS
from calib.calibrators.conformal import (
    CATEGORY_NAMES,
    TINY_MASS,
    ScoreOptions,
    _ranking,
    check_alpha,
    conformal_quantile,
    nonconformity,
    row_uniforms,
)
from calib.calibrators.temperature import (
    CMCE_BINS,
    CMCE_GRID,
    LOG_BETA_BOUND,
    bracket_end_warnings,
    fit_inverse_temperature,
    nll_gradient,
)
from calib.core.numerics import log_softmax
from calib.errors import UsageError

# temperature scaling ---------------------------------------------------------------------------------


def test_labels_against_the_logits_put_the_temperature_on_the_high_end_exactly():
    """Every label is the lower logit: the NLL gradient in beta = 1/T is >= 0 from beta = e^-16 on,
    so the minimum is that end of the bracket, T = e^16 exactly (not a point bisected near it),
    and the fit says so."""
    logits = np.array([[0.0, 0.5], [0.3, 0.0], [0.0, 0.2]])
    labels = np.array([0, 1, 0])
    assert nll_gradient(np.exp(-LOG_BETA_BOUND), logits, labels)[0] > 0
    ts = CALIBRATORS["ts"]().fit(logits, labels)
    assert ts.temperature_ == 1.0 / np.exp(-LOG_BETA_BOUND)
    assert "no information" in " ".join(ts.warnings())


def test_a_newton_step_with_zero_curvature_falls_back_to_bisection():
    """Logits (0, 1000): at beta = 1 every p is exactly 0 or 1 in floating point, so the curvature
    (the variance of z) is exactly 0 while the gradient is not; the solver bisects instead of
    dividing by zero. Two of three labels are class 1: the root has p_1 = 2/3, beta = log(2)/1000."""
    logits = np.array([[0.0, 1000.0]] * 3)
    labels = np.array([1, 1, 0])
    grad, curvature = nll_gradient(1.0, logits, labels)
    assert curvature == 0.0 and grad != 0.0
    assert fit_inverse_temperature(logits, labels) == pytest.approx(np.log(2.0) / 1000.0, rel=1e-12)


def test_logits_on_a_tiny_scale_still_reach_the_root():
    """Logits of size 1e-3 (curvature ~1e-6 per row): T = 1/beta with beta the root of the NLL
    gradient, found by a bracketing solver on the same formula."""
    from scipy.optimize import brentq

    rng = np.random.default_rng(8)
    labels = rng.integers(0, 3, 400)
    logits = rng.normal(size=(400, 3)) * 1e-3
    logits[np.arange(400), labels] += 2e-3
    beta = fit_inverse_temperature(logits, labels)
    root = brentq(lambda b: nll_gradient(b, logits, labels)[0], 1.0, 1e6, xtol=1e-14, rtol=1e-14)
    assert beta == pytest.approx(root, rel=1e-10)


def test_the_temperature_divides_the_logits():
    """log p = log_softmax(z / T) for ts and cmce-ts alike."""
    z = np.array([[2.0, 0.0, -1.0]])
    for name in ("ts", "cmce-ts"):
        calibrator = CALIBRATORS[name]()
        calibrator.temperature_ = 2.0
        np.testing.assert_allclose(calibrator.transform(z), log_softmax(z / 2.0), rtol=1e-15)


def test_the_cmce_grid_is_301_log_spaced_temperatures_from_1e_2_to_1e2_with_1_on_it():
    exponents = np.arange(-150, 151) / 75.0
    np.testing.assert_array_equal(CMCE_GRID, 10.0**exponents)
    assert len(CMCE_GRID) == 301 and CMCE_GRID[0] == 0.01 and CMCE_GRID[-1] == 100.0 and CMCE_GRID[150] == 1.0
    assert CMCE_BINS == 25


def test_cmce_temperature_minimises_the_25_bin_cmce_of_the_metric_over_the_grid():
    """A second path: CMCE (25 bins) of softmax(z / T) from calib.evaluate at the chosen T and at
    the grid points beside it; the fit's value is the metric's."""
    data = np.load(calib.sample_path("cifar10_val.npz"))
    logits, labels = data["logits"][:600].astype(np.float64), data["labels"][:600]
    fitted = CALIBRATORS["cmce-ts"]().fit(logits, labels)
    i = int(np.argmin(np.abs(CMCE_GRID - fitted.temperature_)))

    def cmce(temperature):
        return calib.evaluate(logits / temperature, labels, metrics=["cmce"], kind="logits").values["cmce"]

    assert fitted.cmce_ == pytest.approx(cmce(fitted.temperature_), abs=1e-12)
    assert cmce(CMCE_GRID[i - 1]) >= fitted.cmce_ - 1e-12 and cmce(CMCE_GRID[i + 1]) >= fitted.cmce_ - 1e-12


def test_a_temperature_on_an_end_of_the_grid_is_said_and_one_point_inside_is_not():
    cmce_ts = CALIBRATORS["cmce-ts"]()
    for temperature, said in ((CMCE_GRID[0], True), (CMCE_GRID[-1], True), (CMCE_GRID[1], False), (CMCE_GRID[-2], False)):
        cmce_ts.temperature_ = float(temperature)
        assert bool(cmce_ts.warnings()) is said, temperature
    assert bracket_end_warnings(0.01 * (1 + 1e-6), 0.01, 100.0, "CMCE") == []
    assert bracket_end_warnings(100.0 * (1 - 1e-6), 0.01, 100.0, "CMCE") == []
    assert "separable" in bracket_end_warnings(0.01, 0.01, 100.0, "CMCE")[0]
    assert "no information" in bracket_end_warnings(100.0, 0.01, 100.0, "CMCE")[0]


# conformal scores ----------------------------------------------------------------------------------

MASK = (1 << 64) - 1


def splitmix_row_uniform(row: np.ndarray, seed: int) -> float:
    """The documented row hash in plain Python integers mod 2^64: h = sum_j bits(p_j) w_j + seed * S
    with w_j = (j * S) | 1 (j = 1..K, S the golden-ratio step 0x9E3779B97F4A7C15), splitmix64's
    finaliser (shifts 30, 27, 31; multipliers 0xBF58476D1CE4E5B9, 0x94D049BB133111EB), then the top
    53 bits as a fraction of 2^53."""
    step = 0x9E3779B97F4A7C15
    h = 0
    for j, bits in enumerate(np.asarray(row, dtype=np.float64).view(np.uint64).tolist(), start=1):
        h = (h + bits * (((j * step) & MASK) | 1)) & MASK
    h = (h + seed * step) & MASK
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & MASK
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & MASK
    h ^= h >> 31
    return (h >> 11) / 2.0**53


def test_row_uniforms_are_splitmix64_of_the_row_in_plain_python():
    rng = np.random.default_rng(4)
    probs = rng.dirichlet(np.ones(7), size=20)
    probs[0] = [1, 0, 0, 0, 0, 0, 0]
    for seed in (0, 1, 12345):
        got = row_uniforms(probs, seed)
        assert got.tolist() == [splitmix_row_uniform(row, seed) for row in probs]


def test_randomised_scores_default_to_seed_zero():
    probs = np.random.default_rng(1).dirichlet(np.ones(5), size=10)
    options = ScoreOptions("aps", randomize=True)
    np.testing.assert_array_equal(nonconformity(probs, options), nonconformity(probs, options, seed=0))
    assert not np.array_equal(nonconformity(probs, options), nonconformity(probs, options, seed=1))


def test_ranking_keys_are_one_minus_the_bits_with_the_column_in_the_low_bits():
    """Key of p_j = bits(1.0) - bits(p_j) with its lowest ceil(log2 K) bits replaced by j, sorted
    per row: p = 1 has key 0 (column 0); p = 0 has bits(1.0) = 0x3FF0000000000000, low bit 1."""
    keys, mask = _ranking(np.array([[0.0, 1.0], [1.0, 0.0]]))
    assert mask == 1
    assert keys.tolist() == [[1, 0x3FF0000000000000], [0, 0x3FF0000000000001]]
    for k, expected in ((2, 1), (3, 3), (4, 3), (5, 7), (8, 7), (9, 15), (1000, 1023)):
        assert _ranking(np.full((1, k), 1.0 / k))[1] == expected, k
    assert _ranking(np.array([[1.0]]))[1] == 1


def test_rank_scores_flags_exactly_the_rows_out_of_order():
    """A ranking is exact when its probabilities never increase and equal ones come in column order."""
    from calib.core import kernels

    probs = np.array([[0.5, 0.5], [0.5, 0.5], [0.3, 0.7], [0.7, 0.3]])
    ranking = np.array([[0, 1], [1, 0], [0, 1], [0, 1]], dtype=np.uint64)
    out, misranked = np.empty_like(probs), np.empty(4, dtype=np.uint8)
    kernels.rank_scores(probs, ranking, 1, 0, None, out, misranked)
    assert misranked.tolist() == [0, 1, 1, 0]
    # three equal values: the order 0, 2, 1 breaks the column order at its second step only
    equal = np.full((2, 3), 1 / 3)
    ranking = np.array([[0, 2, 1], [0, 1, 2]], dtype=np.uint64)
    out, misranked = np.empty_like(equal), np.empty(2, dtype=np.uint8)
    kernels.rank_scores(equal, ranking, 3, 0, None, out, misranked)
    assert misranked.tolist() == [1, 0]


def test_score_options_ranges_and_defaults():
    """RAPS lambda >= 0 and k_reg >= 0 (0 allowed), SAPS lambda > 0; defaults 0.01, 5 and 0.2."""
    options = ScoreOptions()
    assert (options.score, options.raps_lambda, options.raps_kreg, options.saps_lambda) == ("msp", 0.01, 5, 0.2)
    ScoreOptions("raps", raps_lambda=0.0, raps_kreg=0)
    for bad in (dict(raps_lambda=-0.5), dict(raps_kreg=-1), dict(raps_lambda=-2.0, raps_kreg=3), dict(saps_lambda=0.0)):
        with pytest.raises(UsageError):
            ScoreOptions("raps", **bad)


def test_alpha_must_lie_strictly_between_zero_and_one():
    for alpha in (0.0, 1.0, -0.5, 1.5):
        with pytest.raises(UsageError, match="alpha"):
            check_alpha(alpha)
    assert check_alpha(1e-9) == 1e-9 and check_alpha(0.999) == 0.999


def test_conformal_quantile_is_the_ceil_n_plus_one_times_one_minus_alpha_th_smallest():
    """n = 9, alpha = 0.2: ceil(10 * 0.8) = 8th smallest of 9 scores (values 10..90 shuffled)."""
    scores = np.array([50.0, 10, 90, 30, 70, 20, 80, 40, 60])
    assert conformal_quantile(scores, 0.2) == 80.0
    assert conformal_quantile(scores, 0.5) == 50.0  # ceil(10 * 0.5) = 5th


def test_row_categories_have_distinct_codes():
    assert sorted(CATEGORY_NAMES) == [1, 2, 3, 4, 5] and TINY_MASS == 5
    assert CATEGORY_NAMES[TINY_MASS] == "mass_below_1e-12"


def test_mass_rescaling_categories_at_their_edges():
    """MR leaves a row unchanged when its set is empty or full, or when P_in or P_out < 1e-12; a
    mass of exactly 1e-12 is rescaled. The categories are read from rows built for each case."""
    mr = CALIBRATORS["mr"]()
    probs = np.array(
        [
            [0.5, 0.3, 0.2],  # set {0}: feasible
            [0.5, 0.3, 0.2],  # empty set
            [0.5, 0.3, 0.2],  # full set
            [1.0 - 1e-12, 1e-12, 0.0],  # P_out = 1e-12 exactly: feasible
            [1.0 - 5e-13, 5e-13, 0.0],  # P_out < 1e-12: tiny mass
            [1e-12, 1.0 - 1e-12, 0.0],  # set {0} with P_in = 1e-12: feasible
        ]
    )
    in_set = np.array([[1, 0, 0], [0, 0, 0], [1, 1, 1], [1, 0, 1], [1, 0, 1], [1, 0, 0]], dtype=bool)
    category = mr._factors(probs, in_set)[2]
    from calib.core.kernels import EMPTY, FEASIBLE, FULL

    assert category.tolist() == [FEASIBLE, EMPTY, FULL, FEASIBLE, TINY_MASS, FEASIBLE]


def test_the_low_end_of_the_temperature_bracket_is_matched_relatively():
    """T = e^-16 = 1.1e-7 is the low end; 1.2e-7 is 9% above it and not on it."""
    lowest, highest = np.exp(-LOG_BETA_BOUND), np.exp(LOG_BETA_BOUND)
    assert bracket_end_warnings(lowest, lowest, highest, "NLL")
    assert bracket_end_warnings(1.2e-7, lowest, highest, "NLL") == []


def test_conformal_quantile_on_many_scores_is_the_sorted_one():
    """The k-th smallest, k = ceil((n + 1)(1 - alpha)), against a full sort on 1,001 scores."""
    scores = np.random.default_rng(6).random(1001)
    for alpha in (0.05, 0.1, 0.5):
        k = int(np.ceil(1002 * (1 - alpha) - 1e-9))
        assert conformal_quantile(scores, alpha) == np.sort(scores)[k - 1]


# set-based calibrators ----------------------------------------------------------------------------


def sample(n=600):
    data = np.load(calib.sample_path("cifar10_val.npz"))
    return data["logits"][:n].astype(np.float64), data["labels"][:n]


def test_set_options_defaults_and_ranges():
    """No trivial full set unless asked; no class pooled unless asked; min_class_rows >= 0."""
    from calib.calibrators.set_based import SetOptions

    options = SetOptions()
    assert (options.alpha, options.allow_full_set, options.min_class_rows, options.threshold) == (0.1, False, 0, "constant")
    with pytest.raises(UsageError, match="min_class_rows"):
        SetOptions(min_class_rows=-1)
    logits, labels = sample(50)
    with pytest.raises(UsageError, match="too few"):
        CALIBRATORS["mr"](CALIBRATORS["mr"].Options(alpha=0.01)).fit(logits, labels)


def test_a_conformal_fit_draws_its_randomised_scores_from_seed_zero_by_default():
    from calib.calibrators.set_based import label_scores

    logits, labels = sample(200)
    options = CALIBRATORS["mr"].Options(score="aps", randomize=True)
    assert CALIBRATORS["mr"](options).fit(logits, labels).score_seed_ == 0
    randomised = ScoreOptions("aps", randomize=True)
    np.testing.assert_array_equal(label_scores(logits, labels, randomised), label_scores(logits, labels, randomised, seed=0))


def test_constant_and_per_class_thresholds_condition_on_nothing():
    logits, labels = sample(400)
    for threshold in ("constant", "classwise"):
        fitted = CALIBRATORS["mr"](CALIBRATORS["mr"].Options(threshold=threshold)).fit(logits, labels)
        assert fitted._conditioning(logits[:, :3], None) is None, threshold
        assert fitted.trained_on_ is None


def test_the_null_cluster_holds_the_classes_too_rare_to_embed():
    """Classes 0-3 with 150 rows each, class 4 with none: n_c = floor(150 * 5 / 80) = 9 rows embed
    each class (9 >= 9, the least n for alpha = 0.1), and k-means puts the 4 classes with enough in
    M = floor(9 / 2) = 4 clusters; class 4 alone is in the null cluster (-1)."""
    logits, labels = sample(3000)
    rows = np.concatenate([np.flatnonzero(labels == c)[:150] for c in range(4)])
    logits, labels = logits[rows][:, :5], labels[rows]
    fitted = CALIBRATORS["mr"](CALIBRATORS["mr"].Options(threshold="clustered")).fit(logits, labels)
    assert fitted.fit_report()["classes in the null cluster (marginal quantile)"] == 1
    assert fitted.threshold_["cluster"][4] == -1 and (fitted.threshold_["cluster"][:4] >= 0).all()


def test_bundles_from_before_randomised_scores_restore_seed_zero():
    from calib.calibrators.set_based import TRAINED_ON_HALVES, restore_conditioning

    params = {"conditioning": "logits", "n_conditioning": 10, "fit_counts": {}}
    constant = restore_conditioning(CALIBRATORS["mr"](), dict(params))
    assert constant.score_seed_ == 0 and constant.trained_on_ is None
    adaptive = restore_conditioning(CALIBRATORS["mr"](CALIBRATORS["mr"].Options(threshold="adaptive")), dict(params))
    assert adaptive.score_seed_ == 0 and adaptive.trained_on_ == TRAINED_ON_HALVES


def test_training_rows_of_another_width_are_refused_with_their_counts():
    from calib.calibrators.base import TrainingRows
    from calib.calibrators.set_based import start_fit
    from calib.errors import InputError

    rng = np.random.default_rng(0)
    adaptive = CALIBRATORS["mr"](CALIBRATORS["mr"].Options(threshold="adaptive"))
    logits, labels = rng.normal(size=(20, 4)), rng.integers(0, 4, 20)
    train = TrainingRows(np.zeros((5, 3)), np.zeros(5, dtype=int))
    with pytest.raises(InputError, match="the training rows have 3 classes; the calibration rows have 4"):
        start_fit(adaptive, logits, labels, seed=0, features=None, probs=None, train=train)
    train = TrainingRows(np.zeros((5, 4)), np.zeros(5, dtype=int), features=np.zeros((5, 3)))
    with pytest.raises(InputError, match="expects 2 features columns; got 3"):
        start_fit(adaptive, logits, labels, seed=0, features=np.zeros((20, 2)), probs=None, train=train)


def test_the_nll_gradient_and_curvature_are_the_derivatives_of_the_mean_nll():
    """Central differences of NLL(beta) = mean_i [lse(beta z_i) - beta z_{i, y_i}] (a second formulation)."""
    from scipy.special import logsumexp

    rng = np.random.default_rng(11)
    logits, labels = rng.normal(size=(50, 4)) * 2, rng.integers(0, 4, 50)

    def nll(beta):
        return float(np.mean(logsumexp(beta * logits, axis=1) - beta * logits[np.arange(50), labels]))

    def grad(beta):
        return nll_gradient(beta, logits, labels)[0]

    for beta in (0.3, 1.0, 2.5):
        h = 1e-5
        assert nll_gradient(beta, logits, labels)[0] == pytest.approx((nll(beta + h) - nll(beta - h)) / (2 * h), rel=1e-6)
        assert nll_gradient(beta, logits, labels)[1] == pytest.approx((grad(beta + h) - grad(beta - h)) / (2 * h), rel=1e-6)


def test_a_root_reached_after_two_bisections():
    """Logits (0, 1e6): p is saturated at beta = 1 and nearly so at the first bisection point
    e^-8, so the solver bisects twice before Newton takes over; two of three labels are class 1:
    the root is beta = log(2) / 1e6."""
    logits = np.array([[0.0, 1e6]] * 3)
    labels = np.array([1, 1, 0])
    assert fit_inverse_temperature(logits, labels) == pytest.approx(np.log(2.0) / 1e6, rel=1e-12)


def test_an_adaptive_threshold_refuses_features_of_another_width():
    from conftest import needs

    from calib.errors import InputError

    needs("torch")
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(300, 3)), rng.integers(0, 3, 300)
    features = rng.normal(size=(300, 2))
    fitted = CALIBRATORS["mr"](CALIBRATORS["mr"].Options(threshold="adaptive")).fit(logits, labels, features=features)
    with pytest.raises(InputError, match="threshold expects 2 features columns; got 3"):
        fitted.transform(logits[:5], rng.normal(size=(5, 3)))


def test_conformal_quantile_against_a_sort_on_many_inputs():
    """The k-th smallest for 2,000 random inputs of 5 to 3,000 scores at alpha = 0.1 (a partition
    at the wrong position gives the right value for most inputs, not all)."""
    for seed in range(2000):
        rng = np.random.default_rng(seed)
        scores = rng.random(int(rng.integers(5, 3000)))
        n = len(scores)
        k = int(np.ceil((n + 1) * 0.9 - 1e-9))
        if k <= n:
            assert conformal_quantile(scores, 0.1) == np.sort(scores)[k - 1], seed


def test_a_temperature_a_hair_from_an_end_is_on_it():
    """Within 1e-9 relative of an end counts as on it: 1e-10 off still warns."""
    assert bracket_end_warnings(0.01 * (1 + 1e-10), 0.01, 100.0, "CMCE")
    assert bracket_end_warnings(100.0 * (1 - 1e-10), 0.01, 100.0, "CMCE")


def test_bcts_fits_the_nll_optimum_of_softmax_of_z_over_t_plus_b():
    """bcts: log p = log_softmax(z / T + b); at the fit the NLL's gradient in (1/T, b) is 0, b has
    mean 0, the NLL is at most the model's and at most temperature scaling's; the bundle round-trips."""
    from calib.core.numerics import log_softmax as log_softmax_rows

    rng = np.random.default_rng(3)
    z = rng.normal(size=(3000, 4)) * 2.0
    shifted = log_softmax_rows(z / 1.7 + np.array([0.6, 0.0, -0.2, -0.4]))
    labels = (rng.random(3000)[:, None] < np.cumsum(np.exp(shifted), axis=1)).argmax(axis=1)
    fitted = CALIBRATORS["bcts"]().fit(z, labels)
    log_p = fitted.transform(z)
    np.testing.assert_allclose(log_p, log_softmax(z / fitted.temperature_ + fitted.bias_), rtol=1e-13)
    residual = (np.exp(log_p) - np.eye(4)[labels]) / len(z)
    assert abs(np.sum(residual * z)) < 1e-7 and np.abs(residual.sum(axis=0)).max() < 1e-7
    assert abs(fitted.bias_.mean()) < 1e-9 and fitted.temperature_ == pytest.approx(1.7, rel=0.1)
    nll = -log_p[np.arange(len(z)), labels].mean()
    ts = CALIBRATORS["ts"]().fit(z, labels).transform(z)
    assert nll <= -log_softmax(z)[np.arange(len(z)), labels].mean() and nll <= -ts[np.arange(len(z)), labels].mean() + 1e-12
    loaded = type(fitted).from_state(fitted.options, fitted.to_state())
    np.testing.assert_array_equal(loaded.transform(z), log_p)
