"""Comparing two sources (calib.operations.comparing): what `calib compare` does, as a library call."""

import numpy as np

import calib
from calib.operations import ComparisonRequest, Reading, Source, plan_comparison


def test_the_comparison_of_two_files_is_calib_compare_of_their_rows(tmp_path):
    data = np.load(calib.sample_path("cifar10_test.npz"))
    ref, new = tmp_path / "ref.npz", tmp_path / "new.npz"
    np.savez(ref, logits=data["logits"][:5000], labels=data["labels"][:5000])
    np.savez(new, logits=data["logits"][5000:])  # without labels
    request = ComparisonRequest(replicates=40, level=0.9)
    plan = plan_comparison(Source(str(ref)), Source(str(new)), request)
    assert plan.ref.preds.labels is not None and plan.new.preds.labels is None and plan.steps > 0
    steps = []
    report = plan.run(lambda *_: steps.append(1))
    direct = calib.compare((data["logits"][:5000], data["labels"][:5000]), data["logits"][5000:], request)
    ours, theirs = report.to_json(), direct.to_json()
    for key in ("verdict", "metrics", "decomposition", "priors", "gates"):
        assert ours[key] == theirs[key], key
    assert report.remedy_written is None


def test_a_binary_reference_reads_the_new_batch_as_binary_with_one_class_absent(tmp_path):
    rng = np.random.default_rng(0)
    scores = rng.uniform(0.05, 0.95, 400)
    ref, new = tmp_path / "ref.npz", tmp_path / "new.npz"
    np.savez(ref, probs=scores, labels=(rng.uniform(size=400) < scores).astype(int))
    np.savez(new, probs=scores[:100], labels=np.ones(100, dtype=int))
    plan = plan_comparison(Source(str(ref)), Source(str(new), Reading()), ComparisonRequest(replicates=40, level=0.9))
    assert plan.new.preds.k == plan.ref.preds.k == 2


def test_a_multi_label_reference_reads_the_new_batch_as_label_pairs(tmp_path):
    from calib.synth.files import Synthesis, synthesize

    synthesize(Synthesis("multilabel", labels=4, n_cal=300, n_test=300), str(tmp_path / "ml"))
    new = tmp_path / "new.npz"
    with np.load(tmp_path / "ml" / "test.npz") as data:
        np.savez(new, logits=data["logits"])  # (N, L) scores without labels
    plan = plan_comparison(
        Source(str(tmp_path / "ml" / "cal.npz")), Source(str(new)), ComparisonRequest(replicates=40, level=0.9)
    )
    assert plan.ref.preds.multilabel is not None and plan.new.preds.multilabel is not None
