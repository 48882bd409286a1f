"""Every command's JSON on the sample data is what it was when recorded (tests/golden.py): a change of
structure moves no key, and no number or array beyond the last bits a machine of another CPU may
give (tests/golden.py, LAST_BITS)."""

import json

import numpy as np
import pytest
from golden import differences, golden_path, run_all


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return run_all(tmp_path_factory.mktemp("golden"))


GOLDEN = json.loads(golden_path().read_text())


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_output_is_unchanged(outputs, name):
    assert differences(json.loads(json.dumps(outputs[name])), GOLDEN[name]) == []


def test_the_comparison_tells_the_last_bits_from_a_change():
    """A float one ulp off, or an array whose digest differs with its sums equal to 1e-13, passes; a
    float 1e-9 off, another key, an integer or a string off by one, or sums 1e-9 off, fail."""
    record = {"x": 0.1, "n": 3, "s": "ts", "a": {"sha256": "aa", "sums": [1.0, 2.0, 0.5]}}
    same = {"x": float(np.nextafter(0.1, 1)), "n": 3, "s": "ts", "a": {"sha256": "bb", "sums": [1.0 + 1e-13, 2.0, 0.5]}}
    assert differences(same, record) == []
    for key, value in (("x", 0.1 + 1e-10), ("n", 4), ("s", "tS"), ("a", {"sha256": "bb", "sums": [1.0, 2.0, 0.5 + 1e-9]})):
        assert len(differences({**record, key: value}, record)) == 1, key
    assert differences({**record, "extra": 1}, record) != []
    int_array = {"sha256": "aa", "sums": None}
    assert differences({"sha256": "bb", "sums": None}, int_array) != []


def test_every_output_is_recorded(outputs):
    assert sorted(outputs) == sorted(GOLDEN)
