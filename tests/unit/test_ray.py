"""calib.ray on a local Ray: apply adds the column a local apply computes, a bad block or bundle is
one line, a missing engine is named."""

import numpy as np
import pytest
from conftest import data_file

import calib


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    data = np.load(data_file("cifar10_resnet110_test.npz"))
    logits, labels = data["logits"][:1500], data["labels"][:1500]
    root = tmp_path_factory.mktemp("ray")
    val = np.load(data_file("cifar10_resnet110_val.npz"))
    calib.calibrator("ts").fit(val["logits"], val["labels"]).save(root / "ts")
    return logits, labels, root


def _dataset(logits, labels, blocks=4):
    """The rows as a dataset of ``blocks`` blocks (None: one block, the rows in order)."""
    import pyarrow as pa
    import ray.data

    ds = ray.data.from_arrow(pa.table({"logits": pa.array(list(logits)), "label": labels, "row": np.arange(len(labels))}))
    return ds if blocks is None else ds.repartition(blocks)


def test_apply_adds_what_a_local_apply_computes(ray_started, cifar):
    import calib.ray

    logits, labels, root = cifar
    applied = calib.ray.apply(_dataset(logits, labels), str(root / "ts"), what="log-probs").to_arrow_refs()
    import pyarrow as pa

    table = pa.concat_tables(ray_started.get(applied))
    order = np.argsort(table.column("row").to_numpy())
    found = np.stack(table.column("log_probs").to_numpy(zero_copy_only=False))[order]
    expected = np.log(calib.load(str(root / "ts")).predict_proba(logits))
    assert np.allclose(found, expected, rtol=0, atol=1e-12)
    assert table.column_names == ["logits", "label", "row", "log_probs"]


def test_a_bad_block_or_bundle_is_one_line(ray_started, cifar, tmp_path):
    import calib.ray

    logits, labels, _ = cifar
    broken = logits.copy()
    broken[1499, 3] = np.nan  # the last row: past the rows the driver reads first
    with pytest.raises(calib.InputError, match=r"^Dataset block: scores contain NaN") as raised:
        calib.ray.evaluate(_dataset(broken, labels, None), calib.EvaluationRequest.of(bootstrap=0))
    assert "\n" not in str(raised.value)
    rng = np.random.default_rng(0)
    calib.calibrator("ts").fit(rng.normal(size=(100, 3)), rng.integers(0, 3, 100)).save(tmp_path / "k3")
    with pytest.raises(calib.InputError, match="fitted for K = 3"):
        calib.ray.apply(_dataset(logits, labels), str(tmp_path / "k3"))
    with pytest.raises(calib.UsageError, match="unique integer row ids"):
        calib.ray.evaluate(_dataset(logits, labels), calib.EvaluationRequest.of(gates=["ece>0.1"]))


def test_a_missing_engine_is_named(monkeypatch):
    import sys

    import calib.ray
    from calib.core.extras import MissingExtra

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingExtra, match=r"pip install 'calib-cli\[ray\]'"):
        calib.ray.quiet()
