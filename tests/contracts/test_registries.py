"""Contracts every registered metric and calibrator keeps (one test over the whole registry, so a
new entry is covered the day it is added)."""

import json

import numpy as np
import pytest
import reference as ref
from conftest import SAMPLE, method_param

from calib import CALIBRATORS, calibrator
from calib.core.numerics import log_softmax
from calib.io import predictions_from_arrays
from calib.metrics import FUNCTIONS, METRICS, MetricConfig
from calib.metrics.batch import model_batch
from calib.metrics.metric_set import MetricSet


@pytest.fixture(scope="module")
def sample():
    rng = np.random.default_rng(5)
    data = np.load(SAMPLE / "cifar10_test.npz")
    rows = rng.choice(len(data["labels"]), 3000, replace=False)
    logits, labels = data["logits"][rows].astype(np.float64), data["labels"][rows]
    truth = np.exp(log_softmax(logits / 1.3))  # a stand-in "true" distribution for the truth metrics
    return logits, labels, truth


def _metric_set(key, preds, slices):
    metric_set = MetricSet([key], MetricConfig(), preds.k)
    for rows in slices:
        metric_set.update(model_batch(preds, rows))
    return metric_set


@pytest.mark.parametrize("key", sorted(key for key, metric in METRICS.items() if metric.streamed))
def test_every_metric_is_chunk_and_merge_invariant_and_equals_its_function(sample, key):
    logits, labels, truth = sample
    if METRICS[key].binary:  # defined for K = 2: the first two classes' logits, labels mod 2
        logits, labels, truth = logits[:, :2], labels % 2, truth[:, :2] / truth[:, :2].sum(axis=1, keepdims=True)
    preds = predictions_from_arrays(logits, labels)
    preds.true_probs = truth
    whole = _metric_set(key, preds, [slice(0, 3000)]).results()[key]["value"]
    chunked = _metric_set(key, preds, [slice(0, 700), slice(700, 701), slice(701, 3000)]).results()[key]["value"]
    left, right = _metric_set(key, preds, [slice(0, 1234)]), _metric_set(key, preds, [slice(1234, 3000)])
    left.absorb(right.state())  # as merge-states adds one shard's state onto another's
    merged = left.results()[key]["value"]
    function = FUNCTIONS[key](logits, labels, **({"true_probs": truth} if METRICS[key].needs_truth else {}))
    assert whole is not None
    assert chunked == pytest.approx(whole, rel=1e-12, abs=1e-15)
    assert merged == pytest.approx(whole, rel=1e-12, abs=1e-15)
    assert function == pytest.approx(whole, rel=1e-12, abs=1e-15)
    if key in REFERENCE:  # the same number from a plain-Python definition (tests/reference.py)
        assert function == pytest.approx(REFERENCE[key](ref.softmax(logits), labels), rel=1e-9, abs=1e-12)


#: Plain-Python definitions of metrics (tests/reference.py), written apart from calib's code.
REFERENCE = {
    "ece": ref.ece,
    "mce": ref.mce,
    "cw_ece": ref.cw_ece,
    "cmce": ref.cmce,
    "nll": ref.nll,
    "brier": ref.brier,
    "brier_pos": ref.brier_pos,
    "ece_pos": ref.ece_pos,
    "coverage_0.9_0.92": lambda probs, labels: ref.coverage(probs, labels, 0.9, 0.92),
    "coverage_0.99_0.995": lambda probs, labels: ref.coverage(probs, labels, 0.99, 0.995),
}


#: Methods whose maps read the raw logits (not just the probability vector they define): fitted on
#: log-probabilities they are different maps, by design.
RAW_LOGIT_METHODS = {"platt", "quadratic", "adaptive-ts", "ats-aq", "ats-maq"}


