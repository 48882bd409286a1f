"""calib.spark on a local Spark session: apply adds the column a local apply computes, evaluate
reads Spark ML vectors, a bad partition or bundle is one line, a missing engine or Java is named."""

import numpy as np
import pytest
from conftest import data_file, needs

import calib


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    data = np.load(data_file("cifar10_resnet110_test.npz"))
    logits, labels = data["logits"][:1500], data["labels"][:1500]
    root = tmp_path_factory.mktemp("spark")
    val = np.load(data_file("cifar10_resnet110_val.npz"))
    calib.calibrator("ts").fit(val["logits"], val["labels"]).save(root / "ts")
    calib.calibrator("conformal-ts", alpha=0.1).fit(val["logits"], val["labels"]).save(root / "sets")
    return logits, labels, root


def _frame(spark, logits, labels, parts=4):
    """The rows as a DataFrame of ``parts`` partitions (None: as created, the rows in order)."""
    import pyarrow as pa

    table = pa.table({"logits": pa.array(list(logits)), "label": labels, "row": np.arange(len(labels))})
    df = spark.createDataFrame(table)
    return df if parts is None else df.repartition(parts)


def test_apply_adds_what_a_local_apply_computes(spark, cifar):
    import calib.spark

    logits, labels, root = cifar
    applied = calib.spark.apply(_frame(spark, logits, labels), str(root / "ts")).toArrow()
    order = np.argsort(applied.column("row").to_numpy())
    probs = np.stack(applied.column("probs").to_numpy(zero_copy_only=False))[order]
    expected = calib.load(str(root / "ts")).predict_proba(logits)
    assert np.allclose(probs, expected, rtol=0, atol=1e-15)
    assert applied.column_names == ["logits", "label", "row", "probs"]
    sets = calib.spark.apply(_frame(spark, logits, labels), str(root / "sets"), what="sets").toArrow()
    order = np.argsort(sets.column("row").to_numpy())
    mask = calib.load(str(root / "sets")).predict_sets(logits)
    found = [sorted(row) for row in np.array(sets.column("set").to_pylist(), dtype=object)[order]]
    assert found == [np.flatnonzero(row).tolist() for row in mask]


def test_evaluate_reads_spark_ml_probability_vectors(spark, cifar):
    from pyspark.ml.linalg import Vectors

    import calib.spark
    from calib.core.numerics import softmax

    logits, labels, _ = cifar
    probs = softmax(logits[:300])
    probs[:, 0] += 1.0 - probs.sum(axis=1)  # rows that sum to 1 in float64, as a model's output
    rows = [(Vectors.dense(p.tolist()), int(y)) for p, y in zip(probs, labels[:300])]
    rows[5] = (Vectors.sparse(10, {int(np.argmax(probs[5])): 1.0}), int(labels[5]))  # a sparse row: one class
    probs[5] = np.eye(10)[np.argmax(probs[5])]
    df = spark.createDataFrame(rows, ["probability", "label"])
    request = calib.EvaluationRequest.of(bootstrap=0, metrics=("accuracy", "nll", "ece"))
    found = calib.spark.evaluate(df, request, scores="probability")
    expected = calib.evaluate(
        probs, labels[:300], request=calib.EvaluationRequest.of(metrics=["accuracy", "nll", "ece"], bootstrap=0, vece=False)
    )
    assert found.input.kind == "probs"
    for key, value in expected.values.items():
        assert found.values[key] == pytest.approx(value, rel=0, abs=1e-12), key


def test_a_bad_partition_or_bundle_is_one_line(spark, cifar, tmp_path):
    import calib.spark

    logits, labels, root = cifar
    broken = logits.copy()
    broken[1499, 3] = np.inf  # the last row: past the rows the driver reads first
    # the error raised on a worker is raised here as itself, one line
    with pytest.raises(calib.InputError, match=r"^DataFrame partition \d+: scores contain inf") as raised:
        calib.spark.evaluate(_frame(spark, broken, labels, None), calib.EvaluationRequest.of(bootstrap=0))
    assert "\n" not in str(raised.value)
    rng = np.random.default_rng(0)
    calib.calibrator("ts").fit(rng.normal(size=(100, 3)), rng.integers(0, 3, 100)).save(tmp_path / "k3")
    with pytest.raises(calib.InputError, match="fitted for K = 3"):
        calib.spark.apply(_frame(spark, logits, labels), str(tmp_path / "k3"))
    with pytest.raises(calib.InputError, match="already has a column 'probs'"):
        calib.spark.apply(_frame(spark, logits, labels).withColumnRenamed("row", "probs"), str(root / "ts"))


def test_a_missing_engine_or_java_is_named(monkeypatch):
    import sys

    import calib.spark
    from calib.core.extras import MissingExtra

    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(MissingExtra, match=r"pip install 'calib-cli\[spark\]'"):
        calib.spark.start_session()
    monkeypatch.undo()
    needs("pyspark")  # the Java check comes after pyspark's import
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(calib.CalibError, match="needs Java 17 or later"):
        calib.spark.start_session()
