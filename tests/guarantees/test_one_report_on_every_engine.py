"""One answer whatever runs it: the report of the same rows from Spark, Ray, Dask and the local
streaming run is the same JSON (where the rows came from aside) for 1, 7 and 64 partitions, the
rows shuffled, with groups, gates and bootstrap intervals."""

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import data_file, needs
from reports import assert_same_report

#: Rows of CIFAR-10 test logits the equality runs on (the whole file: 10,000).
ROWS = 3000
GATES = ["ece>0.05", "max_group:ece>0.08", "accuracy<0.96", "cmce>0.001"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """CIFAR-10 test logits as a parquet table with a label, a group and a row id column, written
    whole and as 1, 7 and 64 shard files (rows in order)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = np.load(data_file("cifar10_resnet110_test.npz"))
    logits, labels = data["logits"][:ROWS].astype(np.float32), data["labels"][:ROWS]
    source = np.array(["news", "forum", "mail"])[np.random.default_rng(1).integers(0, 3, ROWS)]
    whole = pa.table(
        {"logits": pa.array(list(logits)), "label": labels, "source": source, "row": np.arange(ROWS, dtype=np.int64)}
    )
    root = tmp_path_factory.mktemp("engines")
    pq.write_table(whole, root / "whole.parquet")
    for parts in (1, 7, 64):
        directory = root / f"shards{parts}"
        directory.mkdir()
        for i, rows in enumerate(np.array_split(np.arange(ROWS), parts)):
            pq.write_table(whole.take(rows), directory / f"part{i:02d}.parquet")
    return root


def _request(bootstrap=200):
    from calib.evaluation.request import EvaluationRequest

    return EvaluationRequest.of(gates=GATES, bootstrap=bootstrap, min_group_rows=50)


def _reference(table):
    """The local streaming run: calib.evaluate's report of the whole file (its streamed table)."""
    from calib.evaluation.groups import read_groups
    from calib.evaluation.report import build_report
    from calib.io import read_predictions

    path = str(table / "whole.parquet")
    preds = read_predictions(path)
    request = dataclasses.replace(_request(), metrics=None, vece=False)
    return build_report(preds, request, groups=read_groups(preds, path, "source", None)).to_json()


def test_the_reference_reads_groups_gates_and_intervals(table):
    """What the equality below compares is not empty: every gate outcome, every group, intervals."""
    report = _reference(table)
    assert report["input"]["n"] == ROWS and report["bootstrap"]["replicates"] == 200
    assert list(report["bootstrap"]["by_group"]) == ["forum", "mail", "news"]  # the groups' own replicates
    assert list(report["groups"]) == ["forum", "mail", "news"]
    assert {gate["outcome"] for gate in report["gates"]} >= {"pass", "fail"}
    assert all(entry.get("ci") for key, entry in report["metrics"].items() if key in ("accuracy", "ece", "cmce"))


@pytest.mark.parametrize("parts", [1, 7, 64])
def test_spark_gives_the_local_report_for_any_partitioning(spark, table, parts):
    from pyspark.sql import functions as F

    import calib.spark

    df = spark.read.parquet(str(table / "whole.parquet")).orderBy(F.rand(seed=parts)).repartition(parts)
    assert df.rdd.getNumPartitions() == parts
    report = calib.spark.evaluate(df, _request(), group_by="source", row_id="row")
    assert_same_report(report.to_json(), _reference(table))
    assert report.input.n == ROWS and report.input.kind == "logits"


@pytest.mark.parametrize("parts", [1, 7, 64])
def test_ray_gives_the_local_report_for_any_blocks(ray_started, table, parts):
    import ray.data

    import calib.ray

    ds = ray.data.read_parquet(str(table / "whole.parquet")).random_shuffle(seed=parts).repartition(parts)
    report = calib.ray.evaluate(ds, _request(), group_by="source", row_id="row")
    assert_same_report(report.to_json(), _reference(table))


@pytest.mark.parametrize("parts", [1, 7, 64])
def test_the_local_engine_gives_the_same_report_for_any_shards(table, parts):
    from calib.shards import evaluate_shards

    report = evaluate_shards(str(table / f"shards{parts}"), _request(), group_by="source")
    assert_same_report(report.to_json(), _reference(table))


def test_dask_gives_the_same_report(table):
    needs("distributed")
    from calib.shards import evaluate_shards

    report = evaluate_shards(str(table / "shards7"), _request(), group_by="source", engine="dask")
    assert_same_report(report.to_json(), _reference(table))


def test_an_engine_report_equals_one_evaluation_of_all_rows(spark, table):
    """Without groups, the merged numbers and intervals are those of calib.evaluate of the rows."""
    import pyarrow.parquet as pq

    import calib
    import calib.spark
    from calib.evaluation.request import EvaluationRequest

    whole = pq.read_table(table / "whole.parquet")
    logits = np.stack(whole.column("logits").to_numpy(zero_copy_only=False))
    request = EvaluationRequest.of(bootstrap=200, gates=["ece>0.05"])
    single = calib.evaluate(
        logits,
        whole.column("label").to_numpy(),
        request=calib.EvaluationRequest.of(gates=["ece>0.05"], bootstrap=200, vece=False),
    )
    on_spark = calib.spark.evaluate(spark.read.parquet(str(table / "whole.parquet")).repartition(7), request, row_id="row")
    for key, entry in single.entries.metrics.items():
        assert abs(on_spark.metrics[key].value - entry.value) <= 1e-12, key
        assert np.allclose(on_spark.metrics[key].ci, entry.ci, rtol=0, atol=1e-12), key
    assert on_spark.gates[0].outcome == single.entries.gates[0].outcome


def test_the_command_line_prints_the_local_table_on_every_engine(run, spark, ray_started, table):
    """calib evaluate DIR --engine spark|ray|dask prints the local engine's table (the first line
    names the engine)."""
    directory = table / "shards7"
    args = ("evaluate", directory, "--group-by", "source", "--fail-if", "ece>0.05", "--min-group-rows", "50")
    code, local, err = run(*args)
    assert code == 0, err
    for engine in ("spark", "ray"):
        code, out, err = run(*args, "--engine", engine)
        assert code == 0, err
        assert out.splitlines()[1:] == local.splitlines()[1:], engine
        assert "7 files, local" in local.splitlines()[0] and f"7 files, {engine}" in out.splitlines()[0]


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["spark", "ray"])
def test_a_fresh_process_starts_its_own_local_engine_quietly(table, engine):
    """As a user runs it: the command starts a local session itself (Spark's Python workers on this
    interpreter), prints the local table, and nothing of the engine's own logs but the JVM's one
    line about its modules."""
    needs("pyspark" if engine == "spark" else "ray")
    command = [sys.executable, "-m", "calib", "evaluate", str(table / "shards7"), "--group-by", "source", "--json", "-"]
    local = subprocess.run(command, capture_output=True, text=True)
    found = subprocess.run([*command, "--engine", engine], capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert_same_report(json.loads(found.stdout), json.loads(local.stdout))
    noise = [line for line in found.stderr.splitlines() if "incubator" not in line and not line.startswith("calib evaluate")]
    assert noise == [], found.stderr


def test_a_bad_shard_is_one_line_on_every_engine(run, spark, ray_started, table, tmp_path):
    """A shard with a NaN score fails the command with the reader's own line, exit 2, whatever ran it."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    needs("distributed")
    bad = tmp_path / "bad"
    shutil.copytree(table / "shards7", bad)
    shard = pq.read_table(bad / "part03.parquet")
    logits = np.stack(shard.column("logits").to_numpy(zero_copy_only=False))
    logits[5, 1] = np.nan
    pq.write_table(shard.set_column(0, "logits", pa.array(list(logits))), bad / "part03.parquet")
    for engine in ("local", "dask", "spark", "ray"):
        code, _, err = run("evaluate", bad, "--engine", engine)
        assert code == 2 and err == f"calib: error: {bad / 'part03.parquet'}: scores contain NaN (first at row 5, column 1)\n", (
            engine,
            err,
        )
