"""CI gates with three outcomes: the decision rule at its edges (from the rule's definition:
fail when the whole confidence interval is past the threshold, pass when none of it is), the
interval's ends, the minimum detectable change, relative and decreasing change gates, the
default replicates, JUnit XML read by a real parser, GitHub's summary and outputs, and the
false-alarm rate of the README's gate on equally calibrated models."""

from __future__ import annotations

import json
import math
import re
from statistics import NormalDist

import numpy as np
import pytest
from conftest import DATA, SAMPLE, needs
from reports import report, values

from calib.bootstrap import DEFAULT_REPLICATES, MAX_DEFAULT_CLASSES, BootstrapConfig, default_config
from calib.evaluation.gate_noise import Spread
from calib.evaluation.gates import ChangeGate, Gate
from calib.metrics.definitions import METRICS

TEST = SAMPLE / "cifar10_test.npz"


def spread(lower, upper, sd=1.0, rows=100, level=0.95):
    return Spread(lower, upper, sd, rows, level, "bootstrap")


# change gates --------------------------------------------------------------------------------------------


def test_a_relative_allowance_is_a_share_of_the_baseline_and_passes_on_its_edge():
    """10%-style gates: 50% of a baseline 0.25 allows 0.125 (exact in binary): 0.375 passes, the
    next float fails."""
    gate = ChangeGate("cmce", 0.5, values(cmce=0.25), relative=True)
    entry = gate.check(values(cmce=0.375))
    assert entry["allowed"] == 0.125 and entry["allowed_relative"] == 0.5 and entry["outcome"] == "pass"
    assert entry["relative_change"] == 0.5 and entry["expr"] == "cmce - baseline <= 50% of |baseline|"
    assert gate.check(values(cmce=float(np.nextafter(0.375, 1))))["outcome"] == "fail"


def test_a_decrease_gate_fails_on_a_drop_beyond_the_allowance():
    """accuracy 0.5 -> 0.375 is a worsening of 0.125 = allowed: passes; one float lower fails; a
    rise never fails."""
    gate = ChangeGate("accuracy", 0.125, values(accuracy=0.5), direction="decrease")
    entry = gate.check(values(accuracy=0.375))
    assert entry["worsening"] == 0.125 and entry["increase"] == -0.125 and entry["outcome"] == "pass"
    assert entry["expr"] == "baseline - accuracy <= 0.125"
    assert gate.check(values(accuracy=float(np.nextafter(0.375, 0))))["outcome"] == "fail"
    assert gate.check(values(accuracy=1.0))["outcome"] == "pass"


def test_a_paired_decrease_reads_the_negated_differences():
    """Differences new - old of 0, 0.25, ..., 100 (in units of 0.001; 401 replicates) for accuracy: the
    decrease is their negation, -100..0, whose 95% interval is [-97.5, -2.5] (x 0.001), centred on
    the estimate -50."""
    section = {"replicates": 401, "seed": 0, "groups": 200, "rows": 1000, "labels_sha256": "x", "level": 0.95}
    baseline = {**section, "values": {"accuracy": [0.5] * 401}}
    current = {**section, "values": {"accuracy": [0.5 + i / 4000 for i in range(401)]}}
    gate = ChangeGate("accuracy", 0.0, report({"accuracy": {"value": 0.5}}, bootstrap=baseline), direction="decrease")
    entry = gate.check(report({"accuracy": {"value": 0.55}}, bootstrap=current))
    assert entry["bounds"] == pytest.approx([-0.0975, -0.0025], abs=1e-12) and entry["outcome"] == "pass"
    assert entry["increase_lower_bound"] == pytest.approx(0.0025) and entry["noise"] == "paired bootstrap, 0.95 interval"


def test_default_replicates_follow_the_baseline_else_the_input_size():
    config = default_config(1000, 10, 0.9, BootstrapConfig(50, 3, 0.95), seed=8)
    assert (config.replicates, config.seed, config.level) == (50, 3, 0.9)  # the baseline's seed, to pair
    assert default_config(1000, 10, 0.9, seed=8).seed == 8
    config = default_config(10**6, MAX_DEFAULT_CLASSES, 0.95)  # exactly the limit, at any row count
    assert (config.replicates, config.seed) == (DEFAULT_REPLICATES, 0)
    assert default_config(10, MAX_DEFAULT_CLASSES + 1, 0.95) is None


# the command ---------------------------------------------------------------------------------------------


@pytest.fixture
def small_pair(tmp_path):
    """300 rows of the CIFAR-10 test logits and the same rows with a little noise added."""
    data = np.load(TEST)
    logits, labels = data["logits"][:300], data["labels"][:300]
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "base.npz", logits=logits, labels=labels)
    np.savez(tmp_path / "new.npz", logits=logits + rng.normal(size=logits.shape) * 0.3, labels=labels)
    return tmp_path


