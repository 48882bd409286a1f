"""evaluate --bootstrap: the grouped bootstrap against the textbook row bootstrap, and paired gates;
the per-cluster sums of the evaluation's own pass, keyed by each row's global index, against their
definitions (SplitMix64's published outputs, a replicate as the metrics of the resampled rows
themselves), on both kernel paths, and merged shards against one run."""

import json

import numpy as np
import pytest

import calib
from calib.bootstrap import BootstrapConfig, BootstrapStates, cluster_counts, row_clusters, row_weights, splitmix64
from calib.core.binning import BinCounter
from calib.evaluation import stream_metrics
from calib.io import Predictions
from calib.metrics import Batch, MetricConfig
from calib.metrics.metric_set import MetricSet


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


# the bootstrap in the evaluation's own pass ----------------------------------------------------------

#: SplitMix64 from state 1234567: its first five outputs (Rosetta Code, "Pseudo-random numbers/Splitmix64").
SPLITMIX_1234567 = [0x599ED017FB08FC85, 0x2C73F08458540FA5, 0x883EBCE5A3F27C77, 0x3FBEF740E9177B3F, 0xE3B8346708CB5ECD]


def test_splitmix64_gives_the_published_outputs():
    assert splitmix64(np.uint64(1234567), np.arange(5)).tolist() == SPLITMIX_1234567


def test_a_rows_cluster_depends_on_its_global_index_alone():
    whole = row_clusters(3, range(1000))
    parts = [row_clusters(3, np.arange(start, stop)) for start, stop in ((0, 1), (1, 370), (370, 1000))]
    assert np.array_equal(whole, np.concatenate(parts))
    assert np.array_equal(row_clusters(3, slice(370, 1000)), whole[370:])
    assert whole.min() >= 0 and whole.max() == 199 and not np.array_equal(whole, row_clusters(4, range(1000)))
    # a multi-label input's pairs: the L pairs of a row share the row's cluster
    assert np.array_equal(row_clusters(3, range(12), pairs_per_row=3), np.repeat(whole[:4], 3))
    # spread over the clusters as a uniform draw: chi-square of 200,000 rows in 200 cells
    counts = np.bincount(row_clusters(0, range(200_000)), minlength=200)
    assert ((counts - 1000.0) ** 2 / 1000.0).sum() < 280  # the 0.9995 quantile of chi-square(199) is 280


def _evaluate(logits, labels, keys, bootstrap=None):
    return calib.evaluate(logits, labels, request=calib.EvaluationRequest.of(metrics=keys, bootstrap=bootstrap or 0)).to_dict()


KEYS = [
    "accuracy",
    "nll",
    "brier",
    "ece",
    "mce",
    "cw_ece",
    "cmce",
    "ece_quantile",
    "smece",
    "tl_ece",
    "top5_accuracy",
    "coverage_0.9_0.92",
]


def test_a_replicate_is_the_metrics_of_its_resampled_rows():
    """Replicate r of each metric equals the metric evaluated on the rows themselves, each row i
    repeated c_r(cluster i) times: per-cluster sums weighted by the counts (and, for equal-mass bins,
    the per-row values repeated) are the resampled sample."""
    rng = np.random.default_rng(7)
    logits, labels = rng.normal(size=(700, 12)) * 2, rng.integers(0, 12, 700)
    config = BootstrapConfig(6, 5)
    report = _evaluate(logits, labels, KEYS, config)
    counts = cluster_counts(config, 200)
    cluster = row_clusters(5, range(700))
    for r in range(6):
        rows = np.repeat(np.arange(700), counts[r, cluster])
        resampled = _evaluate(logits[rows], labels[rows], KEYS)["metrics"]
        for key in KEYS:
            assert report["bootstrap"]["values"][key][r] == pytest.approx(resampled[key]["value"], rel=1e-12, abs=1e-15), key


def test_the_values_with_replicates_are_those_without_to_the_bit():
    rng = np.random.default_rng(8)
    logits, labels = rng.normal(size=(900, 30)), rng.integers(0, 30, 900)
    with_replicates = _evaluate(logits, labels, KEYS, BootstrapConfig(20, 0))["metrics"]
    without = _evaluate(logits, labels, KEYS)["metrics"]
    for key in KEYS:
        assert with_replicates[key]["value"] == without[key]["value"], key  # the same sums: the same bits


