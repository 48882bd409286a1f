"""Metrics against hand-computed values, a literal second formulation, and reference libraries."""

import math

import numpy as np
import pytest
import reference as ref
from conftest import needs

from calib.core import numerics
from calib.core.numerics import bin_index, label_rank, log_softmax
from calib.evaluation import compute_metrics
from calib.io import Predictions
from calib.metrics import DEFAULT_METRICS, MetricConfig

ALL = list(DEFAULT_METRICS) + ["ece_quantile", "debiased_ece_sq"]


def metrics_of(scores, labels, kind="probs", keys=ALL, **config):
    preds = Predictions("test", np.asarray(scores, dtype=np.float64), kind, "test", np.asarray(labels), "0")
    values, _ = compute_metrics(preds, list(keys), MetricConfig(**config))
    return {k: v["value"] for k, v in values.items()}


def test_hand_computed_tiny_case():
    # Two rows, K = 3 (values chosen so that the float sums are exact: 0.75 + 0.15 == 0.9).
    # row 0: p = (0.5, 0.3, 0.2),   y = 0 -> correct, conf 0.5
    # row 1: p = (0.75, 0.1, 0.15), y = 2 -> wrong,   conf 0.75
    probs = np.array([[0.5, 0.3, 0.2], [0.75, 0.1, 0.15]])
    labels = np.array([0, 2])
    got = metrics_of(probs, labels)
    assert got["accuracy"] == 0.5
    assert got["nll"] == pytest.approx(-(math.log(0.5) + math.log(0.15)) / 2, abs=1e-15)
    # brier: row 0: .25 + .09 + .04 = .38; row 1: .5625 + .01 + .7225 = 1.295 -> mean .8375
    assert got["brier"] == pytest.approx(0.8375, abs=1e-15)
    # ece: two singleton bins (7 and 11 of 15): (|1 - .5| + |0 - .75|) / 2 = .625; mce = .75
    assert got["ece"] == pytest.approx(0.625, abs=1e-15)
    assert got["mce"] == pytest.approx(0.75, abs=1e-15)
    # cumulative pairs (m, c): row 0: (.5,1) (.8,1) (1,1); row 1: (.75,0) (.9,1) (1,1)
    # 25 bins: .5 -> 12, .8 -> 20, .75 -> 18, .9 -> 22, 1.0 -> 24 (two pairs, gap 0)
    # |c - m|: .5 + .2 + .75 + .1 = 1.55 over 6 pairs
    assert got["cmce"] == pytest.approx(1.55 / 6, abs=1e-15)
    # coverage [0.9, 0.92]: the one pair in range, (0.9, c=1) -> 1.0; none in [0.99, 0.995]
    assert got["coverage_0.9_0.92"] == 1.0
    assert got["coverage_0.99_0.995"] is None


def test_classwise_hand_computed():
    # K = 2, rows p1 = 0.1 (y=0), 0.7 (y=1), 0.75 (y=0); 15 bins.
    probs = np.array([[0.9, 0.1], [0.3, 0.7], [0.25, 0.75]])
    labels = np.array([0, 1, 0])
    # class 1: p = .1 (bin 1, o 0), .7 (bin 10, o 1), .75 (bin 11, o 0) -> (.1 + .3 + .75)/3
    # class 0: p = .9 (bin 13, o 1), .3 (bin 4, o 0), .25 (bin 3, o 1) -> (.1 + .3 + .75)/3
    assert metrics_of(probs, labels, keys=["cw_ece"])["cw_ece"] == pytest.approx(1.15 / 3, abs=1e-15)


