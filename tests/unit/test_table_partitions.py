"""A table's parts (calib.table_partitions), without an engine: any split of the rows, in any order,
merges into the report of all of them; the score columns a table may hold; the plan's refusals."""

import numpy as np
import pytest
from conftest import data_file
from reports import assert_same_report

from calib.bootstrap import add_fingerprints, row_clusters, rows_fingerprint
from calib.errors import InputError, UsageError
from calib.evaluation.request import EvaluationRequest
from calib.table_partitions import TableColumns, make_plan, merged_report, part_state, score_matrix


@pytest.fixture(scope="module")
def rows():
    import pyarrow as pa

    data = np.load(data_file("cifar10_resnet110_test.npz"))
    n = 2000
    logits, labels = data["logits"][:n], data["labels"][:n]
    groups = np.array(["x", "y"])[np.arange(n) % 2]
    return pa.table({"logits": pa.array(list(logits)), "label": labels, "group": groups, "id": np.arange(n) * 7 + 3})


def _report(table, parts, request, order=None):
    plan = make_plan(
        table.column_names, table.slice(0, 100), "rows", TableColumns(group_by="group", row_id="id"), request=request
    )
    if order is not None:
        table = table.take(order)
    bounds = np.linspace(0, table.num_rows, parts + 1).astype(int)
    states = [part_state(table.slice(a, b - a), plan, f"part {i}") for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]
    return merged_report(states, request, "rows", plan).to_json()


def test_any_split_and_order_of_the_rows_gives_one_report(rows):
    request = EvaluationRequest.of(gates=["ece>0.05", "max_group:cmce>0.01"], bootstrap=50)
    whole = _report(rows, 1, request)
    shuffled = np.random.default_rng(0).permutation(rows.num_rows)
    for parts, order in ((3, None), (5, shuffled), (40, shuffled[::-1])):
        assert_same_report(_report(rows, parts, request, order), whole)
    assert whole["bootstrap"]["replicates"] == 50 and whole["gates"][1]["expr"] == "max_group:cmce>0.01"


def test_an_empty_part_adds_nothing(rows):
    request = EvaluationRequest.of(bootstrap=0)
    plan = make_plan(rows.column_names, rows, "rows", TableColumns(), request=request)
    assert part_state(rows.slice(0, 0), plan, "empty") is None
    merged = merged_report([None, part_state(rows, plan, "all"), None], request, "rows", plan)
    assert merged.input.n == rows.num_rows
    with pytest.raises(InputError, match="no rows to evaluate"):
        merged_report([None], request, "rows", plan)


def _vectors():
    """(Spark ML's vector type as Arrow carries it, type 0 sparse and 1 dense; three vectors: [0.7,
    0.2, 0.1] dense, 1.0 at index 2 of 3 sparse, [0.25, 0.5, 0.25] dense)."""
    import pyarrow as pa

    vector_type = pa.struct(
        [("type", pa.int8()), ("size", pa.int32()), ("indices", pa.list_(pa.int32())), ("values", pa.list_(pa.float64()))]
    )
    vectors = pa.array(
        [
            {"type": 1, "size": None, "indices": None, "values": [0.7, 0.2, 0.1]},
            {"type": 0, "size": 3, "indices": [2], "values": [1.0]},
            {"type": 1, "size": None, "indices": None, "values": [0.25, 0.5, 0.25]},
        ],
        vector_type,
    )
    return vector_type, vectors


def test_score_columns_as_lists_vectors_or_one_per_class():
    import pyarrow as pa

    matrix = np.array([[0.7, 0.2, 0.1], [0.0, 0.0, 1.0], [0.25, 0.5, 0.25]])
    listed = pa.table({"p": pa.array(list(matrix))})
    fixed = pa.table({"p": pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), 3)})
    wide = pa.table({f"c{j}": matrix[:, j] for j in range(3)})
    vector_type, vectors = _vectors()
    dense = pa.table({"p": vectors.take([0, 2])})
    for table, columns, expected in (
        (listed, ("p",), matrix),
        (fixed, ("p",), matrix),
        (wide, ("c0", "c1", "c2"), matrix),
        (wide.select(["c0", "c1"]), ("c0", "c1"), matrix[:, :2]),
        (pa.table({"p": vectors}), ("p",), matrix),
        (dense, ("p",), matrix[[0, 2]]),
        (pa.table({"p": vectors.slice(1)}), ("p",), matrix[1:]),  # an array with an offset: rows 1 and 2
        (pa.table({"p": vectors.slice(2)}), ("p",), matrix[2:]),
    ):
        assert np.array_equal(score_matrix(table, columns, "t"), expected)
    with pytest.raises(InputError, match="must hold a list or a vector per row"):
        score_matrix(pa.table({"p": [1.0, 2.0]}), ("p",), "t")
    uneven = pa.array([{"type": 1, "size": None, "indices": None, "values": [0.5, 0.5]}, vectors[1].as_py()], vector_type)
    with pytest.raises(InputError, match=r"have different sizes \(\[2, 3\]\)"):
        score_matrix(pa.table({"p": uneven}), ("p",), "t")


