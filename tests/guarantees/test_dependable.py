"""Regression tests from reproducers of real-world trials: no crash, one answer on every install,
no silent wrong number (each section names what it guards)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, SAMPLE, needs

import calib
from calib.core import kernels
from calib.core.numerics import EDGE_RTOL, bin_index, edge_index, softmax
from calib.errors import InputError
from calib.registry import CALIBRATORS

ROOT = Path(__file__).resolve().parents[2]

# 1. CatBoost fits never run at the same time in one process ------------------------------------


def test_no_two_catboost_fits_run_at_once_even_from_two_threads(monkeypatch):
    """Two V-ECE estimates started from two threads: CatBoost's fits (which crash the process when
    two run in threads at once) are serialised, and each thread gets the value it gets alone."""
    catboost = needs("catboost")
    active, most = [0], [0]
    guard = threading.Lock()
    original = catboost.CatBoostClassifier.fit

    def counting_fit(self, *args, **kwargs):
        with guard:
            active[0] += 1
            most[0] = max(most[0], active[0])
        try:
            return original(self, *args, **kwargs)
        finally:
            with guard:
                active[0] -= 1

    monkeypatch.setattr(catboost.CatBoostClassifier, "fit", counting_fit)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(600, 4)) * 2
    labels = rng.integers(0, 4, 600)
    alone = calib.metrics.vece(logits, labels)
    results = [None, None]

    def estimate(i):
        results[i] = calib.metrics.vece(logits, labels)

    threads = [threading.Thread(target=estimate, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1
    assert results[0] == alone and results[1] == alone


@pytest.mark.slow
def test_the_default_evaluate_never_crashes_in_repeated_runs(tmp_path):
    """A short run of the stress command (`python -m benchmarks.stress_evaluate`, as documented in
    docs/benchmarks.md): the default `calib evaluate` (V-ECE on) in fresh processes on the three
    stress inputs, every exit 0 and every report the same; the command exits 1 on any failure."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.stress_evaluate", "--runs", "6", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = json.loads((tmp_path / "stress_evaluate.json").read_text())
    assert all(row["runs"] == 2 for row in rows)
    assert [(row["crashes"], row["other failures"], row["reports differ"]) for row in rows] == [(0, 0, 0)] * 3


# 2. an array's name never beats its values ------------------------------------------------------


def _probabilities(rows=300, classes=6, seed=0):
    rng = np.random.default_rng(seed)
    probs = softmax(rng.normal(size=(rows, classes)) * 2)
    return probs, rng.integers(0, classes, rows)


def test_probabilities_saved_as_logits_are_refused_with_the_way_out(run, tmp_path):
    probs, labels = _probabilities()
    path = tmp_path / "fasttext.npz"
    np.savez(path, logits=probs.astype(np.float32), labels=labels)
    code, out, err = run("evaluate", path, "--no-vece")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "named logits but look like probabilities" in err and "--input-kind probs" in err
    code, out, _ = run("evaluate", path, "--no-vece", "--input-kind", "probs", "--json", "-", "--metrics", "ece")
    expected = calib.evaluate(probs.astype(np.float32), labels, metrics="ece", kind="probs").values["ece"]
    assert code == 0 and json.loads(out)["metrics"]["ece"]["value"] == expected
    code, _, _ = run("evaluate", path, "--no-vece", "--input-kind", "logits")  # the name confirmed
    assert code == 0


def test_real_logits_and_log_probs_named_logits_are_still_read_as_logits(tmp_path):
    from calib.io.readers import read_predictions

    probs, labels = _probabilities()
    for name, values in (("raw", np.log(probs) * 3 + 1.0), ("log-probs", np.log(probs))):
        path = tmp_path / f"{name}.npz"
        np.savez(path, logits=values, labels=labels)
        preds = read_predictions(str(path))
        assert preds.kind == "logits" and "named for logits" in preds.kind_reason, name


def test_a_binary_probability_column_named_logits_is_refused(tmp_path):
    from calib.io.readers import read_predictions

    path = tmp_path / "binary.npz"
    np.savez(path, logits=np.array([0.1, 0.7, 0.4, 1.0]), labels=np.array([0, 1, 0, 1]))
    with pytest.raises(InputError, match="look like probabilities"):
        read_predictions(str(path))


# 3. classes missing from the calibration rows -----------------------------------------------------


