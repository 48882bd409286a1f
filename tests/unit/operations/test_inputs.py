"""A command's input (calib.operations.inputs): its files, refused as outputs; its rows read once."""

import numpy as np
import pytest

import calib
from calib.errors import CalibError
from calib.operations import Reading, Source
from calib.operations.inputs import read_source


def test_an_output_that_is_one_of_the_inputs_is_refused(tmp_path):
    pred, labels, baseline = (tmp_path / name for name in ("p.npz", "labels.npy", "base.json"))
    for path in (pred, labels, baseline):
        path.write_bytes(b"x")
    source = Source(str(pred), Reading(labels_path=str(labels)))
    source.check_outputs([None, "-", str(tmp_path / "report.json")], [str(baseline)])  # none of them an input
    for output in (pred, labels, baseline):
        with pytest.raises(CalibError, match="is an input of this command"):
            source.check_outputs([str(output)], [str(baseline)])


def test_the_rows_are_read_with_their_groups_and_features(tmp_path):
    data = np.load(calib.sample_path("cifar10_test.npz"))
    rows = 200
    path = tmp_path / "rows.npz"
    np.savez(path, logits=data["logits"][:rows], labels=data["labels"][:rows], shard=np.arange(rows) % 3)
    np.save(tmp_path / "features.npy", np.ones((rows, 2)))
    source = Source(str(path), Reading(require_labels=True), group_by="shard", features=str(tmp_path / "features.npy"))
    inputs = read_source(source)
    assert (inputs.preds.n, inputs.preds.k) == (rows, 10) and inputs.calibrator is None
    assert inputs.groups.names == ["0", "1", "2"] and inputs.features.shape == (rows, 2)
    assert inputs.kind_line.startswith("logits (")
    assert read_source(source, groups=False).groups is None


def test_an_engine_on_one_file_is_refused_before_it_is_read(tmp_path):
    source = Source(str(tmp_path / "absent.npz"), engine="dask")
    with pytest.raises(CalibError, match="is one input; an engine runs the files of a directory"):
        read_source(source)
    assert not Source(calib.sample_path("cifar10_test.npz")).is_directory
    assert Source(str(tmp_path)).is_directory
