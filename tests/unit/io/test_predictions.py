"""calib.io.predictions: how a calibrated output of rows, or of a multi-label input's (row, label)
pairs, is laid out."""

import numpy as np

from calib.io.predictions import LABEL_SET_CODES, LabelLayout, RowLayout


def test_a_labels_set_over_0_and_1_has_the_documented_code():
    """docs/multilabel.md: {0} -> 0 (absent), {1} -> 1 (present), {0, 1} -> 2 (either), {} -> -1 (empty)."""
    layout = LabelLayout(2, ("a", "b"))
    block = np.array([[True, False], [False, True], [True, True], [False, False]])
    assert layout.block(block, "sets")[:, 0].tolist() == [0, 1, 2, -1]
    assert LABEL_SET_CODES == {"absent": 0, "present": 1, "either": 2, "empty": -1}
    assert layout.dtype("sets") == np.int8 and layout.dtype("probs") == np.float64


def test_pairs_are_row_major_and_come_back_as_the_matrix_they_were_read_from():
    """Pair p is row p // L's label p % L; the probabilities' column is P(y_l = 1)."""
    layout = LabelLayout(3, ("a", "b"))
    assert layout.pair_labels(slice(1, 5)).tolist() == [1, 0, 1, 0]
    assert layout.pair_rows(np.array([0, 3, 5])).tolist() == [0, 1, 2]
    assert layout.shape == (3, 2) and layout.width == 1 and layout.to_json() == {"rows": 3, "labels": 2}
    assert layout.block(np.array([[0.25, 0.75], [0.5, 0.5]]), "probs")[:, 0].tolist() == [0.75, 0.5]
    assert layout.labels(np.arange(6)).tolist() == [[0, 1], [2, 3], [4, 5]] and layout.labels(None) is None
    assert layout.describe() == "3 rows x 2 labels"


def test_rows_of_classes_come_back_as_they_are():
    layout = RowLayout(4, 3)
    block = np.ones((4, 3))
    assert layout.block(block, "probs") is block and layout.shape == (4, 3) and layout.width == 3
    assert layout.dtype("sets") is bool and layout.dtype("log-probs") == np.float64
    assert layout.pair_labels(slice(0, 4)) is None and layout.labels(np.arange(4)).tolist() == [0, 1, 2, 3]
    assert layout.describe() == "4 rows"


def test_layouts_are_immutable():
    from dataclasses import FrozenInstanceError

    import pytest

    for layout, field in ((RowLayout(1, 2), "n"), (LabelLayout(1, ("a",)), "n_rows")):
        with pytest.raises(FrozenInstanceError):
            setattr(layout, field, 3)