def test_an_inconclusive_gate_at_300_rows_says_what_would_settle_it(run, small_pair):
    common = ["--no-vece", "--metrics", "cmce"]
    assert run("evaluate", small_pair / "base.npz", *common, "--json", small_pair / "base.json")[0] == 0
    gate = ["--baseline", small_pair / "base.json", "--max-increase", "cmce=0"]
    code, out, _ = run("evaluate", small_pair / "new.npz", *common, *gate)
    line = next(line for line in out.splitlines() if line.startswith("gate "))
    assert code == 0 and line.startswith("gate INCONCLUSIVE (counts as a pass): cmce ")
    found = re.search(r"at n = 300 the gate detects an increase ([0-9.e-]+) beyond the threshold \(80% power\)", line)
    assert found and float(found.group(1)) > 0
    assert re.search(r"about [0-9,]+ rows would settle the observed distance", line)
    code, out, err = run("evaluate", small_pair / "new.npz", *common, *gate, "--inconclusive", "fail", "--json", "-")
    entry = json.loads(out)["gates"][0]
    assert code == 1 and entry["outcome"] == "inconclusive" and entry["passed"] is False
    assert entry["min_detectable"] == pytest.approx(float(found.group(1)), rel=1e-3)
    lower, upper = entry["bounds"]
    assert lower <= 0 < upper  # straddles the allowed 0
    code, out, _ = run("evaluate", small_pair / "new.npz", *common, *gate, "--ignore-noise", "--json", "-")
    assert json.loads(out)["gates"][0]["noise"] == "ignored" and json.loads(out)["gates"][0]["outcome"] in ("pass", "fail")


def test_a_baseline_without_replicates_is_compared_raw_and_says_so(run, small_pair):
    common = ["--no-vece", "--metrics", "cmce"]
    assert run("evaluate", small_pair / "base.npz", *common, "--bootstrap", "0", "--json", small_pair / "base.json")[0] == 0
    code, _, err = run(
        "evaluate", small_pair / "new.npz", *common, "--baseline", small_pair / "base.json", "--max-increase", "cmce=1"
    )
    assert code == 0 and err.count("ignore noise") == 1 and "records bootstrap replicates" in err


def test_usage_errors_of_the_gate_options(run, small_pair):
    code, _, err = run("evaluate", small_pair / "new.npz", "--no-vece", "--inconclusive", "maybe")
    assert code == 2 and "inconclusive must be one of pass, fail; got 'maybe' (--inconclusive pass|fail)" in err
    code, _, err = run("evaluate", small_pair / "new.npz", "--no-vece", "--paired", "--ignore-noise")
    assert code == 2 and "drop one of the two" in err


def _gated_run(run, tmp_path, *extra):
    data = np.load(TEST)
    groups = np.arange(len(data["labels"])) % 3
    np.savez(tmp_path / "g.npz", logits=data["logits"], labels=data["labels"])
    np.save(tmp_path / "groups.npy", groups)
    return run(
        "evaluate",
        tmp_path / "g.npz",
        "--no-vece",
        "--metrics",
        "cmce,accuracy",
        "--groups",
        tmp_path / "groups.npy",
        "--fail-if",
        "cmce>0.0001",  # fails
        "--fail-if",
        "accuracy<0.5",  # passes
        "--fail-if",
        "cmce>0.00269",  # the value itself: inconclusive
        "--fail-if",
        "max_group:cmce>0.005",
        *extra,
    )


def test_junit_has_one_case_per_gate_and_gated_group_and_a_real_parser_reads_it(run, tmp_path):
    junitparser = needs("junitparser")
    code, _, _ = _gated_run(run, tmp_path, "--junit", tmp_path / "gates.xml")
    assert code == 1
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "gates.xml"))
    (suite,) = list(xml)
    cases = list(suite)
    assert [case.classname for case in cases] == ["calib.gates"] * 4 + ["calib.gates.groups"] * 3
    assert cases[4].name == "max_group:cmce>0.005 [group 0]"
    results = [type(case.result[0]).__name__ if case.result else "passed" for case in cases]
    assert results[:3] == ["Failure", "passed", "Skipped"]
    assert (suite.tests, suite.failures, suite.errors) == (7, results.count("Failure"), 0)
    assert suite.skipped == results.count("Skipped") >= 1
    assert "interval" in cases[2].result[0].message and "straddles" in cases[2].result[0].message
    # the attributes Jenkins' and GitLab's readers require: name/tests/failures/errors on the
    # suite, name on every case; the same report gives the same bytes
    root = __import__("xml.etree.ElementTree", fromlist=["x"]).parse(tmp_path / "gates.xml").getroot()
    assert root.tag == "testsuites" and all(k in root[0].attrib for k in ("name", "tests", "failures", "errors"))
    first = (tmp_path / "gates.xml").read_bytes()
    _gated_run(run, tmp_path, "--junit", tmp_path / "gates.xml")
    assert (tmp_path / "gates.xml").read_bytes() == first


def test_github_summary_and_outputs(run, tmp_path, monkeypatch):
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs.txt"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    code, _, _ = _gated_run(run, tmp_path, "--inconclusive", "pass")
    assert code == 1
    pairs = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    gates = json.loads(pairs["gates"])
    assert pairs["passed"] == "false" and pairs["outcome"] == "fail"
    assert pairs["inconclusive"] == str([g["outcome"] for g in gates].count("inconclusive"))
    assert [g["outcome"] for g in gates][:3] == ["fail", "pass", "inconclusive"] and int(pairs["failed"]) >= 1
    text = summary.read_text()
    assert text.startswith("**calib evaluate**") and "- gate FAIL: cmce = 0.00269" in text


