"""calib export --to onnx: onnxruntime's output against calib's own apply, for every method with a
graph, on real models and on inputs placed on the edges each method's map has (bin edges, knots,
run boundaries, ties, the set threshold); the methods without one refused with a reason."""

import json

import numpy as np
import pytest
from conftest import INSTALL, data_file, needs

from calib.registry import onnx_cases

#: Every method with a graph, with options for each of its variants (from the registries).
EXPORTED = onnx_cases()

INSTALL.setdefault("onnxruntime", "pip install 'calib-cli[test-all]'")
INSTALL.setdefault("onnx", "pip install 'calib-cli[onnx]'")

#: Methods that must refuse the export, with a word of the reason their refusal gives.
REFUSED = {
    "adaptive-ts": "neural network",
    "ats-aq": "neural network",
    "ats-mgq": "many levels of alpha",
    "ats-maq": "many levels of alpha",
    "tl-hb": "capped shares",
}


def _session(model: bytes):
    ort = needs("onnxruntime")
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def _run_graph(model: bytes, scores: np.ndarray) -> list:
    session = _session(model)
    return session.run(None, {session.get_inputs()[0].name: scores})


def _fitted(method, scores, labels, **options):
    import calib

    return calib.calibrator(method, **options).fit(scores, labels)


def _cifar(name="cifar10_resnet110", rows=None):
    val, test = (np.load(data_file(f"{name}_{part}.npz")) for part in ("val", "test"))
    return val["logits"][:rows], val["labels"][:rows], test["logits"][:rows]


def _check(fitted, scores, tolerance=1e-6):
    """ORT's float32 probabilities within ``tolerance`` of calib's, its float64 ones within 1e-8
    (5e-9 measured for the temperature searches, 1e-14 for the others; exp and log differ in their
    last bits between libraries and machines), the sets equal."""
    from calib.calibrators.base import builds_sets

    needs("onnx")
    given = np.asarray(scores, dtype=np.float32)
    outputs = _run_graph(fitted.to_onnx(), given)
    assert outputs[0].dtype == np.float32 and outputs[0].shape == given.shape
    assert np.abs(outputs[0] - fitted.predict_proba(given)).max() <= tolerance
    scores64 = np.asarray(scores, dtype=np.float64)  # as given: values on edges stay on them
    exact = _run_graph(fitted.to_onnx(dtype="float64"), scores64)
    assert np.abs(exact[0] - fitted.predict_proba(scores64)).max() <= 1e-8
    if builds_sets(fitted.fitted):
        assert np.array_equal(exact[1], fitted.predict_sets(scores64))
    if builds_sets(fitted.fitted):
        assert outputs[1].dtype == bool
        differ = (outputs[1] != fitted.predict_sets(given)).any(axis=1)
        assert differ.sum() == 0, f"{differ.sum()} rows with other sets"
    else:
        assert len(outputs) == 1
    return outputs


@pytest.mark.parametrize("method, options", EXPORTED, ids=[m + "".join(f"-{v}" for v in o.values()) for m, o in EXPORTED])
def test_every_exported_method_equals_calib_apply_on_cifar10(method, options):
    scores, labels, test = _cifar()
    _check(_fitted(method, scores, labels, **options), test)


@pytest.mark.parametrize("method", ["ts", "sms", "isotonic", "hist", "venn-abers", "mr", "conformal-ts"])
def test_cifar100_rows(method):
    scores, labels, test = _cifar("cifar100_resnet110", rows=2000)
    _check(_fitted(method, scores, labels), test)


@pytest.mark.parametrize("method", ["ts", "platt", "beta", "isotonic", "hist", "mr", "conformal-ts"])
def test_probability_inputs_with_exact_zeros(method):
    """20 Newsgroups probabilities hold exact zeros (61 rows give the true class 0): the graph takes
    log(max(p, 1e-12)) and scores the probabilities as given, as calib does."""
    news = np.load(data_file("news20_probs.npz"))
    probs, labels = news["probs"].astype(np.float64), news["labels"]
    fitted = _fitted(method, probs[:3000], labels[:3000])
    assert fitted.input_kind == "probs"
    _check(fitted, probs[3000:5000])