def test_bin_edges():
    # 1.0 belongs to the last bin; exact multiples of 1/B open their bin; 0.3 * 15 = 4.5; a value
    # within 1e-12 below an edge is on it (one ulp below 1/15: bin 1), 1e-9 below is not (bin 0)
    values = np.array([0.0, 1.0, 1 / 15, 0.3, 14 / 15, np.nextafter(1 / 15, 0), 1 / 15 - 1e-9])
    assert bin_index(values, 15).tolist() == [0, 14, 1, 4, 14, 1, 0]
    values = np.random.default_rng(1).random(2000)
    assert bin_index(values, 15).tolist() == [ref.edge_bin(v, 15) for v in values]
    grid = np.linspace(0, 1, 26)
    assert bin_index(grid, 25).tolist() == [ref.edge_bin(v, 25) for v in grid]


def test_label_rank_ties_go_to_lower_index():
    scores = np.array([[0.2, 0.4, 0.4], [0.2, 0.4, 0.4], [0.5, 0.5, 0.0]])
    assert label_rank(scores, np.array([1, 2, 1])).tolist() == [0, 1, 1]


@pytest.mark.parametrize("seed,k", [(0, 2), (1, 5), (2, 12)])
def test_matches_literal_formulation(seed, k):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(120, k)) * 3
    labels = rng.integers(0, k, 120)
    probs = ref.softmax(logits)
    got = metrics_of(logits, labels, kind="logits")
    assert got["accuracy"] == pytest.approx(np.mean(probs.argmax(1) == labels), abs=1e-12)
    assert got["nll"] == pytest.approx(ref.nll(probs, labels), abs=1e-10)
    assert got["brier"] == pytest.approx(ref.brier(probs, labels), abs=1e-12)
    assert got["ece"] == pytest.approx(ref.ece(probs, labels), abs=1e-12)
    assert got["mce"] == pytest.approx(ref.mce(probs, labels), abs=1e-12)
    assert got["cw_ece"] == pytest.approx(ref.cw_ece(probs, labels), abs=1e-12)
    assert got["cmce"] == pytest.approx(ref.cmce(probs, labels), abs=1e-12)
    for lo, hi in ((0.9, 0.92), (0.99, 0.995)):
        want = ref.coverage(probs, labels, lo, hi)
        value = got[f"coverage_{lo}_{hi}"]
        assert (value is None and want is None) or value == pytest.approx(want, abs=1e-12)


def test_chunking_does_not_change_values(monkeypatch):
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(500, 7)) * 2
    labels = rng.integers(0, 7, 500)
    whole = metrics_of(logits, labels, kind="logits")
    monkeypatch.setattr(numerics, "CHUNK_ELEMENTS", 7 * 13)  # 13 rows a chunk, last chunk ragged
    import calib.io.predictions as predictions_module

    monkeypatch.setattr(predictions_module, "row_chunks", lambda n, k: numerics.row_chunks(n, k, 7 * 13))
    chunked = metrics_of(logits, labels, kind="logits")
    for key in whole:
        assert chunked[key] == pytest.approx(whole[key], abs=1e-12), key


def test_debiased_and_quantile_ece_by_hand():
    # 4 rows, conf .6,.6,.8,.8 (bins 9 and 12 of 15), correct 1,0,1,1
    probs = np.array([[0.6, 0.4], [0.6, 0.4], [0.8, 0.2], [0.8, 0.2]])
    labels = np.array([0, 1, 0, 0])
    got = metrics_of(probs, labels, keys=["debiased_ece_sq", "ece_quantile"], bins=2)
    # bins=2 equal width: all conf >= .5 -> one bin: f = .7, y = .75, n = 4
    # (f - y)^2 - y(1-y)/(n-1) = .0025 - .1875/3 = -.06
    assert got["debiased_ece_sq"] == pytest.approx(0.0025 - 0.1875 / 3, abs=1e-15)
    # equal-mass with 2 bins: edges (.6, .7, .8): bin 0 = {.6,.6} acc .5, bin 1 = {.8,.8} acc 1
    # ece = .5 * |.5 - .6| + .5 * |1 - .8| = .15
    assert got["ece_quantile"] == pytest.approx(0.15, abs=1e-15)


