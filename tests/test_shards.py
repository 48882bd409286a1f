"""calib evaluate DIR: shards of each format merged in this process or on a local two-worker Dask cluster."""

import json

import numpy as np
import pytest


@pytest.fixture
def shards(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = np.load(__import__("conftest").data_file("cifar100_resnet110_test.npz"))
    logits, labels = data["logits"], data["labels"]
    directory = tmp_path / "shards"
    directory.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(labels)), 3)):
        table = pa.table({"logits": pa.array(list(logits[part].astype(np.float32))), "label": labels[part]})
        pq.write_table(table, directory / f"part{i}.parquet", row_group_size=1000)
    np.savez(tmp_path / "all.npz", logits=logits.astype(np.float32), labels=labels)
    return directory, tmp_path / "all.npz"


def _metrics(run, *args):
    code, out, err = run("evaluate", *args, "--json", "-")
    assert code == 0, err
    return json.loads(out)


def test_local_and_dask_engines_equal_one_run_over_all_rows(run, shards):
    directory, whole = shards
    keys = ["--metrics", "accuracy,nll,brier,ece,cw_ece,cmce,ece_quantile,smece,coverage_0.9_0.92"]
    single = _metrics(run, whole, "--no-vece", *keys)["metrics"]
    local = _metrics(run, directory, *keys)
    on_dask = _metrics(run, directory, "--engine", "dask", *keys)
    assert local["input"]["n"] == on_dask["input"]["n"] == 10000 and len(on_dask["input"]["merged_from"]) == 3
    for key, entry in single.items():
        assert local["metrics"][key]["value"] == on_dask["metrics"][key]["value"]  # same order of addition
        assert abs(on_dask["metrics"][key]["value"] - entry["value"]) <= 1e-12, key


def test_gates_on_shards_compare_raw_values_and_say_so(run, shards):
    directory, _ = shards
    code, _, err = run("evaluate", directory, "--metrics", "ece", "--fail-if", "ece>0.5")
    assert code == 0 and err.count("ignore noise") == 1
    assert "a directory of shards is evaluated without replicates" in err and "--bootstrap" not in err


def test_directory_inputs_refuse_what_cannot_be_merged(run, shards, tmp_path):
    directory, _ = shards
    (tmp_path / "empty").mkdir()
    for args, message in (
        ((tmp_path / "empty",), "found none"),
        ((directory, "--metrics", "ece,vece_l1"), "cannot be merged from shards"),
        ((directory, "--engine", "spark"), "--engine must be one of"),
        ((directory, "--bootstrap", "10"), "--bootstrap does not apply"),
        ((tmp_path / "all.npz", "--engine", "dask"), "take a directory"),
    ):
        code, _, err = run("evaluate", *args)
        assert code == 2 and message in err and err.count("\n") == 1, (args, err)
    (directory / "part9.parquet").write_bytes(b"PAR1 not really")
    code, _, err = run("evaluate", directory)
    assert code == 2 and "part9.parquet" in err
    code, out, _ = run("evaluate", directory.parent / "shards", "--metrics", "ece", "--fail-if", "ece>0.01")
    assert code == 2  # the broken shard is still there: refused before any gate


@pytest.mark.parametrize("suffix", [".arrow", ".safetensors", ".csv", ".jsonl"])
def test_a_directory_of_shards_of_each_format_equals_one_run_over_all_rows(run, tmp_path, suffix):
    import pyarrow as pa
    import pyarrow.feather as feather

    from calib.io.formats.safetensors import safetensors_bytes

    rng = np.random.default_rng(5)
    logits, labels = rng.normal(size=(600, 4)) * 2, rng.integers(0, 4, 600)
    folder = tmp_path / "shards"
    folder.mkdir()
    for i, rows in enumerate((slice(0, 250), slice(250, 600))):
        path = folder / f"part{i}{suffix}"
        z, y = logits[rows], labels[rows]
        if suffix == ".arrow":
            feather.write_feather(pa.table({"logits": list(z), "label": y}), str(path))
        elif suffix == ".safetensors":
            path.write_bytes(safetensors_bytes({"logits": z, "labels": y}))
        elif suffix == ".csv":
            path.write_text(
                "\n".join(
                    [",".join([f"logit_{k}" for k in range(4)] + ["label"])]
                    + [",".join([*map(repr, r.tolist()), str(int(t))]) for r, t in zip(z, y)]
                )
                + "\n"
            )
        else:
            path.write_text("".join(json.dumps({"logits": r.tolist(), "label": int(t)}) + "\n" for r, t in zip(z, y)))
    np.savez(tmp_path / "all.npz", logits=logits, labels=labels)
    keys = "ece,cmce,nll,accuracy"
    merged = _metrics(run, folder, "--metrics", keys)
    whole = _metrics(run, tmp_path / "all.npz", "--metrics", keys, "--no-vece", "--bootstrap", "0")
    for key in keys.split(","):
        assert merged["metrics"][key]["value"] == pytest.approx(whole["metrics"][key]["value"], rel=1e-12)