def test_probability_rows_off_the_simplex_are_repaired_as_on_reading():
    needs("onnx")
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(5), size=400)
    labels = rng.integers(0, 5, 400)
    fitted = _fitted("ts", probs, labels)
    off = probs[:4].copy()
    off[0] *= 1.0 + 1e-7  # sums to 1 + 1e-7: divided by its sum
    off[1, 0] += 1e-6
    off[2] = np.array([0.5, 0.5, 0.0, 0.0, 0.0])  # exact zeros, on the simplex: kept
    with np.errstate(all="ignore"):
        _check(fitted, off)


def test_log_prob_inputs():
    needs("onnx")
    scores, labels, test = _cifar(rows=1000)
    log_probs = scores - np.log(np.exp(scores.astype(np.float64)).sum(axis=1, keepdims=True))
    import calib

    fitted = calib.calibrator("ts").fit(log_probs, labels, kind="log-probs")
    test_log = test - np.log(np.exp(test.astype(np.float64)).sum(axis=1, keepdims=True))
    assert _session(fitted.to_onnx()).get_inputs()[0].name == "log_probs"
    given = test_log.astype(np.float32)
    out = _run_graph(fitted.to_onnx(), given)[0]
    assert np.abs(out - fitted.predict_proba(given, kind="log-probs")).max() <= 1e-6


def test_values_on_the_edges_of_each_map():
    """Probabilities exactly on histogram bin edges (k / 15), on the isotonic knots and on the
    Venn-Abers run boundaries; rows of tied scores (ranking ties to the lower index)."""
    needs("onnx")
    rng = np.random.default_rng(3)
    k = 4
    edges = np.arange(16) / 15.0
    probs = np.zeros((600, k))
    # on the edges j / 15 (0 and 1 included) and 1e-13 below them, within the edge tolerance: bin j
    probs[:, 0] = np.clip(rng.choice(edges, size=600) - rng.choice([0.0, 1e-13], size=600), 0.0, 1.0)
    probs[:, 1:] = (1.0 - probs[:, :1]) / 3.0  # three tied classes
    labels = rng.integers(0, k, 600)
    for method in ("hist", "isotonic", "venn-abers", "platt"):
        fitted = _fitted(method, probs[:400], labels[:400])
        _check(fitted, probs)
    iso = _fitted("isotonic", probs[:400], labels[:400])
    knots = iso.fitted.knots_x_[: iso.fitted.offsets_[1]]
    _check(iso, np.column_stack([knots, np.tile(((1 - knots) / 3)[:, None], (1, 3))]))
    va = _fitted("venn-abers", probs[:400], labels[:400])
    bounds = va.fitted.boundaries_[: va.fitted.offsets_[1]]
    bounds = bounds[np.isfinite(bounds) & (bounds >= 0) & (bounds <= 1)]
    on_bounds = np.column_stack([bounds, np.tile(((1 - bounds) / 3)[:, None], (1, 3))])
    _check(va, on_bounds)


def test_ties_empty_and_full_sets_in_the_conformal_graphs():
    """Rows whose set is empty (MR and ATS leave them as the model gave them), rows with every class
    in the set, tied scores and a score exactly at q."""
    needs("onnx")
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(800, 6)) * 3
    labels = rng.integers(0, 6, 800)
    logits[:50] = 0.0  # uniform rows: all tied
    for method, options in (("mr", {}), ("mr", {"score": "aps"}), ("conformal-ts", {}), ("ats-gq", {"score": "raps"})):
        fitted = _fitted(method, logits, labels, **options)
        outputs = _check(fitted, logits)
        sizes = outputs[1].sum(axis=1)
        assert (sizes == 0).any() or (sizes == 6).any() or method != "mr"


def test_a_class_absent_from_the_calibration_rows():
    needs("onnx")
    scores, labels, test = _cifar(rows=1500)
    keep = labels != 3
    for absent in ("keep", "base-rate"):
        for method in ("platt", "isotonic", "hist"):
            fitted = _fitted(method, scores[keep], labels[keep], absent=absent)
            assert fitted.fitted.absent_classes_ == (3,)
            _check(fitted, test)


def _stand_in(method, **options):
    """A calibrator marked fitted without a fit (the refusals read only the method and its
    options): the torch methods' fits take seconds."""
    from calib.registry import CALIBRATORS

    cls = CALIBRATORS[method]
    calibrator = cls(cls.parse_options(options))
    calibrator.conditioning_ = "logits"
    calibrator.threshold_ = {}
    return calibrator


