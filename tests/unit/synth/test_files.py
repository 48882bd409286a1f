"""The synthetic datasets written to files (calib.synth.files)."""

import json

import numpy as np
import pytest

from calib.errors import CalibError
from calib.synth.files import DEFAULTS, Synthesis, synthesize, truth_path


def test_a_setting_left_unset_takes_its_kinds_default():
    assert Synthesis("large-k").classes == 1000 and Synthesis("known-ce").classes == 10
    assert Synthesis("known-ce", classes=4).classes == 4 and Synthesis("known-ce").labels is None
    assert Synthesis.default("multilabel", "correlation") == DEFAULTS["multilabel"]["correlation"]
    with pytest.raises(CalibError, match="unknown synthetic dataset"):
        Synthesis("gaussian")


def test_known_ce_writes_the_rows_and_their_exact_errors_and_the_same_bytes_for_a_seed(tmp_path):
    out = str(tmp_path / "k.npz")
    shown = synthesize(Synthesis("known-ce", seed=3, classes=4, n=500), out)
    with np.load(out) as data:
        assert data["probs"].shape == (500, 4) and data["true_probs"].shape == (500, 4)
    truth = json.loads(open(truth_path(out)).read())
    assert truth["true_errors"]["l1"] == pytest.approx(shown["true l1"]) and truth["seed"] == 3
    first = open(out, "rb").read()
    synthesize(Synthesis("known-ce", seed=3, classes=4, n=500), out)
    assert open(out, "rb").read() == first


@pytest.mark.parametrize("setting, message", [({"temperature": 0.0}, "temperature must be > 0"), ({}, "writes a .npz file")])
def test_known_ce_refuses_before_drawing(tmp_path, setting, message):
    out = str(tmp_path / ("k.npz" if setting else "k.parquet"))
    with pytest.raises(CalibError, match=message):
        synthesize(Synthesis("known-ce", **setting), out)


def test_large_k_shows_the_accuracy_of_its_rows(tmp_path):
    out = str(tmp_path / "big.npz")
    shown = synthesize(Synthesis("large-k", classes=20, n=400), out)
    with np.load(out) as data:
        accuracy = float(np.mean(data["logits"].argmax(1) == data["labels"]))
    assert shown["accuracy"] == accuracy and json.loads(open(truth_path(out)).read())["accuracy"] == accuracy


def test_multilabel_writes_both_splits_and_its_record(tmp_path):
    shown = synthesize(Synthesis("multilabel", labels=3, n_cal=50, n_test=40), str(tmp_path / "ml"))
    meta = json.loads((tmp_path / "ml" / "meta.json").read_text())
    assert shown["rows (cal / test)"] == "50 / 40" and len(meta["true_l1_errors_test"]) == 3
    with np.load(tmp_path / "ml" / "test.npz") as data:
        assert data["labels"].shape == (40, 3)
