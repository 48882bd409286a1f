"""Stated confidences read as probabilities (calib.io.stated): every form, the log's scale of bare
numbers with values on its edges (0, 1, 100), and one line naming the row for what cannot be read."""

from __future__ import annotations

import re

import pytest

from calib.errors import InputError
from calib.io import stated


def _read(*values, missing=None):
    return stated.confidences([(f"row {i}", v) for i, v in enumerate(values)], missing, "log")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("85%", 0.85),
        (" 85 % ", 0.85),
        ("0%", 0.0),
        ("100%", 1.0),
        ("12.5%", 0.125),
        ("high", 0.7),
        ("  Very   HIGH ", 0.9),
        ("very low", 0.1),
        ("low", 0.3),
        ("medium", 0.5),
        ("0.85", 0.85),
        (".5", 0.5),
        (0.85, 0.85),
        (0, 0.0),
        (1, 1.0),
        ("1", 1.0),
    ],
)
def test_each_form_reads_as_the_rule_says(value, expected):
    values, _ = _read(value)
    assert values == [pytest.approx(expected, abs=1e-15)]


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("maybe", "is not one calib reads"),
        ("85 percent", "is not one calib reads"),
        ("5a%", "is not one calib reads"),
        ("101%", "is a percentage outside \\[0, 100\\]"),
        ("100.5%", "is a percentage outside \\[0, 100\\]"),
        ("-1%", "is a percentage outside \\[0, 100\\]"),
        ("nan", "is not one calib reads"),
        (float("nan"), "is not a finite number"),
        (float("inf"), "is not a finite number"),
        ("1e400", "is not a finite number"),
        ("-0.5", "is negative"),
        (-2, "is negative"),
    ],
)
def test_what_the_rule_does_not_read_is_refused_naming_the_row(value, why):
    with pytest.raises(InputError, match=f"^row 0: confidence {re.escape(repr(value))} {why}"):
        _read(value)


def test_a_yes_or_no_is_not_a_confidence():
    with pytest.raises(InputError, match="row 0: confidence True is a yes/no"):
        _read(True)


def test_bare_numbers_in_zero_one_are_probabilities():
    values, said = _read(0, 1, 0.5, "1")
    assert values == [0.0, 1.0, 0.5, 1.0] and "0-100" not in said


def test_whole_numbers_to_100_with_one_above_1_are_percentages():
    """One above 1 puts every bare number on the 0-100 scale: 1 is then 1%, 100 is certain."""
    values, said = _read(0, 1, 2, 100, "85%", "high")
    assert values == [0.0, 0.01, 0.02, 1.0, 0.85, 0.7]
    assert "bare numbers on a 0-100 scale" in said


def test_a_percentage_scale_ends_at_100():
    with pytest.raises(InputError, match="^row 1: confidence 101 is above 100, neither a probability nor a percentage$"):
        _read(50, 101)
    assert _read(50, 100)[0] == [0.5, 1.0]


def test_probabilities_beside_a_number_above_1_are_refused_naming_the_first():
    """0 and 1 count among the probabilities; the first number above 1 is named."""
    expected = (
        r"^row 4: confidence 87 where 3 other confidences of the log lie in \[0, 1\]; "
        r"write a percentage as 87% or a probability as 0.87$"
    )
    with pytest.raises(InputError, match=expected):
        _read(0, 1, 0.85, "", 87, 90.5)
    with pytest.raises(InputError, match=r"^row 1: confidence 2 where 1 other"):  # 2 is above 1 too
        _read(0.5, 2)


def test_a_missing_confidence_is_refused_or_set_as_browsecomp_sets_it():
    with pytest.raises(InputError, match=r"row 1: no stated confidence \(2 of 3 rows lack one\)"):
        _read(0.5, None, "")
    values, said = _read(0.5, None, "  ", missing="browsecomp")
    assert values == [0.5, 1.0, 1.0]
    assert "2 missing set to 1 as browsecomp sets them" in said
    assert _read(0.5, missing="browsecomp") == ([0.5], "stated confidences (bare)")  # none missing: none said
    with pytest.raises(InputError, match="set as browsecomp sets it; got 'zero'"):
        _read(0.5, missing="zero")