def test_every_method_exports_or_says_why():
    """The registry's methods split into those with a graph and the five refused with a reason;
    a fit with an adaptive threshold or randomised scores is refused too."""
    needs("onnx")
    from calib.errors import ExportError
    from calib.onnx_export import GraphInputs, OnnxGraph
    from calib.registry import CALIBRATORS

    assert {m for m, _ in EXPORTED} | set(REFUSED) == set(CALIBRATORS)
    refusals = [(_stand_in(method), reason) for method, reason in REFUSED.items()]
    refusals += [
        (_stand_in("mr", score="aps", randomize=True), "hash of its float64 bits"),
        (_stand_in("mr", threshold="adaptive"), "adaptive threshold is a neural network"),
        (_stand_in("conformal-ts", threshold="adaptive", flow="er"), "adaptive threshold is a neural network"),
    ]
    for calibrator, reason in refusals:
        with pytest.raises(ExportError, match=reason) as info:
            calibrator.onnx_outputs(OnnxGraph(4), GraphInputs("logits", None))
        assert "\n" not in str(info.value) and repr(calibrator.name) in str(info.value)
    rng = np.random.default_rng(1)
    fitted = _fitted("ats-mgq", rng.normal(size=(300, 4)), rng.integers(0, 4, 300))
    with pytest.raises(ExportError, match="cannot be exported to ONNX: it aggregates"):
        fitted.to_onnx()


def test_metadata_opset_and_bundle_hash(tmp_path, run):
    onnx = needs("onnx")
    import hashlib

    import calib

    scores, labels, _ = _cifar(rows=500)
    fitted = calib.calibrator("mr", alpha=0.2).fit(scores, labels)
    fitted.save(str(tmp_path / "b"))
    manifest_sha = hashlib.sha256((tmp_path / "b" / "manifest.json").read_bytes()).hexdigest()
    assert fitted.to_onnx() == calib.load(str(tmp_path / "b")).to_onnx()  # the same graph, the same hash
    code, _, err = run("export", tmp_path / "b", "--to", "onnx", "--out", tmp_path / "m.onnx")
    assert code == 0, err
    assert "opset 17" in err and manifest_sha[:12] in err
    model = onnx.load(str(tmp_path / "m.onnx"))
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["calib.bundle_sha256"] == manifest_sha
    assert meta["calib.method"] == "mr" and json.loads(meta["calib.options"])["alpha"] == 0.2
    assert meta["calib.dtype"] == "float32" and model.opset_import[0].version == 17
    assert [o.name for o in model.graph.output] == ["probs", "sets"]


def test_cli_refusals_are_one_line(tmp_path, run):
    needs("onnx")
    import calib

    scores, labels, _ = _cifar(rows=500)
    calib.calibrator("ts").fit(scores, labels).save(str(tmp_path / "b"))
    calib.calibrator("ats-mgq").fit(scores, labels).save(str(tmp_path / "mgq"))
    code, _, err = run("export", tmp_path / "mgq", "--out", tmp_path / "m.onnx")
    assert code == 2 and "method 'ats-mgq' cannot be exported to ONNX" in err and err.count("\n") == 1
    assert not (tmp_path / "m.onnx").exists()
    for args, message in (
        (("--to", "tflite", "--out", tmp_path / "m.onnx"), "--to must be one of onnx"),
        (("--out", tmp_path / "m.onnx", "--dtype", "float16"), "dtype must be one of float32, float64; got 'float16' (--dtype)"),
        (("--out", tmp_path / "m.bin"), "ends in .onnx"),
    ):
        code, _, err = run("export", tmp_path / "b", *args)
        assert code == 2 and message in err and err.count("\n") == 1, err
    code, _, err = run("export", tmp_path / "missing", "--out", tmp_path / "m.onnx")
    assert code == 2 and "not a bundle directory" in err


def test_without_the_onnx_extra_the_export_names_it(monkeypatch, tmp_path, run):
    import sys

    import calib

    scores, labels, _ = _cifar(rows=300)
    calib.calibrator("ts").fit(scores, labels).save(str(tmp_path / "b"))
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    code, _, err = run("export", tmp_path / "b", "--out", tmp_path / "m.onnx")
    assert code == 2 and "pip install 'calib-cli[onnx]'" in err and err.count("\n") == 1
    assert not (tmp_path / "m.onnx").exists()


