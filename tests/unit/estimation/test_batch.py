"""The estimates of a batch: the replicates' matrix formulas against the direct computation, the
interval's arithmetic, both estimators, the refusals, coverage on a world with known truth, and
parity with NannyML's confidence-based performance estimation (CBPE, NannyML 0.13.1) on NannyML's
own synthetic binary and multiclass datasets: given the probabilities CBPE calibrated (its isotonic
maps, fitted on its reference period) and its predicted classes, calib's ``cbpe`` estimate of each
analysis chunk equals CBPE's to 1e-9 (docs/estimation.md)."""

from __future__ import annotations

import os
from statistics import NormalDist

import numpy as np
import pytest
from conftest import needs

import calib
from calib.drift.priors import adapted_probs
from calib.errors import InputError, UsageError
from calib.estimation import estimate_batch
from calib.estimation.expectations import SCORES, expected, mean_expectations, predicted_class
from calib.estimation.reference import ReferenceRows


def _world(n: int, k: int, seed: int, concentration: float = 0.5):
    """Calibrated probabilities (a Dirichlet draw a row) and labels drawn from them."""
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(k, concentration), size=n)
    labels = (rng.random(n)[:, None] > probs.cumsum(axis=1)).sum(axis=1).clip(max=k - 1)
    return probs, labels


def test_replicate_formulas_equal_the_direct_computation():
    probs, _ = _world(300, 4, 0)
    predicted = predicted_class(probs)
    old = np.array([0.1, 0.2, 0.3, 0.4])
    priors = np.random.default_rng(1).dirichlet(np.ones(4), size=5)
    found = mean_expectations(probs, predicted, priors / old)
    for r, new in enumerate(priors):
        direct = expected(probs, predicted, adapted_probs(probs, old, new))
        for score in SCORES:
            assert found[score][r] == pytest.approx(direct[score][0].mean(), abs=1e-12)


def test_interval_arithmetic_and_the_two_estimators():
    probs, labels = _world(2000, 5, 2)
    reference = ReferenceRows.of(probs, np.log(probs), labels)
    batch, _ = _world(1000, 5, 3)
    debiased = estimate_batch(batch, np.log(batch), reference)
    plain = estimate_batch(batch, np.log(batch), reference, estimator="cbpe")
    z = NormalDist().inv_cdf(0.975)
    bias, noise = reference.map_error("accuracy")
    mean = batch[np.arange(1000), predicted_class(batch)].mean()
    assert plain.estimates["est_accuracy"].value == pytest.approx(mean, abs=1e-15)
    assert debiased.estimates["est_accuracy"].value == pytest.approx(mean + bias, abs=1e-15)
    entry = debiased.estimates["est_accuracy"]
    assert entry.variances["map"] == noise and plain.estimates["est_accuracy"].variances["map"] == noise + bias**2
    assert entry.sd == pytest.approx(np.sqrt(sum(entry.variances.values())), abs=1e-15)
    assert (entry.lower, entry.upper) == pytest.approx((entry.value - z * entry.sd, entry.value + z * entry.sd), abs=1e-15)


def test_the_shifted_estimate_by_hand_and_when_the_em_bias_is_corrected():
    """Debiased, with the reference rows' probabilities: value = mean_i E_{q_i}[s] + d under q (no
    bootstrap bias correction); cbpe and a record without probabilities take the bootstrap's
    estimate of EM's bias off the mean."""
    from calib.drift.priors import em_priors

    probs, labels = _world(2000, 5, 2)
    reference = ReferenceRows.of(probs, np.log(probs), labels)
    batch, _ = _world(300, 5, 3, concentration=0.3)
    found = estimate_batch(batch, np.log(batch), reference, seed=1).estimates["est_accuracy_shifted"]
    priors, _ = em_priors(batch, reference.priors)
    mean = expected(batch, predicted_class(batch), adapted_probs(batch, reference.priors, priors))["accuracy"][0].mean()
    d = reference.shifted_map_error(priors)["accuracy"][0]
    assert found.em_bias_correction == 0.0
    assert found.value == pytest.approx(mean + d, abs=1e-12)
    plain = estimate_batch(batch, np.log(batch), reference, seed=1, estimator="cbpe").estimates["est_accuracy_shifted"]
    assert plain.em_bias_correction != 0.0 and plain.value == pytest.approx(mean + plain.em_bias_correction, abs=1e-12)
    fields = ("n", "label_counts", "mean_probs", "residual_sums", "residual_squares", "margins", "labels")
    older = ReferenceRows(*(getattr(reference, f) for f in fields))
    assert estimate_batch(batch, np.log(batch), older, seed=1).estimates["est_accuracy_shifted"].em_bias_correction != 0.0


