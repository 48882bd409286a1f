"""Input validation at its edges, from the rules in docs/cli.md: the kind tolerance tol =
max(sqrt(eps32), sqrt(eps(dtype))) with values exactly on it, the repair of rows off the simplex,
the hints for rows with mass missing, the first offending value named, labels as a column, and
arrays from notebooks (objects, ragged rows, tensors)."""

from __future__ import annotations

import numpy as np
import pytest

from calib.core.validation import (
    UnitIntervalScores,
    as_array,
    check_labels,
    kind_tolerance,
    repair_probs,
    resolve_kind,
)
from calib.errors import InputError

TOL = float(np.sqrt(np.finfo(np.float32).eps))  # 3.45e-4: float32 and float64 files


def test_the_tolerance_is_the_square_root_of_float32_epsilon_or_of_the_dtype():
    assert kind_tolerance(np.float64) == TOL and kind_tolerance(np.float32) == TOL
    assert kind_tolerance(np.float16) == float(np.sqrt(np.finfo(np.float16).eps))


def test_values_exactly_on_the_tolerance_are_probabilities_and_are_repaired():
    """Every entry in [-tol, 1 + tol]: an entry of exactly 1 + tol and one of exactly -tol (row sum
    1) are probabilities, read as declared or detected, and the row is clipped and renormalised."""
    row = np.array([[1.0 + TOL, -TOL], [0.25, 0.75]])
    for requested in ("auto", "probs"):
        kind, reason = resolve_kind(row, requested, "x")
        assert kind == "probs" and f"1 rows off by up to {TOL:.3g}" in reason, reason
    assert resolve_kind(np.array([[0.25, 0.75]]), "probs", "x")[1] == "as given"
    kind, reason = resolve_kind(row, "logits", "x", given_by="as declared")
    assert (kind, reason) == ("logits", "as declared")


def test_one_row_of_probabilities_is_a_matrix_and_a_column_is_binary():
    assert resolve_kind(np.array([[0.2, 0.3, 0.5]]), "auto", "x")[1].startswith("every row lies in [0, 1]")
    kind, reason = resolve_kind(np.array([[0.3], [0.8]]), "auto", "x")
    assert kind == "probs" and reason == "one column with values in [0, 1]: P(class 1) of a binary model"


def test_log_probabilities_exactly_on_the_tolerance():
    """Entries <= tol and logsumexp within tol: a row (tol, -50) has its largest entry and its
    logsumexp both exactly tol (e^-50 is lost against e^tol), so it is log-probabilities."""
    row = np.array([[TOL, -50.0], [np.log(0.25), np.log(0.75)], [-0.1, -0.2]])
    assert resolve_kind(row[:2], "auto", "x")[0] == "log-probs"
    assert resolve_kind(row[:2], "log-probs", "x")[0] == "log-probs"
    with pytest.raises(InputError, match="row 2 has"):
        resolve_kind(row, "log-probs", "x")
    with pytest.raises(InputError, match="must be <= 0; row 1, column 0 is 0.5"):
        resolve_kind(np.array([[np.log(0.5), np.log(0.5)], [0.5, -1.0]]), "log-probs", "x")


def test_probabilities_outside_the_tolerance_name_the_first_value():
    probs = np.array([[0.5, 0.5], [1.5, -0.5], [-0.2, 1.2]])
    with pytest.raises(InputError, match=r"row 1, column 0 is 1.5"):
        resolve_kind(probs, "probs", "x")
    with pytest.raises(InputError, match=r"first at row 1, column 1"):
        resolve_kind(np.array([[0.5, 0.5], [0.5, np.nan], [np.nan, 0.5]]), "auto", "x")


def test_rows_with_mass_missing_are_told_apart_from_other_unit_scores():
    """[0, 1] rows not summing to 1: all sums in (0, 1 + tol] -> mass missing (a hint to
    renormalise; row 1 named); a row of zeros or one summing to 1.5 -> other [0, 1] scores."""
    short = np.array([[0.5, 0.5], [0.3, 0.3], [0.2, 0.1]])
    with pytest.raises(UnitIntervalScores, match=r"row 1 sums to 0.6") as refused:
        resolve_kind(short, "auto", "x")
    assert refused.value.mass_missing is True
    for other in (np.array([[0.5, 0.5], [0.75, 0.75]]), np.array([[0.5, 0.5], [0.0, 0.0]])):
        with pytest.raises(UnitIntervalScores) as refused:
            resolve_kind(other, "auto", "x")
        assert refused.value.mass_missing is False


def test_declared_probabilities_with_mass_missing_get_the_renormalise_hint_only_then():
    with pytest.raises(InputError, match="rows with mass missing") as refused:
        resolve_kind(np.array([[0.5, 0.5], [0.3, 0.3], [0.2, 0.1]]), "probs", "x")
    assert "row 1 sums to 0.6" in str(refused.value)
    for other in ([[0.5, 0.5], [0.75, 0.75]], [[0.3, 0.3], [0.0, 0.0]], [[0.3, 0.3], [0.75, 0.75]]):
        with pytest.raises(InputError) as refused:
            resolve_kind(np.array(other), "probs", "x")
        assert "mass missing" not in str(refused.value), other


