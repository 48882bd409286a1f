"""The calibration errors of other tools and papers, each under its own key (calib.metrics.conventions),
against the reference code's own formula on shared vectors: the adaptive RMS calibration error of
Hendrycks et al. and Humanity's Last Exam (whose reference skips its last bin), torchmetrics' bin of
its own for a confidence of exactly 1.0, and scikit-learn's quantile calibration curve."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SAMPLE, needs

import calib


def reference_calib_err(confidence, correct, p="2", beta=100):
    """The reference code's calib_err (Hendrycks et al., outlier-exposure utils/calibration_tools.py,
    as Humanity's Last Exam's judge script calls it), its logic unchanged: note the loop over
    range(len(bins) - 1)."""
    idxs = np.argsort(confidence)
    confidence = confidence[idxs]
    correct = correct[idxs]
    bins = [[i * beta, (i + 1) * beta] for i in range(len(confidence) // beta)]
    bins[-1] = [bins[-1][0], len(confidence)]
    cerr = 0
    total_examples = len(confidence)
    for i in range(len(bins) - 1):
        bin_confidence = confidence[bins[i][0] : bins[i][1]]
        bin_correct = correct[bins[i][0] : bins[i][1]]
        num_examples_in_bin = len(bin_confidence)
        if num_examples_in_bin > 0:
            difference = np.abs(np.nanmean(bin_confidence) - np.nanmean(bin_correct))
            if p == "2":
                cerr += num_examples_in_bin / total_examples * np.square(difference)
    if p == "2":
        cerr = np.sqrt(cerr)
    return cerr


def all_bins_calib_err(confidence, correct, beta=100):
    """The same formula over every bin (the loop the reference meant), written independently."""
    order = np.argsort(confidence)
    confidence, correct = confidence[order], correct[order]
    n = len(confidence)
    starts = list(range(0, max(n // beta, 1) * beta, beta))
    stops = starts[1:] + [n]
    return np.sqrt(sum((b - a) / n * (confidence[a:b].mean() - correct[a:b].mean()) ** 2 for a, b in zip(starts, stops)))


def _top_label(logits, labels):
    from scipy.special import softmax

    probs = softmax(logits.astype(np.float64), axis=1)
    return probs, probs.max(axis=1), (probs.argmax(axis=1) == labels).astype(np.float64)


@pytest.mark.parametrize("n", [200, 250, 399, 1000, 10000])
def test_rms_ce_and_the_reference_with_its_skipped_bin(n):
    data = np.load(SAMPLE / "cifar10_test.npz")
    probs, confidence, correct = _top_label(data["logits"][:n], data["labels"][:n])
    values = calib.evaluate(probs, data["labels"][:n], metrics=["rms_ce", "rms_ce_hle"], kind="probs").values
    assert values["rms_ce_hle"] == pytest.approx(reference_calib_err(confidence, correct), abs=1e-12)
    assert values["rms_ce"] == pytest.approx(all_bins_calib_err(confidence, correct), abs=1e-12)


def test_the_adaptive_bins_on_their_edges():
    from calib.metrics.conventions import adaptive_bins

    assert adaptive_bins(99) == [(0, 99)]  # fewer than 100 rows: one bin
    assert adaptive_bins(100) == [(0, 100)]
    assert adaptive_bins(199) == [(0, 199)]  # the last bin holds the rest
    assert adaptive_bins(200) == [(0, 100), (100, 200)]
    assert adaptive_bins(299) == [(0, 100), (100, 299)]


def test_under_200_rows_the_reference_reports_0_and_rms_ce_does_not():
    """With one bin the reference's loop runs no time: 0 for any model, which rms_ce_hle
    reproduces (its settings say why) and rms_ce does not."""
    confidence = np.full(150, 0.9)
    correct = np.r_[np.ones(75), np.zeros(75)]
    probs = np.column_stack([1 - confidence, confidence])
    report = calib.evaluate(probs, correct.astype(int), metrics=["rms_ce", "rms_ce_hle"], kind="probs")
    assert report.values["rms_ce_hle"] == 0.0 == reference_calib_err(confidence, correct)
    assert report.values["rms_ce"] == pytest.approx(0.4, abs=1e-15)  # |0.9 - 0.5|, one bin
    settings = report.to_dict()["metrics"]["rms_ce_hle"]["settings"]
    assert "last bin skipped" in settings["scheme"]


def test_a_binary_input_is_binned_on_p1_against_y():
    """A confidence-and-correctness input (K = 2): the adaptive bins take P(class 1) against y = 1,
    as the reference takes a stated confidence against correctness, below 0.5 as well."""
    rng = np.random.default_rng(3)
    p1 = rng.uniform(0, 1, 500)
    y = (rng.uniform(size=500) < p1**1.3).astype(int)
    values = calib.evaluate(np.column_stack([1 - p1, p1]), y, metrics=["rms_ce", "rms_ce_hle"], kind="probs").values
    assert values["rms_ce_hle"] == pytest.approx(reference_calib_err(p1, y.astype(float)), abs=1e-12)
    assert values["rms_ce"] == pytest.approx(all_bins_calib_err(p1, y.astype(float)), abs=1e-12)


def extra_bin_reference(confidence, correct, n_bins):
    """torchmetrics' _binning_bucketize and _ce_compute (norm l1), summed in float64 on its float32 values:
    bucketize(conf, edges, right=True) - 1 over B + 1 counters, the edges torch.linspace's float32
    ones (here from torch itself)."""
    torch = needs("torch")
    boundaries = torch.linspace(0, 1, n_bins + 1, dtype=torch.float32).numpy()
    stored = np.asarray(confidence, dtype=np.float32)
    indices = np.searchsorted(boundaries, stored, side="right") - 1
    count = np.bincount(indices, minlength=n_bins + 1).astype(float)
    conf = np.bincount(indices, weights=stored.astype(float), minlength=n_bins + 1)
    acc = np.bincount(indices, weights=correct, minlength=n_bins + 1)
    keep = count > 0
    return np.sum(np.abs(acc[keep] / count[keep] - conf[keep] / count[keep]) * count[keep] / count.sum())


def test_ece_extra_bin_puts_a_confidence_of_1_in_a_bin_of_its_own():
    """Rows at exactly 1.0 (half right) and at 0.95 (all right): in one top bin |mean - acc| mixes
    them; in torchmetrics' layout each is its own bin. By hand: 0.5 |1 - 0.5| + 0.5 |0.95 - 1|
    (0.95 as float32 is 0.949999988)."""
    probs = np.array([[1.0, 0.0]] * 4 + [[0.95, 0.05]] * 4)
    labels = np.array([0, 0, 1, 1, 0, 0, 0, 0])
    values = calib.evaluate(
        probs, labels, kind="probs", request=calib.EvaluationRequest.of(metrics=["ece", "ece_extra_bin"], bins=10)
    ).values
    assert values["ece_extra_bin"] == pytest.approx(0.5 * 0.5 + 0.5 * (1 - float(np.float32(0.95))), abs=1e-15)
    assert values["ece"] == pytest.approx(abs(0.975 - 0.75), abs=1e-15)


def test_ece_extra_bin_by_hand_a_confidence_on_an_edge_goes_up_as_in_torchmetrics():
    """P = [[0.3, 0.7], [0.75, 0.25]], y = [1, 1]: confidences 0.7 (right) and 0.75 (wrong). As
    float32, 0.7 is 0.699999988 and so is torch's edge 7 of 10: bucketize puts it in bin 7 beside
    0.75, |0.5 - 0.725| = 0.225 (torchmetrics' number; float64 edges gave 0.525)."""
    probs, labels = np.array([[0.3, 0.7], [0.75, 0.25]]), np.array([1, 1])
    value = calib.evaluate(
        probs, labels, kind="probs", request=calib.EvaluationRequest.of(metrics=["ece_extra_bin"], bins=10)
    ).values["ece_extra_bin"]
    assert value == pytest.approx(abs(0.5 - (float(np.float32(0.7)) + float(np.float32(0.75))) / 2), abs=1e-7)  # float32 means
    assert value == pytest.approx(0.225, abs=1e-7)


def test_the_float32_edges_are_torchs_for_every_bin_count():
    from calib.metrics.conventions import torch_float32_edges

    torch = needs("torch")
    for bins in range(1, 301):
        np.testing.assert_array_equal(torch_float32_edges(bins), torch.linspace(0, 1, bins + 1, dtype=torch.float32).numpy())


@pytest.mark.parametrize("k", [2, 10])
@pytest.mark.parametrize("grid", [True, False])
@pytest.mark.parametrize("bins", [10, 15])
def test_ece_extra_bin_equals_torchmetrics_on_stated_and_continuous_confidences(k, grid, bins):
    """Confidences that are whole percents or multiples of 0.05 (an LLM judge's) land on edges;
    continuous ones (a softmax's) do not: both equal torchmetrics' multiclass ECE to 1e-6."""
    torchmetrics = needs("torchmetrics.functional.classification")
    torch = needs("torch")
    rng = np.random.default_rng(bins + k)
    probs = rng.dirichlet(np.full(k, 0.3), size=3000)
    if grid:  # the top class's probability a multiple of 0.05 (or a whole percent), the rest spread evenly
        top = np.round(probs.max(axis=1) / (0.05 if bins == 10 else 0.01)) * (0.05 if bins == 10 else 0.01)
        top = np.clip(top, 1.0 / k + 0.01, 1.0)
        probs = np.tile(((1 - top) / (k - 1))[:, None], (1, k))
        probs[np.arange(3000), rng.integers(0, k, 3000)] = top
    labels = rng.integers(0, k, 3000)
    value = calib.evaluate(
        probs, labels, kind="probs", request=calib.EvaluationRequest.of(metrics=["ece_extra_bin"], bins=bins)
    ).values["ece_extra_bin"]
    confidence, correct = probs.max(axis=1), (probs.argmax(axis=1) == labels).astype(float)
    # the bins' float32 sums (torchmetrics') against exact ones: float32 rounding, a few 1e-6 at 3,000 rows
    assert value == pytest.approx(extra_bin_reference(confidence, correct, bins), abs=1e-5)
    theirs = torchmetrics.multiclass_calibration_error(
        torch.tensor(probs), torch.tensor(labels), num_classes=k, n_bins=bins, norm="l1"
    )
    assert value == pytest.approx(float(theirs), abs=1e-7)


@pytest.mark.parametrize("bins", [10, 15])
def test_ece_extra_bin_equals_the_formula_and_torchmetrics(bins):
    data = np.load(SAMPLE / "cifar10_test.npz")
    probs, _, _ = _top_label(data["logits"][:3000], data["labels"][:3000])
    probs[:40] = np.eye(10)[probs[:40].argmax(axis=1)]  # near-certain rows, exactly 1.0
    confidence, correct = probs.max(axis=1), (probs.argmax(axis=1) == data["labels"][:3000]).astype(float)
    value = calib.evaluate(
        probs, data["labels"][:3000], kind="probs", request=calib.EvaluationRequest.of(metrics=["ece_extra_bin"], bins=bins)
    ).values["ece_extra_bin"]
    assert value == pytest.approx(extra_bin_reference(confidence, correct, bins), abs=1e-5)
    torchmetrics = needs("torchmetrics.functional.classification")
    torch = needs("torch")
    theirs = torchmetrics.multiclass_calibration_error(
        torch.tensor(probs, dtype=torch.float64), torch.tensor(data["labels"][:3000]), num_classes=10, n_bins=bins, norm="l1"
    )
    assert value == pytest.approx(float(theirs), abs=1e-7)  # both sum in float32


def test_ece_pos_quantile_equals_scikit_learn_calibration_curve():
    """The quantile strategy's bins, each weighted by its rows, on scores with ties on the edges
    (multiples of 1/20): scikit-learn's own curve and counts."""
    calibration_curve = needs("sklearn.calibration").calibration_curve

    rng = np.random.default_rng(7)
    p1 = np.round(rng.uniform(0, 1, 2000) * 20) / 20
    y = (rng.uniform(size=2000) < p1).astype(int)
    for bins in (5, 10, 15):
        prob_true, prob_pred = calibration_curve(y, p1, n_bins=bins, strategy="quantile")
        edges = np.percentile(p1, np.linspace(0, 1, bins + 1) * 100)
        counts = np.bincount(np.searchsorted(edges[1:-1], p1), minlength=bins)
        counts = counts[counts > 0]
        theirs = np.sum(counts / counts.sum() * np.abs(prob_true - prob_pred))
        ours = calib.evaluate(
            np.column_stack([1 - p1, p1]),
            y,
            kind="probs",
            request=calib.EvaluationRequest.of(metrics=["ece_pos_quantile"], bins=bins),
        )
        assert ours.values["ece_pos_quantile"] == pytest.approx(theirs, abs=1e-12)


def test_the_keys_are_listed_with_their_reference(run):
    code, out, _ = run("methods")
    assert code == 0
    for key in ("rms_ce", "rms_ce_hle", "ece_extra_bin", "ece_pos_quantile"):
        assert key in out


def test_ece_pos_quantile_on_continuous_scores():
    calibration_curve = needs("sklearn.calibration").calibration_curve
    rng = np.random.default_rng(11)
    p1 = rng.beta(2, 5, 3001)
    y = (rng.uniform(size=3001) < p1**0.8).astype(int)
    prob_true, prob_pred = calibration_curve(y, p1, n_bins=10, strategy="quantile")
    counts = np.bincount(np.searchsorted(np.percentile(p1, np.linspace(0, 1, 11) * 100)[1:-1], p1), minlength=10)
    theirs = np.sum(counts[counts > 0] / len(p1) * np.abs(prob_true - prob_pred))
    ours = calib.evaluate(
        np.column_stack([1 - p1, p1]), y, kind="probs", request=calib.EvaluationRequest.of(metrics=["ece_pos_quantile"], bins=10)
    )
    assert ours.values["ece_pos_quantile"] == pytest.approx(theirs, abs=1e-12)


# HELM's calibration numbers against the package its compute_calibration_metrics calls -------------

HELM_KEYS = ["helm_ece_10", "helm_ece_1", "helm_platt_ece_10", "helm_selective_acc_10", "helm_selective_area"]


def helm_reference(probs, labels) -> dict:
    """HELM's compute_calibration_metrics (crfm-helm 0.5.16, helm/benchmark/metrics/basic_metrics.py)
    on each row's max_prob and 0/1 correctness, with uncertainty-calibration's own functions."""
    cal = pytest.importorskip("calibration")
    max_probs = list(probs.max(axis=1))
    correct = [int(c) for c in probs.argmax(axis=1) == labels]
    area, acc_10 = cal.get_selective_stats(max_probs, correct)
    values = {
        "helm_ece_10": cal.get_ece_em(max_probs, correct, num_bins=10),
        "helm_ece_1": cal.get_ece(max_probs, correct, num_bins=1),
        "helm_selective_acc_10": acc_10,
        "helm_selective_area": area,
        "helm_platt_ece_10": 0.0,
    }
    if 0 < sum(correct) < len(correct):
        scaler = cal.get_platt_scaler(np.array(max_probs), np.array(correct))
        values["helm_platt_ece_10"] = cal.get_ece_em(scaler(np.array(max_probs)), correct, num_bins=10)
    return values


@pytest.mark.parametrize(
    "n, k, decimals",
    [(997, 4, None), (1000, 4, 2), (300, 10, 1), (7, 3, None), (50, 2, 1)],  # ties from rounded scores; fewer rows than bins
)
def test_helm_numbers_equal_uncertainty_calibrations(n, k, decimals):
    rng = np.random.default_rng(n + k)
    logits = rng.normal(size=(n, k)) * 2
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    if decimals is not None:  # stated confidences: many rows share one value
        probs = np.round(probs, decimals)
        probs[:, -1] = 1.0 - probs[:, :-1].sum(axis=1)
        probs = np.clip(probs, 0.0, 1.0)
        probs /= probs.sum(axis=1, keepdims=True)
    labels = rng.integers(0, k, n)
    found = calib.evaluate(probs, labels, kind="probs", metrics=HELM_KEYS).values
    expected = helm_reference(probs, labels)
    for key in HELM_KEYS:
        assert found[key] == pytest.approx(expected[key], abs=1e-12), key


def test_helm_equal_mass_bins_put_a_value_on_an_edge_in_the_bin_below():
    """Four confidences in 2 parts: [0.2, 0.4] and [0.6, 0.8], the edge halfway, 0.5; nothing lies on
    it. With [0.2, 0.5] and [0.5, 0.8] the edge is 0.5 and both 0.5s go below: bins {0.2, 0.5, 0.5}
    and {0.8}."""
    from calib.metrics.conventions import helm_ece, helm_equal_mass_edges

    assert helm_equal_mass_edges(np.array([0.2, 0.4, 0.6, 0.8]), 2).tolist() == [0.5, 1.0]
    confidence, correct = np.array([0.2, 0.5, 0.5, 0.8]), np.array([0.0, 1.0, 1.0, 1.0])
    assert helm_equal_mass_edges(confidence, 2).tolist() == [0.5, 1.0]
    # bin 1: mean conf 0.4, accuracy 2/3; bin 2: 0.8 against 1
    assert helm_ece(confidence, correct, 2) == pytest.approx(0.75 * abs(0.4 - 2 / 3) + 0.25 * 0.2, abs=1e-15)
    cal = pytest.importorskip("calibration")
    assert helm_ece(confidence, correct, 2) == pytest.approx(
        cal.get_ece_em(list(confidence), [0, 1, 1, 1], num_bins=2), abs=1e-15
    )


def test_helm_selective_accuracy_keeps_one_row_more_than_a_tenth():
    """floor(0.1 n) + 1 rows: of 20 rows, the 3 most confident (calib's selective_accuracy_0.1 keeps 2)."""
    confidence = np.linspace(0.99, 0.5, 20)
    probs = np.stack([confidence, 1 - confidence], axis=1)
    labels = np.zeros(20, dtype=int)
    labels[2] = 1  # the third most confident row is wrong
    values = calib.evaluate(probs, labels, kind="probs", metrics=["helm_selective_acc_10", "selective_accuracy_0.1"]).values
    assert values["helm_selective_acc_10"] == pytest.approx(2 / 3, abs=1e-15)
    assert values["selective_accuracy_0.1"] == 1.0


def test_helm_platt_ece_is_zero_when_every_row_is_right_as_helm_sets_it():
    probs = np.array([[0.9, 0.1], [0.7, 0.3], [0.6, 0.4]])
    assert (
        calib.evaluate(probs, np.zeros(3, dtype=int), kind="probs", metrics=["helm_platt_ece_10"]).values["helm_platt_ece_10"]
        == 0.0
    )