def test_reports_without_gates_leave_github_files_alone(run, tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "outputs.txt"))
    assert run("evaluate", TEST, "--no-vece", "--metrics", "ece")[0] == 0
    assert not (tmp_path / "outputs.txt").exists()


# the guarantee -----------------------------------------------------------------------------------------


def test_the_readme_gate_rarely_fails_between_equally_calibrated_models(tmp_path):
    """40 pairs of equally calibrated models on 2,000 shared rows (the world of
    benchmarks/gate_noise.py: 10 classes, z ~ N(0, 2.5^2), labels from softmax(z), each model sees
    z + N(0, 0.5^2)): `--max-increase cmce=0.001` with the default replicates fails at most 2
    times (5%); raw, it fails far more often."""
    import calib
    from calib.evaluation import parse_change_gates

    rng = np.random.default_rng(5)
    fails = raw_fails = 0
    for _ in range(40):
        z = rng.normal(size=(2000, 10)) * 2.5
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        labels = np.minimum((rng.random((2000, 1)) > np.cumsum(p, axis=1)).sum(axis=1), 9)
        base, current = (z + rng.normal(size=z.shape) * 0.5 for _ in range(2))
        report = calib.evaluate(
            base, labels, request=calib.EvaluationRequest.of(metrics=["cmce"], keep_as_baseline=True)
        ).to_dict()
        (tmp_path / "base.json").write_text(json.dumps(report))
        changes = parse_change_gates(["cmce=0.001"], str(tmp_path / "base.json"))
        for ignore_noise in (False, True):
            found = calib.evaluate(
                current,
                labels,
                request=calib.EvaluationRequest.of(metrics=["cmce"], increase_gates=changes, ignore_noise=ignore_noise),
            )
            failed = found.to_dict()["gates"][0]["outcome"] == "fail"
            fails, raw_fails = (fails, raw_fails + failed) if ignore_noise else (fails + failed, raw_fails)
    assert fails <= 2 and raw_fails >= 8


# gates on groups ----------------------------------------------------------------------------------------


def _grouped_report(values_by_group, replicates_by_group, level=0.95):
    return report(
        groups={name: {"n": 100, "metrics": {"cmce": value}} for name, value in values_by_group.items()},
        min_rows=1,
        bootstrap={"level": level, "by_group": {name: {"cmce": reps} for name, reps in replicates_by_group.items()}},
    )


def test_a_worst_group_gate_reads_each_group_at_the_bonferroni_level():
    """4 groups at 0.95: each group's interval is at 1 - 0.05 / 4 = 0.9875, its ends the 0.625% and
    99.375% quantiles of the replicates centred on its value; 1,601 replicates 0, 0.25, ..., 400
    (10 beyond each end) put them at 2.5 and 397.5 before centring."""
    reps = [i / 4 for i in range(1601)]  # mean 200
    values = {"a": 200.0, "b": 210.0, "c": 150.0, "d": 100.0}
    grouped = _grouped_report(values, {name: reps for name in values})
    entry = Gate("max_group:cmce>500", "cmce", ">", 500.0, "max_group").check(grouped)
    bounds = {g["group"]: g["bounds"] for g in entry["per_group"]}
    assert bounds["a"] == pytest.approx([2.5, 397.5], abs=1e-9) and bounds["b"] == pytest.approx([12.5, 407.5], abs=1e-9)
    assert bounds["d"] == pytest.approx([-97.5, 297.5], abs=1e-9)
    assert {g["level"] for g in entry["per_group"]} == {0.9875} and entry["outcome"] == "pass"
    assert entry["group"] == "b" and entry["value"] == 210.0  # all pass: the worst group is named


@pytest.mark.parametrize(
    "threshold, per_group, expected",
    [
        (405.0, {"a": "pass", "b": "pass"}, "pass"),  # b's upper end is on it
        (395.0, {"a": "pass", "b": "inconclusive"}, "inconclusive"),  # a's upper end is on it
        (14.0, {"a": "inconclusive", "b": "fail"}, "fail"),  # b's lower end 15 > 14
        (4.0, {"a": "fail", "b": "fail"}, "fail"),
    ],
)
def test_a_worst_group_gate_fails_on_any_group_and_passes_only_on_all(threshold, per_group, expected):
    """Two groups at the Bonferroni level 1 - 0.05 / 2 = 0.975: the interval's ends are the 1.25%
    and 98.75% quantiles of 0..400, 5 and 395; centred on the values 200 and 210 the intervals are
    a [5, 395] and b [15, 405]."""
    reps = [float(i) for i in range(401)]
    grouped = _grouped_report({"a": 200.0, "b": 210.0}, {"a": reps, "b": reps})
    entry = Gate("max_group:cmce>t", "cmce", ">", threshold, "max_group").check(grouped)
    assert {g["group"]: g["outcome"] for g in entry["per_group"]} == per_group and entry["outcome"] == expected
    assert entry["group"] == "b"  # the worst group among those that decide


