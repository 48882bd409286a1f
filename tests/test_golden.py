"""Every command's JSON on the sample data is what it was when recorded (tests/golden.py): a change of
structure moves no number, key or array bit."""

import json

import pytest
from golden import golden_path, run_all


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return run_all(tmp_path_factory.mktemp("golden"))


GOLDEN = json.loads(golden_path().read_text())


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_output_is_unchanged(outputs, name):
    assert json.loads(json.dumps(outputs[name])) == GOLDEN[name]


def test_every_output_is_recorded(outputs):
    assert sorted(outputs) == sorted(GOLDEN)
