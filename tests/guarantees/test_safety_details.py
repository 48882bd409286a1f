"""The safety checks pinned at their edges: a bundle's canonical bytes, its size limit (a file one
byte over it, and exactly at it), the refusals of its names, manifest and file list; metric state
files' format and version; merged reports; increase gates on undefined values and in groups; and
the matrix-scaling fit's settings and warnings."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from calib import CALIBRATORS, BundleError
from calib.bundle import MANIFEST, MAX_JSON_BYTES, State, dumps, read_bundle, write_bundle
from calib.errors import InputError

MANIFEST_FIELDS = {"method": "ts", "n_classes": 3, "input_kind": "logits", "options": {}}


def bundle(tmp_path, name="b", params=None, **extra) -> str:
    path = str(tmp_path / name)
    write_bundle(path, manifest=dict(MANIFEST_FIELDS), state=State(params=params or {"temperature": 1.5}, **extra))
    return path


def rewrite_manifest(path: str, change) -> None:
    manifest = json.loads(open(os.path.join(path, MANIFEST)).read())
    change(manifest)
    with open(os.path.join(path, MANIFEST), "w") as handle:
        json.dump(manifest, handle)


# bundles -------------------------------------------------------------------------------------------


def test_bundle_json_is_sorted_indented_by_two_and_refuses_nan():
    assert dumps({"b": 1, "a": [1, 2]}) == b'{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'
    with pytest.raises(BundleError, match="non-finite"):
        dumps({"t": float("nan")})


def test_a_bundle_is_not_overwritten_unless_forced(tmp_path):
    path = bundle(tmp_path)
    with pytest.raises(Exception, match="exists"):
        write_bundle(path, manifest=dict(MANIFEST_FIELDS), state=State(params={"temperature": 2.0}))
    write_bundle(path, manifest=dict(MANIFEST_FIELDS), state=State(params={"temperature": 2.0}), force=True)
    assert read_bundle(path, {"ts"}).state.params == {"temperature": 2.0}


@pytest.mark.parametrize("name", ["../escape", ".hidden", "manifest.json", "a/b"])
def test_a_bundle_file_needs_a_plain_name_other_than_the_manifest(tmp_path, name):
    with pytest.raises(BundleError, match="plain file name"):
        write_bundle(str(tmp_path / "b"), manifest=dict(MANIFEST_FIELDS), state=State(blobs={name: b"x"}))


def test_a_manifest_must_be_an_object_of_the_bundle_format(tmp_path):
    path = bundle(tmp_path)
    rewrite_manifest(path, lambda m: m.update(format="other"))
    with pytest.raises(BundleError, match="not a calib bundle manifest"):
        read_bundle(path, {"ts"})
    with open(os.path.join(path, MANIFEST), "w") as handle:
        json.dump(["calib-bundle"], handle)
    with pytest.raises(BundleError, match="not a calib bundle manifest"):
        read_bundle(path, {"ts"})


def test_a_manifest_must_list_params_in_a_file_table(tmp_path):
    path = bundle(tmp_path)
    rewrite_manifest(path, lambda m: m["files"].pop("params.json"))
    with pytest.raises(BundleError, match="lists no params.json"):
        read_bundle(path, {"ts"})
    rewrite_manifest(path, lambda m: m.update(files=["params.json"]))
    with pytest.raises(BundleError, match="lists no params.json"):
        read_bundle(path, {"ts"})


def test_a_manifest_over_64_mib_is_refused_unread_and_one_at_the_limit_is_read(tmp_path):
    """The limit is 64 MiB: a file of 64 MiB + 1 byte is "implausibly large" (sparse, so the test
    writes nothing); one of exactly 64 MiB is read (and then fails as JSON)."""
    assert MAX_JSON_BYTES == 64 * 2**20
    path = bundle(tmp_path)
    for size, message in ((MAX_JSON_BYTES + 1, "implausibly large"), (MAX_JSON_BYTES, "manifest.json")):
        with open(os.path.join(path, MANIFEST), "wb") as handle:
            handle.truncate(size)
        with pytest.raises(BundleError, match=message) as refused:
            read_bundle(path, {"ts"})
        assert ("implausibly" in str(refused.value)) == (size > MAX_JSON_BYTES)


# metric states and merged reports --------------------------------------------------------------


def state_file(tmp_path, name="s.npz", rows=slice(0, 300)):
    import calib

    data = np.load(calib.sample_path("cifar10_test.npz"))
    path = str(tmp_path / name)
    calib.evaluate(
        data["logits"][rows], data["labels"][rows], request=calib.EvaluationRequest.of(metrics=["ece", "nll"], emit_state=path)
    )
    return path


def test_a_state_file_is_read_only_at_its_format_and_a_version_up_to_this_one(tmp_path):
    from calib.evaluation.states import STATE_FORMAT, STATE_VERSION, read_metric_state

    assert STATE_VERSION == 1 and STATE_FORMAT == "calib-metric-state"
    path = state_file(tmp_path)
    header, arrays = read_metric_state(path)
    assert header["format"] == STATE_FORMAT and header["format_version"] == 1

    def rewritten(change):
        changed = dict(header)
        change(changed)
        target = str(tmp_path / "changed.npz")
        np.savez(target, header=np.frombuffer(json.dumps(changed).encode(), dtype=np.uint8), **arrays)
        return target

    assert read_metric_state(rewritten(lambda h: h.update(format_version=0)))[0]["format_version"] == 0
    for change in (lambda h: h.update(format_version=2), lambda h: h.update(format="other"), lambda h: h.pop("format_version")):
        with pytest.raises(InputError, match="version this calib reads"):
            read_metric_state(rewritten(change))


class Planted:
    """Unpickling it writes a file: proof that a pickle was loaded."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_state_file_with_a_pickled_array_is_refused_unloaded(tmp_path):
    from calib.evaluation.states import read_metric_state

    path, marker = str(tmp_path / "pickled.npz"), tmp_path / "unpickled"
    np.savez(path, header=np.array([Planted(str(marker))], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="not a calib metric state file"):
        read_metric_state(path)
    assert not marker.exists()


def test_merged_states_pass_without_gates_and_name_the_first_file_when_they_differ(tmp_path):
    import calib
    from calib.evaluation.states import merge_metric_states, read_metric_state

    first, second = state_file(tmp_path, "a.npz"), state_file(tmp_path, "b.npz", slice(300, 600))
    report = merge_metric_states([read_metric_state(first), read_metric_state(second)], ["a.npz", "b.npz"]).to_json()
    assert report["passed"] is True and report["gates"] == [] and report["input"]["n"] == 600
    twice = state_file(tmp_path, "again.npz")  # the rows of a.npz again: counting them twice is refused
    with pytest.raises(InputError, match="again.npz: counts the rows of scores .* which a.npz already counts"):
        merge_metric_states([read_metric_state(first), read_metric_state(twice)], ["a.npz", "again.npz"])
    data = np.load(calib.sample_path("cifar10_test.npz"))
    other = str(tmp_path / "c.npz")
    calib.evaluate(
        data["logits"][:300], data["labels"][:300], request=calib.EvaluationRequest.of(metrics=["ece"], emit_state=other)
    )
    with pytest.raises(InputError, match="c.npz: its metrics, settings or K differ from a.npz's"):
        merge_metric_states([read_metric_state(first), read_metric_state(other)], ["a.npz", "c.npz"])


def test_merged_groups_under_100_rows_are_listed_not_gated(tmp_path):
    import calib
    from calib.evaluation.states import merge_metric_states, read_metric_state

    data = np.load(calib.sample_path("cifar10_test.npz"))
    path = str(tmp_path / "g.npz")
    groups = np.repeat(["big", "small"], [150, 50])
    calib.evaluate(
        data["logits"][:200],
        data["labels"][:200],
        groups=groups,
        request=calib.EvaluationRequest.of(metrics=["ece"], emit_state=path),
    )
    report = merge_metric_states([read_metric_state(path)], ["g.npz"]).to_json()
    assert report["group_by"]["min_rows"] == 100 and report["group_by"]["below_min_rows"] == ["small"]
    assert report["group_by"]["worst"]["ece"]["group"] == "big"


# increase gates --------------------------------------------------------------------------------


def test_an_increase_gate_on_an_undefined_value_fails_either_side():
    from reports import values

    from calib.evaluation.gates import ChangeGate

    for new, old in ((None, 0.1), (0.1, None), (None, None)):
        gate = ChangeGate("cmce", 0.5, values(cmce=old))
        entry = gate.check(values(cmce=new))
        assert entry["increase"] is None and entry["passed"] is False
    entry = ChangeGate("cmce", 0.05, values(cmce=0.25)).check(values(cmce=0.375))
    assert entry["increase"] == 0.125 and entry["passed"] is False


def test_a_group_increase_gate_passes_exactly_at_its_allowance():
    """Group a: 0.375 - 0.25 = 0.125 = allowed (passes); group b: 0.5 - 0.25 = 0.25 (fails)."""
    from reports import report

    from calib.evaluation.gates import ChangeGate

    baseline_groups = {"a": {"n": 200, "metrics": {"cmce": 0.25}}, "b": {"n": 200, "metrics": {"cmce": 0.25}}}
    gate = ChangeGate("cmce", 0.125, report({"cmce": {"value": 0.1}}, groups=baseline_groups))
    current = report(groups={"a": {"n": 200, "metrics": {"cmce": 0.375}}, "b": {"n": 200, "metrics": {"cmce": 0.5}}})
    entries = {e["group"]: e for e in gate.check_groups(current)}
    assert entries["a"]["passed"] is True and entries["b"]["passed"] is False
    assert entries["a"]["expr"] == "cmce - baseline <= 0.125 (group a)"


def test_a_paired_gate_reads_the_bounds_at_the_runs_level():
    """Paired differences 0, 0.25, ..., 100 (401 replicates), centred on themselves (the change 50 is
    their mean): the 95% interval's ends are the 2.5% and 97.5% quantiles, 2.5 and 97.5, the 90%
    interval's 5 and 95 (numpy's linear rule)."""
    from reports import report

    from calib.evaluation import gates

    section = {"replicates": 401, "seed": 0, "groups": 200, "rows": 1000, "labels_sha256": "x"}
    baseline = {**section, "values": {"cmce": [0.0] * 401}}
    for level, bounds in ((0.95, [2.5, 97.5]), (0.9, [5.0, 95.0])):
        current = {**section, "level": level, "values": {"cmce": [i / 4 for i in range(401)]}}
        gate = gates.ChangeGate("cmce", 100.0, report({"cmce": {"value": 0.0}}, bootstrap=baseline), paired=True)
        entry = gate.check(report({"cmce": {"value": 50.0}}, bootstrap=current))
        assert entry["bounds"] == bounds and entry["level"] == level and entry["outcome"] == "pass"


def test_gates_are_immutable():
    from dataclasses import FrozenInstanceError

    from calib.evaluation.gates import ChangeGate, Gate
    from calib.metrics import METRICS, MetricConfig

    for frozen in (Gate("x>1", "x", ">", 1.0), ChangeGate("x", 0.1, None), MetricConfig(), METRICS["ece"]):
        with pytest.raises(FrozenInstanceError):
            frozen.__setattr__("x_changed", 1)


# matrix scaling --------------------------------------------------------------------------------


def test_linear_map_settings_are_the_documented_ones():
    from calib.calibrators import matrix_scaling

    text = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "calibrators.md")).read()
    assert "budget, 20,000" in text and matrix_scaling.MAX_ITERATIONS == 20_000
    assert f"projected gradient {matrix_scaling.PROJECTED_GRADIENT_TOLERANCE:g}" in text
    assert f"relative loss change {matrix_scaling.RELATIVE_LOSS_TOLERANCE:g}" in text