def test_isotonic_ece_by_hand_and_against_sklearn(cifar100):
    # conf .6,.6,.8,.8 correct 1,0,0,1: PAVA pools everything at .5 -> |.6-.5|, |.8-.5| -> mean .2
    probs = np.array([[0.6, 0.4], [0.6, 0.4], [0.8, 0.2], [0.8, 0.2]])
    assert metrics_of(probs, [0, 1, 1, 0], keys=["isotonic_ece"])["isotonic_ece"] == pytest.approx(0.2, abs=1e-15)
    from sklearn.isotonic import IsotonicRegression

    logits, labels = cifar100["test_logits"].astype(np.float64), cifar100["test_labels"]
    probs = numerics.softmax(logits)
    confidence, correct = probs.max(1), (probs.argmax(1) == labels).astype(float)
    expected = np.abs(confidence - IsotonicRegression().fit(confidence, correct).predict(confidence)).mean()
    got = metrics_of(logits, labels, kind="logits", keys=["isotonic_ece"])["isotonic_ece"]
    assert got == pytest.approx(expected, abs=1e-10)


def test_probs_input_nll_is_clipped_and_reported():
    probs = np.array([[1.0, 0.0], [0.5, 0.5]])
    preds = Predictions("t", probs, "probs", "t", np.array([1, 0]), "0")
    values, _ = compute_metrics(preds, ["nll"], MetricConfig())
    assert values["nll"]["value"] == pytest.approx((-math.log(1e-12) - math.log(0.5)) / 2)
    assert values["nll"]["settings"] == {"prob_clip": 1e-12}


def test_against_torchmetrics_top_label_ece(cifar100):
    torch = needs("torch")
    needs("torchmetrics")
    from torchmetrics.functional.classification import multiclass_calibration_error

    logits, labels = cifar100["test_logits"], cifar100["test_labels"]
    got = metrics_of(logits, labels, kind="logits", keys=["ece", "mce"])
    probs = torch.softmax(torch.as_tensor(logits, dtype=torch.float64), dim=1)
    target = torch.as_tensor(labels)
    tm_ece = multiclass_calibration_error(probs, target, num_classes=100, n_bins=15, norm="l1").item()
    tm_mce = multiclass_calibration_error(probs, target, num_classes=100, n_bins=15, norm="max").item()
    # torchmetrics accumulates in float32: agreement to float32 precision
    assert got["ece"] == pytest.approx(tm_ece, abs=1e-5)
    assert got["mce"] == pytest.approx(tm_mce, abs=1e-5)


def test_against_netcal_top_label_ece(cifar100):
    needs("netcal")
    from netcal.metrics import ECE

    logits, labels = cifar100["test_logits"], cifar100["test_labels"]
    got = metrics_of(logits, labels, kind="logits", keys=["ece"])
    netcal_ece = ECE(bins=15).measure(ref.softmax(logits), labels)
    assert got["ece"] == pytest.approx(netcal_ece, abs=1e-9)


def test_against_sklearn_log_loss(cifar100):
    from sklearn.metrics import log_loss

    logits, labels = cifar100["test_logits"], cifar100["test_labels"]
    got = metrics_of(logits, labels, kind="logits", keys=["nll", "brier"])
    probs = np.exp(log_softmax(logits))
    assert got["nll"] == pytest.approx(log_loss(labels, probs, labels=range(100)), rel=1e-9)
    onehot = np.eye(100)[labels]
    assert got["brier"] == pytest.approx(np.mean(np.sum((probs - onehot) ** 2, axis=1)), rel=1e-12)


def test_calibration_perfect_model_has_small_cmce():
    # Labels drawn from the predicted distribution: CMCE and ECE must be near 0.
    rng = np.random.default_rng(4)
    probs = rng.dirichlet(np.ones(10), size=20000)
    labels = (probs.cumsum(1) > rng.random((20000, 1))).argmax(1)
    got = metrics_of(probs, labels)
    assert got["cmce"] < 0.01 and got["ece"] < 0.02
    assert got["coverage_0.9_0.92"] == pytest.approx(0.91, abs=0.02)


