"""calib compare (calib.drift): the CORP decomposition against its identity and a plain PAV
reference, the verdicts on worlds whose truth is known, EM's priors, the remedies, the gates on
their edges, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import DATA, needs

import calib
from calib.api import as_predictions
from calib.drift import GATE_KEYS, SCORES, adapted_probs, answer_pairs, compare, corp, em_priors, l1_noise, remedy
from calib.synth.shift import WORLDS, shift_world


def _pair(world: str, seed: int, labelled: bool = True, n: int = 3000):
    d = shift_world(world, n, np.random.default_rng(seed))
    ref = as_predictions(d["ref_logits"], d["ref_labels"])
    new = as_predictions(d["new_logits"], d["new_labels"] if labelled else None)
    return ref, new, d


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_decomposition_adds_up_and_equals_a_plain_pav_reference(seed):
    """MCB - DSC + UNC = the score to 1e-12; MCB and DSC equal those of scikit-learn's
    IsotonicRegression (its own tie handling) on the same vectors, with ties in the confidences."""
    isotonic = needs("sklearn.isotonic")
    rng = np.random.default_rng(seed)
    confidence = np.round(rng.uniform(0.2, 1.0, 4000), 2)  # ties
    correct = (rng.uniform(size=4000) < confidence**1.4).astype(float)
    reference = isotonic.IsotonicRegression(out_of_bounds="clip").fit(confidence, correct).predict(confidence)
    terms = corp(confidence, correct)
    for score in SCORES:
        t = terms[score]
        assert t.mcb - t.dsc + t.unc == pytest.approx(t.score, abs=1e-12)
        assert t.recalibrated == pytest.approx(t.unc - t.dsc, abs=1e-12)
        if score == "brier":
            plain = np.mean((confidence - correct) ** 2) - np.mean((reference - correct) ** 2)
            assert t.mcb == pytest.approx(plain, abs=1e-12)
            unc = np.mean((correct.mean() - correct) ** 2)
            assert t.dsc == pytest.approx(unc - np.mean((reference - correct) ** 2), abs=1e-12)
        assert t.mcb >= -1e-15 and t.dsc >= -1e-15


def test_the_decomposition_by_hand():
    """Four rows: c = (0.2, 0.4, 0.6, 0.8), y = (0, 1, 0, 1). PAV pools the middle two (1 > 0):
    iso = (0, 0.5, 0.5, 1). Brier: S(c) = (0.04 + 0.36 + 0.36 + 0.04) / 4 = 0.2, S(iso) = (0 + 0.25 +
    0.25 + 0) / 4 = 0.125, UNC = 0.25: MCB 0.075, DSC 0.125."""
    terms = corp(np.array([0.2, 0.4, 0.6, 0.8]), np.array([0.0, 1.0, 0.0, 1.0]))["brier"]
    assert (terms.score, terms.mcb, terms.dsc, terms.unc) == pytest.approx((0.2, 0.075, 0.125, 0.25), abs=1e-15)


def test_answer_pairs_take_class_1_of_a_binary_model_and_the_top_label_otherwise():
    binary = np.array([[0.7, 0.3], [0.2, 0.8]])
    np.testing.assert_array_equal(answer_pairs(binary, np.array([1, 1])), ([0.3, 0.8], [1.0, 1.0]))
    three = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    np.testing.assert_array_equal(answer_pairs(three, np.array([1, 2])), ([0.5, 0.8], [0.0, 1.0]))


@pytest.mark.parametrize("world", WORLDS)
def test_each_world_gets_its_verdict(world):
    for seed in range(3):
        ref, new, _ = _pair(world, seed)
        assert compare(ref, new, seed=seed)["verdict"] == world


def test_em_priors_are_a_fixed_point_and_find_a_known_shift():
    """At EM's answer the adapted probabilities' mean is the priors; on the label-shift world with
    a calibrated model it lands near the batch's true priors."""
    ref, new, d = _pair("label shift", 4, labelled=False, n=5000)
    old = np.bincount(ref.labels, minlength=10) / ref.n
    probs = np.exp(new.all_logits() - new.all_logits().max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    estimate, iterations = em_priors(probs, old)
    np.testing.assert_allclose(adapted_probs(probs, old, estimate).mean(axis=0), estimate, atol=1e-7)
    assert iterations < 10_000 and np.abs(estimate - d["new_priors"]).sum() < 0.1


def test_the_priors_noise_is_the_mean_absolute_normal_of_each_class_summed():
    replicates = np.array([[0.1, 0.9], [0.3, 0.7], [0.2, 0.8]])  # each class's sd is 0.1
    assert l1_noise(replicates) == pytest.approx(np.sqrt(2 / np.pi) * 0.2, abs=1e-15)


def test_the_priors_noise_predicts_how_far_em_lands_from_the_priors():
    """Over new batches of label-shift worlds, EM's mean L1 distance to the priors it estimates is at
    least the noise each batch's bootstrap states (its sampling noise; the calibration fitted on the
    reference adds its own) and at most twice it."""
    distances, stated = [], []
    for seed in range(6):
        ref, new, d = _pair("label shift", 40 + seed, labelled=False, n=2000)
        report = compare(ref, new, bootstrap=60, level=0.95)
        distances.append(np.abs(np.array(report["priors"]["new"]) - d["new_priors"]).sum())
        stated.append(report["priors"]["l1_noise"])
    assert np.mean(stated) <= np.mean(distances) <= 2 * np.mean(stated)


def test_without_labels_only_label_shift_is_told():
    ref, new, d = _pair("label shift", 5, labelled=False)
    report = compare(ref, new, bootstrap=20, level=0.9)
    assert report["verdict"] == "label shift" and "predicted_ece_under_label_shift" in report
    assert "changes" not in report and "only label shift can be told" in report["note"]
    ref, new, _ = _pair("none", 6, labelled=False)
    assert compare(ref, new, bootstrap=40, level=0.95)["verdict"] == "none"


@pytest.mark.parametrize(
    "world, labelled, method",
    [("label shift", True, "prior-shift"), ("label shift", False, "bcts"), ("calibration decay", True, "ts")],
)
def test_the_remedy_undoes_what_was_found(world, labelled, method):
    ref, new, d = _pair(world, 7, labelled)
    report = compare(ref, new)
    fixed = remedy(ref, new, report)
    assert fixed.method == method
    before = calib.evaluate(d["new_logits"], d["new_labels"], metrics=["nll"]).values["nll"]
    after = calib.evaluate(fixed.predict_proba(d["new_logits"]), d["new_labels"], metrics=["nll"], kind="probs").values["nll"]
    assert after < before - 0.01


def test_no_remedy_for_none_and_a_refusal_for_a_new_concept():
    ref, new, _ = _pair("none", 13)
    assert remedy(ref, new, compare(ref, new)) is None
    ref, new, _ = _pair("new concept", 9)
    with pytest.raises(ValueError, match="no post-hoc map recovers"):
        remedy(ref, new, compare(ref, new))


def test_prior_shift_fits_the_label_shares():
    """The NLL fit of softmax(z + w): its gradient in w is the mean probability less the label
    share, so at the optimum the mean calibrated probability of each class is its share."""
    data = np.load(calib.sample_path("cifar10_val.npz"))
    fitted = calib.calibrator("prior-shift").fit(data["logits"], data["labels"])
    shares = np.bincount(data["labels"], minlength=10) / len(data["labels"])
    np.testing.assert_allclose(fitted.predict_proba(data["logits"]).mean(axis=0), shares, atol=1e-6)
    assert abs(fitted.fitted.log_weights_.mean()) < 1e-12


def _report_with(change_lo: float, change_hi: float, value: float) -> dict:
    return {
        "settings": {"level": 0.99},
        "changes": {"brier": {term: {"value": value, "ci": [change_lo, change_hi]} for term in GATE_KEYS.values()}},
    }


@pytest.mark.parametrize(
    "lo, hi, expected",
    [(0.011, 0.02, "fail"), (0.01, 0.02, "inconclusive"), (0.0, 0.01, "pass"), (0.0, 0.0101, "inconclusive")],
)
def test_gates_on_their_edges(lo, hi, expected):
    """'miscalibration_increase>0.01': fails when the whole interval is above 0.01 (its lower end
    exactly on 0.01 is not), passes when none of it is (the upper end on 0.01 passes)."""
    from calib.drift import _check_gate, _parse_gate
    from calib.evaluation.gates import split_condition

    gate = _parse_gate("miscalibration_increase>0.01", split_condition)
    assert _check_gate(gate, _report_with(lo, hi, (lo + hi) / 2))["result"] == expected


def test_a_discrimination_decrease_reads_the_change_negated():
    from calib.drift import _check_gate, _parse_gate
    from calib.evaluation.gates import split_condition

    gate = _parse_gate("discrimination_decrease>0.01", split_condition)
    entry = _check_gate(gate, _report_with(-0.03, -0.02, -0.025))
    assert entry["result"] == "fail" and entry["ci"] == [0.02, 0.03] and entry["value"] == 0.025


def test_the_command_line_gives_the_librarys_report(run, tmp_path):
    ref, new, d = _pair("calibration decay", 10)
    np.savez(tmp_path / "ref.npz", logits=d["ref_logits"], labels=d["ref_labels"])
    np.savez(tmp_path / "new.npz", logits=d["new_logits"], labels=d["new_labels"])
    code, out, err = run("compare", tmp_path / "ref.npz", tmp_path / "new.npz", "--json", "-")
    assert code == 0, err
    from calib.api import read_predictions

    library = compare(read_predictions(str(tmp_path / "ref.npz")), read_predictions(str(tmp_path / "new.npz")))
    shown = json.loads(out)
    assert shown["verdict"] == library["verdict"] == "calibration decay"
    assert shown["changes"] == json.loads(json.dumps(library["changes"]))
    code, _, err = run(
        "compare",
        tmp_path / "ref.npz",
        tmp_path / "new.npz",
        "--fail-if",
        "miscalibration_increase>0.001",
        "--fit-remedy",
        tmp_path / "fix",
    )
    assert code == 1 and "gate miscalibration_increase>0.001: fail" in err and "wrote the recalibration (ts)" in err
    assert calib.load(str(tmp_path / "fix")).method == "ts"


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda d: (d["ref_logits"][:, :5], d["ref_labels"] % 5, d["new_logits"], d["new_labels"]), "has 5 classes and"),
        (
            lambda d: (d["ref_logits"], np.zeros_like(d["ref_labels"]), d["new_logits"], np.ones_like(d["new_labels"])),
            "share no class",
        ),
        (lambda d: (d["ref_logits"][:50], d["ref_labels"][:50], d["new_logits"], d["new_labels"]), "needs at least 100"),
    ],
)
def test_bad_input_is_one_line_exit_2(run, tmp_path, make, says):
    _, _, d = _pair("none", 11, n=500)
    ref_logits, ref_labels, new_logits, new_labels = make(d)
    np.savez(tmp_path / "ref.npz", logits=ref_logits, labels=ref_labels)
    np.savez(tmp_path / "new.npz", logits=new_logits, labels=new_labels)
    code, _, err = run("compare", tmp_path / "ref.npz", tmp_path / "new.npz", "--bootstrap", "20", "--level", "0.9")
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_a_reference_without_labels_and_bad_gates_are_refused(run, tmp_path):
    _, _, d = _pair("none", 12, n=300)
    np.savez(tmp_path / "ref.npz", logits=d["ref_logits"])
    np.savez(tmp_path / "new.npz", logits=d["new_logits"], labels=d["new_labels"])
    code, _, err = run("compare", tmp_path / "ref.npz", tmp_path / "new.npz")
    assert code == 2 and "no labels" in err
    np.savez(tmp_path / "ref.npz", logits=d["ref_logits"], labels=d["ref_labels"])
    code, _, err = run("compare", tmp_path / "ref.npz", tmp_path / "new.npz", "--fail-if", "ece>0.1")
    assert code == 2 and "a comparison gates on miscalibration_increase" in err