def splitmix_cluster(seed: int, row: int, clusters: int = 200) -> int:
    """Row ``row``'s bootstrap cluster from its definition, in Python integers: SplitMix64's output
    ``row`` (0-based) from the state drawn by SeedSequence([seed, 1]), mod ``clusters``."""
    mask = 2**64 - 1
    z = (int(np.random.SeedSequence([seed, 1]).generate_state(1, np.uint64)[0]) + (row + 1) * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return (z ^ (z >> 31)) % clusters


@pytest.mark.parametrize("n_groups", [2, 3])
def test_group_replicates_resample_each_groups_own_rows_with_the_shared_counts(n_groups):
    """Accuracy of group s in replicate r from the definition: sum_g c_rg hits_sg / sum_g c_rg n_sg,
    cluster g of row i = SplitMix64 output i from the key SeedSequence([seed, 1]) mod 200 (in Python
    integers here) and counts c by default_rng([seed, 2]); the whole sample's replicates equal those
    of a run without groups."""
    import calib
    from calib.bootstrap import BootstrapConfig

    rng = np.random.default_rng(3)
    n, k = 600, 4
    logits, labels = rng.normal(size=(n, k)) * 2, rng.integers(0, k, n)
    strata = rng.integers(0, n_groups, n)
    config = BootstrapConfig(30, 7, 0.95)
    grouped = calib.evaluate(
        logits,
        labels,
        groups=strata,
        request=calib.EvaluationRequest.of(metrics=["accuracy"], bootstrap=config, min_group_rows=1),
    ).to_dict()
    plain = calib.evaluate(logits, labels, request=calib.EvaluationRequest.of(metrics=["accuracy"], bootstrap=config)).to_dict()
    np.testing.assert_allclose(grouped["bootstrap"]["values"]["accuracy"], plain["bootstrap"]["values"]["accuracy"], rtol=1e-12)
    cluster = np.array([splitmix_cluster(7, i) for i in range(n)])
    counts = np.random.default_rng([7, 2]).multinomial(200, np.full(200, 1 / 200), size=30)
    hits = (logits.argmax(axis=1) == labels).astype(float)
    for s in range(n_groups):
        rows = strata == s
        per_cluster_hits = np.bincount(cluster[rows], weights=hits[rows], minlength=200)
        per_cluster_rows = np.bincount(cluster[rows], minlength=200)
        expected = (counts @ per_cluster_hits) / (counts @ per_cluster_rows)
        np.testing.assert_allclose(grouped["bootstrap"]["by_group"][str(s)]["accuracy"], expected, rtol=1e-12)


# the parts the mutation run found untested -------------------------------------------------------------


def _section(values, **extra):
    base = {"replicates": len(values), "seed": 0, "groups": 200, "rows": 1000, "labels_sha256": "x", "level": 0.95}
    return {**base, "values": {"cmce": list(values)}, **extra}


def test_paired_differences_need_both_sections_from_the_same_draw():
    from calib.evaluation.report_types import BootstrapSection, paired_differences

    def typed(section):
        return BootstrapSection.from_json(section)

    current = typed(_section([1.0, 2.0, None]))
    found, why = paired_differences(current, typed(_section([0.5, 0.5, 0.5])), "cmce")
    assert why is None and found[:2].tolist() == [0.5, 1.5] and np.isnan(found[2])  # None is no value
    for baseline in ({}, _section([0.0] * 3, seed=1), _section([0.0] * 3, labels_sha256="y")):
        found, why = paired_differences(current, typed(baseline), "cmce")
        assert found is None and "same rows, seed and count" in why
    found, why = paired_differences(None, typed(_section([0.0] * 3)), "cmce")
    assert found is None and "same rows, seed and count" in why
    found, why = paired_differences(current, typed(_section([0.0] * 3)), "ece")
    assert found is None and why == "no bootstrap replicates of ece in both reports"
    emptied = typed({**_section([1.0, 2.0, None]), "values": {}})
    assert paired_differences(emptied, typed(_section([0.0] * 3)), "cmce")[1] == why.replace("ece", "cmce")


def test_the_table_interval_is_the_two_sided_percentile_interval_centred_on_the_value():
    """Replicates 0, 0.25, ..., 100 (mean 50): the 2.5% and 97.5% quantiles are 2.5 and 97.5; centred
    on a value of 60 they move by 60 - 50 = 10 (the gates' own interval)."""
    from calib.bootstrap import intervals

    replicates = {"m": np.linspace(0.0, 100.0, 401), "none": np.array([np.nan, np.nan])}
    found = intervals(replicates, 0.95, {})
    assert found["m"] == pytest.approx([2.5, 97.5], rel=1e-12) and found["none"] is None
    assert intervals(replicates, 0.95, {"m": 60.0})["m"] == pytest.approx([12.5, 107.5], rel=1e-12)
    assert Spread.of(replicates["m"], 0.95, 101, "bootstrap", 60.0).lower == pytest.approx(12.5, rel=1e-12)


def test_two_replicates_are_enough_for_an_interval():
    """[1, 3]: no replicate lies beyond np.percentile's 1.05 and 2.95, so the ends are the normal
    ones, mean 2 -+ z_0.975 sd, sd = sqrt(2) (n - 1)."""
    found = Spread.of([1.0, 3.0], 0.95, 10, "bootstrap")
    reach = 1.959963984540054 * math.sqrt(2.0)
    assert found is not None and (found.lower, found.upper) == pytest.approx((2.0 - reach, 2.0 + reach), abs=1e-12)


def test_spreads_and_configs_are_immutable():
    from dataclasses import FrozenInstanceError

    from calib.bootstrap import BootstrapConfig

    for frozen, field in ((spread(0.0, 1.0), "lower"), (BootstrapConfig(10, 0), "seed")):
        with pytest.raises(FrozenInstanceError):
            setattr(frozen, field, 1)


def test_a_threshold_entry_states_the_rows_that_would_settle_it():
    """Replicates 0..100 around a value 50.5 against the threshold 50: sd and the rows by hand."""
    replicated = report({"cmce": {"value": 50.5}}, bootstrap=_section(np.arange(101.0), rows=400))
    entry = Gate("cmce>50", "cmce", ">", 50.0).check(replicated)
    sd = np.std(np.arange(101.0), ddof=1)
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
    assert entry["outcome"] == "inconclusive" and entry["min_detectable"] == pytest.approx(z * sd)
    assert entry["rows_to_settle"] == math.ceil(400 * (z * sd / 0.5) ** 2) and entry["rows"] == 400
    assert Gate("cmce>50", "cmce", ">", 50.0).check(replicated, ignore_noise=True)["noise"] == "ignored"


def test_why_a_gate_has_no_interval():
    from calib.evaluation.gate_noise import group_spreads, replicate_spread
    from calib.evaluation.report_types import BootstrapSection

    assert replicate_spread(None, "cmce", 0.1) == (None, "the report has no bootstrap replicates")
    assert replicate_spread(BootstrapSection.from_json(_section([1.0, 2.0])), "ece", 0.1) == (
        None,
        "no bootstrap replicates of ece",
    )
    group_values = {"a": 0.1}
    assert group_spreads(report(), "cmce", group_values) == ({}, "the report has no bootstrap replicates")
    assert group_spreads(report(bootstrap=_section([1.0])), "cmce", group_values) == (
        {},
        "the report has no bootstrap replicates per group",
    )
    grouped = report(
        bootstrap=_section([1.0], by_group={"a": {"ece": [1.0, 2.0]}}), groups={"a": {"n": 10, "metrics": {"cmce": 0.1}}}
    )
    assert group_spreads(grouped, "cmce", group_values) == ({}, "no bootstrap replicates of cmce per group")
    baseline = report({"cmce": {"value": 0.0}}, bootstrap=_section([0.0, 0.0]))
    entry = ChangeGate("cmce", 0.0, baseline).check(report({"cmce": {"value": 0.1}}, bootstrap=_section([None, None])))
    assert entry["noise"] == "ignored" and entry["noise_reason"] == "no paired replicates of cmce with a value"


def test_a_paired_increase_states_its_interval_as_increase_bounds():
    """An increase gate's interval is the increase's; a decrease gate's bounds are negated back."""
    current, baseline = _section([i / 4 for i in range(401)]), _section([0.0] * 401)
    gate = ChangeGate("cmce", 100.0, report({"cmce": {"value": 0.0}}, bootstrap=baseline))
    entry = gate.check(report({"cmce": {"value": 50.0}}, bootstrap=current))
    assert entry["bounds"] == [2.5, 97.5] and (entry["increase_lower_bound"], entry["increase_upper_bound"]) == (2.5, 97.5)
    current = {**current, "values": {"accuracy": current["values"]["cmce"]}}
    baseline = {**baseline, "values": {"accuracy": baseline["values"]["cmce"]}}
    gate = ChangeGate("accuracy", 0.0, report({"accuracy": {"value": 0.0}}, bootstrap=baseline), direction="decrease")
    entry = gate.check(report({"accuracy": {"value": 50.0}}, bootstrap=current))
    assert entry["bounds"] == [-97.5, -2.5] and (entry["increase_lower_bound"], entry["increase_upper_bound"]) == (2.5, 97.5)


def _group_reports(current_values, baseline_values, current_reps, baseline_reps, by_group=True, **extra):
    """(the current report, the baseline report) of groups with these values and replicates;
    ``extra`` changes the current replicates' section, ``by_group`` False drops its groups' replicates."""
    digest = extra.pop("groups_sha256", "g")
    replicates = {g: {"cmce": r} for g, r in current_reps.items()} if by_group else None
    current = report(
        {"cmce": {"value": 0.0}},
        groups={name: {"n": 500, "metrics": {"cmce": v}} for name, v in current_values.items()},
        min_rows=1,
        bootstrap=_section([0.0], by_group=replicates, groups_sha256=digest, **extra),
    )
    baseline = report(
        {"cmce": {"value": 0.0}},
        groups={name: {"n": 500, "metrics": {"cmce": v}} for name, v in baseline_values.items()},
        bootstrap=_section([0.0], by_group={g: {"cmce": r} for g, r in baseline_reps.items()}, groups_sha256="g"),
    )
    return current, baseline


def test_change_gates_on_groups_pair_each_groups_replicates_at_the_bonferroni_level():
    """Two groups: each group's paired differences 0..400 centred on its change, at 1 - 0.05 / 2:
    the 1.25% and 98.75% quantiles, 5 and 395 before centring (mean 200)."""
    reps = [float(i) for i in range(401)]
    zeros = [0.0] * 401
    current, baseline = _group_reports(
        {"a": 200.0, "b": 210.0}, {"a": 0.0, "b": 0.0}, {"a": reps, "b": reps}, {"a": zeros, "b": zeros}
    )
    gate = ChangeGate("cmce", 400.0, baseline)
    entries = {e["group"]: e for e in gate.check_groups(current)}
    assert entries["a"]["bounds"] == [5.0, 395.0] and entries["b"]["bounds"] == [15.0, 405.0]
    assert entries["a"]["level"] == 0.975 and entries["a"]["outcome"] == "pass" and entries["b"]["outcome"] == "inconclusive"
    assert entries["a"]["noise"] == "paired bootstrap, Bonferroni over 2 groups, 0.975 interval"
    raw = {e["group"]: e for e in gate.check_groups(current, ignore_noise=True)}
    assert raw["a"]["noise_reason"] == "noise ignored on request" and raw["b"]["outcome"] == "pass"


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"groups_sha256": "other"}, "the baseline report's rows fall into other groups"),
        ({"seed": 3}, "same rows, seed and count"),
    ],
)
def test_change_gates_on_groups_say_why_they_cannot_pair(change, reason):
    reps = [1.0, 2.0]
    current, baseline = _group_reports({"a": 1.0}, {"a": 0.5}, {"a": reps}, {"a": reps}, **change)
    (entry,) = ChangeGate("cmce", 1.0, baseline).check_groups(current)
    assert entry["noise"] == "ignored" and reason in entry["noise_reason"] and entry["outcome"] == "pass"
    current, baseline = _group_reports({"a": 1.0}, {"a": 0.5}, {"a": reps}, {"a": reps}, by_group=False, **change)
    (entry,) = ChangeGate("cmce", 1.0, baseline).check_groups(current)
    assert entry["noise_reason"] == "the reports have no bootstrap replicates per group"


