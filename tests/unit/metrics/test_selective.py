"""calib.metrics.selective: risk-coverage, AURC, E-AURC, AUROC of correctness, selective accuracy
and coverage at a risk, against hand arithmetic, every order of tied rows, scikit-learn, and the
guarantee of the bootstrap interval."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import calib
from calib.metrics.selective import (
    aurc,
    auroc_of_correct,
    coverage_at_risk,
    excess_aurc,
    expected_risks,
    oracle_aurc,
    selective_accuracy,
)


def plain_aurc(correct_in_order) -> float:
    """(1 / n) sum_k (errors among the first k) / k of rows already in answering order."""
    errors, total = 0, 0.0
    for k, hit in enumerate(correct_in_order, start=1):
        errors += 1 - hit
        total += errors / k
    return total / len(correct_in_order)


def every_tie_order(confidence, correct):
    """The answering orders a confidence threshold cannot tell apart: most confident first, the rows
    of each run of equal confidences in every order."""
    runs = {}
    for value, hit in zip(confidence, correct):
        runs.setdefault(value, []).append(hit)
    ordered = [runs[value] for value in sorted(runs, reverse=True)]
    for arrangement in itertools.product(*(itertools.permutations(run) for run in ordered)):
        yield [hit for run in arrangement for hit in run]


def test_a_tiny_example_by_hand():
    confidence, correct = np.array([0.9, 0.8, 0.7, 0.6]), np.array([1, 0, 1, 0])
    # r_k = 0/1, 1/2, 1/3, 2/4; the oracle answers both correct rows first: 0, 0, 1/3, 2/4
    assert aurc(confidence, correct) == pytest.approx((0 + 1 / 2 + 1 / 3 + 2 / 4) / 4, abs=1e-15)
    assert oracle_aurc(correct) == pytest.approx((1 / 3 + 2 / 4) / 4, abs=1e-15)
    assert excess_aurc(confidence, correct) == pytest.approx(1 / 2 / 4, abs=1e-15)
    # correct rows at 0.9 and 0.7 against wrong at 0.8 and 0.6: 3 of the 4 pairs ordered right
    assert auroc_of_correct(confidence, correct) == 0.75
    assert selective_accuracy(confidence, correct, 0.5) == 0.5  # the top 2 rows: one right
    assert selective_accuracy(confidence, correct, 0.25) == 1.0
    assert coverage_at_risk(confidence, correct, 0.0) == 0.25
    assert coverage_at_risk(confidence, correct, 0.5) == 1.0  # 2 errors in 4, exactly on the edge


@pytest.mark.parametrize("seed", range(6))
def test_with_ties_each_value_is_the_mean_over_every_order_of_the_tied_rows(seed):
    """Computed from the definition: the plain AURC (and risk at k) of each order a threshold cannot
    tell apart, averaged over all of them."""
    rng = np.random.default_rng(seed)
    confidence = rng.choice([0.2, 0.5, 0.5, 0.7, 0.9], size=7)
    correct = rng.integers(0, 2, 7)
    orders = list(every_tie_order(confidence.tolist(), correct.tolist()))
    assert aurc(confidence, correct) == pytest.approx(np.mean([plain_aurc(o) for o in orders]), abs=1e-12)
    for k in range(1, 8):
        mean_accuracy = np.mean([np.mean(o[:k]) for o in orders])
        assert selective_accuracy(confidence, correct, k / 7) == pytest.approx(mean_accuracy, abs=1e-12)


def test_the_values_do_not_depend_on_the_rows_order():
    rng = np.random.default_rng(3)
    confidence, correct = np.round(rng.random(500), 2), rng.integers(0, 2, 500)
    shuffled = rng.permutation(500)
    for measure in (aurc, excess_aurc, auroc_of_correct):
        assert measure(confidence[shuffled], correct[shuffled]) == pytest.approx(measure(confidence, correct), abs=1e-13)


def test_without_ties_aurc_is_the_plain_sorted_curve():
    rng = np.random.default_rng(4)
    confidence, correct = rng.random(300), rng.integers(0, 2, 300)
    in_order = correct[np.argsort(-confidence)]
    assert aurc(confidence, correct) == pytest.approx(plain_aurc(in_order.tolist()), abs=1e-12)


@pytest.mark.parametrize("decimals", [1, 2, 6])
def test_auroc_equals_scikit_learns_ties_included(decimals):
    rng = np.random.default_rng(decimals)
    confidence = np.round(rng.random(2000), decimals)
    correct = (rng.random(2000) < confidence).astype(int)
    assert auroc_of_correct(confidence, correct) == pytest.approx(roc_auc_score(correct, confidence), abs=1e-12)


def test_the_oracle_from_the_definition():
    """AURC* is the plain AURC of the order with every correct row first; E-AURC of that order is 0."""
    correct = np.array([1, 0, 0, 1, 1, 0, 1, 1])
    best = sorted(correct.tolist(), reverse=True)
    assert oracle_aurc(correct) == pytest.approx(plain_aurc(best), abs=1e-15)
    assert excess_aurc(np.where(correct == 1, 0.9, 0.1), correct) == pytest.approx(0.0, abs=1e-15)


def test_edges_all_right_all_wrong_one_row_none():
    assert aurc(np.array([0.3, 0.9]), np.array([1, 1])) == 0.0 and excess_aurc(np.array([0.3, 0.9]), np.array([1, 1])) == 0.0
    assert aurc(np.array([0.3, 0.9]), np.array([0, 0])) == 1.0 and excess_aurc(np.array([0.3, 0.9]), np.array([0, 0])) == 0.0
    assert auroc_of_correct(np.array([0.3, 0.9]), np.array([1, 1])) is None
    assert auroc_of_correct(np.array([0.3, 0.9]), np.array([0, 0])) is None
    assert aurc(np.array([0.5]), np.array([0])) == 1.0
    assert aurc(np.zeros(0), np.zeros(0)) is None and coverage_at_risk(np.zeros(0), np.zeros(0), 0.1) is None
    assert selective_accuracy(np.array([0.5, 0.6]), np.array([1, 0]), 0.0) is None  # no row kept
    assert aurc(np.full(4, 0.7), np.array([1, 0, 1, 0])) == pytest.approx(0.5, abs=1e-15)  # one tie: every r_k = 1/2


def test_a_tied_first_run_with_errors_and_one_row():
    """The most confident rows tied, one of two wrong: r_1 = r_2 = 1/2 whichever answers first;
    then a right row: r_3 = 1/3."""
    confidence, correct = np.array([0.9, 0.9, 0.5]), np.array([0, 1, 1])
    assert expected_risks(confidence, correct)[0].tolist() == pytest.approx([0.5, 0.5, 1 / 3], abs=1e-15)
    assert aurc(confidence, correct) == pytest.approx((0.5 + 0.5 + 1 / 3) / 3, abs=1e-15)
    assert oracle_aurc(np.array([0])) == 1.0 and oracle_aurc(np.array([1])) == 0.0
    assert oracle_aurc(np.zeros(0)) is None
    assert coverage_at_risk(np.array([0.4]), np.array([1]), 0.0) == 1.0
    risks, ends = expected_risks(np.zeros(0), np.zeros(0))
    assert risks.shape == (0,) and ends.shape == (0,)


def test_selective_accuracy_keeps_ceil_of_the_share():
    confidence = np.linspace(1.0, 0.0, 1000, endpoint=False)
    correct = np.zeros(1000)
    correct[:100] = 1  # the 100 most confident right
    assert selective_accuracy(confidence, correct, 0.1) == 1.0  # 0.1 x 1000 = 100.00000000000001 keeps 100 rows
    assert selective_accuracy(confidence, correct, 0.1001) == pytest.approx(100 / 101, abs=1e-15)  # ceil(100.1) = 101


def test_coverage_at_risk_on_its_edge_and_ties_that_cannot_be_split():
    confidence = np.array([0.9, 0.8, 0.7, 0.7, 0.6])
    correct = np.array([1, 1, 1, 0, 0])
    risks, ends = expected_risks(confidence, correct)
    assert ends.tolist() == [True, True, False, True, True]
    assert coverage_at_risk(confidence, correct, 0.25) == 0.8  # 1 error in the first 4: exactly 1/4
    assert coverage_at_risk(confidence, correct, math.nextafter(0.25, 0.0)) == 0.4  # the tied pair is kept together or not at all
    assert coverage_at_risk(confidence, correct, 0.4) == 1.0
    # the most confident row wrong: no threshold keeps a risk of 0
    assert coverage_at_risk(np.array([0.9, 0.8]), np.array([0, 1]), 0.0) == 0.0


def test_in_an_evaluation_they_stream_merge_group_and_gate():
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(3000, 5)) * 2, rng.integers(0, 5, 3000)
    keys = ["aurc", "eaurc", "auroc_correct", "selective_accuracy_0.1", "coverage_at_risk_0.1"]
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    confidence, correct = probs.max(1), (probs.argmax(1) == labels).astype(float)
    report = calib.evaluate(logits, labels, request=calib.EvaluationRequest.of(metrics=keys, gates=["aurc>0.9"]))
    assert report.values["aurc"] == pytest.approx(aurc(confidence, correct), abs=1e-12)
    assert report.values["auroc_correct"] == pytest.approx(roc_auc_score(correct, confidence), abs=1e-12)
    assert report.passed and report.to_dict()["gates"][0]["outcome"] == "pass"
    groups = np.where(np.arange(3000) < 1000, "a", "b")
    grouped = calib.evaluate(logits, labels, metrics=keys, groups=groups)
    rows = groups == "a"
    assert grouped.group_values["a"]["eaurc"] == pytest.approx(excess_aurc(confidence[rows], correct[rows]), abs=1e-12)


def test_shards_states_merge_into_the_values_and_intervals_of_all_rows(tmp_path):
    from calib.evaluation import merge_metric_states, read_metric_state

    rng = np.random.default_rng(5)
    logits, labels = rng.normal(size=(1200, 4)) * 2, rng.integers(0, 4, 1200)
    keys = ["aurc", "eaurc", "auroc_correct", "selective_accuracy_0.8", "coverage_at_risk_0.05"]
    whole = calib.evaluate(logits, labels, request=calib.EvaluationRequest.of(metrics=keys, bootstrap=50)).entries
    paths = []
    for part, rows in enumerate((slice(0, 500), slice(500, 1200))):
        paths.append(str(tmp_path / f"{part}.npz"))
        request = calib.EvaluationRequest.of(metrics=keys, bootstrap=50, emit_state=paths[-1], first_row=rows.start)
        calib.evaluate(logits[rows], labels[rows], request=request)
    merged = merge_metric_states([read_metric_state(path) for path in paths], paths)
    for key in keys:
        assert merged.metrics[key].value == pytest.approx(whole.metrics[key].value, abs=1e-12)
        assert merged.metrics[key].ci == pytest.approx(whole.metrics[key].ci, abs=1e-12)


@pytest.mark.slow
def test_the_aurc_interval_covers_the_true_aurc():
    """Confidence s ~ U(0, 1) and P(correct | s) = s: R(c) = E[1 - S | S >= 1 - c] = c / 2, so the
    true AURC is the integral of c / 2 over [0, 1], 1/4. The 95% interval holds it in >= 93% of
    1,000 draws of 2,000 rows (93.7% here; 94.4% on draws 1,000-1,999: the bootstrap's spread of
    AURC falls 4% short of its sampling spread, as a textbook row bootstrap's does, which makes a
    nominal 95% about 94%; 200 draws are too few to tell 94% from 93%: draws 0-199 gave 92.5%)."""
    held = 0
    for draw in range(1000):
        rng = np.random.default_rng([draw, 7])
        s = rng.random(2000)
        correct = rng.random(2000) < s
        # a two-class model whose top-label confidence is max(p, 1 - p): p = 1/2 + s/2 predicts class 1
        p1 = 0.5 + s / 2
        labels = np.where(correct, 1, 0)
        probs = np.stack([1 - p1, p1], axis=1)
        request = calib.EvaluationRequest.of(metrics=["aurc"], bootstrap=200, seed=draw)
        lo, hi = calib.evaluate(probs, labels, kind="probs", request=request).to_dict()["metrics"]["aurc"]["ci"]
        held += lo <= 0.25 <= hi
    assert held >= 930, held