def test_plain_classwise_sums_counted_beside_the_clusters_are_those_of_their_own_pass(monkeypatch):
    """Without groups, the classwise bins of many classes (added to per cluster on the main thread)
    count the plain sums in the same pass; over many chunks, rows all in the first bin and values
    on bin edges, the plain state equals the pass without replicates to the bit, and the replicates
    equal those of the per-cluster sums alone."""
    import calib.io.predictions as predictions
    from calib.core.numerics import row_chunks

    monkeypatch.setattr(predictions, "row_chunks", lambda n, k: row_chunks(n, k, 97 * k))  # 10 chunks
    rng = np.random.default_rng(9)
    probs = rng.dirichlet(np.full(40, 0.2), size=900)
    probs[::9] = 1 / 40  # every value in the first bin
    probs[5::9, :2], probs[5::9, 2:] = 7 / 15, 1 / 15 / 38  # on the 7th edge and under the first
    labels = rng.integers(0, 40, 900)
    preds = Predictions("t", probs, "probs", "t", labels, "t")
    keys = ["cw_ece", "accuracy"]
    fused = stream_metrics(preds, keys, MetricConfig(), bootstrap=BootstrapConfig(30, 2))
    assert [identity[0] for identity in fused.bootstrap_states.plain_beside] == ["classwise"]
    plain = stream_metrics(preds, keys, MetricConfig())
    for key, array in plain.state.state().items():
        assert np.array_equal(fused.state.state()[key], array), key
    alone = BootstrapStates(lambda clusters=None: MetricSet(keys, MetricConfig(), 40, clusters), 2)
    for rows in predictions.row_chunks(900, 40):
        alone.update(alone.prepare(Batch(labels[rows], probs=probs[rows]), rows))
    expected = alone.replicate_values(BootstrapConfig(30, 2))
    for key in keys:
        assert np.array_equal(fused.replicates["values"][key], expected[key]), key


def test_plain_classwise_sums_are_counted_once_a_chunk_beside_the_clusters(monkeypatch):
    """The worker threads neither count the plain classwise bins nor hand on their empty sums: each
    chunk's plain sums come from the per-cluster pass alone, absorbed once."""
    import calib.io.predictions as predictions
    from calib.core.numerics import row_chunks
    from calib.metrics.accumulators import ClasswiseBins

    monkeypatch.setattr(predictions, "row_chunks", lambda n, k: row_chunks(n, k, 100 * k))  # 6 chunks
    calls = {"update": 0, "absorb": 0}
    for name in calls:
        original = getattr(ClasswiseBins, name)

        def counted(self, *args, _original=original, _name=name):
            calls[_name] += self.clusters is None
            return _original(self, *args)

        monkeypatch.setattr(ClasswiseBins, name, counted)
    rng = np.random.default_rng(10)
    preds = Predictions("t", rng.normal(size=(600, 40)), "logits", "t", rng.integers(0, 40, 600), "t")
    stream_metrics(preds, ["cw_ece"], MetricConfig(), bootstrap=BootstrapConfig(5, 0))
    assert calls == {"update": 0, "absorb": 6}


@pytest.mark.parametrize("n_groups", [3, 60])  # replicates per group (strata), and groups without
def test_grouped_values_with_replicates_are_those_without_to_the_bit(n_groups):
    """By groups, the plain sums come from the groups' own sets (the per-cluster pass counts no
    plain sums then): the overall and every group's state equal the pass without replicates."""
    from calib.evaluation.groups import groups_from_values

    rng = np.random.default_rng(12)
    logits, labels = rng.normal(size=(900, 40)), rng.integers(0, 40, 900)
    groups = groups_from_values(rng.integers(0, n_groups, 900), 900, "g")
    preds = Predictions("t", logits, "logits", "t", labels, "t")
    keys = ["cw_ece", "ece", "accuracy"]
    fused = stream_metrics(preds, keys, MetricConfig(), bootstrap=BootstrapConfig(5, 0), groups=groups)
    plain = stream_metrics(preds, keys, MetricConfig(), groups=groups)
    assert fused.bootstrap_states.plain_beside == {}
    for key, array in plain.state.state().items():
        assert np.array_equal(fused.state.state()[key], array), key
    for got, expected in zip(fused.group_states, plain.group_states):
        for key, array in expected.state().items():
            assert np.array_equal(got.state()[key], array), key


@pytest.mark.parametrize("n_classes, beside", [(40, True), (5, False)])
def test_per_cluster_sums_hold_each_row_once_whichever_thread_fills_them(n_classes, beside):
    """Classwise bins of many classes (added to in place, in the chunks' turns) count their plain
    sums in the same pass; those of few classes (filled for each chunk alone) do not: either way every cluster's bins
    count each of its rows once per class, and the plain sums come back only from the first."""
    states = BootstrapStates(
        lambda clusters=None: MetricSet(["cw_ece"], MetricConfig(), n_classes, clusters), 0, plain_beside=True
    )
    assert bool(states.plain_beside) == beside
    rng = np.random.default_rng(11)
    probs, labels = rng.dirichlet(np.ones(n_classes), 300), rng.integers(0, n_classes, 300)
    plain = states.update(states.prepare(Batch(labels, probs=probs), slice(0, 300)))
    assert len(plain) == beside
    rows = np.bincount(row_clusters(0, range(300)), minlength=200)
    count = next(array for key, array in states.cluster_state().items() if key.endswith("counter.count"))
    assert np.array_equal(count.sum(axis=1), rows * n_classes)