def test_overall_outcome_of_a_run():
    from calib.cli.ci_output import overall_outcome

    gate = {"expr": "cmce>1", "outcome": "pass", "passed": True}
    assert overall_outcome(report(gates=[gate])) == "pass"
    inconclusive = {"expr": "ece>1", "outcome": "inconclusive"}
    assert overall_outcome(report(gates=[gate, {**inconclusive, "passed": True}])) == "inconclusive"
    assert overall_outcome(report(gates=[gate, {**inconclusive, "passed": False}], passed=False)) == "fail"


def test_junit_marks_an_inconclusive_gate_counted_as_failed_as_a_failure():
    from calib.reporting.junit import junit_xml

    gate = {
        "expr": "cmce>0.1",
        "metric": "cmce",
        "op": ">",
        "threshold": 0.1,
        "value": 0.05,
        "outcome": "inconclusive",
        "passed": False,
    }
    xml = junit_xml(report(input={"path": "p", "n": 1, "k": 2, "kind": "logits"}, gates=[gate], passed=False))
    assert xml.startswith(b"<?xml version='1.0' encoding='utf-8'?>\n<testsuites")
    assert b'<failure type="inconclusive"' in xml and b"<skipped" not in xml and b'failures="1"' in xml


def test_the_documented_defaults_of_replicates():
    text = open(__import__("conftest").ROOT / "docs" / "ci-gates.md").read()
    assert f"**{DEFAULT_REPLICATES} bootstrap replicates**" in text and "more than 2,000 classes" in text
    assert MAX_DEFAULT_CLASSES == 2_000 and "at most 50 groups" in text
    from calib.bootstrap import MAX_GROUPS_WITH_REPLICATES

    assert MAX_GROUPS_WITH_REPLICATES == 50