def test_the_interval_is_centred_percentile_by_hand():
    from calib.drift import _interval

    replicates = np.arange(1.0, 101.0)  # mean 50.5
    lo, hi = _interval(replicates, 10.0, 0.9)
    shifted = replicates - 50.5 + 10.0
    assert (lo, hi) == (np.quantile(shifted, 0.05), np.quantile(shifted, 0.95))


@pytest.mark.parametrize("rows, refused", [(99, True), (100, False)])
def test_the_fewest_rows_on_the_edge(rows, refused):
    _, _, d = _pair("none", 14, n=200)
    ref = as_predictions(d["ref_logits"][:rows], d["ref_labels"][:rows])
    new = as_predictions(d["new_logits"], d["new_labels"])
    if refused:
        with pytest.raises(ValueError, match="needs at least 100"):
            compare(ref, new, bootstrap=20, level=0.9)
        with pytest.raises(ValueError, match="needs at least 100"):
            compare(new, ref, bootstrap=20, level=0.9)
    else:
        assert compare(ref, new, bootstrap=20, level=0.9)["ref"]["n"] == 100


@pytest.mark.parametrize(
    "settings, ok",
    [
        ({"bootstrap": 199, "level": 0.99}, False),  # 2 / (1 - level) = 200: one replicate beyond each end
        ({"bootstrap": 200, "level": 0.99}, True),
        ({"bootstrap": 39, "level": 0.95}, False),
        ({"bootstrap": 40, "level": 0.95}, True),
        ({"level": 0.5}, False),
        ({"level": 1.0}, False),
        ({"bootstrap": 400, "level": 0.51}, True),
    ],
)
def test_the_settings_on_their_edges(settings, ok):
    ref, new, _ = _pair("none", 15, n=200)
    settings = {"bootstrap": 200, **settings}
    if ok:
        assert compare(ref, new, **settings)["settings"]["bootstrap"] == settings["bootstrap"]
    else:
        with pytest.raises(ValueError):
            compare(ref, new, **settings)


