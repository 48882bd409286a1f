"""Binary models: the positive-class metrics users compare with scikit-learn and torchmetrics
(brier_pos, ece_pos, nll as log loss) beside the top-label ones, by hand and against the peers."""

import numpy as np
import pytest
from conftest import needs


def _binary(n=4000, seed=0):
    """P(y = 1) of an overconfident model (no p exactly 0 or 1) and labels drawn from a softer truth."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n) * 2.0
    p = 1.0 / (1.0 + np.exp(-z))
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-0.7 * z))).astype(np.int64)
    return p, y


def test_brier_pos_and_nll_equal_scikit_learn():
    sklearn_metrics = needs("sklearn.metrics")
    import calib

    p, y = _binary()
    values = calib.evaluate(p, y).values
    assert values["brier_pos"] == pytest.approx(sklearn_metrics.brier_score_loss(y, p), rel=1e-12)
    assert values["nll"] == pytest.approx(sklearn_metrics.log_loss(y, p), rel=1e-12)
    assert values["brier"] == pytest.approx(2.0 * values["brier_pos"], rel=1e-12)  # the two-class sum


def test_ece_pos_equals_torchmetrics_binary_calibration_error():
    torch = needs("torch")
    needs("torchmetrics")
    from torchmetrics.functional.classification import binary_calibration_error

    import calib

    for seed in range(3):
        p, y = _binary(seed=seed)
        for bins in (10, 15):
            expected = float(binary_calibration_error(torch.tensor(p), torch.tensor(y), n_bins=bins))
            assert calib.metrics.ece_pos(p, y, bins=bins) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_ece_pos_equals_scikit_learn_calibration_curve():
    """calibration_curve's uniform bins (inner edges, searchsorted right: [l, u), 1.0 in the last)
    weighted by their counts give ece_pos, 1.0 included."""
    calibration = needs("sklearn.calibration")
    import calib

    p, y = _binary(seed=4)
    p[:20] = 1.0
    p[20:40] = 0.0
    prob_true, prob_pred = calibration.calibration_curve(y, p, n_bins=15, strategy="uniform")
    edges = np.linspace(0.0, 1.0, 16)
    counts = np.bincount(np.searchsorted(edges[1:-1], p, side="right"), minlength=15)
    weights = counts[counts > 0] / len(p)
    expected = float(np.sum(weights * np.abs(prob_true - prob_pred)))
    assert calib.metrics.ece_pos(p, y) == pytest.approx(expected, rel=1e-12)


def test_values_on_interior_edges_are_where_the_peers_edges_put_them_apart():
    """The worked example of docs/metrics.md ("Which ECE is this"): p = 0.3, 0.3, 0.25, 0.25 with
    labels 1, 1, 0, 0 and 10 bins. calib: 0.3 on the edge 3/10 is in bin 3, so ECE = 0.5 |1 - 0.3| +
    0.5 |0 - 0.25| = 0.475. scikit-learn's edges are np.linspace(0, 1, 11), whose fourth is
    0.30000000000000004 (as are the 7th and 8th: 0.6000000000000001, 0.7000000000000001); torchmetrics'
    are float32 (0.30000001192092896): both put 0.3 in bin 2 with 0.25, mean p 0.275, mean y 0.5,
    ECE 0.225. With the edges as the exact fractions j / 10 scikit-learn's count-weighted curve gives
    calib's number."""
    calibration = needs("sklearn.calibration")
    import calib

    p, y = np.array([0.3, 0.3, 0.25, 0.25]), np.array([1, 1, 0, 0])
    assert calib.metrics.ece_pos(p, y, bins=10) == pytest.approx(0.475, abs=1e-15)
    prob_true, prob_pred = calibration.calibration_curve(y, p, n_bins=10, strategy="uniform")
    assert list(prob_true) == [0.5] and float(np.abs(prob_true - prob_pred)[0]) == pytest.approx(0.225, abs=1e-15)
    assert [j for j in range(1, 10) if np.linspace(0, 1, 11)[j] != j / 10] == [3, 6, 7]
    exact_edges = np.arange(1, 10) / 10
    bins = np.searchsorted(exact_edges, p, side="right")
    by_bin = [(bins == b).mean() * abs(y[bins == b].mean() - p[bins == b].mean()) for b in np.unique(bins)]
    assert float(np.sum(by_bin)) == pytest.approx(calib.metrics.ece_pos(p, y, bins=10), abs=1e-15)