def test_intervals_are_clipped_to_the_score_range():
    probs = np.tile([[0.999, 0.001]], (50, 1))
    found = estimate_batch(probs, np.log(probs), None)
    assert found.estimates["est_accuracy"].upper == 1.0
    assert found.notes and "no record of the rows it was fitted on" in found.notes[0]


def test_refusals():
    probs, labels = _world(100, 3, 4)
    reference = ReferenceRows.of(probs, np.log(probs), labels)
    other, _ = _world(100, 4, 5)
    with pytest.raises(InputError, match="4 classes; the calibration map's reference rows have 3"):
        estimate_batch(other, np.log(other), reference)
    with pytest.raises(InputError, match="at least 2 rows"):
        estimate_batch(probs[:1], np.log(probs[:1]), reference)
    with pytest.raises(UsageError, match="debiased, cbpe"):
        estimate_batch(probs, np.log(probs), reference, estimator="plain")


def test_the_same_seed_gives_the_same_numbers():
    probs, labels = _world(500, 3, 6)
    reference = ReferenceRows.of(probs, np.log(probs), labels)
    first, again = (estimate_batch(probs, np.log(probs), reference, seed=3).to_json() for _ in range(2))
    assert first == again


def _coverage(batches: int, n: int, shifted: bool) -> int:
    """How often the realised accuracy of a batch lies in its 95% interval, in a world whose
    probabilities are right: a pool of 20,000 rows with labels drawn from them, the reference 3,000
    other such rows; each batch draws n rows of the pool uniformly, or (``shifted``) by class in the
    shares 0.55, 0.25, 0.15, 0.05 (label shift: each class's rows as they were)."""
    pool, labels = _world(20_000, 4, 7)
    probs, reference_labels = _world(3000, 4, 8)
    reference = ReferenceRows.of(probs, np.log(probs), reference_labels)
    by_class = [np.flatnonzero(labels == c) for c in range(4)]
    covered = 0
    for b in range(batches):
        rng = np.random.default_rng(b)
        if shifted:
            take = np.concatenate(
                [rng.choice(rows, count) for rows, count in zip(by_class, rng.multinomial(n, [0.55, 0.25, 0.15, 0.05]))]
            )
        else:
            take = rng.integers(0, len(pool), n)
        batch = pool[take]
        found = estimate_batch(batch, np.log(batch), reference, seed=b).estimates[
            "est_accuracy_shifted" if shifted else "est_accuracy"
        ]
        covered += found.lower <= np.mean(predicted_class(batch) == labels[take]) <= found.upper
    return covered


@pytest.mark.parametrize("shifted", [False, True])
def test_realised_accuracy_lies_in_the_interval_of_a_calibrated_world(shifted):
    """25 batches of 1,000 rows: at least 21 covered (a binomial(25, 0.95) falls below 21 with
    probability 0.007)."""
    assert _coverage(25, 1000, shifted) >= 21


@pytest.mark.slow
@pytest.mark.parametrize("shifted", [False, True])
def test_realised_accuracy_lies_in_the_interval_of_a_calibrated_world_often(shifted):
    """400 batches of 2,000 rows: at least 93% covered."""
    assert _coverage(400, 2000, shifted) >= 372


