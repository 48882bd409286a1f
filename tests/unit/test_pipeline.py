"""A bundle and an input of different kinds: applied where the method reads logits only through their
softmax (the same numbers), refused with a way out that reads the file correctly otherwise; never
a hint that leads to a wrong reading."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SAMPLE

import calib
from calib.core.numerics import softmax
from calib.registry import CALIBRATORS


@pytest.fixture(scope="module")
def sample():
    val, test = np.load(SAMPLE / "cifar10_val.npz"), np.load(SAMPLE / "cifar10_test.npz")
    return val["logits"].astype(np.float64), val["labels"], test["logits"].astype(np.float64), test["labels"]


@pytest.fixture
def files(tmp_path, sample):
    """The sample's validation logits, and its test rows as probabilities named probs."""
    val_logits, val_labels, test_logits, test_labels = sample
    np.savez(tmp_path / "val.npz", logits=val_logits, labels=val_labels)
    np.savez(tmp_path / "test_probs.npz", probs=softmax(test_logits), labels=test_labels)
    np.savez(tmp_path / "test_logits.npz", logits=test_logits, labels=test_labels)
    return tmp_path


def test_probabilities_declared_logits_are_refused(run, files):
    """The reproducer: following the old hint (--input-kind logits) on an array named probs gave
    rows like 0.088/0.207 and an ECE of 0.72 with exit 0; now one line, exit 2, pointing the other way."""
    code, _, err = run("fit", files / "val.npz", "--method", "ts", "--out", files / "ts")
    assert code == 0
    code, out, err = run("apply", files / "ts", files / "test_probs.npz", "--out", files / "x.npz", "--input-kind", "logits")
    assert code == 2 and not (files / "x.npz").exists()
    assert "named probs and are probabilities" in err and "declared logits" in err and "drop --input-kind logits" in err
    assert len(err.strip().splitlines()) == 1


def test_a_logits_bundle_applies_to_probabilities_through_log_p(run, files):
    """ts fitted on logits, applied to the same rows as probabilities: the same calibrated
    probabilities (to the rounding of log p) and the same metrics, the kind line saying how."""
    run("fit", files / "val.npz", "--method", "ts", "--out", files / "ts")
    code, out, err = run("apply", files / "ts", files / "test_probs.npz", "--out", files / "from_probs.npz")
    assert code == 0 and "applies through log p" in out + err
    code, _, _ = run("apply", files / "ts", files / "test_logits.npz", "--out", files / "from_logits.npz")
    assert code == 0
    np.testing.assert_allclose(
        np.load(files / "from_probs.npz")["probs"], np.load(files / "from_logits.npz")["probs"], atol=1e-12
    )


@pytest.mark.parametrize("method", sorted(m for m, c in CALIBRATORS.items() if not c.requires))
def test_every_softmax_only_method_gives_the_same_probabilities_from_log_p(method, sample):
    """The rule behind the previous test, method by method: where softmax_only() holds, the fitted
    map gives the same probabilities for logits z and for probabilities softmax(z) (through log p);
    where it does not (maps of the raw logits), applying to probabilities is refused."""
    val_logits, val_labels, test_logits, _ = sample
    fitted = calib.calibrator(method).fit(val_logits[:2000], val_labels[:2000])
    rows = test_logits[:300]
    if fitted.fitted.softmax_only():
        from_probs = fitted.predict_proba(softmax(rows), kind="probs")
        np.testing.assert_allclose(from_probs, fitted.predict_proba(rows), atol=1e-9)
    else:
        with pytest.raises(ValueError, match="reads the logits themselves"):
            fitted.predict_proba(softmax(rows), kind="probs")


def test_a_raw_logit_method_is_refused_on_probabilities_with_a_correct_way_out(run, files):
    run("fit", files / "val.npz", "--method", "platt", "--out", files / "platt")
    code, _, err = run("apply", files / "platt", files / "test_probs.npz", "--out", files / "x.npz")
    assert code == 2 and "fit it on probs to apply it here" in err and "--input-kind" not in err


def test_log_probabilities_for_a_raw_logit_method_suggest_declaring_them_logits(files, sample):
    """Log-probabilities are logits of the same probabilities: declaring them so is a correct
    reading, and the only hint given for a kind mismatch that names --input-kind."""
    val_logits, val_labels, test_logits, _ = sample
    fitted = calib.calibrator("platt").fit(val_logits, val_labels)
    log_probs = test_logits - np.log(np.exp(test_logits).sum(axis=1, keepdims=True))
    with pytest.raises(ValueError, match="declare them so"):
        fitted.predict_proba(log_probs, kind="log-probs")
    np.testing.assert_allclose(fitted.predict_proba(log_probs, kind="logits").sum(axis=1), 1.0)