@pytest.mark.parametrize("backend", ["compiled", "numpy"])
def test_per_cluster_bins_are_the_bins_of_each_clusters_rows_on_both_kernel_paths(backend, monkeypatch):
    """Each cluster's bins (counts, sums and hits to the bit) equal a counter of that cluster's rows
    alone, for values on bin edges, exact zeros and ones, by column and by cumulative mass."""
    from calib.core import kernels

    if backend == "compiled":
        monkeypatch.setattr(kernels, "_compiled", pytest.importorskip("calib._kernels", reason="not built"))
    else:
        monkeypatch.setattr(kernels, "_compiled", None)
    rng = np.random.default_rng(2)
    values = rng.choice(np.r_[np.arange(16) / 15, rng.random(20)], size=(300, 6))  # every edge, 0 and 1
    hits = rng.random((300, 6)) < 0.4
    cluster = rng.integers(0, 7, 300)
    first_hit = rng.integers(0, 7, 300)
    for kind in ("column", "hits", "first_hit"):
        counter = BinCounter(15, 6 if kind == "column" else 1, clusters=7)
        for part in np.array_split(np.arange(300), 4):  # chunk by chunk, into running sums
            _add(counter, kind, values[part], hits[part], first_hit[part], cluster[part])
        state = counter.state()
        for c in range(7):
            alone = BinCounter(15, 6 if kind == "column" else 1)
            mine = cluster == c
            _add(alone, kind, values[mine], hits[mine], first_hit[mine], None)
            for name in ("count", "sum_pred", "sum_true"):
                assert np.array_equal(state[name][c], getattr(alone, name)), (kind, name, c)


@pytest.mark.parametrize("backend", ["compiled", "numpy"])
def test_plain_counts_filled_beside_the_clusters_are_those_of_their_own_pass(backend, monkeypatch):
    """A counter per cluster given ``plain`` fills it as the plain counter's own add would (to the
    bit, running sums over chunks), and its own counts as without it: values on every edge, 0 and 1,
    in group 0 and by column (where the first bin is kept apart per cluster)."""
    from calib.core import kernels

    monkeypatch.setattr(kernels, "_compiled", pytest.importorskip("calib._kernels") if backend == "compiled" else None)
    rng = np.random.default_rng(3)
    values = np.sort(rng.choice(np.r_[np.arange(26) / 25, rng.random(30)], size=(240, 9)), axis=1)
    hits, first_hit, cluster = rng.random((240, 9)) < 0.5, rng.integers(0, 10, 240), rng.integers(0, 7, 240)
    values[::5] = 0.0  # rows all in the first bin
    for kind in ("hits", "first_hit", "column"):
        groups = 9 if kind == "column" else 1
        fused, plain, alone_plain, alone_clusters = (
            BinCounter(25, groups, clusters=7),
            BinCounter(25, groups),
            BinCounter(25, groups),
            BinCounter(25, groups, clusters=7),
        )
        for part in np.array_split(np.arange(240), 3):
            pairs = (values[part][:, 0], hits[part][:, 0]) if kind == "hits" else (values[part],)
            first = {"hits": {}, "first_hit": {"first_hit": first_hit[part]}, "column": {"by_column": True}}[kind]
            fused.add(*pairs, **first, cluster=cluster[part], plain=plain)
            alone_plain.add(*pairs, **first)
            alone_clusters.add(*pairs, **first, cluster=cluster[part])
        for name in ("count", "sum_pred", "sum_true"):
            assert np.array_equal(getattr(plain, name), getattr(alone_plain, name)), (kind, name)
            assert np.array_equal(fused.state()[name], alone_clusters.state()[name]), (kind, name)
    with pytest.raises(ValueError, match="beside per-cluster counts of group 0"):
        BinCounter(25).add(values[:, 0], hits[:, 0], plain=BinCounter(25))
    with pytest.raises(ValueError, match="same bins"):
        BinCounter(25, clusters=7).add(values[:, 0], hits[:, 0], cluster=cluster, plain=BinCounter(15))
    with pytest.raises(ValueError, match="same bins and groups"):
        BinCounter(25, 9, clusters=7).add(values, by_column=True, cluster=cluster, plain=BinCounter(25, 3))


