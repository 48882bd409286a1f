"""evaluate --bootstrap: the grouped bootstrap against the textbook row bootstrap, and paired gates."""

import json

import numpy as np
import pytest

from calib.bootstrap import BootstrapConfig
from calib.evaluation import stream_metrics
from calib.io import Predictions
from calib.metrics import MetricConfig


@pytest.fixture
def cifar10_test():
    from conftest import SAMPLE

    data = np.load(SAMPLE / "cifar10_test.npz")
    return data["logits"].astype(np.float64), data["labels"]


def _values(logits, labels, keys, bootstrap=None):
    preds = Predictions("t", logits, "logits", "t", labels, "t")
    streamed = stream_metrics(preds, keys, MetricConfig(), bootstrap=bootstrap)
    return streamed.values, streamed.replicates


@pytest.mark.slow
def test_grouped_bootstrap_matches_the_row_bootstrap(cifar10_test):
    """Accuracy's bootstrap spread equals the binomial standard error; ECE's and smECE's intervals
    agree with a literal row bootstrap (resample rows, recompute) to a fraction of their width."""
    logits, labels = cifar10_test
    logits, labels = logits[:4000], labels[:4000]
    keys = ["accuracy", "ece", "smece"]
    values, replicates = _values(logits, labels, keys, BootstrapConfig(replicates=400, seed=1))
    accuracy = values["accuracy"]["value"]
    binomial = np.sqrt(accuracy * (1 - accuracy) / len(labels))
    assert np.std(replicates["values"]["accuracy"]) == pytest.approx(binomial, rel=0.15)
    rng = np.random.default_rng(5)
    literal = {key: [] for key in keys}
    for _ in range(150):
        rows = rng.integers(0, len(labels), len(labels))
        for key, entry in _values(logits[rows], labels[rows], keys)[0].items():
            literal[key].append(entry["value"])
    for key in ("ece", "smece"):
        lo, hi = np.percentile(literal[key], [2.5, 97.5])
        width = hi - lo
        assert abs(values[key]["ci"][0] - lo) < 0.35 * width and abs(values[key]["ci"][1] - hi) < 0.35 * width, key


def test_bootstrap_is_deterministic_and_reported(run, tmp_path):
    from conftest import SAMPLE

    outputs = []
    for seed in (0, 0, 1):
        code, out, err = run(
            "evaluate",
            SAMPLE / "cifar10_test.npz",
            "--no-vece",
            "--bootstrap",
            "50",
            "--seed",
            seed,
            "--metrics",
            "ece,ece_quantile,cmce",
            "--json",
            "-",
        )
        assert code == 0, err
        outputs.append(out)
    assert outputs[0] == outputs[1] and outputs[0] != outputs[2]
    report = json.loads(outputs[0])
    assert report["bootstrap"]["replicates"] == 50 and len(report["bootstrap"]["values"]["cmce"]) == 50
    for entry in report["metrics"].values():
        assert entry["ci"][0] <= entry["ci"][1]
    code, _, _ = run(
        "evaluate",
        SAMPLE / "cifar10_test.npz",
        "--bootstrap",
        "20",
        "--metrics",
        "ece,vece_l1",
        "--vece-recalibrator",
        "ts",
        "--json",
        str(tmp_path / "r.json"),
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["bootstrap"]["not_bootstrapped"] == ["vece_l1"] and "ci" not in report["metrics"]["vece_l1"]


def test_paired_gate_fails_only_on_a_significant_increase(run, tmp_path):
    from conftest import SAMPLE

    data = np.load(SAMPLE / "cifar10_test.npz")
    for name, scale in (("same", 1.0), ("worse", 1.6)):
        np.savez(tmp_path / f"{name}.npz", logits=data["logits"] * scale, labels=data["labels"])
    common = ["--no-vece", "--metrics", "ece,nll", "--bootstrap", "100"]
    code, _, _ = run("evaluate", SAMPLE / "cifar10_test.npz", *common, "--json", str(tmp_path / "base.json"))
    assert code == 0
    gate = ["--baseline", tmp_path / "base.json", "--max-increase", "ece=0", "--paired"]
    code, out, _ = run("evaluate", tmp_path / "same.npz", *common, *gate, "--json", "-")
    assert code == 0 and json.loads(out)["gates"][0]["increase_lower_bound"] == 0.0
    code, out, _ = run("evaluate", tmp_path / "worse.npz", *common, *gate, "--json", "-")
    assert code == 1 and json.loads(out)["gates"][0]["increase_lower_bound"] > 0.0
    code, _, err = run("evaluate", tmp_path / "same.npz", "--no-vece", "--metrics", "ece", "--bootstrap", "0", *gate)
    assert code == 2 and "a paired gate needs bootstrap replicates" in err and "(--bootstrap N)" in err
    code, _, err = run("evaluate", tmp_path / "same.npz", *common, "--seed", "3", *gate)
    assert code == 2 and "with the same number of replicates and seed" in err


# --- thin tails: the normal end where few replicates reach the percentile's --------------------------


def test_five_replicates_beyond_each_end_keep_the_percentile_interval():
    """(1 - 0.95) / 2 x 200 = 5 replicates beyond each end (exactly on the edge): the percentiles."""
    from calib.bootstrap import centred_interval

    values = np.linspace(-1.0, 1.0, 200)  # short tails: the normal ends (+-1.13) lie outside the percentiles'
    lower, upper, _ = centred_interval(values, 0.95)
    assert (lower, upper) == tuple(np.percentile(values, [2.5, 97.5])) and upper < 1.0
    values = np.linspace(-1.0, 1.0, 100)
    lower, upper, _ = centred_interval(values, 0.9)  # 0.05 x 100, computed as 4.999999999999999
    assert (lower, upper) == tuple(np.percentile(values, [5.0, 95.0])) and upper < 1.0


def test_fewer_replicates_beyond_an_end_widen_it_to_the_normal_end():
    """199 replicates at 0.95 (4.975 beyond each end), and 200 at a Bonferroni level over 50 groups
    (0.1 beyond): each end is at least z sd from the mean, z the normal's (1 + level) / 2 quantile."""
    from statistics import NormalDist

    from calib.bootstrap import centred_interval

    values = np.linspace(-1.0, 1.0, 199)  # short tails: the percentile ends lie inside z sd
    lower, upper, _ = centred_interval(values, 0.95)
    reach = NormalDist().inv_cdf(0.975) * np.std(values, ddof=1)
    assert (lower, upper) == pytest.approx((-reach, reach), abs=1e-12)
    assert np.percentile(values, 97.5) < reach
    level = 1 - 0.05 / 50
    values = np.random.default_rng(2).normal(0.3, 0.01, 200)
    lower, upper, _ = centred_interval(values, level, 0.5)
    reach = NormalDist().inv_cdf((1 + level) / 2) * np.std(values, ddof=1)
    assert upper == pytest.approx(max(0.5 + reach, np.percentile(values - values.mean() + 0.5, 100 * (1 + level) / 2)), abs=1e-12)
    assert upper - 0.5 > np.max(values) - values.mean()  # beyond every replicate: the percentile could not reach it
    assert lower == pytest.approx(0.5 - reach, abs=1e-12)