@pytest.mark.parametrize("source", ["cifar10_resnet110_test.npz", "cifar100_resnet110_test.npz", "news20_probs.npz", "synthetic"])
def test_smece_agrees_with_relplot(source):
    relplot = needs("relplot")
    from conftest import data_file

    if source == "synthetic":
        rng = np.random.default_rng(0)
        conf = rng.random(4000)
        labels_ok = rng.random(4000) < conf**2
        probs = np.stack([1 - conf, conf], 1)
        labels = np.where(labels_ok, 1, 0)
        # top-label view of a binary model is not conf itself when conf < 1/2: use the top-label
        conf, correct = probs.max(1), probs.argmax(1) == labels
        scores, kind = probs, "probs"
    else:
        data = np.load(data_file(source))
        kind = "logits" if "logits" in data.files else "probs"
        scores, labels = data[kind].astype(np.float64), data["labels"]
        probs = np.exp(log_softmax(scores)) if kind == "logits" else scores
        conf, correct = probs.max(1), probs.argmax(1) == labels
    got = metrics_of(scores, labels, kind=kind, keys=["smece"])["smece"]
    assert got == pytest.approx(relplot.smECE(conf, correct.astype(float)), abs=1e-3)


def test_ece_l2_by_hand_and_against_torchmetrics(cifar100):
    """ece_l2 = sqrt(sum_b (n_b/N)(f_b - y_b)^2). By hand: rows with confidence 0.5 (right) and 0.75
    (wrong) fall in two bins, sqrt(0.5 * 0.5^2 + 0.5 * 0.75^2); torchmetrics' norm="l2" on CIFAR-100."""
    probs = np.array([[0.5, 0.3, 0.2], [0.75, 0.1, 0.15]])
    assert metrics_of(probs, [0, 2], keys=["ece_l2"])["ece_l2"] == pytest.approx(np.sqrt(0.5 * 0.25 + 0.5 * 0.5625), rel=1e-14)
    one_bin = metrics_of(probs, [0, 2], keys=["ece_l2", "ece"], bins=1)  # one bin: |mean f - mean y| both ways
    assert one_bin["ece_l2"] == pytest.approx(one_bin["ece"], rel=1e-14)
    torch = needs("torch")
    needs("torchmetrics")
    from torchmetrics.functional.classification import multiclass_calibration_error

    logits, labels = cifar100["test_logits"], cifar100["test_labels"]
    got = metrics_of(logits, labels, kind="logits", keys=["ece_l2"])["ece_l2"]
    probs = torch.softmax(torch.as_tensor(logits, dtype=torch.float64), dim=1)
    theirs = multiclass_calibration_error(probs, torch.as_tensor(labels), num_classes=100, n_bins=15, norm="l2").item()
    assert got == pytest.approx(theirs, abs=1e-5)  # torchmetrics accumulates in float32


def test_rows_of_stated_answers_read_their_confidence_against_correctness():
    """A batch of answers (P(right), right): each row's answer is class 1 whatever its probability,
    so a confidence of 0.2 in a right answer is a confident-looking 0.2, not a 0.8 in "wrong"."""
    from calib.metrics.batch import Batch

    p = np.array([0.2, 0.9, 0.5, 0.0, 1.0])
    right = np.array([1, 0, 1, 0, 1])
    probs = np.stack([1 - p, p], axis=1)
    answers = Batch(right, probs=probs, answers=True)
    assert list(answers.confidence) == list(p)
    assert list(answers.correct) == [True, False, True, False, True]
    assert list(answers.take(np.array([4, 0])).confidence) == [1.0, 0.2]  # a part keeps the reading
    classifier = Batch(right, probs=probs)
    assert list(classifier.confidence) == [0.8, 0.9, 0.5, 1.0, 1.0]  # a binary classifier's top label