@pytest.mark.parametrize("backend", ["compiled", "numpy"])
def test_each_rows_hit_column_counts_its_own_value_as_an_outcome(backend, monkeypatch):
    """By column, ``hit_column`` (a label per row) adds outcome 1 at the bin of the row's value in
    that column, per cluster, into the plain counter beside it, and over every row alone: the
    hits matrix 1{j = label} counts the same, with labels whose value is 0, on an edge or 1."""
    from calib.core import kernels

    monkeypatch.setattr(kernels, "_compiled", pytest.importorskip("calib._kernels") if backend == "compiled" else None)
    rng = np.random.default_rng(13)
    values = rng.choice(np.r_[0.0, 1 / 15, 7 / 15, 1.0, rng.random(10)], size=(150, 6))
    labels, cluster = rng.integers(0, 6, 150), rng.integers(0, 5, 150)
    matrix = np.arange(6)[None, :] == labels[:, None]
    for clusters in (1, 5):
        rows = {} if clusters == 1 else {"cluster": cluster}
        given, expected = BinCounter(15, 6, clusters), BinCounter(15, 6, clusters)
        plain, plain_expected = BinCounter(15, 6), BinCounter(15, 6)
        for part in np.array_split(np.arange(150), 3):
            parted = {key: value[part] for key, value in rows.items()}
            beside = {} if clusters == 1 else {"plain": plain}
            given.add(values[part], by_column=True, hit_column=labels[part], **parted, **beside)
            expected.add(values[part], matrix[part], by_column=True, **parted)
            plain_expected.add(values[part], matrix[part], by_column=True)
        for name in ("count", "sum_pred", "sum_true"):
            assert np.array_equal(given.state()[name], expected.state()[name]), (clusters, name)
            if clusters > 1:
                assert np.array_equal(plain.state()[name], plain_expected.state()[name]), name
    with pytest.raises(ValueError, match="hit_column goes by column"):
        BinCounter(15, 6).add(values, matrix, by_column=True, hit_column=labels)


@pytest.mark.parametrize("backend", ["compiled", "numpy"])
def test_the_first_bin_kept_apart_gives_the_same_sums_across_reads_and_merges(backend, monkeypatch):
    """By column per cluster, the first bin is kept apart until read: adding, reading, merging a
    state and adding again gives on both paths the sums of that definition, value by value: the
    first bin's values (exact zeros, values just under the first edge) summed apart from zero in
    element order and added to the bin when read, every other value added to its bin's sum in turn."""
    from calib.core import kernels

    monkeypatch.setattr(kernels, "_compiled", pytest.importorskip("calib._kernels") if backend == "compiled" else None)
    rng = np.random.default_rng(4)
    edge = 1 / 15
    values = rng.choice(np.r_[0.0, edge, np.nextafter(edge, 0), 1.0, rng.random(10) * 0.1], size=(200, 5))
    cluster = rng.integers(0, 4, 200)

    def model(sums, apart, rows):
        for i in rows:
            for j, v in enumerate(values[i]):
                b = min(int(v * 15 * (1 + 1e-12)), 14)
                target = apart if b == 0 else sums
                target["count"][cluster[i], j * 15 + b] += 1.0
                target["sum_pred"][cluster[i], j * 15 + b] += v

    def fold(sums, apart):
        for name in sums:
            sums[name] += apart[name]
            apart[name][:] = 0.0

    fresh = lambda: {name: np.zeros((4, 75)) for name in ("count", "sum_pred")}  # noqa: E731
    other_sums, other_apart, sums, apart = fresh(), fresh(), fresh(), fresh()
    model(other_sums, other_apart, range(0, 50))
    fold(other_sums, other_apart)
    counter, other = BinCounter(15, 5, clusters=4), BinCounter(15, 5, clusters=4)
    other.add(values[:50], None, by_column=True, cluster=cluster[:50])
    counter.add(values[50:120], None, by_column=True, cluster=cluster[50:120])
    model(sums, apart, range(50, 120))
    fold(sums, apart)
    assert all(np.array_equal(counter.state()[name], sums[name]) for name in sums)
    counter.absorb(other.state())
    for name in sums:
        sums[name] += other_sums[name]
    counter.add(values[120:], None, by_column=True, cluster=cluster[120:])
    model(sums, apart, range(120, 200))
    fold(sums, apart)
    for name in sums:
        assert np.array_equal(counter.state()[name], sums[name]), name
    assert (counter.state()["count"][:, ::15] > 0).all()  # the first bins were used


def test_a_batchs_binned_pairs_are_filled_once_for_both_readers():
    """With its rows' clusters, a batch's binned pairs are one pass for the plain and the per-cluster
    counters (the second reader takes its counter, not a new pass); another cluster count is refused."""
    rng = np.random.default_rng(5)
    batch = Batch(rng.integers(0, 6, 300), probs=rng.dirichlet(np.ones(6), 300))
    batch.set_clusters(rng.integers(0, 9, 300), 9)
    per_cluster = batch.binned("cumulative_mass", 25, 9)
    assert batch.binned("cumulative_mass", 25, 9) is per_cluster
    plain = batch.binned("cumulative_mass", 25)
    alone = BinCounter(25)
    alone.add(batch.cumulative_mass, first_hit=batch.label_rank)
    assert all(np.array_equal(plain.state()[name], alone.state()[name]) for name in ("count", "sum_pred", "sum_true"))
    assert per_cluster.state()["count"].sum() == plain.count.sum() == 300 * 6
    with pytest.raises(ValueError, match="clusters of 9, not 200"):
        batch.binned("confidence", 15, 200)


