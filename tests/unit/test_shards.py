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
        # a JSON report records replicates: each file's rows keyed from its first row on both engines
        assert on_dask["metrics"][key]["ci"] == pytest.approx(entry["ci"], rel=0, abs=1e-12), key
    assert "warnings" not in on_dask and on_dask["bootstrap"]["values"] == local["bootstrap"]["values"]


def test_gates_on_shards_read_the_replicates_of_all_rows(run, shards):
    """A gate on a directory draws replicates by default, as on one file: the shards' per-cluster
    sums, each file's rows keyed by their global index, so the interval is one run's."""
    directory, whole = shards
    gate = ("--metrics", "ece", "--fail-if", "ece>0.5", "--json", "-")
    code, out, err = run("evaluate", directory, *gate)
    assert code == 0 and "ignore noise" not in err, err
    merged = json.loads(out)
    code, out, _ = run("evaluate", whole, "--no-vece", *gate)
    single = json.loads(out)
    assert merged["gates"][0]["noise"] == single["gates"][0]["noise"] != "ignored"
    assert merged["metrics"]["ece"]["ci"] == pytest.approx(single["metrics"]["ece"]["ci"], rel=1e-12)
    assert merged["bootstrap"]["replicates"] == 200


def test_directory_inputs_refuse_what_cannot_be_merged(run, shards, tmp_path):
    directory, _ = shards
    (tmp_path / "empty").mkdir()
    for args, message in (
        ((tmp_path / "empty",), "found none"),
        ((directory, "--metrics", "ece,vece_l1"), "cannot be merged from a directory's shards"),
        (
            (directory, "--engine", "flink"),
            "engine must be one of local, dask, spark, ray; got 'flink' (--engine local|dask|spark|ray)",
        ),
        ((directory, "--first-row", "10"), "--first-row does not apply"),
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


@pytest.fixture
def apply_shards_dir(tmp_path):
    """Four parquet shards of the bundled CIFAR-10 test logits with an ``id`` column to carry
    through, and a mass-rescaling bundle fitted on the validation rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import calib

    sample = __import__("conftest").SAMPLE
    test, val = np.load(sample / "cifar10_test.npz"), np.load(sample / "cifar10_val.npz")
    directory = tmp_path / "shards"
    directory.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(test["labels"])), 4)):
        logits = pa.FixedSizeListArray.from_arrays(test["logits"][part].astype(np.float32).ravel(), 10)
        pq.write_table(pa.table({"id": part, "logits": logits, "label": test["labels"][part]}), directory / f"part{i}.parquet")
    calib.calibrator("mr").fit(val["logits"], val["labels"]).save(str(tmp_path / "bundle"))
    return directory, tmp_path / "bundle"


def test_apply_on_dask_equals_local_and_single_file_byte_for_byte(run, apply_shards_dir, tmp_path):
    import pyarrow.parquet as pq

    directory, bundle = apply_shards_dir
    for what in ("probs", "sets"):
        outputs = {}
        for engine in ("local", "dask"):
            out = tmp_path / f"{what}_{engine}"
            code, _, err = run("apply", bundle, directory, "--out", out, "--what", what, "--engine", engine)
            assert code == 0, err
            assert f"wrote {what} for 10000 rows of 4 shards" in err
            outputs[engine] = out
        for i in range(4):
            single = tmp_path / f"single{i}_{what}.parquet"
            assert run("apply", bundle, directory / f"part{i}.parquet", "--out", single, "--what", what)[0] == 0
            local, on_dask = (outputs[e] / f"part{i}.parquet" for e in ("local", "dask"))
            assert local.read_bytes() == on_dask.read_bytes() == single.read_bytes()
        table = pq.read_table(outputs["dask"] / "part1.parquet")
        assert table.column("id").to_pylist() == list(range(2500, 5000))  # carried through
        assert table.column("label").to_pylist() == list(
            np.load(__import__("conftest").SAMPLE / "cifar10_test.npz")["labels"][2500:5000]
        )


def test_apply_resumes_skipping_shards_written_with_the_same_bundle(run, apply_shards_dir, tmp_path):
    import os

    import calib

    directory, bundle = apply_shards_dir
    out = tmp_path / "out"
    assert run("apply", bundle, directory, "--out", out)[0] == 0
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.parquet")}
    code, _, err = run("apply", bundle, directory, "--out", out)
    assert code == 0 and "nothing to write" in err and "4 shards already written with this bundle" in err
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.parquet")} == before
    # an output changed on disk, an input touched: those two are redone, the others skipped
    (out / "part0.parquet").write_bytes(b"not the output")
    stat = os.stat(directory / "part2.parquet")
    os.utime(directory / "part2.parquet", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    code, _, err = run("apply", bundle, directory, "--out", out, "--engine", "dask")
    assert code == 0 and "of 2 shards" in err and "2 shards already written" in err, err
    assert (out / "part0.parquet").read_bytes()[:4] == b"PAR1"
    assert (out / "part1.parquet").stat().st_mtime_ns == before["part1.parquet"]
    (out / "part3.parquet").unlink()  # an output gone: redone
    code, _, err = run("apply", bundle, directory, "--out", out)
    assert code == 0 and "of 1 shards" in err and (out / "part3.parquet").exists(), err
    code, _, err = run("apply", bundle, directory, "--out", out, "--force")
    assert code == 0 and "of 4 shards" in err and "already written" not in err
    # another bundle's (or another --what's) outputs are replaced only when asked: then every shard is redone
    val = np.load(__import__("conftest").SAMPLE / "cifar10_val.npz")
    calib.calibrator("ts").fit(val["logits"], val["labels"]).save(str(tmp_path / "ts"))
    code, _, err = run("apply", tmp_path / "ts", directory, "--out", out)
    assert code == 2 and "no ledger of this bundle lists" in err and "(--force)" in err
    code, _, err = run("apply", tmp_path / "ts", directory, "--out", out, "--force")
    assert code == 0 and "of 4 shards" in err
    code, _, err = run("apply", tmp_path / "ts", directory, "--out", out, "--what", "log-probs")
    assert code == 2 and "another bundle's outputs" in err and "(--force)" in err
    code, _, err = run("apply", tmp_path / "ts", directory, "--out", out, "--what", "log-probs", "--force")
    assert code == 0 and "of 4 shards" in err
    # a directory of other files is not written into without --force
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    code, _, err = run("apply", bundle, directory, "--out", tmp_path / "other")
    assert code == 2 and "no ledger of this bundle lists" in err


def test_apply_to_shards_without_labels(run, apply_shards_dir, tmp_path):
    import pyarrow.parquet as pq

    directory, bundle = apply_shards_dir
    bare = tmp_path / "bare"
    bare.mkdir()
    for shard in sorted(directory.iterdir()):
        pq.write_table(pq.read_table(shard).drop_columns(["label"]), bare / shard.name)
    code, _, err = run("apply", bundle, bare, "--out", tmp_path / "out", "--engine", "dask")
    assert code == 0 and "for 10000 rows of 4 shards" in err, err
    assert "label" not in pq.read_table(tmp_path / "out" / "part0.parquet").column_names


def test_apply_to_a_directory_refuses_what_does_not_fit(run, apply_shards_dir, tmp_path):
    directory, bundle = apply_shards_dir
    (tmp_path / "file.parquet").write_bytes(b"x")
    for args, message in (
        ((directory, "--out", directory), "is the input directory"),
        ((directory, "--out", tmp_path / "file.parquet"), "name a directory"),
        ((directory, "--out", "-"), "name a directory"),
        (
            (directory, "--out", tmp_path / "o", "--engine", "flink"),
            "engine must be one of local, dask, spark, ray; got 'flink' (--engine local|dask|spark|ray)",
        ),
        ((directory, "--out", tmp_path / "o", "--labels", tmp_path / "file.parquet"), "carries its labels in each shard"),
        ((directory / "part0.parquet", "--out", tmp_path / "x.parquet", "--engine", "dask"), "take a directory"),
    ):
        code, _, err = run("apply", bundle, *args)
        assert code == 2 and message in err and err.count("\n") == 1, (args, err)
    assert not (tmp_path / "o").exists()  # a bad engine is refused before anything is written


def test_a_report_merged_from_shards_pairs_with_one_evaluation_of_the_rows(run, shards, tmp_path):
    """The labels digest of merged states is the sum of the shards' per-row hashes: a paired change
    gate against a merged report of the same rows reads paired replicates, group by group too."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory, whole = shards
    for i, shard in enumerate(sorted(directory.iterdir())):  # a group column: each row's residue mod 3
        table = pq.read_table(shard)
        first = sum(pq.read_metadata(other).num_rows for other in sorted(directory.iterdir())[:i])
        pq.write_table(table.append_column("part", pa.array((np.arange(table.num_rows) + first) % 3)), shard)
    rows = pa.concat_tables([pq.read_table(shard) for shard in sorted(directory.iterdir())])
    pq.write_table(rows, tmp_path / "all.parquet")
    base = ("--metrics", "ece", "--group-by", "part", "--bootstrap", "200", "--json")
    assert run("evaluate", directory, *base, tmp_path / "merged.json")[0] == 0
    code, out, err = run(
        "evaluate", tmp_path / "all.parquet", *base, "-", "--no-vece", "--baseline", tmp_path / "merged.json",
        "--max-increase", "ece=0.001", "--paired",
    )  # fmt: skip
    assert code == 0, err
    gates = json.loads(out)["gates"]
    assert [gate.get("group") for gate in gates] == [None, "0", "1", "2"]
    assert all(gate["noise"].startswith("paired bootstrap") for gate in gates), gates
    # the same rows resampled alike: every paired difference is 0 up to float summation order
    assert all(abs(end) < 1e-12 for gate in gates for end in gate["bounds"]), gates