@pytest.mark.parametrize("method", [method_param(m) for m in sorted(CALIBRATORS)])
def test_every_calibrator_keeps_its_contract(tmp_path, run, method):
    """Fit on logits = fit on log-probs (for maps of the probability vector); predict_proba equals
    the command line's apply; a saved bundle reloads to the same predictions."""
    data = np.load(SAMPLE / "cifar10_val.npz")
    logits, labels = data["logits"][:1500].astype(np.float64), data["labels"][:1500]
    new = np.load(SAMPLE / "cifar10_test.npz")["logits"][:400].astype(np.float64)
    fitted = calibrator(method).fit(logits, labels, seed=0)
    probs = fitted.predict_proba(new)
    assert probs.shape == (400, 10) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-9)
    if method not in RAW_LOGIT_METHODS:
        from_log_probs = calibrator(method).fit(log_softmax(logits), labels, seed=0, kind="logits")
        # L-BFGS stops the linear maps on a relative loss change of 1e-14, which pins their weights
        # to about sqrt(1e-14) = 1e-7: inputs an ulp apart can end that far apart
        tolerance = 1e-6 if method in ("dirichlet", "svs", "sms") else 1e-7
        np.testing.assert_allclose(from_log_probs.predict_proba(log_softmax(new), kind="logits"), probs, atol=tolerance)
    fitted.save(str(tmp_path / "b"))
    np.save(tmp_path / "new.npy", new)
    code, _, err = run("apply", tmp_path / "b", tmp_path / "new.npy", "--out", tmp_path / "out.npy")
    assert code == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), probs)
    reloaded = __import__("calib").load(str(tmp_path / "b"))
    np.testing.assert_array_equal(reloaded.predict_proba(new), probs)
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["method"] == method and manifest["n_classes"] == 10


def _every_writable_suffix():
    from calib.io.formats import FORMATS

    return [suffix for fmt in FORMATS if fmt.writable and fmt.holds_predictions for suffix in fmt.suffixes]


@pytest.mark.parametrize("suffix", _every_writable_suffix())
def test_every_format_round_trips_from_a_file_stdin_and_a_directory_of_shards(tmp_path, monkeypatch, suffix):
    """Every registered format: what calib writes it reads back bit for bit (scores, and labels
    where the format holds them), from the file, from stdin (told by its bytes), and as a directory
    of two shards where the format shards; a format whose reader or writer raises fails here."""
    import io
    import sys

    from calib.io.formats import shard_formats
    from calib.io.readers import read_predictions
    from calib.io.writers import write_matrix

    rng = np.random.default_rng(5)
    logits = rng.normal(size=(40, 4)) * 3.0
    labels = rng.integers(0, 4, 40)
    path = str(tmp_path / f"p{suffix}")
    write_matrix(path, logits, "logits", labels=labels)
    labels_path = None
    if suffix == ".npy":  # the matrix alone: its labels beside it
        labels_path = str(tmp_path / "labels.npy")
        np.save(labels_path, labels)
    read = read_predictions(path, labels_path=labels_path)
    np.testing.assert_array_equal(read.all_logits(), logits)
    np.testing.assert_array_equal(read.labels, labels)
    data = open(path, "rb").read()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    streamed = read_predictions("-", labels_path=labels_path)
    np.testing.assert_array_equal(streamed.all_logits(), logits)
    np.testing.assert_array_equal(streamed.labels, labels)
    assert streamed.sha256 == read.sha256
    if any(suffix in fmt.suffixes for fmt in shard_formats()):
        import calib

        folder = tmp_path / "shards"
        folder.mkdir()
        for part, rows in enumerate((slice(0, 25), slice(25, 40))):
            write_matrix(str(folder / f"{part}{suffix}"), logits[rows], "logits", labels=labels[rows])
        from calib.shards import evaluate_shards

        merged = evaluate_shards(str(folder), calib.EvaluationRequest(metrics=("accuracy", "nll")))
        whole = calib.evaluate(logits, labels, metrics=["accuracy", "nll"]).values
        assert merged.metrics["accuracy"].value == whole["accuracy"]
        assert merged.metrics["nll"].value == pytest.approx(whole["nll"], abs=1e-12)