def _add(counter, kind, values, hits, first_hit, cluster):
    if kind == "column":
        counter.add(values, None, by_column=True, cluster=cluster)
    elif kind == "hits":
        counter.add(values[:, 0], hits[:, 0], cluster=cluster)
    else:
        counter.add(values, first_hit=first_hit, cluster=cluster)


def test_a_clusters_counter_needs_each_rows_cluster():
    with pytest.raises(ValueError, match="give cluster"):
        BinCounter(15, clusters=3).add(np.array([0.5]), np.array([True]))
    with pytest.raises(ValueError, match="give cluster"):
        BinCounter(15).add(np.array([0.5]), np.array([True]), cluster=np.array([0]))


def test_the_compiled_kernel_refuses_clusters_outside_its_buffers():
    compiled = pytest.importorskip("calib._kernels", reason="not built")
    out = [np.zeros(2 * 15) for _ in range(3)]
    values = np.array([[0.5]])
    for cluster in (np.array([2]), np.array([-1])):
        with pytest.raises(ValueError, match="out of the"):
            compiled.bin_counts(values, None, None, cluster, 1, 1, 15, 15.0, False, 2, *out)
    one = [np.zeros(15) for _ in range(3)]
    with pytest.raises(ValueError, match="beside row_cluster"):  # plain counts go beside per-cluster ones only
        compiled.bin_counts(values, None, None, None, 1, 1, 15, 15.0, False, 1, *one, None, None, *one)
    wide = [np.zeros(2 * 15) for _ in range(3)]
    for column in (np.array([2]), np.array([-1])):  # a row's hit column outside its 2 columns
        with pytest.raises(ValueError, match="hit_column out of the columns"):
            compiled.bin_counts(np.array([[0.5, 0.5]]), None, None, None, 1, 2, 15, 15.0, True, 1, *wide, *[None] * 5, column)
    with pytest.raises(ValueError, match="hit_column goes by column"):
        compiled.bin_counts(values, None, None, None, 1, 1, 15, 15.0, False, 1, *one, *[None] * 5, np.array([0]))


def test_small_accumulators_are_filled_on_the_workers_and_large_ones_in_place():
    """Both kinds give each cluster's sums: replicate values equal to the metrics of the resampled rows."""
    states = BootstrapStates(lambda clusters=None: MetricSet(["accuracy", "cw_ece"], MetricConfig(), 100, clusters), 0)
    assert [identity[0] for identity in states._chunk_filled] == ["proper"]  # classwise: 200 x 100 x 15 x 3 numbers
    rng = np.random.default_rng(0)
    probs, labels = rng.dirichlet(np.ones(100), 50), rng.integers(0, 100, 50)
    states.update(states.prepare(Batch(labels, probs=probs), slice(0, 50)))
    config = BootstrapConfig(3, 0)
    replicates = states.replicate_values(config)
    counts, cluster = cluster_counts(config, 200), row_clusters(0, range(50))
    for r in range(3):
        rows = np.repeat(np.arange(50), counts[r, cluster])
        resampled = MetricSet(["accuracy", "cw_ece"], MetricConfig(), 100)
        resampled.update(Batch(labels[rows], probs=probs[rows]))
        for key, entry in resampled.results().items():
            assert replicates[key][r] == pytest.approx(entry["value"], rel=1e-12), key


@pytest.fixture
def four_shards(tmp_path):
    data = np.load(__import__("conftest").data_file("cifar100_resnet110_test.npz"))
    logits, labels = data["logits"][:6000], data["labels"][:6000]
    np.savez(tmp_path / "all.npz", logits=logits, labels=labels)
    bounds = [0, 1000, 2500, 4000, 6000]
    for i, (start, stop) in enumerate(zip(bounds, bounds[1:])):
        np.savez(tmp_path / f"part{i}.npz", logits=logits[start:stop], labels=labels[start:stop])
    return tmp_path, bounds


SHARD_KEYS = "accuracy,nll,brier,ece,mce,cw_ece,cmce,ece_quantile,smece,coverage_0.9_0.92"