def test_the_graphs_binary_search_is_searchsorted():
    """count_at_most (isotonic knots, Venn-Abers runs) equals np.searchsorted(edges, x, "right")
    for tables of every length around the powers of two, values on the edges, below the first and
    above the last."""
    needs("onnx")
    from calib.onnx_export import OnnxGraph

    rng = np.random.default_rng(11)
    lengths = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 100, 255, 256, 257, 700]
    tables = [np.sort(rng.choice(np.linspace(0.0, 1.0, 2001), size=m, replace=False)) for m in lengths]
    x = np.column_stack(
        [np.concatenate([np.resize(t, 100), [-0.5, 1.5, t[0] - 1e-9, t[-1] + 1e-9], rng.random(200)]) for t in tables]
    )
    g = OnnxGraph(len(tables))
    g.nodes.append(g.onnx.helper.make_node("Identity", [g.count_at_most("x", tables)], ["count"]))
    graph = g.onnx.helper.make_graph(
        g.nodes,
        "search",
        [g.onnx.helper.make_tensor_value_info("x", g.onnx.TensorProto.DOUBLE, ["N", len(tables)])],
        [g.onnx.helper.make_tensor_value_info("count", g.onnx.TensorProto.INT64, ["N", len(tables)])],
        initializer=g.initializers,
    )
    model = g.onnx.helper.make_model(graph, opset_imports=[g.onnx.helper.make_opsetid("", 17)], ir_version=8)
    (count,) = _session(model.SerializeToString()).run(None, {"x": x})
    expected = np.column_stack([np.searchsorted(t, x[:, k], side="right") for k, t in enumerate(tables)])
    assert np.array_equal(count, expected)


@pytest.mark.parametrize(
    "method, options",
    [
        ("ts", {}),
        ("ts", {"per_label": True}),
        ("isotonic", {"per_label": True}),
        ("platt", {}),
        ("venn-abers", {"per_label": True}),
        ("mr", {"joint": True}),
        ("mr", {"per_label": True}),
        ("ats-gq", {"joint": True}),
    ],
)
@pytest.mark.parametrize("kind", ["logits", "probs", "log-probs"])
def test_multi_label_bundles_export_with_label_columns_and_set_codes(method, options, kind):
    """A calibrator of a multi-label input's pairs: (N, L) scores of P(y_l = 1) in, (N, L)
    calibrated P(y_l = 1) out and, for a conformal method, each label's set code (int8), as calib
    applies them; a shared calibrator maps every pair, a per-label one each label's column."""
    needs("onnx")
    import calib

    rng = np.random.default_rng(5)
    z = rng.normal(size=(1200, 5)) * np.linspace(0.5, 2.0, 5) - 0.3
    y = (rng.random((1200, 5)) < 1.0 / (1.0 + np.exp(-z / 1.4))).astype(np.int64)
    p = 1.0 / (1.0 + np.exp(-z))
    scores = {"logits": z, "probs": p, "log-probs": np.log(p)}[kind]
    fitted = calib.calibrator(method, **options).fit(scores[:600], y[:600], kind=kind)
    test = scores[600:]
    outputs = _run_graph(fitted.to_onnx(dtype="float64"), test)
    assert outputs[0].shape == (600, 5)
    assert np.abs(outputs[0] - fitted.predict_proba(test, kind=kind)).max() <= 1e-8
    if len(outputs) > 1:
        assert outputs[1].dtype == np.int8 and np.array_equal(outputs[1], fitted.predict_sets(test, kind=kind))
    single = _run_graph(fitted.to_onnx(), test.astype(np.float32))
    assert np.abs(single[0] - fitted.predict_proba(test.astype(np.float32), kind=kind)).max() <= 1e-6


def test_beta_on_a_peaked_model_holds_the_float64_bound():
    """beta on 97-class peaked logits (top probabilities within 1e-13 of 1): the feature -log(1 - p)
    of a row's top class is computed from the other classes' weights in both calib and the graph, so
    the float64 graph equals calib apply within 1e-8 (it was 2.7e-6 on 22 of 2,000 rows when 1 - p
    was taken from the rounded p: p's rounding of 1e-16 is relative 1e-4 of 1 - p = 1e-12)."""
    needs("onnx")
    from conftest import peaked_logits

    import calib

    z, labels = peaked_logits(4000, k=97, seed=3)
    fitted = calib.calibrator("beta").fit(z[:2000], labels[:2000])
    graph = _run_graph(fitted.to_onnx(dtype="float64"), z[2000:])[0]
    assert np.abs(graph - fitted.predict_proba(z[2000:])).max() <= 1e-8