def test_the_python_api_draws_replicates_at_95_percent_by_default():
    import calib

    data = np.load(TEST)
    report = calib.evaluate(
        data["logits"][:500], data["labels"][:500], request=calib.EvaluationRequest.of(metrics=["ece"], bootstrap=20, seed=4)
    ).to_dict()
    assert (report["bootstrap"]["replicates"], report["bootstrap"]["seed"], report["bootstrap"]["level"]) == (20, 4, 0.95)
    assert (
        "bootstrap"
        not in calib.evaluate(
            data["logits"][:500], data["labels"][:500], request=calib.EvaluationRequest.of(metrics=["ece"], bootstrap=0)
        ).to_dict()
    )


def test_an_undefined_value_with_replicates_fails_without_a_distance():
    entry = Gate("cmce>0.1", "cmce", ">", 0.1).check(report({"cmce": {"value": None}}, bootstrap=_section([1.0, 2.0])))
    assert entry["outcome"] == "fail" and "rows_to_settle" not in entry


def test_one_group_is_read_at_the_runs_own_level():
    """Bonferroni over one group is no correction: 0.95 stays 0.95."""
    reps = [i / 4 for i in range(401)]
    grouped = _grouped_report({"a": 50.0}, {"a": reps})
    entry = Gate("max_group:cmce>t", "cmce", ">", 1000.0, "max_group").check(grouped)
    assert entry["per_group"][0]["level"] == 0.95 and entry["per_group"][0]["bounds"] == [2.5, 97.5]


def test_a_group_whose_paired_replicates_have_no_value_says_so():
    current, baseline = _group_reports({"a": 1.0}, {"a": 0.5}, {"a": [None, None]}, {"a": [0.0, 0.0]})
    (entry,) = ChangeGate("cmce", 1.0, baseline).check_groups(current)
    assert entry["noise"] == "ignored" and entry["noise_reason"] == "no paired replicates of cmce with a value"