def test_a_bundle_from_before_convergence_records_gives_no_warning():
    fitted = CALIBRATORS["dirichlet"]()
    fitted.report_ = {"iterations": 10}
    assert fitted.warnings() == []
    fitted.report_ = {"iterations": 10, "converged": False}
    assert "without converging" in fitted.warnings()[0]


def test_penalties_are_immutable_and_scale_with_k_as_documented():
    """ODIR: bias weight mu / K, off-diagonal lambda / (K (K - 1)), no diagonal penalty."""
    from dataclasses import FrozenInstanceError

    penalties = CALIBRATORS["dirichlet"]().penalties(1000, 4)
    assert (penalties.bias, penalties.diagonal, penalties.off_diagonal) == (25.0, 0.0, 100.0 / 12)
    with pytest.raises(FrozenInstanceError):
        penalties.bias = 1.0
    with pytest.raises(FrozenInstanceError):
        CALIBRATORS["dirichlet"].Options().odir_mu = 1.0


def test_dirichlet_and_sms_fit_a_matrix_and_svs_a_vector():
    """W = I + D: a full K x K D for dirichlet and sms, a diagonal (a K-vector) for svs."""
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(200, 3)) * 2, rng.integers(0, 3, 200)
    shapes = {name: CALIBRATORS[name]().fit(logits, labels).delta_.shape for name in ("dirichlet", "sms", "svs")}
    assert shapes == {"dirichlet": (3, 3), "sms": (3, 3), "svs": (3,)}
