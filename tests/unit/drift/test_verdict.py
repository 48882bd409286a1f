"""calib.drift.verdict: the tests' order, each test's level (the comparison's 1 - level shared by
five tests, Bonferroni), and the edges of each rule, from hand-made changes and replicates."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from calib.drift.analysis import interval
from calib.drift.report import Change
from calib.drift.verdict import DISCRIMINATION, TESTS, labelled_findings, unlabelled_findings, verdict_of

#: 200 replicates at the normal quantiles (i + 0.5) / 200: their sd is 1 to within 1%
GRID = np.array([NormalDist().inv_cdf((i + 0.5) / 200) for i in range(200)])
GRID = GRID / GRID.std(ddof=1)
PATHS = [
    "top_label.brier.mcb",
    "top_label.log_loss.mcb",
    DISCRIMINATION,
    "classwise.brier.mcb",
]


def _section(moves: dict[str, float], p_value: float = 0.5, level: float = 0.99):
    """Changes of ``moves`` standard deviations (every other quantity 0), replicates around each."""
    values = {"class_accuracy": 0.0, "accuracy": 0.0, "brier": 0.0, **{path: 0.0 for path in PATHS}, **moves}
    replicates = {path: value + GRID for path, value in values.items()}
    changes = {path: Change(0.5, 0.5 + value, value, interval(replicates[path], value, level)) for path, value in values.items()}
    metrics = {key: changes[key] for key in ("class_accuracy", "accuracy", "brier")}
    decomposition: dict = {}
    for path in PATHS:
        problem, score, term = path.split(".")
        decomposition.setdefault(problem, {}).setdefault(score, {})[term] = changes[path]
    return labelled_findings(metrics, decomposition, replicates, p_value, 0.1, level, "log_loss")


def test_each_test_reads_its_interval_at_the_shared_level():
    """At level 0.99 each of the 5 tests runs at 1 - 0.01 / 5 = 0.998: its interval's ends are at
    least z_0.999 = 3.09 sd from the change (the normal end, with 0.2 replicates beyond it). A
    change of 3.0 sd, beyond the 99% interval (2.58 sd), fires no test; 3.2 sd does."""
    assert len(TESTS) == 5
    assert verdict_of(_section({"class_accuracy": -3.0})) == "none"
    assert verdict_of(_section({"class_accuracy": -3.2})) == "performance loss"
    assert verdict_of(_section({"class_accuracy": 3.2})) == "performance gain"


@pytest.mark.parametrize(
    "moves, p_value, verdict",
    [
        ({}, 0.5, "none"),
        ({}, 0.0019, "label shift"),
        ({}, 0.002, "none"),  # the test fires when p < 1 - 0.998, and 0.002 is not below it
        ({DISCRIMINATION: 3.2}, 0.5, "performance loss"),
        ({DISCRIMINATION: -3.2}, 0.5, "performance gain"),
        ({"top_label.log_loss.mcb": 3.2}, 0.5, "calibration decay"),
        ({"top_label.log_loss.mcb": -3.2}, 0.5, "calibration improvement"),
        ({"top_label.brier.mcb": 3.2}, 0.5, "none"),  # the decay test reads log loss; Brier's MCB is one of 4 others
        ({"top_label.brier.mcb": 4.0}, 0.5, "other change"),  # beyond the 1 - 0.002 / 4 interval (3.48 sd)
        ({"class_accuracy": -3.2, DISCRIMINATION: 5.0, "top_label.log_loss.mcb": 5.0}, 0.0, "performance loss"),
        ({DISCRIMINATION: 5.0, "top_label.log_loss.mcb": 5.0}, 0.0, "label shift"),
        ({"top_label.log_loss.mcb": 5.0, "top_label.brier.mcb": 9.0}, 0.5, "calibration decay"),
    ],
)
def test_the_tests_in_order_and_on_their_edges(moves, p_value, verdict):
    assert verdict_of(_section(moves, p_value)) == verdict


def test_the_evidence_names_every_test_and_the_verdict_is_the_first_that_fired():
    findings = _section({"class_accuracy": -4.0, "top_label.log_loss.mcb": 5.0}, 0.0)
    assert [f.test for f in findings] == list(TESTS)
    assert [f.verdict for f in findings] == ["performance loss", "label shift", None, "calibration decay", None]
    assert "accuracy at NEW's class shares 0.5 -> -3.5" in findings[0].evidence and "(0.998 interval)" in findings[0].evidence
    assert "test at 0.002" in findings[1].evidence
    quiet = _section({})
    assert quiet[-1].evidence.startswith("no change left its noise: none of the 5 tests fired (each at 0.998")


def test_without_labels_the_bound_decides():
    priors = {"largest_z": 3.0, "bound": 3.0, "ref": [0.5, 0.5], "l1": 0.1}
    assert verdict_of(unlabelled_findings(priors, 0.99)) == "none"  # fires when the largest z exceeds the bound
    assert verdict_of(unlabelled_findings({**priors, "largest_z": 3.0000001}, 0.99)) == "label shift"


@pytest.mark.parametrize("ci, moved", [([0.0, 1.0], 0), ([1e-300, 1.0], 1), ([-1.0, 0.0], 0), ([-1.0, -1e-300], -1), (None, 0)])
def test_a_change_leaves_its_noise_only_with_its_whole_interval_off_0(ci, moved):
    assert Change(0.0, 0.0, 0.5, ci).beyond_noise() == moved


def test_a_quantity_without_replicates_never_fires_and_the_catch_all_names_the_one_furthest_out():
    """A change with no replicates has no interval, so no test reads it as moved; among the other
    quantities that moved, the evidence names the one furthest beyond its noise (|change| / width)."""
    from calib.drift.verdict import _any_change, _at

    assert _at(Change(0.1, 0.9, 0.8, None), None, 0.99).ci is None
    others = {"brier": Change(0.1, 0.2, 0.1, None), "nll": Change(1.0, 1.4, 0.4, None)}
    replicates = {"brier": 0.1 + 0.01 * GRID, "nll": 0.4 + 0.1 * GRID}  # z = 10 and 4
    found = _any_change(others, replicates, 0.99)
    assert found.verdict == "other change" and found.reads == "brier" and "one of 2 of the 2" in found.evidence
    quiet = _any_change({"brier": Change(0.1, 0.2, 0.1, None)}, {"brier": None}, 0.99)
    assert quiet.verdict is None
