"""One engine: ``calib.evaluate`` in a notebook and ``calib evaluate`` in a CI job give the same
JSON report (metrics, replicates, groups, gate entries with their outcomes, intervals and notes;
only the names of the input differ) and the same exit outcome, on random inputs, metrics,
threshold, change and worst-group gates, with and without replicates, under both inconclusive
policies. The replicate policy ("auto": drawn when gated, or for a report kept as a later
baseline, as ``--json`` keeps it) lives in the library (calib.bootstrap.resolve_config)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import calib
from calib.evaluation.gate_parsing import parse_change_gates

STREAMED = ["accuracy", "nll", "brier", "ece", "mce", "cmce", "cw_ece", "ece_l2"]
PATH_KEYS = ("path", "sha256", "baseline_input", "note", "source")  # "source": where the groups came from


def _comparable(value):
    """The report without what names the input (paths, digests, the notes that quote them)."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items() if k not in PATH_KEYS}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value


@st.composite
def evaluations(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    n, k = draw(st.integers(40, 400)), draw(st.integers(2, 6))
    logits = rng.normal(size=(n, k)) * draw(st.sampled_from([0.5, 2.0, 5.0]))
    labels = rng.integers(0, k, n)
    metrics = draw(st.lists(st.sampled_from(STREAMED), min_size=1, max_size=3, unique=True))
    gated = draw(st.lists(st.sampled_from(metrics), max_size=2))
    ops = draw(st.lists(st.sampled_from(["<", "<=", ">", ">="]), min_size=len(gated), max_size=len(gated)))
    thresholds = draw(st.lists(st.floats(0.0, 1.0), min_size=len(gated), max_size=len(gated)))
    n_groups = draw(st.sampled_from([0, 0, 2, 4]))
    groups = rng.integers(0, n_groups, n) if n_groups else None
    prefixes = ["", "max_group:", "min_group:"] if n_groups else [""]
    aggregates = draw(st.lists(st.sampled_from(prefixes), min_size=len(gated), max_size=len(gated)))
    gates = [f"{a}{m}{op}{t:.4g}" for a, m, op, t in zip(aggregates, gated, ops, thresholds)]
    change = draw(st.sampled_from([None, "same rows", "other rows"]))
    bootstrap = draw(st.sampled_from([None, 0, 30]))
    inconclusive = draw(st.sampled_from(["pass", "fail"]))
    bins = draw(st.sampled_from(["15", "auto"])) if change != "other rows" else "15"  # auto: other rows, other bins
    return logits, labels, metrics, gates, change, bootstrap, inconclusive, seed, groups, bins


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(evaluations())
def test_the_api_and_the_command_line_give_one_report_and_outcome(run, tmp_path, draw):
    logits, labels, metrics, gates, change, bootstrap, inconclusive, seed, groups, bins = draw
    path = tmp_path / f"s{seed}.npz"
    np.savez(path, logits=logits, labels=labels)
    cli_args = ["evaluate", path, "--no-vece", "--metrics", ",".join(metrics), "--inconclusive", inconclusive]
    cli_args += ["--bins", bins, "--cmce-bins", bins, "--min-group-rows", "10"]
    if groups is not None:
        np.save(tmp_path / "groups.npy", groups)
        cli_args += ["--groups", tmp_path / "groups.npy"]
    for gate in gates:
        cli_args += ["--fail-if", gate]
    if bootstrap is not None:
        cli_args += ["--bootstrap", bootstrap]
    increase_gates = []
    if change is not None:
        rows = slice(None) if change == "same rows" else slice(0, len(labels) // 2)
        base = tmp_path / f"b{seed}.npz"
        np.savez(base, logits=logits[rows] * 1.1, labels=labels[rows])
        assert (
            run(
                "evaluate",
                base,
                "--no-vece",
                "--metrics",
                metrics[0],
                "--bins",
                bins,
                "--cmce-bins",
                bins,
                "--json",
                tmp_path / "base.json",
            )[0]
            == 0
        )
        cli_args += [
            "--baseline",
            tmp_path / "base.json",
            "--max-increase",
            f"{metrics[0]}=0.001" if metrics[0] != "accuracy" else "nll=0.001",
        ]
        spec = f"{metrics[0]}=0.001" if metrics[0] != "accuracy" else None
        if spec is None:  # accuracy: higher is better; gate nll's rise instead (and compute it)
            cli_args[cli_args.index("--metrics") + 1] += ",nll" if "nll" not in metrics else ""
            metrics = metrics + (["nll"] if "nll" not in metrics else [])
            spec = "nll=0.001"
            assert (
                run("evaluate", base, "--no-vece", "--metrics", "nll", "--bins", bins, "--json", tmp_path / "base.json")[0] == 0
            )
        increase_gates = parse_change_gates([spec], str(tmp_path / "base.json"))
    code, out, err = run(*cli_args, "--json", "-")
    assert code in (0, 1), err
    cli = json.loads(out)
    api = calib.evaluate(
        logits,
        labels,
        groups=groups,
        request=calib.EvaluationRequest.of(
            metrics=metrics,
            gates=gates,
            increase_gates=increase_gates,
            bootstrap="auto" if bootstrap is None else bootstrap,
            keep_as_baseline=True,
            inconclusive=inconclusive,
            min_group_rows=10,
            bins=bins,
            cmce_bins=bins,
        ),
    ).to_dict()
    assert _comparable(api) == _comparable(cli)
    assert api["passed"] == cli["passed"] and code == (0 if api["passed"] else 1)


def test_the_reproducer_a_gate_in_a_notebook_reads_the_noise_as_in_ci(run, tmp_path):
    """2,000 CIFAR-10 test rows, ece 0.02539 against "ece>0.02": calib.evaluate returned fail
    ("no bootstrap replicates", noise ignored) while the command returned inconclusive; now both
    draw the same 200 replicates and give inconclusive with the same interval."""
    from conftest import SAMPLE

    data = np.load(SAMPLE / "cifar10_test.npz")
    logits, labels = data["logits"][:2000], data["labels"][:2000]
    np.savez(tmp_path / "s.npz", logits=logits, labels=labels)
    api = calib.evaluate(logits, labels, request=calib.EvaluationRequest.of(metrics=["ece"], gates=["ece>0.02"])).to_dict()[
        "gates"
    ][0]
    code, out, _ = run("evaluate", tmp_path / "s.npz", "--metrics", "ece", "--fail-if", "ece>0.02", "--json", "-")
    cli = json.loads(out)["gates"][0]
    assert api["outcome"] == cli["outcome"] == "inconclusive" and code == 0
    assert (
        api["bounds"] == cli["bounds"]
        and api["noise"]
        == cli["noise"]
        == "bootstrap, 0.95 interval; lower end the value less its resolution floor or the bound from the mean gap, the larger"
    )


def _compare_case(case: str, tmp_path):
    """(REF, NEW as arrays, the command line's arguments beyond the two files, the API's request,
    its groups, and a remedy path or None) of one option set of ``calib compare``."""
    from calib.evaluation.groups import groups_from_values
    from calib.synth.shift import shift_world

    world = {"gates": "calibration decay", "groups": "none", "unlabelled": "label shift", "remedy": "label shift"}.get(
        case, "none"
    )
    d = shift_world(world, 1500, np.random.default_rng(3))
    ref, new = (d["ref_logits"], d["ref_labels"]), (d["new_logits"], d["new_labels"])
    args, request, groups, remedy = ["--bootstrap", "40", "--level", "0.95"], {"replicates": 40, "level": 0.95}, None, None
    if case == "gates":
        gates = ["log_loss_miscalibration_increase>0.01", "accuracy_decrease>0.2", "classwise_discrimination_decrease>0.0"]
        args += [arg for gate in gates for arg in ("--fail-if", gate)] + ["--inconclusive", "fail", "--top-k", "3"]
        request.update(gates=tuple(gates), inconclusive="fail", top_k=(3,))
    elif case == "groups":
        sites = np.array(["a", "b", "c"])[np.arange(1500) % 3]
        groups = (groups_from_values(sites, 1500, "site"),) * 2
        args += ["--group-by", "site", "--fail-if", "max_group:accuracy_decrease>0.05"]
        request["gates"] = ("max_group:accuracy_decrease>0.05",)
    elif case == "unlabelled":
        new = (d["new_logits"], None)
        args += ["--fail-if", "prior_shift>0.02"]
        request["gates"] = ("prior_shift>0.02",)
    elif case == "remedy":
        remedy = tmp_path / "fix"
        args += ["--fit-remedy", remedy]
    else:  # multi-label: five labels of calibrated logits
        rng = np.random.default_rng(4)
        z = rng.normal(0, 2, (600, 5))
        y = (rng.uniform(size=(600, 5)) < 1 / (1 + np.exp(-z))).astype(int)
        ref, new = (z[:300], y[:300]), (1.5 * z[300:], y[300:])
        args += ["--fail-if", "max_label:miscalibration_increase>0.02"]
        request["gates"] = ("max_label:miscalibration_increase>0.02",)
    return ref, new, args, request, groups, remedy


@pytest.mark.parametrize("case", ["gates", "groups", "unlabelled", "remedy", "multi-label"])
def test_compare_gives_one_report_from_the_api_and_the_command_line(run, tmp_path, case):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from calib.drift import ComparisonRequest, compare, save_remedy

    ref, new, args, request, groups, remedy = _compare_case(case, tmp_path)
    for name, (logits, labels) in (("ref", ref), ("new", new)):
        columns = {"logits": list(logits)}
        if labels is not None:
            columns["label" if labels.ndim == 1 else "labels"] = list(labels) if labels.ndim == 2 else labels
        if groups is not None:
            columns["site"] = [groups[0].names[c] for c in groups[0].codes]
        pq.write_table(pa.table(columns), tmp_path / f"{name}.parquet")
    code, out, err = run("compare", tmp_path / "ref.parquet", tmp_path / "new.parquet", *args, "--json", "-")
    assert code in (0, 1), err
    cli = json.loads(out)
    ref_preds, new_preds = (
        calib.read_predictions(str(tmp_path / "ref.parquet")),
        calib.read_predictions(str(tmp_path / "new.parquet"), task=ref_preds_task(ref)),
    )
    report = compare(ref_preds, new_preds, ComparisonRequest(**request), groups=groups)
    if remedy is not None:
        save_remedy(ref_preds, new_preds, report, str(tmp_path / "fix_api"))
    api = json.loads(json.dumps(report.to_json()))
    assert _comparable(api) == _comparable(cli)
    assert api["passed"] == cli["passed"] and code == (0 if api["passed"] else 1)
    if remedy is not None:
        assert cli["remedy_written"]["path"] == str(remedy) and calib.load(str(remedy)).method == "prior-shift"


def ref_preds_task(ref) -> str:
    """The task NEW is read with: a multi-label REF's (its labels a matrix)."""
    return "multilabel" if np.ndim(ref[1]) == 2 else "auto"
