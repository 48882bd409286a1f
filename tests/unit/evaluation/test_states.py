"""Metric state files merged: nothing to merge is refused in one line; a state merged alone is the
report of its own rows."""

from __future__ import annotations

import numpy as np
import pytest

import calib
from calib.errors import UsageError
from calib.evaluation import merge_metric_states, read_metric_state


def test_merging_no_state_is_refused():
    with pytest.raises(UsageError, match="at least one state"):
        merge_metric_states([], [])


def test_one_state_merged_alone_gives_its_own_rows_report(tmp_path):
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(400, 4)), rng.integers(0, 4, 400)
    path = tmp_path / "part.npz"
    report = calib.evaluate(
        logits, labels, request=calib.EvaluationRequest.of(metrics=["accuracy", "ece", "cmce"], emit_state=str(path))
    )
    merged = merge_metric_states([read_metric_state(str(path))], [str(path)])
    for key in ("accuracy", "ece", "cmce"):
        assert merged.metrics[key].value == report.values[key]
    assert merged.input.n == 400