@pytest.fixture
def label_sorted_halves(tmp_path):
    """CIFAR-10 test logits sorted by label and cut in halves: classes 5-9 never in the first."""
    data = np.load(DATA / "cifar10_resnet110_test.npz")
    order = np.argsort(data["labels"], kind="stable")
    logits, labels = data["logits"][order], data["labels"][order]
    half = len(labels) // 2
    first, second = tmp_path / "first.npz", tmp_path / "second.npz"
    np.savez(first, logits=logits[:half], labels=labels[:half])
    np.savez(second, logits=logits[half:], labels=labels[half:])
    return first, second


def test_missing_classes_are_said_at_fit_kept_in_the_bundle_and_said_at_evaluate(run, tmp_path, label_sorted_halves):
    first, second = label_sorted_halves
    code, _, err = run("fit", first, "--method", "isotonic", "--out", tmp_path / "iso")
    assert code == 0
    assert "5 classes have no calibration row (5, 6, 7, 8, 9): their probabilities are kept as the model gave them" in err
    manifest = json.loads((tmp_path / "iso" / "manifest.json").read_text())
    assert manifest["fit_report"]["classes without calibration rows"] == [5, 6, 7, 8, 9]
    assert "5 classes have no calibration row" in manifest["fit_report"]["warning"]
    code, out, err = run("evaluate", second, "--bundle", tmp_path / "iso", "--no-vece", "--json", "-")
    report = json.loads(out)
    assert code == 0 and "5000 of 5000 rows are labelled with a class that had no calibration row" in err
    assert report["warnings"] == [err.split("warning: ", 1)[1].strip()]
    # kept as the model gave them: the accuracy stays the model's, not 0.012 (every row sent to a class 0-4)
    assert report["metrics"]["accuracy"]["value"] > 0.94
    assert report["metrics"]["nll"]["value"] < 0.25
    code, _, err = run("apply", tmp_path / "iso", second, "--out", tmp_path / "calibrated.npy")
    assert code == 0 and "5000 of 5000 rows are labelled with a class that had no calibration row" in err


def test_base_rate_rule_for_missing_classes_stays_selectable(label_sorted_halves):
    first, _ = label_sorted_halves
    data = np.load(first)
    zero = calib.calibrator("isotonic", absent="base-rate").fit(data["logits"], data["labels"])
    assert np.all(zero.predict_proba(data["logits"][:50])[:, 5:] == 0.0)
    assert "base rate" in zero.fitted.fit_warnings()[0]


@pytest.mark.parametrize("method", [m for m, c in sorted(CALIBRATORS.items()) if not c.requires])
def test_every_method_says_what_it_does_with_a_missing_class(method):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(300, 5)) * 2
    labels = rng.integers(0, 4, 300)  # class 4 never appears
    fitted = calib.calibrator(method).fit(logits, labels)
    warning = fitted.fitted.fit_warnings()[0]
    assert warning.startswith("1 classes have no calibration row (4): ") and len(warning) > 50
    assert fitted.fit_report()["classes without calibration rows"] == [4]


# 4. the same numbers on both kernel paths ---------------------------------------------------------


def on_numpy_path(monkeypatch):
    monkeypatch.setattr(kernels, "_compiled", None)
    monkeypatch.setattr(kernels, "_COMPILED_LOG", False)


def _both_paths(monkeypatch, compute):
    compiled = compute()
    with monkeypatch.context() as patch:
        on_numpy_path(patch)
        numpy_path = compute()
    return compiled, numpy_path


def _assert_same_numbers(first: dict, second: dict, what: str) -> None:
    """Equal, or within 1e-12 relative for values that are not counts."""
    assert first.keys() == second.keys()
    for key, value in first.items():
        other = second[key]
        if value is None or other is None or key in ("set_empty", "set_full"):
            assert value == other, (what, key)
        else:
            assert other == pytest.approx(value, rel=1e-12, abs=1e-300), (what, key)


def _sample_and_label_sorted():
    val, test = np.load(SAMPLE / "cifar10_val.npz"), np.load(SAMPLE / "cifar10_test.npz")
    real = np.load(DATA / "cifar10_resnet110_test.npz")
    order = np.argsort(real["labels"], kind="stable")
    half = len(order) // 2
    return [
        ("sample", (val["logits"], val["labels"]), (test["logits"], test["labels"])),
        (
            "label-sorted",
            (real["logits"][order][:half], real["labels"][order][:half]),
            (real["logits"][order], real["labels"][order]),
        ),
    ]


def _kernel_paths_agree(method, monkeypatch):
    for name, (fit_logits, fit_labels), (logits, labels) in _sample_and_label_sorted():
        fitted = calib.calibrator(method).fit(fit_logits, fit_labels)
        compiled, numpy_path = _both_paths(monkeypatch, lambda: calib.evaluate(logits, labels, calibrator=fitted).values)  # noqa: B023
        _assert_same_numbers(compiled, numpy_path, f"{method} on {name}")


