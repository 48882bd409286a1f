"""Gates written as text: change allowances read or refused in one line."""

from __future__ import annotations

import pytest

from calib.errors import UsageError
from calib.evaluation.gate_parsing import parse_allowance


@pytest.mark.parametrize(
    "spec, direction, expected",
    [("cmce=0.001", "increase", ("cmce", 0.001, False)), ("cmce=10%", "increase", ("cmce", 0.1, True))],
)
def test_allowances_parse(spec, direction, expected):
    assert parse_allowance(spec, direction) == expected


@pytest.mark.parametrize(
    "spec, direction, message",
    [
        ("accuracy=0.01", "increase", "higher is better"),
        ("cmce=0.01", "decrease", "lower is better"),
        ("cmce", "increase", "expected METRIC=NUMBER"),
        ("cmce=ten%", "increase", "expected METRIC=NUMBER"),
        ("cmce=nan", "increase", "expected METRIC=NUMBER"),
    ],
)
def test_allowances_that_cannot_be_read_are_refused(spec, direction, message):
    with pytest.raises(UsageError, match=message):
        parse_allowance(spec, direction)