def test_passed_is_false_only_when_a_gate_fails():
    ref, new, _ = _pair("calibration decay", 16)
    assert not compare(ref, new, gates=["miscalibration_increase>0.0001"])["passed"]
    assert compare(ref, new, bootstrap=20, level=0.9, gates=["miscalibration_increase>0.5"])["passed"]
    assert compare(ref, new, bootstrap=20, level=0.9)["passed"]


def test_the_reference_priors_are_its_label_shares_and_unseen_classes_are_dropped_from_the_test():
    """Class 9 appears in neither batch: the chi-square test runs on the 9 others."""
    ref, new, d = _pair("none", 17)
    keep_ref, keep_new = d["ref_labels"] != 9, d["new_labels"] != 9
    ref = as_predictions(d["ref_logits"][keep_ref], d["ref_labels"][keep_ref])
    new = as_predictions(d["new_logits"][keep_new], d["new_labels"][keep_new])
    report = compare(ref, new, bootstrap=20, level=0.9)
    np.testing.assert_allclose(report["priors"]["ref"], np.bincount(ref.labels, minlength=10) / ref.n, rtol=0, atol=1e-15)
    assert report["priors"]["ref"][9] == 0.0 and 0.0 < report["priors"]["homogeneity_p_value"] <= 1.0


