"""Evaluating a source (calib.operations.evaluating): what `calib evaluate` does, as a library call."""

import numpy as np
import pytest

import calib
from calib.errors import CalibError
from calib.operations import EvaluationRequest, Reading, Source, merge_states, plan_evaluation

TEST = calib.sample_path("cifar10_test.npz")


def test_a_labelled_file_gets_the_report_of_calib_evaluate():
    request = EvaluationRequest.of(metrics=["accuracy", "ece", "nll"], bootstrap=0)
    plan = plan_evaluation(Source(TEST), request)
    assert plan.mode == "evaluate" and plan.fits == 0 and not plan.subsampled
    assert len(plan.notes) == 1 and plan.notes[0].startswith("input kind: logits (")
    done = plan.run()
    data = np.load(TEST)
    assert not done.estimated and done.shown is done.report
    assert done.report.values == calib.evaluate(data["logits"], data["labels"], request=request).entries.values


def test_the_gates_are_placed_by_what_they_read(tmp_path):
    data = np.load(TEST)
    bundle = str(tmp_path / "ts")
    calib.calibrator("ts").fit(data["logits"][:2000], data["labels"][:2000]).save(bundle)
    unlabelled = tmp_path / "new.npz"
    np.savez(unlabelled, logits=data["logits"][2000:4000])
    gates = ["est_accuracy<0.5", "ece>0.5"]
    request = EvaluationRequest.of(metrics=["accuracy"], bootstrap=0)
    labelled = plan_evaluation(Source(TEST, bundle=bundle), request, gates=gates[1:])
    assert labelled.mode == "evaluate" and [g.expr for g in labelled.request.gates.thresholds] == ["ece>0.5"]
    with pytest.raises(CalibError, match="reads labels and no row"):  # a metric gate where no row has a label
        plan_evaluation(Source(str(unlabelled), bundle=bundle), request, gates=gates)
    plan = plan_evaluation(Source(str(unlabelled), bundle=bundle), request, gates=gates[:1])
    assert plan.mode == "estimate" and plan.estimation.gates == ("est_accuracy<0.5",)
    done = plan.run()
    assert done.estimated and done.labelled is None and [g["passed"] for g in done.report.gates] == [True]
    with pytest.raises(CalibError, match="which need a calibration map"):
        plan_evaluation(Source(str(unlabelled)), request, gates=gates[:1])
    with pytest.raises(CalibError, match="every row of .* has a label"):
        plan_evaluation(Source(TEST, bundle=bundle), request, gates=gates[:1])


def test_without_a_request_the_librarys_default_table_is_evaluated():
    done = plan_evaluation(Source(TEST)).run()
    data = np.load(TEST)
    assert done.report.values == calib.evaluate(data["logits"], data["labels"]).values


def test_a_v_ece_key_is_refused_only_where_v_ece_was_switched_off():
    request = EvaluationRequest.of(metrics=["accuracy"], bootstrap=0)
    with pytest.raises(CalibError, match="vece_l1 is a V-ECE value, which is switched off"):
        plan_evaluation(Source(TEST), request, gates=["vece_l1>0.5"], vece_off=True)
    assert plan_evaluation(Source(TEST), request, gates=["vece_l1>0.5"]).fits > 0


def test_merged_states_give_the_report_of_all_their_rows(tmp_path):
    data = np.load(TEST)
    request = EvaluationRequest.of(metrics=["accuracy", "nll"], bootstrap=0)
    states = []
    for part, rows in enumerate((slice(0, 4000), slice(4000, None))):
        path = tmp_path / f"part{part}.npz"
        np.savez(path, logits=data["logits"][rows], labels=data["labels"][rows])
        state = str(tmp_path / f"state{part}.npz")
        first = rows.start
        plan_evaluation(
            Source(str(path)), EvaluationRequest.of(metrics=["accuracy", "nll"], bootstrap=0, emit_state=state, first_row=first)
        ).run()
        states.append(state)
    done = merge_states(states)
    whole = plan_evaluation(Source(TEST), request).run().report.values
    assert done.shown.input.path == "2 merged states"
    assert done.report.values == pytest.approx(whole, rel=1e-12, abs=1e-15)


