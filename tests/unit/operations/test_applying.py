"""Applying a bundle to a source and writing the output (calib.operations.applying)."""

import io

import numpy as np
import pytest

import calib
from calib.errors import CalibError
from calib.operations import Source, apply_source


def test_the_written_probabilities_are_the_bundles_and_an_output_is_not_replaced_unasked(tmp_path):
    data = np.load(calib.sample_path("cifar10_test.npz"))
    bundle = str(tmp_path / "ts")
    calibration = calib.calibrator("ts").fit(data["logits"][:3000], data["labels"][:3000])
    calibration.save(bundle)
    source = Source(calib.sample_path("cifar10_test.npz"), bundle=bundle)
    out = str(tmp_path / "probs.npy")
    done = apply_source(source, out)
    assert done.rows == "10000 rows" and done.kind_line.startswith("logits (") and done.warnings == []
    np.testing.assert_allclose(np.load(out), calibration.predict_proba(data["logits"]), rtol=1e-12, atol=1e-15)
    with pytest.raises(CalibError, match="exists"):
        apply_source(source, out)
    stream = io.BytesIO()
    apply_source(source, stream)
    assert stream.getvalue() == open(out, "rb").read()  # a stream holds the .npy file's bytes


def test_a_directory_is_written_to_a_directory_only(tmp_path):
    (tmp_path / "shards").mkdir()
    (tmp_path / "file.parquet").write_bytes(b"x")
    with pytest.raises(CalibError, match="name a directory"):
        apply_source(Source(str(tmp_path / "shards"), bundle="b"), str(tmp_path / "file.parquet"))


def test_rows_of_a_class_the_bundle_never_saw_are_warned_of(tmp_path):
    data = np.load(calib.sample_path("cifar10_test.npz"))
    seen = data["labels"] != 3
    bundle = str(tmp_path / "ts")
    calib.calibrator("ts").fit(data["logits"][seen][:3000], data["labels"][seen][:3000]).save(bundle)
    done = apply_source(Source(calib.sample_path("cifar10_test.npz"), bundle=bundle), str(tmp_path / "p.npz"))
    assert done.warnings == [
        f"{int(np.sum(~seen))} of 10000 rows are labelled with a class that had no calibration row"
        " (one temperature serves every class, so their probabilities are scaled like the others')"
    ]