def test_em_stops_within_its_tolerance():
    from calib.drift import EM_TOLERANCE

    ref, new, _ = _pair("label shift", 18, labelled=False)
    probs = np.exp(new.all_logits() - new.all_logits().max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    old = np.bincount(ref.labels, minlength=10) / ref.n
    estimate, iterations = em_priors(probs, old)
    one_more = adapted_probs(probs, old, estimate).mean(axis=0)
    assert np.max(np.abs(one_more - estimate)) <= EM_TOLERANCE and 1 < iterations < 10_000
    assert EM_TOLERANCE == 1e-8


def test_a_multi_label_batch_beside_a_single_label_one_is_refused_on_either_side():
    rng = np.random.default_rng(19)
    multilabel = as_predictions(rng.normal(size=(150, 3)), (rng.uniform(size=(150, 3)) < 0.5).astype(int))
    single = as_predictions(rng.normal(size=(450, 2)), rng.integers(0, 2, 450))
    for ref, new in ((multilabel, single), (single, multilabel)):
        with pytest.raises(ValueError, match="is a multi-label input and"):
            compare(ref, new, bootstrap=20, level=0.9)


def test_multi_label_batches_of_other_label_counts_are_refused():
    rng = np.random.default_rng(23)
    three = as_predictions(rng.normal(size=(150, 3)), (rng.uniform(size=(150, 3)) < 0.5).astype(int))
    four = as_predictions(rng.normal(size=(150, 4)), (rng.uniform(size=(150, 4)) < 0.5).astype(int))
    with pytest.raises(ValueError, match="has 3 labels and .* 4$"):
        compare(three, four, bootstrap=20, level=0.9)


def _tags(rng, n=3000, stretch=1.0):
    """Five labels, y_l ~ Bernoulli(sigmoid(z_l)): calibrated logits; label 2's stretched."""
    z = rng.normal(0, 2, (n, 5))
    y = (rng.uniform(size=(n, 5)) < 1 / (1 + np.exp(-z))).astype(int)
    z[:, 2] *= stretch
    return z, y


def test_a_multi_label_comparison_takes_each_label_as_a_group():
    rng = np.random.default_rng(25)
    ref, new = _tags(rng), _tags(rng, stretch=2.0)
    report = compare(as_predictions(*ref), as_predictions(*new))
    verdicts = {name: found["verdict"] for name, found in report["groups"]["values"].items()}
    assert verdicts == {"0": "none", "1": "none", "2": "calibration decay", "3": "none", "4": "none"}
    assert report["groups"]["source"] == "labels" and "resamples them as if independent" in report["note_pairs"]
    unlabelled = compare(as_predictions(*ref), as_predictions(new[0], task="multilabel"), bootstrap=40, level=0.95)
    assert set(unlabelled["groups"]["values"]) == {"0", "1", "2", "3", "4"}
    with pytest.raises(ValueError, match="grouped by its labels"):
        compare(as_predictions(*ref), as_predictions(*new), groups=(None, None))


def test_the_predicted_ece_by_hand():
    """Rows of confidence 0.9 (bin 13 of 15) and 0.6 (bin 9), whose truth gives their top labels
    0.8 and 0.6: |0.8 - 0.9| / 2 + 0 = 0.05."""
    from calib.drift import _ece_against

    probs = np.array([[0.9, 0.1], [0.6, 0.4]])
    truth = np.array([[0.8, 0.2], [0.6, 0.4]])
    assert _ece_against(probs, truth) == pytest.approx(0.05, abs=1e-15)
    assert _ece_against(np.array([[1.0, 0.0]]), np.array([[0.5, 0.5]])) == pytest.approx(0.5, abs=1e-15)  # 1.0: the last bin


def test_a_class_absent_from_new_keeps_its_probability_under_the_prior_correction():
    from calib.drift import _prior_correction_effect

    rng = np.random.default_rng(20)
    probs = rng.dirichlet(np.ones(4), size=400)
    labels = rng.integers(0, 3, 400)  # class 3 never in NEW
    ref_prior, new_prior = np.full(4, 0.25), np.bincount(labels, minlength=4) / 400
    effect = _prior_correction_effect(probs, labels, ref_prior, new_prior)
    assert np.isfinite(effect["miscalibration_before"]) and np.isfinite(effect["miscalibration_after"])


@pytest.mark.parametrize("world", ["none", "label shift"])
def test_without_labels_the_verdict_is_the_bonferroni_bound(world):
    from statistics import NormalDist

    ref, new, _ = _pair(world, 21, labelled=False)
    report = compare(ref, new, bootstrap=40, level=0.95)
    priors = report["priors"]
    assert priors["bound"] == pytest.approx(NormalDist().inv_cdf(1 - 0.05 / 20), abs=1e-12)
    assert (report["verdict"] == "label shift") == (priors["largest_z"] > priors["bound"])
    assert priors["l1"] == pytest.approx(np.abs(np.array(priors["new"]) - np.array(priors["ref"])).sum(), abs=1e-15)


def _two_sites(seed: int):
    from calib.evaluation.groups import groups_from_values

    rng = np.random.default_rng(seed)
    same, decayed = shift_world("none", 3000, rng), shift_world("calibration decay", 3000, rng)
    sites = np.array(["a"] * 3000 + ["b"] * 3000 + ["c"] * 99)
    batches = []
    for side in ("ref", "new"):
        logits = np.vstack([same[f"{side}_logits"], decayed[f"{side}_logits"], same[f"{side}_logits"][:99]])
        labels = np.r_[same[f"{side}_labels"], decayed[f"{side}_labels"], same[f"{side}_labels"][:99]]
        batches.append(as_predictions(logits, labels))
    groups = groups_from_values(sites, len(sites), "site")
    return batches, groups


def test_per_group_verdicts_find_the_decayed_group_at_the_bonferroni_level():
    (ref, new), groups = _two_sites(22)
    report = compare(ref, new, groups=(groups, groups))
    found = report["groups"]
    assert {name: value["verdict"] for name, value in found["values"].items()} == {"a": "none", "b": "calibration decay"}
    assert found["level"] == pytest.approx(1 - 0.01 / 2, abs=1e-15)  # two groups analysed
    assert found["skipped"] == {"c": "99 rows in REF and 99 in NEW; each needs 100"}  # one short of the edge


def _write_sites(tmp_path, seed: int) -> None:
    """ref.parquet and new.parquet of :func:`_two_sites`, the site in a column beside the scores."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (ref, new), groups = _two_sites(seed)
    sites = [groups.names[c] for c in groups.codes]
    for name, preds in (("ref", ref), ("new", new)):
        table = pa.table({"logits": list(preds.all_logits()), "label": preds.labels, "site": sites})
        pq.write_table(table, tmp_path / f"{name}.parquet")


def test_per_group_on_the_command_line(run, tmp_path):
    _write_sites(tmp_path, 23)
    code, out, err = run("compare", tmp_path / "ref.parquet", tmp_path / "new.parquet", "--group-by", "site", "--json", "-")
    assert code == 0, err
    assert json.loads(out)["groups"]["values"]["b"]["verdict"] == "calibration decay"


def test_the_html_page_holds_the_verdict_the_tables_and_the_groups(run, tmp_path):
    from html.parser import HTMLParser

    _write_sites(tmp_path, 24)
    code, out, err = run(
        "compare",
        tmp_path / "ref.parquet",
        tmp_path / "new.parquet",
        "--group-by",
        "site",
        "--html",
        tmp_path / "c.html",
        "--json",
        "-",
    )
    assert code == 0, err
    page = (tmp_path / "c.html").read_text()
    report = json.loads(out)
    assert f"Verdict: {report['verdict']}" in page and page.count("<table") == 5  # Brier, log loss, priors, remedies, groups
    for section in ("brier", "log_loss", "priors", "remedies", "groups"):
        assert f'id="{section}"' in page
    assert "not compared: 99 rows in REF and 99 in NEW" in page
    assert "calibration decay from log_loss's miscalibration (MCB)" in page

    class Balance(HTMLParser):
        open_tags: list = []

        def handle_starttag(self, tag, attrs):
            if tag not in ("meta", "br", "wbr"):
                self.open_tags.append(tag)

        def handle_endtag(self, tag):
            assert self.open_tags.pop() == tag

    checker = Balance()
    checker.open_tags = []
    checker.feed(page)
    assert checker.open_tags == []


def test_gates_on_the_worst_group():
    (ref, new), groups = _two_sites(26)
    report = compare(
        ref,
        new,
        groups=(groups, groups),
        gates=["max_group:miscalibration_increase>0.001", "max_group:miscalibration_increase>0.5", "miscalibration_increase>0.5"],
    )
    failing, passing, whole = report["gates"]
    assert failing["result"] == "fail" and failing["group"] == "b" and set(failing["per_group"]) == {"a", "b"}
    assert passing["result"] == "pass" and whole["result"] == "pass" and not report["passed"]
    alone = compare(ref, new, bootstrap=20, level=0.9, gates=["max_group:score_change>0.1"])
    assert alone["gates"][0]["result"] == "fail" and "needs groups" in alone["gates"][0]["why"]
    with pytest.raises(ValueError, match="max_group:KEY or max_label:KEY"):
        compare(ref, new, bootstrap=20, level=0.9, gates=["min_group:miscalibration_increase>0.1"])


def test_the_decay_test_reads_log_loss_by_default_and_brier_by_name(run, tmp_path):
    """CIFAR-10's ResNet-110 on two halves, the second's logits x 1.5: log loss's MCB rises by many
    standard errors where Brier's interval still reaches 0 in some draws (docs/compare.md)."""
    data = np.load(DATA / "cifar10_resnet110_test.npz")
    logits, labels = data["logits"].astype(np.float64), data["labels"]
    order = np.random.default_rng(3).permutation(len(labels))
    ref, new = order[:5000], order[5000:]
    report = compare((logits[ref], labels[ref]), (1.5 * logits[new], labels[new]), bootstrap=200)
    assert report["settings"]["decay_score"] == "log_loss" and report["verdict"] == "calibration decay"
    assert report["changes"]["log_loss"]["mcb"]["ci"][0] > 0.02
    brier = compare((logits[ref], labels[ref]), (1.5 * logits[new], labels[new]), bootstrap=200, decay_score="brier")
    assert brier["settings"]["decay_score"] == "brier" and brier["changes"] == report["changes"]
    assert brier["verdict"] == ("calibration decay" if brier["changes"]["brier"]["mcb"]["ci"][0] > 0 else "none")
    with pytest.raises(ValueError, match="decay score must be one of brier, log_loss"):
        compare((logits[ref], labels[ref]), (logits[new], labels[new]), decay_score="ece")
    np.savez(tmp_path / "ref.npz", logits=logits[ref][:500], labels=labels[ref][:500])
    code, _, err = run("compare", tmp_path / "ref.npz", tmp_path / "ref.npz", "--decay-score", "ece")
    assert code == 2 and "decay score must be one of brier, log_loss" in err and "--decay-score" in err
    code, out, _ = run("compare", "--help")
    assert all(score in out for score in SCORES)
    np.savez(tmp_path / "new.npz", logits=1.5 * logits[new][:500], labels=labels[new][:500])
    code, out, err = run("compare", tmp_path / "ref.npz", tmp_path / "new.npz")
    assert code == 0 and "the decay test reads log_loss's miscalibration (MCB): change +" in out + err