def test_doubled_logits_are_called_unreliable():
    val, test = (np.load(calib.sample_path(f"cifar10_{part}.npz")) for part in ("val", "test"))
    fitted = calib.calibrator("ts").fit(val["logits"], val["labels"])
    logits = 2.0 * test["logits"][:2000].astype(np.float64)
    found = estimate_batch(fitted.predict_proba(logits), logits, fitted.reference)
    assert not found.reliable and len(found.reasons) == 2
    assert estimate_batch(fitted.predict_proba(logits / 2), logits / 2, fitted.reference).reliable


#: The rows of a CBPE chunk
CHUNK = 5000
#: NannyML 0.13.1 on pandas 3 and Python 3.11 warns of its own deprecated calls
NANNYML_WARNINGS = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::UserWarning", "ignore:The inplace keyword"
)


@pytest.fixture(scope="module")
def nml():
    os.environ.setdefault("NML_DISABLE_USAGE_LOGGING", "1")  # else NannyML reports its use over the network
    needs("statsmodels")
    return needs("nannyml")


def _analysis_chunks(result):
    frame = result.to_df()
    analysis = frame[frame[("chunk", "period")] == "analysis"]
    starts, ends = analysis[("chunk", "start_index")].to_numpy(), analysis[("chunk", "end_index")].to_numpy()
    return list(zip(starts, ends)), analysis[("accuracy", "value")].to_numpy()


def _calib_estimates(probs: np.ndarray, predicted: np.ndarray, chunks) -> np.ndarray:
    return np.array(
        [
            estimate_batch(
                probs[start : end + 1],
                np.log(np.maximum(probs[start : end + 1], 1e-12)),
                None,
                predicted=predicted[start : end + 1],
                estimator="cbpe",
            )
            .estimates["est_accuracy"]
            .value
            for start, end in chunks
        ]
    )


def _cbpe(nml, probabilities, truth: str, problem: str):
    """NannyML's CBPE estimating accuracy in chunks of :data:`CHUNK` rows, its default isotonic maps."""
    return nml.CBPE(
        y_pred_proba=probabilities, y_pred="y_pred", y_true=truth, problem_type=problem, metrics=["accuracy"], chunk_size=CHUNK
    )


@NANNYML_WARNINGS
def test_binary_chunks_equal_cbpe(nml):
    reference, analysis, _ = nml.load_synthetic_binary_classification_dataset()
    cbpe = _cbpe(nml, "y_pred_proba", "work_home_actual", "classification_binary").fit(reference)
    chunks, expected = _analysis_chunks(cbpe.estimate(analysis))
    given = analysis["y_pred_proba"].to_numpy()
    calibrated = cbpe.calibrator.calibrate(given) if cbpe.needs_calibration else given
    probs = np.stack([1.0 - calibrated, calibrated], axis=1)
    found = _calib_estimates(probs, analysis["y_pred"].to_numpy().astype(np.int64), chunks)
    assert len(found) == 10
    np.testing.assert_allclose(found, expected, rtol=0, atol=1e-9)


@NANNYML_WARNINGS
def test_multiclass_chunks_equal_cbpe(nml):
    from nannyml.performance_estimation.confidence_based.cbpe import _calibrate_predicted_probabilities

    reference, analysis, _ = nml.load_synthetic_multiclass_classification_dataset()
    columns = {name: f"y_pred_proba_{name}" for name in ("prepaid_card", "highstreet_card", "upmarket_card")}
    cbpe = _cbpe(nml, columns, "y_true", "classification_multiclass").fit(reference)
    chunks, expected = _analysis_chunks(cbpe.estimate(analysis))
    calibrated_frame = _calibrate_predicted_probabilities(analysis, "y_true", columns, cbpe._calibrators)
    classes = list(columns)
    probs = calibrated_frame[[columns[name] for name in classes]].to_numpy()
    predicted = np.array([classes.index(value) for value in analysis["y_pred"]])
    found = _calib_estimates(probs, predicted, chunks)
    assert len(found) == 12
    np.testing.assert_allclose(found, expected, rtol=0, atol=1e-9)
    # the model's predicted class is not always the calibrated argmax: the estimate follows the model's
    assert (predicted != probs.argmax(axis=1)).any()
