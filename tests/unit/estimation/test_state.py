"""Estimation states: shards' merged states give the numbers of one estimation of all the rows (the
bottom-k sample too), on the local engine and on a Dask cluster the test starts; what cannot merge is
refused."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import SAMPLE, needs

import calib
from calib.errors import InputError
from calib.estimation import state as state_module
from calib.estimation.report import EstimationSettings, report_of_state
from calib.estimation.state import BatchState, merge_states
from calib.evaluation.groups import Groups


@pytest.fixture(scope="module")
def fitted():
    val = np.load(SAMPLE / "cifar10_val.npz")
    return calib.calibrator("ts").fit(val["logits"], val["labels"])


@pytest.fixture(scope="module")
def batch(fitted):
    test = np.load(SAMPLE / "cifar10_test.npz")
    logits = test["logits"][:4000].astype(np.float64)
    labels = np.where(np.arange(4000) % 10 == 0, test["labels"][:4000], -1)
    groups = Groups(["a", "b"], (np.arange(4000) % 3 == 0).astype(np.int64), "test")
    return fitted.predict_proba(logits), logits, labels, groups


def _parts(batch, fitted, cuts):
    probs, logits, labels, groups = batch
    states = []
    for start, stop in zip([0, *cuts], [*cuts, len(probs)]):
        part = Groups(groups.names, groups.codes[start:stop], "test")
        states.append(
            BatchState.of(
                probs[start:stop], logits[start:stop], labels[start:stop], fitted.reference, groups=part, first_row=start
            )
        )
    return states


@pytest.mark.parametrize("sample_rows", [20_000, 700])
def test_merged_states_equal_one_pass(batch, fitted, monkeypatch, sample_rows):
    monkeypatch.setattr(state_module, "SAMPLE_ROWS", sample_rows)
    probs, logits, labels, groups = batch
    whole = BatchState.of(probs, logits, labels, fitted.reference, groups=groups)
    merged = merge_states(_parts(batch, fitted, [1000, 2500, 2501]), ["p0", "p1", "p2", "p3"])
    assert merged.names == whole.names
    for name, value in whole.sums.items():
        np.testing.assert_allclose(merged.sums[name], value, rtol=1e-13, atol=1e-12)
    for name, value in whole.sample.items():
        np.testing.assert_array_equal(merged.sample[name], value)
    assert len(whole.sample["rows"]) == min(sample_rows, 4000)
    settings = EstimationSettings(gates=("est_accuracy<0.9", "min_group:est_accuracy<0.9"), min_group_rows=50)
    one, other = (report_of_state(s, settings).to_json() for s in (whole, merged))
    for key, entry in one["estimates"].items():
        assert other["estimates"][key]["value"] == pytest.approx(entry["value"], abs=1e-12)
    assert [g["outcome"] for g in one["gates"]] == [g["outcome"] for g in other["gates"]]


def test_the_sample_is_uniform_over_the_rows(monkeypatch):
    monkeypatch.setattr(state_module, "SAMPLE_ROWS", 1000)
    probs = np.full((20_000, 2), 0.5)
    kept = BatchState.of(probs, np.log(probs), None, None).sample["rows"]
    assert len(kept) == 1000 and np.all(np.diff(kept) > 0)
    counts = np.bincount(kept // 2000, minlength=10)  # 100 expected in each tenth of the rows
    assert counts.min() > 60 and counts.max() < 140


def test_what_cannot_merge_is_refused(batch, fitted, tmp_path):
    probs, logits, labels, _ = batch
    first = BatchState.of(probs[:100], logits[:100], labels[:100], fitted.reference)
    again = BatchState.of(probs[:100], logits[:100], labels[:100], fitted.reference)
    with pytest.raises(InputError, match="share rows"):
        merge_states([first, again], ["a", "b"])
    other_map = calib.calibrator("ts").fit(logits[:2000], np.load(SAMPLE / "cifar10_test.npz")["labels"][:2000])
    with pytest.raises(InputError, match="another calibration map"):
        merge_states(
            [first, BatchState.of(probs[100:200], logits[100:200], None, other_map.reference, first_row=100)], ["a", "b"]
        )
    with pytest.raises(InputError, match="other settings"):
        EstimationSettings.of_states([{"level": 0.95}, {"level": 0.9}], ["a", "b"])
    path = tmp_path / "s.npz"
    path.write_bytes(first.to_bytes(EstimationSettings().recorded()))
    read, recorded = BatchState.read(str(path))
    assert recorded == EstimationSettings().recorded() and read.reference.n == fitted.reference.n
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 nothing")
    with pytest.raises(InputError, match="not a calib estimation state"):
        BatchState.read(str(tmp_path / "bad.npz"))


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    test = np.load(SAMPLE / "cifar10_test.npz")
    root = tmp_path_factory.mktemp("unlabelled_shards")
    for i, rows in enumerate(np.array_split(np.arange(3000), 4)):
        pq.write_table(
            pa.table({"logits": list(test["logits"][rows]), "source": np.array(["x", "y"])[rows % 2]}), root / f"p{i}.parquet"
        )
    pq.write_table(
        pa.table({"logits": list(test["logits"][:3000]), "source": np.array(["x", "y"])[np.arange(3000) % 2]}),
        root / "whole.parquet",
    )
    return root


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_a_directory_of_shards_gives_the_whole_files_numbers(run, fitted, shards, tmp_path, engine):
    import json

    if engine == "dask":
        needs("distributed")
    fitted.save(str(tmp_path / "b"))
    whole = tmp_path / "whole"
    whole.mkdir()
    (whole / "whole.parquet").write_bytes((shards / "whole.parquet").read_bytes())
    found = {}
    for name, folder in (("shards", shards), ("whole", whole)):
        directory = tmp_path / name
        if not directory.exists():
            directory.mkdir()
            for part in sorted(folder.glob("p*.parquet")) if name == "shards" else [folder / "whole.parquet"]:
                (directory / part.name).write_bytes(part.read_bytes())
        code, out, err = run(
            "evaluate", directory, "--bundle", tmp_path / "b", "--engine", engine, "--group-by", "source", "--json", "-"
        )
        assert code == 0, err
        found[name] = json.loads(out)
    for key, entry in found["whole"]["estimates"].items():
        assert found["shards"]["estimates"][key]["value"] == pytest.approx(entry["value"], abs=1e-12)
    assert [g["group"] for g in found["shards"]["groups"]] == ["x", "y"]


def test_emitted_states_merge_on_the_command_line(run, fitted, batch, tmp_path):
    import json

    probs, logits, _, _ = batch
    fitted.save(str(tmp_path / "b"))
    for i, (start, stop) in enumerate([(0, 1500), (1500, 4000)]):
        np.save(tmp_path / f"p{i}.npy", logits[start:stop])
        code, _, err = run(
            "evaluate",
            tmp_path / f"p{i}.npy",
            "--bundle",
            tmp_path / "b",
            "--emit-state",
            tmp_path / f"s{i}.npz",
            "--first-row",
            start,
        )
        assert code == 0, err
    np.save(tmp_path / "all.npy", logits)
    code, out, _ = run("evaluate", tmp_path / "all.npy", "--bundle", tmp_path / "b", "--json", "-")
    whole = json.loads(out)
    code, out, err = run("merge-states", tmp_path / "s0.npz", tmp_path / "s1.npz", "--json", "-")
    assert code == 0, err
    merged = json.loads(out)
    for key, entry in whole["estimates"].items():
        assert merged["estimates"][key]["value"] == pytest.approx(entry["value"], abs=1e-12)