def test_a_baseline_of_another_problem_is_refused(run, tmp_path):
    """The reproducer: a 97-class run gated against a 10-class baseline printed "ece rose +138%"
    and exited 1; every metric of another class count, task or label count is incomparable: exit 2
    with one line naming both problems. Binary against multiclass too."""
    data = np.load(SAMPLE / "cifar10_test.npz")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "ten.npz", logits=data["logits"][:600], labels=data["labels"][:600])
    np.savez(tmp_path / "nine.npz", logits=data["logits"][:600, :9], labels=np.minimum(data["labels"][:600], 8))
    np.savez(tmp_path / "two.npz", logits=rng.normal(size=600), labels=rng.integers(0, 2, 600))
    assert run("evaluate", tmp_path / "ten.npz", "--no-vece", "--metrics", "ece", "--json", tmp_path / "ten.json")[0] == 0
    for other, words in (("nine.npz", "10-class problem"), ("two.npz", "this run of a binary one")):
        code, _, err = run(
            "evaluate",
            tmp_path / other,
            "--no-vece",
            "--metrics",
            "ece",
            "--baseline",
            tmp_path / "ten.json",
            "--max-increase",
            "ece=10%",
        )
        assert code == 2 and words in err and "same problem" in err and len(err.strip().splitlines()) <= 2


def test_the_same_problem_passes_the_check():
    from calib.evaluation.gates import check_same_problem
    from calib.evaluation.report_types import InputSection

    def section(**fields):
        return InputSection.from_json(fields)

    from calib.io.predictions import LabelLayout, RowLayout

    three_labels, four_labels = LabelLayout(9, ("a", "b", "c")), LabelLayout(5, ("a", "b", "c", "d"))
    check_same_problem(section(k=10, path="a"), RowLayout(50, 10).task())
    check_same_problem(section(k=2, multilabel={"rows": 5, "labels": 3}), three_labels.task())  # other rows, same labels
    check_same_problem(section(), RowLayout(50, 4).task())  # a hand-made report without an input section
    with pytest.raises(ValueError, match="multi-label \\(3 labels\\) problem"):
        check_same_problem(section(k=2, multilabel={"rows": 5, "labels": 3}), four_labels.task())
    with pytest.raises(ValueError, match="multi-label \\(3 labels\\) problem, this run of a binary one"):
        check_same_problem(section(k=2, multilabel={"rows": 5, "labels": 3}), RowLayout(50, 2).task())
    with pytest.raises(ValueError, match="binary problem \\(b\\), this run of a 3-class one"):
        check_same_problem(section(k=2, path="b"), RowLayout(50, 3).task())


def test_a_report_names_the_problem_as_the_input_layout_does():
    """The input section of a report and the layout of the input it was made from name one problem."""
    from calib.evaluation.report_types import InputSection
    from calib.io.predictions import LabelLayout, RowLayout

    for layout, k in ((RowLayout(7, 2), 2), (RowLayout(7, 3), 3), (LabelLayout(7, ("x", "y")), 2)):
        section = InputSection.from_json({"n": 14, "k": k, "multilabel": layout.to_json()})
        assert section.task() == layout.task()
    assert [RowLayout(7, 2).task(), RowLayout(7, 3).task(), LabelLayout(7, ("x", "y")).task()] == [
        "binary",
        "3-class",
        "multi-label (2 labels)",
    ]
    assert InputSection.from_json({"n": 14, "k": 2, "multilabel": {"rows": 7, "labels": 2}}).shape() == (
        "multi-label: 7 rows x 2 labels = 14 pairs"
    )
    assert InputSection.from_json({"n": 14, "k": 3}).shape() == "14 x 3"


def test_a_baseline_of_other_rows_is_compared_unpaired_and_says_so_everywhere(run, tmp_path, monkeypatch):
    """The other half of the same model's test rows as baseline, both reports with replicates: the
    gate reads the difference of the two independent bootstrap distributions (not raw values), and
    the JSON entry, the table line, the stderr note, the JUnit message and GITHUB_OUTPUT say so; no
    note says the baseline lacks replicates. Its interval is wider than a paired one: the two
    halves' sampling spreads add."""
    junitparser = needs("junitparser")
    data = np.load(TEST)
    order = np.random.default_rng(3).permutation(len(data["labels"]))
    halves = order[:5000], order[5000:]
    for name, rows in zip(("a", "b"), halves):
        np.savez(tmp_path / f"{name}.npz", logits=data["logits"][rows], labels=data["labels"][rows])
    common = ["--no-vece", "--metrics", "ece"]
    assert run("evaluate", tmp_path / "a.npz", *common, "--json", tmp_path / "a.json")[0] == 0
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "outputs.txt"))
    gate = ["--baseline", tmp_path / "a.json", "--max-increase", "ece=10%"]
    code, out, err = run(
        "evaluate", tmp_path / "b.npz", *common, *gate, "--json", tmp_path / "b.json", "--junit", tmp_path / "g.xml"
    )
    entry = json.loads((tmp_path / "b.json").read_text())["gates"][0]
    assert code in (0, 1) and entry["noise"] == "unpaired bootstrap of independent rows, 0.95 interval"
    assert "has as many rows but other labels: compared unpaired" in err
    assert "ignore noise" not in err and "no bootstrap replicates" not in err
    line = next(line for line in out.splitlines() if line.startswith("gate "))
    assert "unpaired 95% interval" in line and "compared unpaired" in line
    (suite,) = list(junitparser.JUnitXml.fromfile(str(tmp_path / "g.xml")))
    case = list(suite)[0]
    message = case.result[0].message if case.result else case.system_out
    assert "compared unpaired" in message
    pairs = dict(item.split("=", 1) for item in (tmp_path / "outputs.txt").read_text().splitlines())
    assert "compared unpaired" in json.loads(pairs["gates"])[0]["note"]
    lower, upper = entry["bounds"]
    assert lower < entry["worsening"] < upper