def test_a_part_with_a_bundle_is_what_the_bundle_gives(rows, tmp_path):
    """The bundle shipped as bytes: a part applied equals the calibrator's own probabilities, a
    part evaluated after it equals calib.evaluate with the calibrator."""
    import calib
    from calib.table_partitions import applied_part, apply_plan, bundle_bytes

    val = np.load(data_file("cifar10_resnet110_val.npz"))
    ts = calib.calibrator("ts").fit(val["logits"], val["labels"])
    ts.save(str(tmp_path / "ts"))
    assert bundle_bytes(str(tmp_path / "ts"))[0] == calib.load(str(tmp_path / "ts")).bundle_sha256
    logits = np.stack(rows.column("logits").to_numpy(zero_copy_only=False))
    plan = apply_plan(rows.column_names, rows.slice(0, 10), "rows", str(tmp_path / "ts"), TableColumns(), "probs", "auto")
    applied = applied_part(rows, plan, "part")
    assert applied.column_names == [*rows.column_names, "probs"]
    assert np.allclose(np.stack(applied.column("probs").to_numpy(zero_copy_only=False)), ts.predict_proba(logits), atol=1e-15)
    request = EvaluationRequest.of(bootstrap=0, metrics=("ece", "nll"))
    plan = make_plan(rows.column_names, rows, "rows", TableColumns(), bundle=str(tmp_path / "ts"), request=request)
    merged = merged_report([part_state(rows, plan, "part")], request, "rows", plan)
    single = calib.evaluate(
        logits,
        rows.column("label").to_numpy(),
        calibrator=ts,
        request=calib.EvaluationRequest.of(metrics=["ece", "nll"], bootstrap=0),
    )
    assert merged.values == pytest.approx(single.values, abs=1e-12)
    with pytest.raises(calib.UsageError, match="what must be one of probs, log-probs, sets"):
        apply_plan(rows.column_names, rows, "rows", str(tmp_path / "ts"), TableColumns(), "logits", "auto")


def test_the_plan_refuses_what_it_cannot_read(rows, tmp_path):
    import calib

    names = rows.column_names
    gated = EvaluationRequest.of(gates=["ece>0.05"])
    for columns, request, error, message in (
        (TableColumns(), gated, UsageError, "name a column of unique integer row ids"),
        (TableColumns(row_id="missing"), gated, InputError, "no column named 'missing' \\(row_id"),
        (TableColumns(row_id="group"), gated, InputError, "must hold integers"),
        (TableColumns(scores="nothing"), None, InputError, "no column named 'nothing'"),
        (TableColumns(scores=["logits", "x"]), None, InputError, "no column named 'x'"),
        (TableColumns(row_id="id"), EvaluationRequest.of(bins="auto", bootstrap=0), UsageError, "give a number of bins"),
    ):
        with pytest.raises(error, match=message):
            make_plan(names, rows.slice(0, 50), "rows", columns, request=request)
    with pytest.raises(InputError, match="evaluation needs labels"):
        make_plan(["logits"], rows.select(["logits"]), "rows", TableColumns(), request=gated)
    # a bundle of another class count, or a corrupt one, is refused on the driver
    rng = np.random.default_rng(0)
    calib.calibrator("ts").fit(rng.normal(size=(200, 3)), rng.integers(0, 3, 200)).save(tmp_path / "k3")
    with pytest.raises(InputError, match="has K = 10 classes but the bundle was fitted for K = 3"):
        make_plan(names, rows.slice(0, 50), "rows", TableColumns(), bundle=str(tmp_path / "k3"), request=gated)
    (tmp_path / "k3" / "manifest.json").write_text("{")
    with pytest.raises(calib.BundleError):
        make_plan(names, rows.slice(0, 50), "rows", TableColumns(), bundle=str(tmp_path / "k3"), need_labels=False)