def test_merged_states_of_four_shards_give_the_intervals_of_one_run(run, four_shards):
    folder, bounds = four_shards
    common = ("--no-vece", "--metrics", SHARD_KEYS, "--bootstrap", "200", "--seed", "4")
    code, out, err = run("evaluate", folder / "all.npz", *common, "--json", "-")
    assert code == 0, err
    single = json.loads(out)
    states = []
    for i, start in enumerate(bounds[:-1]):
        states.append(folder / f"state{i}.npz")
        code, _, err = run("evaluate", folder / f"part{i}.npz", *common, "--first-row", str(start), "--emit-state", states[-1])
        assert code == 0, err
    code, out, err = run("merge-states", *reversed(states), "--json", "-")  # any order
    assert code == 0, err
    merged = json.loads(out)
    assert "warnings" not in merged
    for key, entry in single["metrics"].items():
        assert merged["metrics"][key]["value"] == pytest.approx(entry["value"], rel=1e-12, abs=1e-15), key
        np.testing.assert_allclose(merged["metrics"][key]["ci"], entry["ci"], rtol=1e-12, atol=1e-15, err_msg=key)
        replicates = np.array(merged["bootstrap"]["values"][key], dtype=float)
        np.testing.assert_allclose(replicates, np.array(single["bootstrap"]["values"][key], dtype=float), rtol=1e-12, atol=1e-15)
    assert merged["bootstrap"]["floors"]["values"] == pytest.approx(single["bootstrap"]["floors"]["values"], rel=1e-12)
    # shards without their first rows overlap: valid replicates of other clusters, and a warning
    for i in (1, 2):
        code, _, err = run("evaluate", folder / f"part{i}.npz", *common, "--emit-state", states[i])
        assert code == 0, err
    code, out, _ = run("merge-states", *states, "--json", "-")
    overlapping = json.loads(out)
    assert code == 0 and len(overlapping["warnings"]) == 1 and "overlap" in overlapping["warnings"][0]
    assert overlapping["metrics"]["ece"]["value"] == pytest.approx(single["metrics"]["ece"]["value"], rel=1e-12)


def test_states_with_other_replicates_are_refused(run, four_shards):
    folder, _ = four_shards
    for i, seed in ((0, "1"), (1, "2")):
        code, _, err = run(
            "evaluate",
            folder / f"part{i}.npz",
            "--no-vece",
            "--bootstrap",
            "50",
            "--seed",
            seed,
            "--emit-state",
            folder / f"s{i}.npz",
        )
        assert code == 0, err
    code, _, err = run("merge-states", folder / "s0.npz", folder / "s1.npz")
    assert code == 2 and "differ" in err and err.count("\n") == 1


def test_a_directory_of_shards_gets_the_replicates_of_one_run_locally_and_on_dask(run, four_shards):
    from calib.io.writers import write_matrix

    folder, bounds = four_shards
    shards = folder / "shards"
    shards.mkdir()
    data = np.load(folder / "all.npz")
    for i, (start, stop) in enumerate(zip(bounds, bounds[1:])):
        write_matrix(str(shards / f"part{i}.parquet"), data["logits"][start:stop], "logits", labels=data["labels"][start:stop])
    common = ("--metrics", "accuracy,ece,cw_ece,cmce", "--bootstrap", "100", "--json", "-")
    code, out, err = run("evaluate", folder / "all.npz", "--no-vece", *common)
    assert code == 0, err
    single = json.loads(out)
    for engine in ("local", "dask"):
        code, out, err = run("evaluate", shards, *common, "--engine", engine)
        assert code == 0, err
        merged = json.loads(out)
        for key, entry in single["metrics"].items():
            np.testing.assert_allclose(merged["metrics"][key]["ci"], entry["ci"], rtol=1e-12, err_msg=(engine, key))


def test_stacked_binned_errors_equal_each_replicates_own_on_a_binary_input_with_empty_replicates():
    """The binned errors computed for every replicate at once (ece, mce, cw_ece, cmce, ece_pos)
    equal the same metrics of each replicate's own state, NaN where a replicate drew no row (3
    rows in 200 clusters: a replicate misses each row's cluster with chance about 1/e, all three
    about one time in twenty)."""
    from calib.metrics.definitions import METRICS

    rng = np.random.default_rng(4)
    logits, labels = rng.normal(size=(3, 2)) * 2, np.array([0, 1, 1])
    keys = [key for key, metric in METRICS.items() if metric.stacks]
    assert sorted(keys) == ["cmce", "cw_ece", "ece", "ece_pos", "mce"]
    config = BootstrapConfig(300, 2)
    replicates = _evaluate(logits, labels, keys, config)["bootstrap"]["values"]
    counts, cluster = cluster_counts(config, 200), row_clusters(2, range(3))
    empty = 0
    for r in range(300):
        rows = np.repeat(np.arange(3), counts[r, cluster])
        if len(rows) == 0:
            empty += 1
            assert all(replicates[key][r] is None for key in keys)
            continue
        resampled = _evaluate(logits[rows], labels[rows], keys)["metrics"]
        for key in keys:
            assert replicates[key][r] == pytest.approx(resampled[key]["value"], rel=1e-12, abs=1e-15), (key, r)
    assert empty > 0