@pytest.mark.parametrize("method", [m for m, c in sorted(CALIBRATORS.items()) if not c.requires])
def test_every_bundle_gives_the_same_numbers_on_both_kernel_paths(method, monkeypatch):
    """Every metric of the default table (and the conformal set statistics) after each method's
    bundle, on the sample data and a label-sorted real file, equal on the compiled and the NumPy
    kernels, or within 1e-12 relative where the two paths' exp and log differ in the last bits:
    never a row counted differently (MR puts exactly 0.9 of the mass in its sets, the coverage
    band's lower edge). Without the compiled kernels both runs are the NumPy path."""
    _kernel_paths_agree(method, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("method", [m for m, c in sorted(CALIBRATORS.items()) if c.requires])
def test_every_torch_bundle_gives_the_same_numbers_on_both_kernel_paths(method, monkeypatch):
    needs("torch")
    _kernel_paths_agree(method, monkeypatch)


def test_a_value_within_the_tolerance_below_an_edge_is_on_it():
    """Bins [l, u): 0.2 (15 bins: the edge of bins 2 and 3) is in bin 3, and so is 0.2 less a last
    bit difference; 0.2 less 1e-13 (more than any rounding of the kernels) stays in bin 2. The same
    rule on uneven edges."""
    edge = 3 / 15
    values = np.array([edge, np.nextafter(edge, 0), edge - 4e-16, edge - 1e-13, 1.0, 0.0])
    assert bin_index(values, 15).tolist() == [3, 3, 3, 2, 14, 0]
    edges = np.array([0.0, 0.25, 0.5, 1.0])
    assert edge_index(np.array([0.25, 0.25 - 1e-15, 0.25 - 1e-13, 1.0]), edges).tolist() == [1, 1, 0, 2]
    assert EDGE_RTOL == 2.0**-44


def test_coverage_band_counts_a_mass_a_rounding_below_its_edge():
    """Coverage[0.9, 0.92] of one row whose top-1 mass is 0.9 less an ulp, top-2 mass 0.95: the
    top-1 pair is in the band (within the tolerance of its lower edge), and covers the label 0."""
    probs = np.array([[np.nextafter(0.9, 0), 0.05, 0.05 + (0.9 - np.nextafter(0.9, 0))]])
    value = calib.evaluate(probs, np.array([0]), metrics="coverage_0.9_0.92", kind="probs").values["coverage_0.9_0.92"]
    assert value == 1.0


# 5. optional peers and extras: every test skips without them --------------------------------------

OPTIONAL = {"torch", "torchmetrics", "netcal", "probmetrics", "mapie", "torchcp", "numba", "venn_abers", "relplot", "safetensors"}


def test_every_optional_import_in_a_test_goes_through_a_skip():
    """An import of an optional package inside a test function comes after needs(<package>) (or a
    pytest.skip) in the same function; no test module imports one at its top."""
    problems = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                problems += [f"{path.name}:{node.lineno} imports {n} at the top" for n in names if n.split(".")[0] in OPTIONAL]
        for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            guarded: dict[str, int] = {}
            for node in ast.walk(function):
                if isinstance(node, ast.Call):
                    callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                    if callee == "needs" and node.args and isinstance(node.args[0], ast.Constant):
                        guarded[node.args[0].value] = min(guarded.get(node.args[0].value, 10**9), node.lineno)
                    if callee == "skip":
                        guarded["*"] = min(guarded.get("*", 10**9), node.lineno)
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    for name in names:
                        root = name.split(".")[0]
                        first = min(guarded.get(root, 10**9), guarded.get("*", 10**9))
                        if root in OPTIONAL and first > node.lineno:
                            problems.append(f"{path.name}:{node.lineno} imports {name} before any needs({root!r})")
    assert not problems, "\n".join(problems)


# 6. diagnose writes its report like fit writes a bundle -----------------------------------------------


def test_diagnose_refuses_a_missing_parent_and_an_existing_report(run, tmp_path):
    code, _, err = run("diagnose", SAMPLE / "cifar10_test.npz", "--out", tmp_path / "missing" / "report")
    assert code == 2 and "does not exist" in err and not (tmp_path / "missing").exists()
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "mine.txt").write_text("keep me")
    code, _, err = run("diagnose", SAMPLE / "cifar10_test.npz", "--out", tmp_path / "report")
    assert code == 2 and "--force" in err and (tmp_path / "report" / "mine.txt").read_text() == "keep me"
    code, _, _ = run("diagnose", SAMPLE / "cifar10_test.npz", "--out", tmp_path / "report", "--force")
    assert code == 0 and {"report.json", "report.html"} <= {p.name for p in (tmp_path / "report").iterdir()}
    assert not (tmp_path / "report" / "mine.txt").exists()