def test_a_bad_part_is_refused_naming_it(rows):
    import pyarrow as pa

    plan = make_plan(rows.column_names, rows, "rows", TableColumns(), request=EvaluationRequest.of(bootstrap=0))
    logits = np.stack(rows.column("logits").to_numpy(zero_copy_only=False)[:10])
    logits[3, 2] = np.nan
    bad = rows.slice(0, 10).set_column(0, "logits", pa.array(list(logits)))
    with pytest.raises(InputError, match="^DataFrame partition 4: "):
        part_state(bad, plan, "DataFrame partition 4")


def test_the_rows_fingerprint_adds_up_over_any_split_and_order():
    rng = np.random.default_rng(3)
    ids, labels = rng.permutation(10_000)[:500].astype(np.uint64), rng.integers(0, 100, 500)
    whole = rows_fingerprint(ids, labels)
    order = rng.permutation(500)
    parts = [rows_fingerprint(ids[order[a:b]], labels[order[a:b]]) for a, b in ((0, 17), (17, 300), (300, 500))]
    assert add_fingerprints(parts) == whole and len(whole) == 32
    assert rows_fingerprint(range(5), [0, 1, 2, 3, 4]) == rows_fingerprint(np.arange(5), np.arange(5))
    changed = labels.copy()
    changed[7] += 1
    assert rows_fingerprint(ids, changed) != whole  # one label more
    assert rows_fingerprint(ids + np.uint64(1), labels) != whole  # other rows


def test_the_pairs_of_a_row_keep_its_cluster():
    from calib.io.predictions import LabelLayout

    layout = LabelLayout(2, ("a", "b", "c"))
    keys = layout.pair_keys(np.array([10, 4], dtype=np.uint64))
    assert keys.tolist() == [30, 31, 32, 12, 13, 14]  # row r's label l: r L + l
    clusters = row_clusters(0, keys, pairs_per_row=3)
    assert clusters[0] == clusters[1] == clusters[2] == row_clusters(0, [10])[0]
    assert clusters[3] == clusters[4] == clusters[5] == row_clusters(0, [4])[0]


def test_the_pieces_of_an_applied_part():
    """Arrow list columns from matrices (a mask: each row's classes), an empty part, one row, two
    label columns refused, labels not needed to apply, a sliced vector array's offsets."""
    from calib.table_partitions import _vector_matrix, list_array

    assert list_array(np.array([[0.25, 0.75], [1.0, 0.0], [0.5, 0.5]])).to_pylist() == [[0.25, 0.75], [1.0, 0.0], [0.5, 0.5]]
    assert list_array(np.array([[True, False, True], [False, False, False]])).to_pylist() == [[0, 2], []]
    _, vectors = _vectors()
    # a slice keeps its children's offsets (3, 4, 7): the columns count from the slice's first value
    assert np.array_equal(_vector_matrix(vectors.slice(1), "t", "p"), [[0.0, 0.0, 1.0], [0.25, 0.5, 0.25]])


def test_apply_plans_need_no_labels_and_refuse_two_label_columns(rows, tmp_path):
    import pyarrow as pa

    import calib
    from calib.table_partitions import applied_part, apply_plan

    rng = np.random.default_rng(0)
    calib.calibrator("ts").fit(rng.normal(size=(200, 10)), rng.integers(0, 10, 200)).save(str(tmp_path / "ts"))
    bare = rows.select(["logits"])
    plan = apply_plan(bare.column_names, bare, "rows", str(tmp_path / "ts"), TableColumns(), "probs", "auto")
    assert applied_part(bare.slice(0, 1), plan, "one").column("probs").to_pylist()[0] == pytest.approx(
        calib.load(str(tmp_path / "ts")).predict_proba(np.stack(bare.column("logits").to_numpy(zero_copy_only=False)[:1]))[0]
    )
    empty = applied_part(bare.slice(0, 0), plan, "none")
    assert empty.num_rows == 0 and empty.schema.field("probs").type == pa.list_(pa.float64())
    zeros = pa.array(np.zeros(rows.num_rows, dtype=np.int64))
    two = bare.append_column("label_0", zeros).append_column("label_1", zeros)  # wide 0/1 label columns
    with pytest.raises(InputError, match="the labels must be one column"):
        make_plan(two.column_names, two, "rows", TableColumns(), request=EvaluationRequest.of(bootstrap=0))