def _dense_replicates(state, weights, n_bins, n_groups):
    """The replicates' counters by their definition: each sum W s over every bin (one product per
    sum), in counters of the replicates' stacked sums."""
    counter = BinCounter(n_bins, n_groups)
    for name in ("count", "sum_pred", "sum_true"):
        setattr(counter, name, weights @ state[name])
    return counter


@pytest.mark.parametrize("n_groups, n_bins", [(1, 15), (7, 5)])
def test_replicate_bins_read_the_errors_of_each_replicates_summed_sums(n_groups, n_bins):
    """ReplicateBins (one product of the clusters' differences, over the bins that hold a row)
    against counters of the replicates' own sums: groups and bins without a row in any cluster,
    a bin whose outcomes equal its predictions (gap 0), and a replicate that drew no cluster with
    rows (NaN)."""
    from calib.core.binning import ReplicateBins

    rng = np.random.default_rng(11)
    clusters, size = 6, n_groups * n_bins
    count = rng.integers(0, 4, size=(clusters, size)).astype(float)
    count[:, rng.random(size) < 0.4] = 0.0  # bins without a row in any cluster
    if n_groups > 1:
        count[:, n_bins : 2 * n_bins] = 0.0  # a group without a row
    count[1:, :] *= rng.random((clusters - 1, 1)) < 0.5  # some clusters hold no row at all
    sum_pred = count * rng.random((clusters, size))
    sum_true = np.minimum(count, np.round(sum_pred + rng.normal(scale=0.8, size=sum_pred.shape)).clip(0))
    sum_true[:, 0] = sum_pred[:, 0]  # the first bin's outcomes equal its predictions
    state = {"count": count, "sum_pred": sum_pred, "sum_true": sum_true}
    weights = rng.integers(0, 3, size=(9, clusters)).astype(float)
    weights[0] = 0.0
    weights[0, count.sum(axis=1) == 0] = 2.0  # replicate 0 draws only clusters without rows
    replicates = ReplicateBins(n_bins, n_groups, state, weights)
    assert np.array_equal(replicates.bins, np.flatnonzero(count.sum(axis=0) > 0))  # only bins with a row are multiplied
    dense = _dense_replicates(state, weights, n_bins, n_groups)
    assert np.isnan(replicates.weighted_error()[0]).all() and np.isnan(replicates.max_error()[0])
    np.testing.assert_allclose(replicates.weighted_error(), dense.weighted_error(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(replicates.max_error(), dense.max_error(), rtol=1e-13, atol=1e-15)
    if n_groups > 1:
        assert np.isnan(replicates.weighted_error()[:, 1]).all()  # the group without a row


def test_replicate_bins_of_a_counter_without_rows_are_nan_and_of_one_bin_its_gap():
    """No bin with a row: NaN for every replicate; one bin (group 1's last) with rows in two clusters:
    by hand, replicate r's error is |w_r0 (2 - 1.5) + w_r2 (0 - 0.25)| / (2 w_r0 + w_r2) for
    group 1, NaN for group 0."""
    from calib.core.binning import ReplicateBins

    state = {name: np.zeros((4, 6)) for name in ("count", "sum_pred", "sum_true")}
    replicates = ReplicateBins(3, 2, state, np.ones((5, 4)))
    assert replicates.weighted_error().shape == (5, 2) and np.isnan(replicates.weighted_error()).all()
    assert replicates.max_error().shape == (5,) and np.isnan(replicates.max_error()).all()
    state["count"][[0, 2], 5] = 2.0, 1.0
    state["sum_pred"][[0, 2], 5] = 1.5, 0.25
    state["sum_true"][0, 5] = 2.0
    weights = np.array([[1.0, 3.0, 0.0, 0.0], [0.0, 1.0, 2.0, 1.0], [2.0, 0.0, 1.0, 0.0]])
    found = ReplicateBins(3, 2, state, weights).weighted_error()
    assert np.isnan(found[:, 0]).all()
    np.testing.assert_allclose(found[:, 1], [0.5 / 2, 0.5 / 2, 0.75 / 5], rtol=1e-15)
    np.testing.assert_allclose(ReplicateBins(3, 2, state, weights).max_error(), [0.25, 0.25, 0.15], rtol=1e-15)


def test_an_accumulators_replicates_are_the_weighted_sums_of_its_clusters():
    """Additive.load_replicates: each sum s kept per cluster becomes W s (the row counts of top-label
    bins here), each counter the replicates' bins; per-row values are refused (their metrics read
    one replicate at a time)."""
    from calib.core.binning import ReplicateBins
    from calib.metrics.accumulators import TopLabelBins, TopLabelValues

    rng = np.random.default_rng(5)
    accumulator = TopLabelBins(4)
    accumulator.split_by_cluster(3)
    state = {
        "counter.count": rng.integers(0, 5, size=(3, 4)).astype(float),
        "counter.sum_pred": rng.random((3, 4)),
        "counter.sum_true": rng.integers(0, 2, size=(3, 4)).astype(float),
        "n": np.array([4.0, 7.0, 1.0]),
    }
    weights = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]])
    accumulator.load_replicates(state, weights)
    assert np.array_equal(accumulator.n, [6.0, 21.0])
    assert isinstance(accumulator.counter, ReplicateBins) and np.array_equal(accumulator.counter.weights, weights)
    formed, later = accumulator.counter, np.array([[0.0, 1.0, 1.0]])
    accumulator.load_replicates(state, later)  # the next block of the same state: drawn again, not formed again
    assert accumulator.counter is formed and np.array_equal(accumulator.n, [8.0])
    np.testing.assert_array_equal(formed.weighted_error(), ReplicateBins(4, 1, formed.state, later).weighted_error())
    other = {**state, "counter.count": state["counter.count"].copy()}
    accumulator.load_replicates(other, later)  # another state's counts: formed from them
    assert accumulator.counter is not formed and accumulator.counter.state["count"] is other["counter.count"]
    values = TopLabelValues()
    values.split_by_cluster(3)
    with pytest.raises(ValueError, match="one replicate at a time"):
        values.load_replicates({"confidence": np.zeros(2), "correct": np.zeros(2), "row_cluster": np.zeros(2)}, weights)