def test_an_interrupted_diagnose_leaves_no_report_behind(tmp_path, monkeypatch):
    """Interrupted while writing (Ctrl-C after report.json): no directory, not one with report.json alone."""
    from calib.diagnose import diagnose
    from calib.io.readers import read_predictions
    from calib.reporting import html as report_html
    from calib.reporting import plots

    result = diagnose(read_predictions(str(SAMPLE / "cifar10_test.npz"), require_labels=True))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report_html, "report_page", interrupted)
    with pytest.raises(KeyboardInterrupt):
        plots.write_report(result, str(tmp_path / "report"))
    assert list(tmp_path.iterdir()) == []


# 7. messages ------------------------------------------------------------------------------------------


def test_a_metric_given_as_a_string_is_one_key():
    probs, labels = _probabilities()
    assert list(calib.evaluate(probs, labels, metrics="ece").values) == ["ece"]


def test_a_pandas_series_of_rows_is_stacked_and_ragged_rows_are_refused():
    pd = pytest.importorskip("pandas")
    probs, labels = _probabilities()
    stacked = calib.evaluate(pd.Series(list(probs)), pd.Series(labels), metrics="ece").values
    assert stacked == calib.evaluate(probs, labels, metrics="ece").values
    with pytest.raises(InputError, match="rows of different lengths"):
        calib.evaluate(pd.Series([probs[0], probs[1][:3]]), labels[:2])


def test_labels_out_of_range_name_one_subject():
    probs, labels = _probabilities()
    with pytest.raises(InputError) as caught:
        calib.evaluate(probs, labels + 3)
    assert str(caught.value).startswith("labels must lie in [0, 6); row ")


def test_a_tensor_that_requires_grad_is_detached():
    torch = needs("torch")
    probs, labels = _probabilities()
    logits = torch.tensor(np.log(probs), requires_grad=True)
    got = calib.evaluate(logits * 1.0, torch.tensor(labels), metrics="ece").values
    assert got == calib.evaluate(np.log(probs), labels, metrics="ece").values


def test_a_text_file_named_npz_is_never_offered_unpickling(run, tmp_path):
    path = tmp_path / "scores.npz"
    path.write_text("0.1,0.9\n0.8,0.2\n")
    code, _, err = run("evaluate", path, "--no-vece")
    assert code == 2 and "pickle" not in err.replace("pickled data is never loaded", "") and "holds text" in err
    probs, labels = _probabilities()
    np.save(tmp_path / "probs.npy", probs)
    code, _, err = run("evaluate", tmp_path / "probs.npy", "--labels", path, "--no-vece")
    assert code == 2 and "allow_pickle" not in err and "never loaded" in err


def test_top_k_probabilities_are_refused_naming_the_renormalise_option_which_reads_them(run, tmp_path):
    probs, labels = _probabilities(classes=10)
    order = np.argsort(-probs, axis=1)
    top = probs.copy()
    np.put_along_axis(top, order[:, 5:], 0.0, axis=1)  # the top 5 kept: rows sum to less than 1
    np.savez(tmp_path / "named.npz", probs=top, labels=labels)  # named probs
    np.save(tmp_path / "unnamed.npy", top)  # kind decided from the values
    np.save(tmp_path / "labels.npy", labels)
    for path, more in ((tmp_path / "named.npz", ()), (tmp_path / "unnamed.npy", ("--labels", tmp_path / "labels.npy"))):
        code, _, err = run("evaluate", path, *more, "--no-vece")
        assert code == 2 and "--renormalise" in err and len(err.strip().splitlines()) == 1, path
        code, out, err = run("evaluate", path, *more, "--no-vece", "--renormalise", "--json", "-", "--metrics", "ece,nll")
        expected = calib.evaluate(top / top.sum(axis=1, keepdims=True), labels, metrics=["ece", "nll"], kind="probs").values
        assert code == 0 and "renormalised as asked" in err
        got = {key: entry["value"] for key, entry in json.loads(out)["metrics"].items()}
        assert got == pytest.approx(expected, rel=1e-12)


# 8. one-vs-rest calibrators see probabilities as given ------------------------------------------------