def test_unpaired_differences_are_the_two_reports_replicates_apart():
    from calib.evaluation.report_types import BootstrapSection, unpaired_differences

    current = BootstrapSection.from_json({"values": {"ece": [0.3, 0.2, None]}})
    baseline = BootstrapSection.from_json({"values": {"ece": [0.1, 0.1]}})
    assert unpaired_differences(current, baseline, "ece").tolist() == pytest.approx([0.2, 0.1])  # the first 2
    assert unpaired_differences(current, BootstrapSection.from_json({"values": {"other": [1.0]}}), "ece") is None
    assert unpaired_differences(None, baseline, "ece") is None and unpaired_differences(current, None, "ece") is None


def test_one_interval_in_the_table_the_json_and_the_gates(run, tmp_path):
    """The table's interval of a metric is the one its gate reads (the replicates' percentile
    interval centred on the value), and every value lies inside its own interval: the plain
    percentile interval of a binned error's replicates sits above the value (the bootstrap repeats
    rows, which inflates binned errors), as cw_ece 0.00357 shown as [0.003619, 0.003953] did."""
    data = np.load(TEST)
    np.savez(tmp_path / "s.npz", logits=data["logits"][:300], labels=data["labels"][:300])
    metrics = "ece,cw_ece,cmce,nll"
    gates = [arg for key in metrics.split(",") for arg in ("--fail-if", f"{key}>0.5")]
    code, out, err = run("evaluate", tmp_path / "s.npz", "--no-vece", "--metrics", metrics, *gates, "--json", "-")
    report = json.loads(out)
    by_metric = {gate["metric"]: gate for gate in report["gates"]}
    for key, entry in report["metrics"].items():
        lower, upper = entry["ci"]
        assert lower <= entry["value"] <= upper, key
        gate = by_metric[key]
        if METRICS[key].binned_norm:  # the gate's lower end: the value less its floor, or the mean-gap bound
            bound = max(entry["value"] - gate["floor"], gate.get("gap_bound", -np.inf))
            assert gate["bounds"] == [min(lower, bound), upper], key
            assert gate["floor"] == report["bootstrap"]["floors"]["values"][key]
        else:
            assert [lower, upper] == gate["bounds"], key
    # CIFAR-100 test: the plain percentile interval of cw_ece, [0.00262, 0.00290], excludes its value 0.00239
    import calib

    hundred = np.load(DATA / "cifar100_resnet110_test.npz")
    full = calib.evaluate(
        hundred["logits"], hundred["labels"], request=calib.EvaluationRequest.of(metrics=["cw_ece"], bootstrap=200)
    ).to_dict()
    value, (lower, upper) = full["metrics"]["cw_ece"]["value"], full["metrics"]["cw_ece"]["ci"]
    assert np.percentile(np.array(full["bootstrap"]["values"]["cw_ece"]), 2.5) > value and lower <= value <= upper
    code, _, err = run("evaluate", tmp_path / "s.npz", "--no-vece", "--metrics", "ece", "--json", tmp_path / "r.json")
    assert "note: 0.95 intervals from 200 bootstrap replicates, drawn for the JSON report" in err
    code, _, err = run("evaluate", tmp_path / "s.npz", "--no-vece", "--metrics", "ece", "--emit-state", tmp_path / "state.npz")
    assert code == 0 and "drawn for the metric state file" in err


@pytest.mark.parametrize(
    "lower, says",
    [
        (0.004, "the range from the value less its resolution floor to the upper end of its 95% interval [0.004, 0.02]"),
        (0.006, "the range from its mean-gap bound to the upper end of its 95% interval [0.006, 0.02]"),
        (0.007, "its 95% interval [0.007, 0.02]"),
    ],
)
def test_an_inconclusive_gate_names_what_its_bounds_are(lower, says):
    """value 0.012, floor 0.008 (value - floor = 0.004), gap bound 0.006: the lower end the gate
    read is named for what it is, so it is not mistaken for the table's interval."""
    from calib.reporting.text import gate_text

    gate = {
        "expr": "ece>0.01",
        "metric": "ece",
        "op": ">",
        "threshold": 0.01,
        "value": 0.012,
        "outcome": "inconclusive",
        "passed": True,
        "bounds": [lower, 0.02],
        "level": 0.95,
        "noise": "bootstrap, 0.95 interval",
        "floor": 0.008,
        "gap_bound": 0.006,
        "rows": 2000,
        "power": 0.8,
        "min_detectable": 0.01,
    }
    assert f"ece = 0.012: {says} straddles 0.01" in gate_text(gate)
