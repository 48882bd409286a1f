"""Multi-label inputs: scores (N, L) with 0/1 labels (N, L), read as their N L (row, label) pairs,
evaluated per label (the groups), pooled (micro) and averaged (macro), gated on the worst label,
calibrated by one calibrator for all labels or one per label, against each label's binary
evaluation and the synthetic data's known truth."""

import json

import numpy as np
import pytest
from conftest import needs


def _data(n=1200, labels=4, seed=0):
    """Logits of a model over-confident on some labels, under on others, and labels drawn from the truth."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=(n, labels)) * 1.5 - 0.5
    y = (rng.random((n, labels)) < 1.0 / (1.0 + np.exp(-truth))).astype(np.int64)
    z = truth * np.linspace(0.6, 1.8, labels)
    return z, y


def test_each_label_equals_its_binary_evaluation_and_micro_pools_the_pairs():
    import calib

    z, y = _data()
    report = calib.evaluate(z, y).to_dict()
    assert report["input"]["multilabel"] == {"rows": 1200, "labels": 4} and report["input"]["n"] == 4800
    assert list(report["metrics"]) == ["accuracy", "nll", "brier_pos", "ece_pos"]
    for label in range(4):
        alone = calib.evaluate(z[:, label], y[:, label], metrics=list(report["metrics"])).values
        for key, value in alone.items():
            assert report["groups"][str(label)]["metrics"][key] == pytest.approx(value, rel=1e-12, abs=1e-15), (label, key)
    pooled = calib.evaluate(z.reshape(-1), y.reshape(-1), metrics=list(report["metrics"])).values
    for key, value in pooled.items():
        assert report["metrics"][key]["value"] == pytest.approx(value, rel=1e-12)
    macro = report["group_by"]["mean"]
    for key in report["metrics"]:
        assert macro[key] == pytest.approx(np.mean([report["groups"][str(i)]["metrics"][key] for i in range(4)]), rel=1e-12)


def test_per_label_brier_equals_scikit_learn():
    sklearn_metrics = needs("sklearn.metrics")
    import calib

    z, y = _data(seed=1)
    groups = calib.evaluate(z, y).to_dict()["groups"]
    p = 1.0 / (1.0 + np.exp(-z))
    for label in range(4):
        expected = sklearn_metrics.brier_score_loss(y[:, label], p[:, label])
        assert groups[str(label)]["metrics"]["brier_pos"] == pytest.approx(expected, rel=1e-12)


def test_probability_inputs_and_parquet_list_columns_give_the_same_numbers(tmp_path, run):
    import pyarrow as pa
    import pyarrow.parquet as pq

    z, y = _data(seed=2)
    p = 1.0 / (1.0 + np.exp(-z))
    np.savez(tmp_path / "ml.npz", probs=p, labels=y)
    table = pa.table(
        {
            "probs": pa.FixedSizeListArray.from_arrays(p.ravel(), 4),
            "label": pa.array(list(y)),  # a list column of 0/1 per row
        }
    )
    pq.write_table(table, tmp_path / "ml.parquet")
    outputs = []
    for name in ("ml.npz", "ml.parquet"):
        code, out, err = run("evaluate", tmp_path / name, "--json", "-")
        assert code == 0, err
        assert "multi-label: 1200 rows x 4 labels, read as 4800 (row, label) pairs" in err
        outputs.append(json.loads(out))
    assert outputs[0]["metrics"] == outputs[1]["metrics"] and outputs[0]["groups"] == outputs[1]["groups"]


def test_bad_multi_label_inputs_are_refused_with_one_line(tmp_path, run):
    import calib

    z, y = _data(n=50)
    bad = y.astype(float)
    bad[7, 2] = 2.0
    with pytest.raises(ValueError, match=r"row 7, label 2 is 2.0; multi-label labels are 0 or 1"):
        calib.evaluate(z, bad)
    bad[7, 2] = np.nan
    with pytest.raises(ValueError, match=r"row 7, label 2 is nan"):
        calib.evaluate(z, bad)
    with pytest.raises(ValueError, match=r"labels \(50, 3\), scores \(50, 4\)"):
        calib.evaluate(z, y[:, :3])
    np.savez(tmp_path / "ml.npz", logits=z, labels=y)
    np.savez(tmp_path / "mc.npz", logits=z, labels=y[:, 0])
    for args, message in (
        ((tmp_path / "ml.npz", "--task", "multiclass"), "declared multiclass"),
        ((tmp_path / "mc.npz", "--task", "multilabel"), "needs labels as a (N, L) matrix"),
        ((tmp_path / "ml.npz", "--task", "ternary"), "task must be one of"),
        ((tmp_path / "ml.npz", "--group-by", "label"), "grouped by its labels"),
        ((tmp_path / "mc.npz", "--fail-if", "max_label:ece_pos>0.1"), "needs a multi-label input"),
    ):
        code, _, err = run("evaluate", *args, "--no-vece")
        assert code == 2 and message in err and err.count("error:") == 1, (args, err)


def test_max_label_gate_on_its_edge(run, tmp_path):
    """The gate reads the worst label's value: a threshold exactly at it passes (> is strict), a
    hair below fails; max_group: is the same over the labels."""
    import calib

    z, y = _data(seed=3)
    worst = float(max(calib.evaluate(z[:, i], y[:, i], metrics=["ece_pos"]).values["ece_pos"] for i in range(4)))
    np.savez(tmp_path / "ml.npz", logits=z, labels=y)
    for threshold, expected in ((worst, 0), (float(np.nextafter(worst, 0.0)), 1), (worst * 1.01, 0)):
        for aggregate in ("max_label", "max_group"):
            code, _, err = run(
                "evaluate", tmp_path / "ml.npz", "--fail-if", f"{aggregate}:ece_pos>{threshold!r}", "--ignore-noise"
            )
            assert code == expected, (aggregate, threshold, err)
    code, _, err = run("evaluate", tmp_path / "ml.npz", "--fail-if", f"max_label:ece_pos>{worst * 0.5!r}", "--ignore-noise")
    assert code == 1 and "of label" in err and "(the max label of 4 labels)" in err


def test_states_of_row_halves_merge_into_the_whole(run, tmp_path):
    z, y = _data(seed=4)
    np.savez(tmp_path / "all.npz", logits=z, labels=y)
    np.savez(tmp_path / "a.npz", logits=z[:500], labels=y[:500])
    np.savez(tmp_path / "b.npz", logits=z[500:], labels=y[500:])
    for part in ("a", "b"):
        assert run("evaluate", tmp_path / f"{part}.npz", "--emit-state", tmp_path / f"{part}.state.npz")[0] == 0
    code, out, _ = run("merge-states", tmp_path / "a.state.npz", tmp_path / "b.state.npz", "--json", "-")
    assert code == 0
    merged = json.loads(out)
    whole = json.loads(run("evaluate", tmp_path / "all.npz", "--json", "-")[1])
    assert merged["input"]["multilabel"] == {"rows": 1200, "labels": 4}
    for key, entry in whole["metrics"].items():
        assert merged["metrics"][key]["value"] == pytest.approx(entry["value"], rel=1e-12)
    for label, entry in whole["groups"].items():
        for key, value in entry["metrics"].items():
            assert merged["groups"][label]["metrics"][key] == pytest.approx(value, rel=1e-12)
    assert merged["group_by"]["mean"] == pytest.approx(whole["group_by"]["mean"], rel=1e-12)  # the macro average
    code, text, _ = run("merge-states", tmp_path / "a.state.npz", tmp_path / "b.state.npz")
    assert code == 0 and "by label (4 labels)" in text
    np.savez(tmp_path / "other.npz", logits=z[:, :3], labels=y[:, :3])
    assert run("evaluate", tmp_path / "other.npz", "--emit-state", tmp_path / "other.state.npz")[0] == 0
    code, _, err = run("merge-states", tmp_path / "a.state.npz", tmp_path / "other.state.npz")
    assert code == 2 and "multi-label" in err


def test_the_bootstrap_resamples_rows_with_all_their_pairs():
    from calib.bootstrap import BootstrapStates
    from calib.metrics import MetricConfig
    from calib.metrics.metric_set import MetricSet

    states = BootstrapStates(lambda clusters=None: MetricSet(["accuracy"], MetricConfig(), 2, clusters), 0, pairs_per_row=4)
    clusters = states.cells(slice(0, 400)).reshape(100, 4)  # 100 rows of 4 pairs
    assert (clusters == clusters[:, :1]).all() and len(np.unique(clusters[:, 0])) > 50


def test_no_analytic_interval_takes_a_rows_pairs_as_independent():
    """The analytic intervals (Wilson, the normal ones) count independent rows: a multi-label input's
    pairs of one row are not, so its report has none, while the same pairs read as single rows do."""
    import calib

    z, y = _data(n=300, seed=4)
    as_pairs = calib.evaluate(z, y, request=calib.EvaluationRequest.of(bootstrap=30)).to_dict()["metrics"]
    as_rows = calib.evaluate(
        z.reshape(-1), y.reshape(-1), request=calib.EvaluationRequest.of(metrics=list(as_pairs), bootstrap=30)
    ).to_dict()["metrics"]
    assert all("ci" in entry and "ci_analytic" not in entry for entry in as_pairs.values())
    assert any("ci_analytic" in entry for entry in as_rows.values())


def test_shared_and_per_label_temperatures_by_hand(tmp_path):
    """One temperature for all labels is TS on the pooled pairs; per label, label l's temperature
    is TS on its column alone; the applied probabilities are sigmoid(z / T_l), (N, L)."""
    import calib

    z, y = _data(seed=5)
    shared = calib.calibrator("ts").fit(z, y)
    pooled = calib.calibrator("ts").fit(z.reshape(-1), y.reshape(-1))
    assert shared.fitted.temperature_ == pytest.approx(pooled.fitted.temperature_, rel=1e-12)
    per_label = calib.calibrator("ts", per_label=True).fit(z, y)
    temperatures = [calib.calibrator("ts").fit(z[:, i], y[:, i]).fitted.temperature_ for i in range(4)]
    assert [c.temperature_ for c in per_label.fitted.calibrators_] == pytest.approx(temperatures, rel=1e-12)
    probs = per_label.predict_proba(z)
    assert probs.shape == (1200, 4)
    assert probs == pytest.approx(1.0 / (1.0 + np.exp(-z / np.array(temperatures))), rel=1e-12)
    per_label.save(str(tmp_path / "b"))
    again = calib.load(str(tmp_path / "b"))
    assert again.per_label and np.array_equal(again.predict_proba(z), probs)
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["task"] == "multilabel" and manifest["n_labels"] == 4 and manifest["per_label"] is True


@pytest.mark.parametrize("method", ["ts", "platt", "isotonic", "beta", "hist", "venn-abers"])
def test_fit_apply_evaluate_per_label_from_the_command_line(run, tmp_path, method):
    z, y = _data(seed=6)
    np.savez(tmp_path / "cal.npz", logits=z[:600], labels=y[:600])
    np.savez(tmp_path / "test.npz", logits=z[600:], labels=y[600:])
    np.save(tmp_path / "test_scores.npy", z[600:])
    code, out, err = run("fit", tmp_path / "cal.npz", "--method", method, "--per-label", "--out", tmp_path / "b")
    assert code == 0, err
    assert "one calibrator per label (4)" in out
    for target in ("out.npz", "out.npy", "out.parquet"):
        assert run("apply", tmp_path / "b", tmp_path / "test.npz", "--out", tmp_path / target)[0] == 0
    from_scores = tmp_path / "from_scores.npy"
    code, _, err = run("apply", tmp_path / "b", tmp_path / "test_scores.npy", "--out", from_scores)
    assert code == 0 and "600 rows x 4 labels" in err
    npz, npy = np.load(tmp_path / "out.npz"), np.load(tmp_path / "out.npy")
    assert npz["probs"].shape == (600, 4) and np.array_equal(npz["probs"], npy)
    assert np.array_equal(npy, np.load(from_scores)) and np.array_equal(npz["labels"], y[600:])
    code, out, _ = run("evaluate", tmp_path / "test.npz", "--bundle", tmp_path / "b", "--json", "-")
    assert code == 0
    report = json.loads(out)
    for label in range(4):  # each label's calibrated numbers are its own map's
        import calib

        alone = calib.load(str(tmp_path / "b")).fitted.calibrators_[label]
        probs = alone.predict_proba(np.column_stack([np.zeros(600), z[600:, label]]))[:, 1]
        assert probs == pytest.approx(npz["probs"][:, label], rel=1e-12)
        assert report["groups"][str(label)]["metrics"]["brier_pos"] == pytest.approx(
            np.mean((probs - y[600:, label]) ** 2), rel=1e-9
        )


def test_bundles_apply_only_to_inputs_of_their_task(run, tmp_path):
    z, y = _data(seed=7)
    np.savez(tmp_path / "ml.npz", logits=z, labels=y)
    np.savez(tmp_path / "ml3.npz", logits=z[:, :3], labels=y[:, :3])
    np.savez(tmp_path / "mc.npz", logits=z, labels=y.argmax(axis=1))
    assert run("fit", tmp_path / "ml.npz", "--method", "ts", "--out", tmp_path / "ml_b")[0] == 0
    assert run("fit", tmp_path / "mc.npz", "--method", "ts", "--out", tmp_path / "mc_b")[0] == 0
    for bundle, data, message in (
        ("ml_b", "ml3.npz", "multi-label input of 4 labels; this input is of 3 labels"),
        ("ml_b", "mc.npz", "needs labels as a (N, L) matrix"),
        ("mc_b", "ml.npz", "is a multi-label input (4 labels)"),
    ):
        code, _, err = run("apply", tmp_path / bundle, tmp_path / data, "--out", tmp_path / "o.npz")
        assert code == 2 and message in err, (bundle, data, err)


def test_what_multi_label_inputs_do_not_have_yet_is_refused(run, tmp_path):
    z, y = _data(seed=8)
    np.savez(tmp_path / "ml.npz", logits=z, labels=y)
    np.save(tmp_path / "features.npy", z)
    for args, message in (
        (("fit", tmp_path / "ml.npz", "--method", "mr", "--out", tmp_path / "b"), "need a stated coverage, per label"),
        (
            (
                "fit",
                tmp_path / "ml.npz",
                "--method",
                "ts",
                "--per-label",
                "--features",
                tmp_path / "features.npy",
                "--out",
                tmp_path / "c",
            ),
            "take neither",
        ),
    ):
        code, _, err = run(*args)
        assert code == 2 and message in err, (args, err)
    np.savez(tmp_path / "mc.npz", logits=z, labels=y.argmax(axis=1))
    code, _, err = run("fit", tmp_path / "mc.npz", "--method", "ts", "--per-label", "--out", tmp_path / "d")
    assert code == 2 and "needs a multi-label input" in err


def test_synthetic_multilabel_truth_and_calibration_towards_it(run, tmp_path):
    """calib synth multilabel: the written true errors are mean |sigmoid(z) - p| per label; per-label
    Platt (the family the data's maps belong to) brings the macro ECE down to the truth's own."""
    code, _, err = run("synth", "multilabel", "--labels", "8", "--n-cal", "6000", "--n-test", "6000", "--out", tmp_path / "ml")
    assert code == 0, err
    meta = json.loads((tmp_path / "ml" / "meta.json").read_text())
    test = np.load(tmp_path / "ml" / "test.npz")
    errors = np.abs(1.0 / (1.0 + np.exp(-test["logits"])) - test["true_probs"]).mean(axis=0)
    assert meta["true_l1_errors_test"] == pytest.approx(errors.tolist(), abs=1e-6)
    assert test["labels"].shape == (6000, 8) and set(np.unique(test["labels"])) == {0, 1}
    macro = {}
    for name, args in (("model", ()), ("platt", ("--bundle", tmp_path / "platt"))):
        if name == "platt":
            assert (
                run("fit", tmp_path / "ml" / "cal.npz", "--method", "platt", "--per-label", "--out", tmp_path / "platt")[0] == 0
            )
        code, out, _ = run("evaluate", tmp_path / "ml" / "test.npz", *args, "--json", "-")
        macro[name] = json.loads(out)["group_by"]["mean"]["ece_pos"]
    np.savez(tmp_path / "truth.npz", probs=test["true_probs"], labels=test["labels"])
    macro["truth"] = json.loads(run("evaluate", tmp_path / "truth.npz", "--json", "-")[1])["group_by"]["mean"]["ece_pos"]
    assert macro["platt"] < 0.5 * macro["model"]
    assert macro["platt"] < 1.5 * macro["truth"] + 0.003  # binning noise of 6,000 rows per label


def test_diagnose_shows_the_worst_labels_reliability(run, tmp_path):
    """diagnose of a multi-label input: the pooled reliability of P(y_l = 1), each label's
    positive-class ECE (the evaluation's per-label ece_pos) and the worst labels' curves."""
    z, y = _data(seed=9)
    np.savez(tmp_path / "ml.npz", logits=z, labels=y)
    code, out, err = run("diagnose", tmp_path / "ml.npz", "--out", tmp_path / "r", "--no-vece")
    assert code == 0, err
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    groups = report["groups"]
    assert groups["unit"] == "label" and groups["measure"] == "positive-class ECE"
    evaluated = json.loads(run("evaluate", tmp_path / "ml.npz", "--json", "-")[1])
    for label, entry in groups["ece"].items():
        assert entry["ece"] == pytest.approx(evaluated["groups"][label]["metrics"]["ece_pos"], rel=1e-12)
    worst = max(groups["ece"], key=lambda label: groups["ece"][label]["ece"])
    assert groups["worst"][0]["group"] == worst and len(groups["worst"]) == 3
    assert report["metrics"]["ece_pos"] == pytest.approx(evaluated["metrics"]["ece_pos"]["value"], rel=1e-12)
    assert "worst labels (positive-class ECE" in out and "reliability (P(y_l = 1), pairs pooled)" in out
    html = (tmp_path / "r" / "report.html").read_text()
    assert "<h2>Labels</h2>" in html and "worst label" in html


def test_per_label_fit_report_and_a_label_never_positive():
    """The report gives min / median / max of each label's fitted numbers; a label with no positive
    calibration row warns, naming the label and its absent class."""
    import calib

    z, y = _data(seed=10)
    y[:, 2] = 0
    fitted = calib.calibrator("ts", per_label=True).fit(z, y)
    temperatures = [c.temperature_ for c in fitted.fitted.calibrators_]
    report = fitted.fit_report()
    key = "temperature per label (min / median / max)"
    assert report["labels"] == 4
    assert report[key] == pytest.approx([min(temperatures), float(np.median(temperatures)), max(temperatures)], rel=1e-12)
    warnings = fitted.fitted.warnings()
    assert any(w.startswith("label 2: 1 classes have no calibration row (1)") for w in warnings), warnings
    assert not any(w.startswith("label 0:") for w in warnings)


def _pair_scores(z, y):
    """msp scores of the pairs by hand: V = 1 - P(y_l), P(y_l = 1) = sigmoid(z)."""
    p1 = 1.0 / (1.0 + np.exp(-z))
    return np.where(y == 1, 1.0 - p1, p1), p1


def _kth(values, alpha):
    """The ceil((n + 1)(1 - alpha))-th smallest value, by the definition."""
    n = len(values)
    return np.sort(values)[int(np.ceil((n + 1) * (1 - alpha))) - 1]


def test_joint_threshold_is_the_quantile_of_row_maxima_and_its_pair_level_by_hand():
    """Joint coverage: q is the ceil((n + 1)(1 - alpha))-th smallest row maximum of the pair scores;
    the probabilities put 1 - alpha_pair on each set, alpha_pair = (missed pairs + 1) / (n L + 1)."""
    import calib

    z, y = _data(n=300, seed=11)
    fitted = calib.calibrator("mr", joint=True, alpha=0.1).fit(z, y)
    scores, p1 = _pair_scores(z, y)
    q = _kth(scores.max(axis=1), 0.1)
    assert float(fitted.fitted.threshold_["q"]) == pytest.approx(q, rel=1e-14)  # sigmoid vs softmax: an ulp
    q += 1e-12  # the pair at q (the k-th row maximum) is in its set by either computation
    missed = int((scores > q).sum())
    assert fitted.fitted.joint_["pair_alpha"] == (missed + 1) / (z.size + 1)
    report = fitted.fit_report()
    assert report["coverage"] == "joint over 4 labels" and report["alpha"] == 0.1
    # sets: v in C_l iff V(x_l, v) <= q; codes 0 {0}, 1 {1}, 2 {0, 1}, -1 {}
    has_1, has_0 = 1.0 - p1 <= q, p1 <= q
    expected = np.where(has_0 & has_1, 2, np.where(has_1, 1, np.where(has_0, 0, -1)))
    sets = fitted.predict_sets(z)
    assert sets.dtype == np.int8 and sets.shape == (300, 4) and (sets == expected).all()
    # mass rescaling: a pair with one value in its set gets 1 - alpha_pair on it
    probs = fitted.predict_proba(z)
    one = sets == 1
    assert np.allclose(probs[one], 1.0 - fitted.fitted.joint_["pair_alpha"], rtol=1e-12)


def test_per_label_sets_use_each_labels_own_quantile():
    import calib

    z, y = _data(n=300, seed=12)
    fitted = calib.calibrator("mr", per_label=True, alpha=0.2).fit(z, y)
    scores, _ = _pair_scores(z, y)
    for label, calibrator in enumerate(fitted.fitted.calibrators_):
        assert float(calibrator.threshold_["q"]) == pytest.approx(_kth(scores[:, label], 0.2), rel=1e-14)
    assert fitted.fit_report()["coverage"] == "per label" and fitted.fit_report()["alpha"] == 0.2


def test_joint_and_per_label_coverage_hold_over_many_splits():
    """The guarantees: P(every label of a row covered) >= 1 - alpha with joint sets, P(y_l in C_l)
    >= 1 - alpha for each label with per-label sets, and not much more (at most 1 - alpha + 1 / (n +
    1) for continuous scores): 100 fresh draws of 200 calibration and 200 test rows of 5 labels; the
    mean's standard error is about 0.003, the bounds are 3 of them."""
    import calib

    joint, per_label = [], []
    for draw in range(100):
        z, y = _data(n=400, labels=5, seed=1000 + draw)
        sets = calib.calibrator("mr", joint=True, alpha=0.1).fit(z[:200], y[:200]).predict_sets(z[200:])
        joint.append(((sets == 2) | (sets == y[200:])).all(axis=1).mean())
        sets = calib.calibrator("mr", per_label=True, alpha=0.1).fit(z[:200], y[:200]).predict_sets(z[200:])
        per_label.append(((sets == 2) | (sets == y[200:])).mean(axis=0))
    upper = 0.9 + 1.0 / 201 + 0.01
    assert 0.89 <= np.mean(joint) <= upper
    assert ((np.mean(per_label, axis=0) >= 0.89) & (np.mean(per_label, axis=0) <= upper)).all()


def test_joint_at_the_minimum_rows_for_alpha():
    """n = 9 rows at alpha = 0.1: q is the largest row maximum (rank ceil(10 * 0.9) = 9); 8 rows refused."""
    import calib

    z, y = _data(n=9, seed=14)
    fitted = calib.calibrator("mr", joint=True, alpha=0.1).fit(z, y)
    assert float(fitted.fitted.threshold_["q"]) == pytest.approx(_pair_scores(z, y)[0].max(), rel=1e-14)
    with pytest.raises(ValueError, match="too few for alpha"):
        calib.calibrator("mr", joint=True, alpha=0.1).fit(z[:8], y[:8])


def test_joint_and_per_label_conformal_from_the_command_line(run, tmp_path):
    """fit --joint / --per-label, apply --what sets (codes in .npz, parquet and CSV), evaluate's
    joint and per-label coverage computed by hand from the written sets, diagnose's finding."""
    import pyarrow.parquet as pq

    z, y = _data(n=1000, seed=15)
    np.savez(tmp_path / "cal.npz", logits=z[:500], labels=y[:500])
    np.savez(tmp_path / "test.npz", logits=z[500:], labels=y[500:])
    for flag in ("--joint", "--per-label"):
        bundle = tmp_path / flag.strip("-")
        code, _, err = run("fit", tmp_path / "cal.npz", "--method", "mr", flag, "--out", bundle)
        assert code == 0, err
        manifest = json.loads((bundle / "manifest.json").read_text())
        assert (manifest.get("coverage") == "joint") == (flag == "--joint")
        assert run("apply", bundle, tmp_path / "test.npz", "--what", "sets", "--out", tmp_path / "s.npz", "--force")[0] == 0
        sets = np.load(tmp_path / "s.npz")["sets"]
        assert sets.shape == (500, 4) and sets.dtype == np.int8
        assert run("apply", bundle, tmp_path / "test.npz", "--what", "sets", "--out", tmp_path / "s.parquet", "--force")[0] == 0
        assert np.array_equal(np.stack(pq.read_table(tmp_path / "s.parquet").column("sets").to_numpy(zero_copy_only=False)), sets)
        assert run("apply", bundle, tmp_path / "test.npz", "--what", "sets", "--out", tmp_path / "s.csv", "--force")[0] == 0
        header = (tmp_path / "s.csv").read_text().splitlines()[0]
        assert header.startswith('"set_0","set_1","set_2","set_3","label_0"')
        covered = (sets == 2) | (sets == y[500:])
        code, out, err = run("evaluate", tmp_path / "test.npz", "--bundle", bundle, "--json", "-")
        assert code == 0, err
        metrics = json.loads(out)["metrics"]
        assert metrics["set_coverage"]["value"] == pytest.approx(covered.mean(), rel=1e-12)
        assert metrics["set_coverage_joint"]["value"] == pytest.approx(covered.all(axis=1).mean(), rel=1e-12)
        label_coverage = covered.mean(axis=0)
        assert metrics["set_coverage_label_min"]["value"] == pytest.approx(label_coverage.min(), rel=1e-12)
        assert metrics["set_coverage_label_min"]["worst_labels"][0]["label"] == int(np.argmin(label_coverage))
        code, out, err = run("diagnose", tmp_path / "test.npz", "--bundle", bundle, "--out", tmp_path / flag, "--no-vece")
        assert code == 0, err
        said = "joint sets cover every label of a row at once" if flag == "--joint" else "per-label sets cover each label"
        assert said in out


def test_conformal_multi_label_refusals(run, tmp_path):
    z, y = _data(n=200, seed=16)
    np.savez(tmp_path / "ml.npz", logits=z, labels=y)
    np.savez(tmp_path / "mc.npz", logits=z, labels=y.argmax(axis=1))
    for data, args, message in (
        ("ml.npz", ("--method", "ts", "--joint"), "builds no conformal sets; joint coverage"),
        ("ml.npz", ("--method", "mr", "--joint", "--threshold", "classwise"), "with a constant threshold"),
        ("ml.npz", ("--method", "mr", "--joint", "--per-label"), "choose one"),
        ("mc.npz", ("--method", "mr", "--joint"), "joint coverage needs a multi-label input"),
        ("ml.npz", ("--method", "ats-mgq"), "need a stated coverage"),
    ):
        code, _, err = run("fit", tmp_path / data, *args, "--out", tmp_path / "b")
        assert code == 2 and message in err and "Traceback" not in err, (args, err)


def test_joint_bundle_round_trip():
    import calib

    z, y = _data(n=300, seed=17)
    fitted = calib.calibrator("ats-gq", joint=True, alpha=0.1).fit(z, y)
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        fitted.save(folder + "/b")
        loaded = calib.load(folder + "/b")
    assert loaded.joint and loaded.fitted.joint_ == fitted.fitted.joint_
    assert np.array_equal(loaded.predict_sets(z), fitted.predict_sets(z))
    assert np.array_equal(loaded.predict_proba(z), fitted.predict_proba(z))


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".arrow", ".jsonl"])
def test_wide_label_columns(tmp_path, suffix):
    """One 0/1 column per label (label_0, label_1, ..., or a prefix named with a *) reads as the
    (N, L) label matrix, the same numbers as the .npz; other columns pass through."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    import calib
    from calib.io import read_predictions

    z, y = _data(n=100, labels=3, seed=18)
    prefix = "label_" if suffix != ".jsonl" else "tag_"
    columns = {f"logit_{j}": z[:, j] for j in range(3)}
    columns.update({f"{prefix}{j}": y[:, j] for j in (2, 0, 1)})  # out of order on purpose
    columns["id"] = np.arange(100)
    table = pa.table(columns)
    path = tmp_path / f"wide{suffix}"
    if suffix == ".parquet":
        pq.write_table(table, path)
    elif suffix == ".csv":
        pacsv.write_csv(table, path)
    elif suffix == ".arrow":
        feather.write_feather(table, path)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in table.to_pylist()))
    preds = read_predictions(str(path), label_column=None if prefix == "label_" else "tag_*")
    assert preds.multilabel.n_labels == 3 and np.array_equal(preds.labels.reshape(100, 3), y)
    assert preds.passthrough.column_names == ["id"]
    expected = calib.evaluate(z, y).values
    assert calib.evaluate(preds).values == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="no column starts with 'nope_'"):
        read_predictions(str(path), label_column="nope_*")


def test_joint_scores_the_probabilities_as_given():
    """A probability input's pair scores are 1 - p as the file gives p (not the softmax of their
    logs, an ulp away): q is exactly the k-th row maximum of those, and a test row equal to the
    calibration row at q is in its set."""
    import calib

    rng = np.random.default_rng(19)
    p = np.round(rng.uniform(0.05, 0.95, size=(200, 3)), 3)
    y = (rng.random((200, 3)) < p).astype(np.int64)
    fitted = calib.calibrator("mr", joint=True, alpha=0.1).fit(p, y, kind="probs")
    scores = np.where(y == 1, 1.0 - p, p)
    q = _kth(scores.max(axis=1), 0.1)
    assert float(fitted.fitted.threshold_["q"]) == q
    at_q = int(np.argmax(scores.max(axis=1) == q))
    sets = fitted.predict_sets(p[at_q : at_q + 1], kind="probs")[0]
    assert ((sets == 2) | (sets == y[at_q])).all()


def test_per_label_set_counts_add_up_over_the_labels():
    """apply's row counts of a conformal method per label: each label's counts, summed."""
    import calib
    from calib.api import as_predictions
    from calib.calibrators.base import CalibrationInputs

    z, y = _data(n=400, seed=20)
    fitted = calib.calibrator("mr", per_label=True, alpha=0.3).fit(z, y)
    preds = as_predictions(z, y, task="multilabel")
    _, counts = fitted.fitted.apply(CalibrationInputs.of(preds), "probs")
    expected: dict = {}
    for label, calibrator in enumerate(fitted.fitted.calibrators_):
        rows = np.flatnonzero(np.arange(preds.n) % 4 == label)
        for key, value in calibrator.apply(CalibrationInputs.of(preds, rows), "probs")[1].items():
            expected[key] = expected.get(key, 0) + value
    assert counts == expected and sum(counts.values()) > 0


def test_per_label_fit_report_of_entries_that_differ_or_are_missing():
    """Entries equal for every label are kept as they are; numbers that differ become min / median /
    max over the labels that report them; strings or flags that differ are left out."""
    from calib.api import as_predictions
    from calib.calibrators.base import CalibrationInputs
    from calib.calibrators.per_label import PerLabel
    from calib.calibrators.temperature import TemperatureScaling

    class Reported(TemperatureScaling):
        def fit_report(self):
            t = float(self.temperature_)
            report = {"temperature": t, "flag": t > 1.0, "note": "hot" if t > 1.0 else "cold", "same": "x"}
            if t > 1.0:
                report["only some"] = 2 * t
            return report

    z, y = _data(seed=21)
    calibrator = PerLabel(Reported, Reported.Options(), 4)
    preds = as_predictions(z, y, task="multilabel")
    calibrator.fit_inputs(CalibrationInputs.of(preds), preds.labels, seed=0)
    temperatures = [float(c.temperature_) for c in calibrator.calibrators_]
    assert min(temperatures) < 1.0 < max(temperatures)  # the data make some labels hot, some cold
    report = calibrator.fit_report()
    hot = [2 * t for t in temperatures if t > 1.0]
    assert report["same"] == "x" and "flag" not in report and "note" not in report
    assert report["only some per label (min / median / max)"] == [min(hot), float(np.median(hot)), max(hot)]
    assert report["temperature per label (min / median / max)"] == pytest.approx(
        [min(temperatures), float(np.median(temperatures)), max(temperatures)], rel=1e-12
    )


def test_a_joint_fit_summary_counts_pairs_as_pairs(run, tmp_path):
    """The joint fit's infeasible counts are of the input's (row, label) pairs, not rows: 300 rows
    of 4 labels give up to 1,200 of them, and the summary says pairs."""
    z, y = _data(n=300, seed=3)
    np.savez(tmp_path / "ml.npz", logits=z, labels=y)
    code, out, err = run("fit", tmp_path / "ml.npz", "--method", "mr", "--joint", "--out", tmp_path / "joint")
    report = json.loads((tmp_path / "joint" / "manifest.json").read_text())["fit_report"]
    counted = [key for key in report if key.startswith("infeasible")]
    assert code == 0 and counted and all(key.endswith("(cal (row, label) pairs)") for key in counted)
    assert sum(report[key] for key in counted) <= 300 * z.shape[1]


def test_the_library_refuses_features_and_training_rows_for_pairs(tmp_path):
    """The refusal is the library's (the command line only adds the flag to drop): a calibrator of
    one for all pairs took features before, which are per row, not per pair."""
    import calib
    from calib.errors import InputError, UsageError
    from calib.io.readers import read_features

    z, y = _data(seed=8)
    preds = calib.api.as_predictions(z, y)
    with pytest.raises(UsageError, match="take neither"):
        calib.calibrator("ts").fit(preds, features=np.zeros((len(z), 2)))
    with pytest.raises(UsageError, match="take neither"):
        calib.calibrator("ts").fit(preds, train=preds)
    np.save(tmp_path / "f.npy", np.zeros((len(z), 2)))
    with pytest.raises(InputError, match="take neither"):
        read_features(str(tmp_path / "f.npy"), preds)