def test_a_chunks_cells_are_its_rows_global_clusters_in_their_stratum():
    """BootstrapStates.cells: the clusters of rows first_row + i for a slice starting anywhere and
    for index arrays; with strata, each row's stratum's block of clusters before its cluster."""
    make = lambda clusters=None: MetricSet(["accuracy"], MetricConfig(), 3, clusters)  # noqa: E731
    plain = BootstrapStates(make, 5, first_row=7)
    assert np.array_equal(plain.cells(slice(4, 9)), row_clusters(5, range(11, 16)))
    assert np.array_equal(plain.cells(np.array([8, 0])), row_clusters(5, [15, 7]))
    strata = np.array([0, 2, 1, 2])
    stratified = BootstrapStates(make, 5, strata=strata, n_strata=3)
    assert np.array_equal(stratified.cells(slice(0, 4)), strata * 200 + row_clusters(5, range(4)))
    assert stratified.metric_set.clusters == 600


def test_row_weights_are_the_cluster_counts_of_each_rows_cluster():
    config = BootstrapConfig(7, 3)
    weights = row_weights(config, 50)
    assert np.array_equal(weights.assignment, row_clusters(3, range(50)))
    assert np.array_equal(weights.counts, cluster_counts(config, 200))
    assert np.array_equal(weights.matrix(), cluster_counts(config, 200)[:, row_clusters(3, range(50))])
    assert (weights.counts.sum(axis=1) == 200).all()  # each replicate draws 200 clusters


@pytest.mark.parametrize(
    "asked, expected",
    [(0, None), (None, None), (1, (1, 0, 0.95)), (np.int64(3), (3, 0, 0.95)), ("auto", None)],
)
def test_the_replicates_asked_for_by_count(asked, expected):
    from calib.bootstrap import resolve_config

    found = resolve_config(asked, 100, 10)
    assert (found if found is None else (found.replicates, found.seed, found.level)) == expected
    found = resolve_config("auto", 100, 10, gated=True)
    assert (found.replicates, found.seed, found.level) == (200, 0, 0.95)
    assert resolve_config("auto", 100, 10, recorded=True).replicates == 200


@pytest.mark.parametrize("asked", [-1, True, 2.5, "200"])
def test_replicates_that_are_no_count_are_refused(asked):
    from calib.bootstrap import resolve_config
    from calib.errors import UsageError

    with pytest.raises(UsageError, match="number of replicates"):
        resolve_config(asked, 100, 10)


def test_replicates_drawn_in_blocks_are_the_replicates_drawn_at_once(monkeypatch):
    import calib.bootstrap as bootstrap

    rng = np.random.default_rng(6)
    logits, labels = rng.normal(size=(300, 6)), rng.integers(0, 6, 300)
    whole = _evaluate(logits, labels, KEYS, BootstrapConfig(23, 1))["bootstrap"]["values"]
    monkeypatch.setattr(bootstrap, "REPLICATE_BLOCK", 5)  # blocks of 5, 5, 5, 5 and 3
    blocked = _evaluate(logits, labels, KEYS, BootstrapConfig(23, 1))["bootstrap"]["values"]
    for key in KEYS:  # the same sums; BLAS may round a product of another shape in another last bit
        np.testing.assert_allclose(np.array(blocked[key], dtype=float), np.array(whole[key], dtype=float), rtol=1e-12, atol=1e-15)