def test_renormalising_takes_row_sums_in_zero_to_one_and_says_how_many():
    kind, reason = resolve_kind(np.array([[0.5, 0.5], [0.3, 0.3], [0.2, 0.1]]), "auto", "x", renormalise=True)
    assert kind == "probs" and "2 rows renormalised (row sums from 0.3 to 1)" in reason
    assert resolve_kind(np.array([[0.5, 0.5]]), "auto", "x", renormalise=True)[1] == "probabilities renormalised as asked"
    for bad, row in (([[0.5, 0.5], [0.0, 0.0]], 1), ([[0.75, 0.75], [0.5, 0.5]], 0)):
        with pytest.raises(InputError, match=rf"sum in \(0, 1\]; row {row} sums to"):
            resolve_kind(np.array(bad), "auto", "x", renormalise=True)


def test_repair_keeps_exact_rows_as_given_and_clips_the_others():
    """Rows in [0, 1] summing to 1 within 1e-9 are returned as the same object; an entry 1e-10
    above 1 or below 0 is clipped and the row renormalised; a column of P(class 1) is clipped."""
    exact = np.array([[1.0, 0.0], [0.25, 0.75]])
    assert repair_probs(exact) is exact
    assert repair_probs(np.array([[1.0 + 1e-10, 0.0]])).tolist() == [[1.0, 0.0]]
    assert repair_probs(np.array([[-1e-10, 1.0]])).tolist() == [[0.0, 1.0]]
    clipped = repair_probs(np.array([[1.0 + 1e-4, 1e-4]]))
    np.testing.assert_allclose(clipped, [[1.0 / (1.0 + 1e-4), 1e-4 / (1.0 + 1e-4)]], rtol=1e-15)
    assert repair_probs(np.array([[0.3], [1.0001], [-1e-4]])).tolist() == [[0.3], [1.0], [0.0]]
    assert repair_probs(np.array([0.3, 1.0001, -1e-4])).tolist() == [0.3, 1.0, 0.0]


def test_labels_as_a_column_are_read_and_every_other_shape_refused():
    assert check_labels(np.array([[0], [1], [1]]), 3, 2, "labels").tolist() == [0, 1, 1]
    with pytest.raises(InputError, match=r"1-d array; got shape \(3, 2\)"):
        check_labels(np.zeros((3, 2), dtype=int), 3, 2, "labels")
    with pytest.raises(InputError, match="2 labels for 3 rows"):
        check_labels(np.array([0, 1]), 3, 2, "labels")


def test_objects_and_ragged_rows_from_notebooks_are_refused_in_one_line():
    rows = np.empty(2, dtype=object)
    rows[0], rows[1] = np.array([1, None], dtype=object), np.array([2, 3], dtype=object)
    with pytest.raises(InputError, match="Python objects"):
        as_array(rows, "x")
    with pytest.raises(InputError, match="Python objects"):
        as_array(np.empty(0, dtype=object), "x")
    ragged = np.empty(4, dtype=object)
    for i, length in enumerate((1, 2, 3, 4)):
        ragged[i] = np.zeros(length)
    with pytest.raises(InputError, match=r"different lengths \(\(1,\), \(2,\), \(3,\)\); every row"):
        as_array(ragged, "x")
    stacked = np.empty(2, dtype=object)
    stacked[0], stacked[1] = np.array([0.1, 0.9]), np.array([0.5, 0.5])
    assert as_array(stacked, "x").tolist() == [[0.1, 0.9], [0.5, 0.5]]


def test_only_a_tensor_is_detached():
    """An object with a ``cpu`` attribute but no ``detach`` method is read as an array like any other."""

    class Device:
        cpu = "not a method"

        def __array__(self, dtype=None, copy=None):
            return np.array([[0.5, 0.5]])

    assert as_array(Device(), "x").tolist() == [[0.5, 0.5]]


def test_scores_above_one_plus_tol_are_logits_not_unit_scores():
    """Entries in [0, 1.5]: outside [0, 1 + tol], so not probabilities (and not refused as [0, 1] scores)."""
    assert resolve_kind(np.array([[0.0, 1.5], [0.2, 0.4]]), "auto", "x")[0] == "logits"


def test_non_positive_rows_without_logsumexp_zero_are_logits():
    """Every entry <= 0, but the second row's logsumexp is log(e^-2 + e^-3), far from 0."""
    assert resolve_kind(np.array([[np.log(0.5), np.log(0.5)], [-2.0, -3.0]]), "auto", "x")[0] == "logits"


def test_the_first_row_off_its_sum_is_named_across_chunks():
    """2,100 rows of 1,000 [0, 1] scores that do not sum to 1 (two chunks of 1,048 rows and one
    more): the message names row 0, not a row of a later chunk."""
    scores = np.full((2100, 1000), 0.002)
    with pytest.raises(UnitIntervalScores, match=r"row 0 sums to 2"):
        resolve_kind(scores, "auto", "x")


def test_the_first_log_probability_above_tol_is_named():
    """Row 0 holds an entry of exactly tol (allowed); rows 1 and 2 one above it each: row 1 is named."""
    rows = np.array([[TOL, -50.0], [0.5, -1.0], [0.7, -1.0]])
    with pytest.raises(InputError, match="must be <= 0; row 1, column 0 is 0.5"):
        resolve_kind(rows, "log-probs", "x")