#: Calibration rows with an exact zero, ties across rows and a value on a histogram edge (0.2 = 3/15).
TIED = np.array([[0.5, 0.5, 0.0], [0.5, 0.25, 0.25], [0.2, 0.2, 0.6]])
TIED_LABELS = np.array([1, 0, 2])


def test_isotonic_on_probabilities_equals_sklearn_with_zeros_and_ties():
    from sklearn.isotonic import IsotonicRegression

    fitted = calib.calibrator("isotonic").fit(TIED, TIED_LABELS, kind="probs").fitted
    maps = fitted.class_maps(np.log(np.maximum(TIED, 1e-12)), TIED, given=True)
    for k in range(3):
        reference = IsotonicRegression(out_of_bounds="clip").fit(TIED[:, k], TIED_LABELS == k).predict(TIED[:, k])
        np.testing.assert_array_equal(maps[:, k], reference)
    assert maps[0, 0] == maps[1, 0] == 0.5  # the tie p_0 = 0.5 stays a tie (was 0 and 1)


def test_venn_abers_on_probabilities_equals_the_venn_abers_package():
    package = needs("venn_abers")
    rng = np.random.default_rng(3)
    probs = np.vstack([TIED, np.round(rng.dirichlet(np.ones(3), 60), 2)])  # rounded: many ties, some zeros
    probs /= probs.sum(axis=1, keepdims=True)
    labels = np.concatenate([TIED_LABELS, rng.integers(0, 3, 60)])
    three = calib.calibrator("venn-abers").fit(TIED, TIED_LABELS, kind="probs").fitted
    p0, p1 = three.interval(TIED)
    # p_0 = 0.2 (the lowest of 0.5, 0.5, 0.2): with (0.2, 0) added the isotonic fit at 0.2 is 0;
    # with (0.2, 1) the points 0.2 -> {0, 1} pool to 0.5, below 0.5 -> {0, 1}'s 0.5: p1 = 0.5
    assert (p0[2, 0], p1[2, 0]) == (0.0, 0.5)
    fitted = calib.calibrator("venn-abers").fit(probs, labels, kind="probs").fitted
    p0, p1 = fitted.interval(probs)
    for k in range(3):
        binary = np.stack([1.0 - probs[:, k], probs[:, k]], axis=1)
        _, intervals = package.VennAbers().fit(binary, (labels == k).astype(int)).predict_proba(binary)
        np.testing.assert_allclose(p0[:, k], intervals[:, 0], atol=1e-12)
        np.testing.assert_allclose(p1[:, k], intervals[:, 1], atol=1e-12)


def test_histogram_bins_probabilities_as_given():
    """p = 0.2 in rows 2 and 3 (class 0 and class 1): 0.2 * 15 = 3, so bin 3 by the definition
    [3/15, 4/15), the bin of both rows (a softmax round trip dropped one to bin 2)."""
    fitted = calib.calibrator("hist").fit(TIED, TIED_LABELS, kind="probs").fitted
    assert bin_index(TIED[2, :2], 15).tolist() == [3, 3]
    # class 1: row 3 (p = 0.2, label 2) alone in bin 3 -> 0 hits of 1; class 0: row 3 alone -> 0
    assert fitted.values_[0, 3] == 0.0 and fitted.values_[1, 3] == 0.0
    assert fitted.values_[0, 7] == 0.5  # rows 1 and 2 (p_0 = 0.5: bin 7), one of them labelled 0


# 9. Dirichlet and SMS converge or say that they did not --------------------------------------------


def test_an_unconverged_linear_map_warns_at_fit_in_the_bundle_and_in_diagnose(run, tmp_path, monkeypatch):
    from calib.calibrators import matrix_scaling

    monkeypatch.setattr(matrix_scaling, "NEWTON_MAX_ITERATIONS", 2)
    code, _, err = run("fit", SAMPLE / "cifar10_val.npz", "--method", "dirichlet", "--out", tmp_path / "d")
    assert code == 0 and "warning: the Newton-CG fit stopped after 2 iterations without converging" in err
    assert "Newton decrement" in err
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert manifest["fit_report"]["converged"] is False and "without converging" in manifest["fit_report"]["warning"]
    code, out, _ = run("diagnose", SAMPLE / "cifar10_test.npz", "--bundle", tmp_path / "d")
    assert code == 0 and "without converging" in out


@pytest.mark.parametrize("method", ["dirichlet", "sms"])
def test_linear_maps_converge_on_real_data_within_the_budget(method):
    data = np.load(SAMPLE / "cifar10_val.npz")
    fitted = calib.calibrator(method).fit(data["logits"], data["labels"])
    assert fitted.fit_report()["converged"] is True and fitted.fitted.warnings() == []