def test_a_directory_of_shards_is_evaluated_whole(tmp_path):
    from calib.io.writers import write_matrix

    data = np.load(TEST)
    folder = tmp_path / "shards"
    folder.mkdir()
    for part, rows in enumerate((slice(0, 3000), slice(3000, None))):
        write_matrix(str(folder / f"{part}.parquet"), data["logits"][rows], "logits", labels=data["labels"][rows])
    request = EvaluationRequest.of(metrics=["accuracy"], bootstrap=0)
    plan = plan_evaluation(Source(str(folder), Reading()), request)
    assert plan.mode == "evaluate shards" and plan.input is None
    done = plan.run()
    assert done.shown.input.path == f"{folder} (2 files, local)" and done.shown.input.kind == "shards"
    assert done.report.values["accuracy"] == pytest.approx(float(np.mean(data["logits"].argmax(1) == data["labels"])))


def _shards(folder, data, labelled: bool):
    from calib.io.writers import write_matrix

    folder.mkdir()
    for part, rows in enumerate((slice(0, 3000), slice(3000, 6000))):
        labels = data["labels"][rows] if labelled else None
        write_matrix(str(folder / f"{part}.parquet"), data["logits"][rows], "logits", labels=labels)
    return str(folder)


def test_a_directory_is_estimated_only_under_a_bundle_and_only_where_its_shards_lack_labels(tmp_path):
    data = np.load(TEST)
    bundle = str(tmp_path / "ts")
    calib.calibrator("ts").fit(data["logits"][6000:], data["labels"][6000:]).save(bundle)
    unlabelled, labelled = _shards(tmp_path / "new", data, False), _shards(tmp_path / "old", data, True)
    request = EvaluationRequest.of(metrics=["accuracy"], bootstrap=0)
    assert plan_evaluation(Source(unlabelled, bundle=bundle), request).mode == "estimate shards"
    assert plan_evaluation(Source(labelled, bundle=bundle), request).mode == "evaluate shards"
    assert plan_evaluation(Source(unlabelled), request).mode == "evaluate shards"  # no map: nothing to estimate under
    for source, settings in ((Source(labelled), {"reference": TEST}), (Source(labelled, bundle=bundle), {"missing_label": -1})):
        with pytest.raises(CalibError, match="a directory of shards is estimated under a bundle"):
            plan_evaluation(source, request, **settings)


def test_the_estimates_take_the_requests_level_seed_group_rows_and_first_row(tmp_path):
    data = np.load(TEST)
    reference = tmp_path / "ref.npz"
    np.savez(reference, logits=data["logits"][:3000], labels=data["labels"][:3000])
    new = tmp_path / "new.npz"
    np.savez(new, logits=data["logits"][3000:6000])
    request = EvaluationRequest.of(metrics=["accuracy"], level=0.9, seed=4, min_group_rows=37, inconclusive="fail")
    plan = plan_evaluation(Source(str(new)), request, reference=str(reference), estimator="cbpe")
    assert plan.mode == "estimate" and plan.notes[0] == f"calibration map: ts fitted on 3000 rows of {reference}"
    settings = plan.estimation
    assert (settings.level, settings.seed, settings.min_group_rows, settings.estimator) == (0.9, 4, 37, "cbpe")
    assert settings.inconclusive == "fail"
    done = plan.run()
    assert done.report.to_json()["input"]["reference"] == str(reference)


def test_estimation_states_of_two_parts_merge_into_the_estimation_of_all_rows(tmp_path):
    data = np.load(TEST)
    bundle = str(tmp_path / "ts")
    calib.calibrator("ts").fit(data["logits"][:3000], data["labels"][:3000]).save(bundle)
    whole = tmp_path / "whole.npz"
    np.savez(whole, logits=data["logits"][3000:])
    states = []
    for part, rows in enumerate((slice(3000, 6500), slice(6500, None))):
        path = tmp_path / f"part{part}.npz"
        np.savez(path, logits=data["logits"][rows])
        state = str(tmp_path / f"state{part}.npz")
        request = EvaluationRequest.of(metrics=["accuracy"], emit_state=state, first_row=rows.start - 3000)
        plan_evaluation(Source(str(path), bundle=bundle), request).run()
        states.append(state)
    merged = merge_states(states)
    one = plan_evaluation(Source(str(whole), bundle=bundle), EvaluationRequest.of(metrics=["accuracy"])).run()
    assert merged.estimated and one.estimated
    ours, theirs = merged.report.to_json()["estimates"], one.report.to_json()["estimates"]
    assert ours.keys() == theirs.keys()
    for key, estimate in theirs.items():
        for field in ("value", "sd", "interval"):
            assert ours[key][field] == pytest.approx(estimate[field], rel=1e-12), (key, field)