def test_values_on_interior_edges_against_torchmetrics():
    torch = needs("torch")
    needs("torchmetrics")
    from torchmetrics.functional.classification import binary_calibration_error

    p, y = np.array([0.3, 0.3, 0.25, 0.25]), np.array([1, 1, 0, 0])
    assert float(binary_calibration_error(torch.tensor(p), torch.tensor(y), n_bins=10)) == pytest.approx(0.225, abs=1e-7)
    assert float(torch.linspace(0, 1, 11)[3]) == 0.30000001192092896


def test_ece_pos_by_hand_on_bin_edges():
    """p on the edges j / 15 falls in bin j (bins [l, u), the last one closed): two rows per edge,
    computed from the definition."""
    import calib

    edges = np.arange(16) / 15.0
    p = np.repeat(edges, 2)
    y = np.tile([1, 0], 16)
    y[-2:] = 1  # both rows at 1.0 positive
    bins = np.minimum(np.arange(16), 14).repeat(2)  # 1.0 joins bin 14 with 14/15
    expected = 0.0
    for b in range(15):
        rows = bins == b
        expected += rows.sum() / len(p) * abs(p[rows].mean() - y[rows].mean())
    assert calib.metrics.ece_pos(p, y) == pytest.approx(expected, rel=1e-12)


def test_binary_table_reports_both_conventions_with_their_settings():
    import calib

    p, y = _binary(n=500)
    report = calib.evaluate(p, y).to_dict()["metrics"]
    assert report["brier_pos"]["settings"]["as"] == "scikit-learn brier_score_loss"
    assert report["ece_pos"]["settings"]["as"] == "torchmetrics BinaryCalibrationError"
    assert report["ece"]["settings"]["label"] == "top" and report["ece_pos"]["settings"]["label"] == "class 1"
    # the same model as two columns (P(y = 0), P(y = 1)) gives the same numbers
    two = calib.evaluate(np.column_stack([1.0 - p, p]), y).values
    assert two["brier_pos"] == pytest.approx(report["brier_pos"]["value"], rel=1e-12)
    assert two["ece_pos"] == pytest.approx(report["ece_pos"]["value"], rel=1e-12)


def test_positive_class_keys_refuse_a_multiclass_input(run, tmp_path):
    import calib

    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(200, 3)), rng.integers(0, 3, 200)
    assert "brier_pos" not in calib.evaluate(logits, labels).values
    with pytest.raises(ValueError, match=r"binary models \(K = 2\), on the positive class; this input has K = 3"):
        calib.evaluate(logits, labels, metrics=["ece_pos"])
    np.savez(tmp_path / "multi.npz", logits=logits, labels=labels)
    code, _, err = run("evaluate", tmp_path / "multi.npz", "--no-vece", "--fail-if", "brier_pos>0.1")
    assert code == 2 and "K = 3" in err and err.count("error:") == 1


def test_binary_platt_and_isotonic_are_the_binary_maps_of_scikit_learn():
    """A binary model's one-vs-rest calibrators map P(y = 1) alone, P(y = 0) its complement: Platt
    is the logistic regression of y on the logit, isotonic the isotonic regression of y on p_1
    (scikit-learn's, nearly unpenalised and clipped to [0, 1])."""
    linear_model = needs("sklearn.linear_model")
    isotonic = needs("sklearn.isotonic")
    import calib

    p, y = _binary(n=3000, seed=7)
    z = np.log(p / (1.0 - p))
    platt = calib.calibrator("platt").fit(z, y).predict_proba(z)
    reference = linear_model.LogisticRegression(C=1e10, tol=1e-12, max_iter=10_000).fit(z[:, None], y)
    assert platt[:, 1] == pytest.approx(reference.predict_proba(z[:, None])[:, 1], abs=1e-5)
    assert platt.sum(axis=1) == pytest.approx(1.0, abs=1e-15)
    fitted = calib.calibrator("isotonic").fit(p, y).predict_proba(p)
    expected = isotonic.IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(p, y).predict(p)
    assert fitted[:, 1] == pytest.approx(expected, abs=1e-12)
