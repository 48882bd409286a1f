"""Readers and writers: every format round-trips, kinds are detected, parquet columns carried."""

import io
import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import needs

from calib.io import read_predictions, write_matrix
from calib.io.formats.npz import npz_bytes


@pytest.fixture
def arrays():
    rng = np.random.default_rng(0)
    logits = (rng.normal(size=(40, 4)) * 3).astype(np.float32)
    labels = rng.integers(0, 4, 40)
    return logits, labels


def test_npy_with_labels_files(tmp_path, arrays):
    logits, labels = arrays
    np.save(tmp_path / "s.npy", logits)
    np.save(tmp_path / "y.npy", labels)
    (tmp_path / "y.txt").write_text("\n".join(map(str, labels)) + "\n")
    a = read_predictions(str(tmp_path / "s.npy"), labels_path=str(tmp_path / "y.npy"))
    b = read_predictions(str(tmp_path / "s.npy"), labels_path=str(tmp_path / "y.txt"))
    assert a.kind == "logits" and np.array_equal(a.labels, labels) and np.array_equal(b.labels, labels)
    assert np.array_equal(a.logits(), logits.astype(np.float64))


@pytest.mark.parametrize("name,kind", [("logits", "logits"), ("log_probs", "log-probs"), ("probs", "probs")])
def test_npz_names_say_the_kind(tmp_path, arrays, name, kind):
    logits, labels = arrays
    z = logits.astype(np.float64)
    lp = z - np.log(np.exp(z).sum(1, keepdims=True))
    data = {"logits": z, "log_probs": lp, "probs": np.exp(lp)}[name]
    np.savez(tmp_path / "p.npz", **{name: data, "labels": labels})
    preds = read_predictions(str(tmp_path / "p.npz"))
    assert preds.kind == kind
    assert np.allclose(np.exp(preds.logits()) / np.exp(preds.logits()).sum(1, keepdims=True), np.exp(lp), atol=1e-12)


def test_auto_detection_reports_its_decision(tmp_path, arrays):
    logits, _ = arrays
    z = logits.astype(np.float64)
    lp = z - np.log(np.exp(z).sum(1, keepdims=True))
    for data, kind in ((z, "logits"), (lp, "log-probs"), (np.exp(lp), "probs")):
        np.save(tmp_path / "a.npy", data)
        preds = read_predictions(str(tmp_path / "a.npy"))
        assert preds.kind == kind and preds.kind_reason
    np.savez(tmp_path / "unnamed.npz", z)
    assert read_predictions(str(tmp_path / "unnamed.npz")).kind == "logits"


def test_binary_single_column(tmp_path):
    p1 = np.array([0.1, 0.8, 0.5])
    np.save(tmp_path / "b.npy", p1)
    preds = read_predictions(str(tmp_path / "b.npy"))
    assert preds.kind == "probs" and preds.k == 2
    assert np.allclose(np.exp(preds.logits()), np.stack([1 - p1, p1], 1))
    np.save(tmp_path / "z.npy", np.array([[-2.0], [3.0]]))
    preds = read_predictions(str(tmp_path / "z.npy"))
    assert preds.kind == "logits" and preds.logits().tolist() == [[0.0, -2.0], [0.0, 3.0]]


def test_parquet_list_fixed_and_wide_columns_agree(tmp_path, arrays):
    logits, labels = arrays
    ids = [f"id{i}" for i in range(len(labels))]
    lists = pa.array(logits.tolist(), type=pa.list_(pa.float32()))
    pq.write_table(pa.table({"id": ids, "logits": lists, "label": labels}), tmp_path / "list.parquet")
    fixed = pa.FixedSizeListArray.from_arrays(pa.array(logits.reshape(-1)), 4)
    pq.write_table(pa.table({"logits": fixed, "label": labels}), tmp_path / "fixed.parquet")
    wide = {f"logit_{j}": logits[:, j] for j in (2, 0, 3, 1)}  # out of order on purpose
    pq.write_table(pa.table({**wide, "label": labels, "id": ids}), tmp_path / "wide.parquet")
    for name in ("list", "fixed", "wide"):
        preds = read_predictions(str(tmp_path / f"{name}.parquet"))
        assert preds.kind == "logits" and np.array_equal(preds.labels, labels), name
        assert np.array_equal(preds.logits(), logits.astype(np.float64)), name
    carried = read_predictions(str(tmp_path / "wide.parquet")).passthrough
    assert carried.column_names == ["id"]
    custom = read_predictions(str(tmp_path / "wide.parquet"), score_prefix="logit_")
    assert np.array_equal(custom.logits(), logits.astype(np.float64))


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".parquet"])
def test_writer_round_trip(tmp_path, arrays, suffix):
    logits, labels = arrays
    probs = np.exp(logits - logits.max(1, keepdims=True)).astype(np.float64)
    probs /= probs.sum(1, keepdims=True)
    path = str(tmp_path / f"out{suffix}")
    passthrough = pa.table({"id": list(range(len(labels)))})
    write_matrix(path, probs, "probs", labels=labels, passthrough=passthrough if suffix == ".parquet" else None)
    back = read_predictions(path, labels_path=None)
    assert back.kind == "probs"
    assert np.array_equal(np.asarray(back.scores), probs)
    if suffix != ".npy":
        assert np.array_equal(back.labels, labels)
    if suffix == ".parquet":
        assert back.passthrough.column("id").to_pylist() == list(range(len(labels)))


def test_npz_bytes_are_deterministic():
    arrays = {"probs": np.eye(3), "labels": np.arange(3)}
    assert npz_bytes(arrays) == npz_bytes(arrays)
    loaded = np.load(io.BytesIO(npz_bytes(arrays)))
    assert np.array_equal(loaded["probs"], np.eye(3))


def test_stdin_npy_stream(tmp_path, arrays):
    logits, labels = arrays
    np.save(tmp_path / "y.npy", labels)
    buffer = io.BytesIO()
    np.save(buffer, logits)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "calib",
            "evaluate",
            "-",
            "--labels",
            str(tmp_path / "y.npy"),
            "--json",
            "-",
            "--metrics",
            "accuracy",
        ],
        input=buffer.getvalue(),
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr.decode()
    import json

    report = json.loads(done.stdout)
    assert report["input"]["path"] == "<stdin>"
    assert report["metrics"]["accuracy"]["value"] == pytest.approx(np.mean(logits.argmax(1) == labels))


@pytest.mark.parametrize("order", ["C", "F"])
def test_stored_npz_members_are_mapped_and_compressed_ones_read(tmp_path, order):
    rng = np.random.default_rng(3)
    logits = np.asarray(rng.normal(size=(50, 7)).astype(np.float32), order=order)
    labels = rng.integers(0, 7, 50)
    stored, packed = tmp_path / "stored.npz", tmp_path / "packed.npz"
    np.savez(stored, logits=logits, labels=labels)
    np.savez_compressed(packed, logits=logits, labels=labels)
    mapped, read = read_predictions(str(stored)), read_predictions(str(packed))
    assert isinstance(mapped.scores, np.memmap) and not isinstance(read.scores, np.memmap)
    for preds in (mapped, read):
        assert np.array_equal(preds.scores, logits) and np.array_equal(preds.labels, labels)


def test_truncated_stored_npz_member_is_one_clear_error(tmp_path):
    from calib.errors import InputError

    path = tmp_path / "cut.npz"
    np.savez(path, logits=np.ones((200, 10)), labels=np.zeros(200, dtype=int))
    data = bytearray(path.read_bytes())
    # keep the zip directory intact but claim a larger array in the member's .npy header
    at = data.index(b"'shape': (200, 10)")
    data[at : at + 18] = b"'shape': (900, 10)"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="unreadable"):
        read_predictions(str(path))


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".parquet", ".arrow"])
def test_stdin_takes_each_format_by_its_magic_number(tmp_path, suffix):
    """`cat test.npz | calib evaluate -`: the same numbers and sha256 as the file itself."""
    import json

    from conftest import SAMPLE

    data = np.load(SAMPLE / "cifar10_test.npz")
    logits, labels = data["logits"][:500], data["labels"][:500]
    path = tmp_path / f"p{suffix}"
    if suffix == ".npy":
        np.save(path, logits)
    elif suffix == ".npz":
        np.savez(path, logits=logits, labels=labels)
    elif suffix == ".parquet":
        pq.write_table(pa.table({"logits": list(logits), "label": labels}), path)
    else:
        import pyarrow.feather as feather

        feather.write_feather(pa.table({"logits": list(logits), "label": labels}), str(path))
    np.save(tmp_path / "y.npy", labels)

    def evaluate(source, stdin=None):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "calib",
                "evaluate",
                source,
                "--no-vece",
                "--metrics",
                "ece,nll",
                "--labels",
                str(tmp_path / "y.npy"),
                "--json",
                "-",
            ],
            input=stdin,
            capture_output=True,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    from_file, from_stdin = evaluate(str(path)), evaluate("-", path.read_bytes())
    assert from_stdin["metrics"] == from_file["metrics"]
    assert from_stdin["input"]["sha256"] == from_file["input"]["sha256"]


@pytest.mark.parametrize("stream", [b"\x00\x9f\x92binary", b"hello world"])
def test_stdin_of_unknown_bytes_or_headerless_text_is_one_line_exit_2(stream):
    done = subprocess.run([sys.executable, "-m", "calib", "evaluate", "-", "--no-vece"], input=stream, capture_output=True)
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("calib: error: <stdin>"), lines
    if stream.startswith(b"\x00"):
        assert "nor text (CSV, TSV, JSON lines)" in lines[0]


def test_stdin_of_unknown_bytes_names_the_formats_told_by_their_first_bytes():
    done = subprocess.run(
        [sys.executable, "-m", "calib", "evaluate", "-", "--no-vece"], input=b"\x00\x01\x02\x03", capture_output=True
    )
    lines = done.stderr.decode().strip().splitlines()
    # the formats told by their first bytes (a magic number, or a sniff of their own); text formats
    # (CSV, TSV, JSON lines) have none to tell them by
    from calib.io.formats import FORMATS, Format, listed

    told = [fmt for fmt in FORMATS if fmt.magic is not None or type(fmt).sniff is not Format.sniff]
    assert {".npy", ".npz", ".parquet", ".arrow", ".safetensors"} <= {fmt.suffixes[0] for fmt in told}
    assert done.returncode == 2 and len(lines) == 1 and f"neither {listed(told)} bytes" in lines[0], lines


def test_feather_and_arrow_files_read_as_the_npz_does_and_round_trip(tmp_path):
    """A Feather (Arrow IPC) file of the CIFAR-10 sample: wide or list columns, the labels beside
    them, give the .npz's scores and labels to the bit; apply writes .arrow, read back the same."""
    import pyarrow.feather as feather
    from conftest import SAMPLE

    data = np.load(SAMPLE / "cifar10_test.npz")
    logits, labels = data["logits"][:300], data["labels"][:300]
    listed = tmp_path / "list.feather"
    feather.write_feather(pa.table({"logits": list(logits), "label": labels, "id": np.arange(300)}), str(listed))
    wide = tmp_path / "wide.arrow"
    feather.write_feather(pa.table({**{f"logit_{k}": logits[:, k] for k in range(10)}, "labels": labels}), str(wide))
    for path in (listed, wide):
        preds = read_predictions(str(path))
        assert preds.kind == "logits" and np.array_equal(np.asarray(preds.scores), logits)
        assert np.array_equal(preds.labels, labels)
    assert read_predictions(str(listed)).passthrough.column_names == ["id"]
    out = tmp_path / "out.arrow"
    write_matrix(
        str(out), logits.astype(np.float64), "logits", labels=labels, passthrough=read_predictions(str(listed)).passthrough
    )
    back = read_predictions(str(out))
    assert np.array_equal(np.asarray(back.scores), logits.astype(np.float64)) and np.array_equal(back.labels, labels)
    assert back.passthrough.column("id").to_pylist() == list(range(300))


@pytest.mark.parametrize(
    "rows, message",
    [
        ([[0.5, 0.5], [0.5, 0.5], [0.2, 0.3, 0.5]], "row 0 has 2 scores, row 2 has 3"),
        ([[0.2, 0.3, 0.5], [0.5, 0.5], [0.5, 0.5]], "row 0 has 3 scores, row 1 has 2"),
    ],
)
def test_ragged_list_rows_name_the_first_row_unlike_row_0(rows, message):
    from calib.errors import InputError
    from calib.io.formats.columns import list_column_to_matrix

    with pytest.raises(InputError, match=message):
        list_column_to_matrix(pa.chunked_array([rows[:1], rows[1:]]), "p.parquet", "probs")


def test_list_columns_of_one_and_no_rows():
    from calib.io.formats.columns import list_column_to_matrix

    one = list_column_to_matrix(pa.array([[0.25, 0.75]]), "p.parquet", "probs")
    assert one.shape == (1, 2) and one.tolist() == [[0.25, 0.75]]
    assert list_column_to_matrix(pa.array([], pa.list_(pa.float64())), "p.parquet", "probs").shape == (0, 0)


def test_arrow_files_refuse_bad_input_in_one_line(tmp_path):
    import pyarrow.feather as feather

    from calib.errors import InputError

    ragged = tmp_path / "ragged.feather"
    feather.write_feather(pa.table({"probs": [[0.5, 0.5], [1.0]], "label": [0, 0]}), str(ragged))
    with pytest.raises(InputError, match="ragged rows in column 'probs'"):
        read_predictions(str(ragged))
    cut = tmp_path / "cut.arrow"
    feather.write_feather(pa.table({"logits": [[0.5, 0.5]] * 50, "label": [0] * 50}), str(cut))
    cut.write_bytes(cut.read_bytes()[:-40])
    with pytest.raises(InputError, match="not a readable .arrow file"):
        read_predictions(str(cut))
    text = tmp_path / "text.feather"
    text.write_text("logits,label\n")
    with pytest.raises(InputError, match="not a .feather file"):
        read_predictions(str(text))


def test_netcal_records_read_by_name_and_by_the_one_matrix_one_vector_rule(tmp_path):
    """netcal's example records (`predictions` (N, K) float32 softmax, `ground_truth` (N,) int64):
    with --scores/--label-column, and without them by the rule, the same predictions as a .npz
    following the naming convention, the rule said in the input-kind line."""
    from conftest import SAMPLE

    from calib.core.numerics import softmax
    from calib.errors import InputError

    data = np.load(SAMPLE / "cifar10_test.npz")
    probs = softmax(data["logits"][:400].astype(np.float64)).astype(np.float32)
    labels = data["labels"][:400].astype(np.int64)
    netcal, named = tmp_path / "netcal.npz", tmp_path / "named.npz"
    np.savez(netcal, predictions=probs, ground_truth=labels)
    np.savez(named, probs=probs, labels=labels)
    reference = read_predictions(str(named))
    by_name = read_predictions(str(netcal), scores="predictions", label_column="ground_truth")
    by_rule = read_predictions(str(netcal))
    for preds in (by_name, by_rule):
        assert preds.kind == "probs" and np.array_equal(np.asarray(preds.scores), probs)
        assert np.array_equal(preds.labels, reference.labels)
    assert "scores: the only 2-D floating array, 'predictions'" in by_rule.kind_reason
    assert "labels: the only 1-D integer array, 'ground_truth'" in by_rule.kind_reason
    assert "only" not in by_name.kind_reason
    two = tmp_path / "two.npz"
    np.savez(two, a=probs, b=probs, y=labels)
    with pytest.raises(InputError, match=r"found a \(400, 10\) float32, b \(400, 10\) float32, y \(400,\) int64") as caught:
        read_predictions(str(two))
    assert caught.value.cli_hint == "--scores NAME"
    conventional = tmp_path / "conventional.npz"
    np.savez(conventional, logits=data["logits"][:400], ids=np.arange(400))
    assert read_predictions(str(conventional)).labels is None  # the convention's files name their labels
    with pytest.raises(InputError, match="no array named 'nope'"):
        read_predictions(str(netcal), scores="nope")
    with pytest.raises(InputError, match="no array 'x' to pick"):
        np.save(tmp_path / "m.npy", probs)
        read_predictions(str(tmp_path / "m.npy"), scores="x")


def test_scores_name_a_list_column_of_parquet_and_arrow(tmp_path):
    import pyarrow.feather as feather

    from calib.errors import InputError

    rng = np.random.default_rng(1)
    logits, labels = rng.normal(size=(50, 3)), rng.integers(0, 3, 50)
    table = pa.table({"model_output": list(logits), "target": labels})
    pq.write_table(table, tmp_path / "t.parquet")
    feather.write_feather(table, str(tmp_path / "t.feather"))
    for path in (tmp_path / "t.parquet", tmp_path / "t.feather"):
        preds = read_predictions(str(path), scores="model_output", label_column="target", input_kind="logits")
        assert np.array_equal(np.asarray(preds.scores), logits) and np.array_equal(preds.labels, labels)
        with pytest.raises(InputError, match="named twice"):
            read_predictions(str(path), scores="model_output", score_prefix="x")


def _to_csv(path, probs, labels, delimiter=",", index=True):
    """What pandas' DataFrame(probs).assign(target=labels).to_csv(path) writes: an unnamed index
    column, one column per class named 0..K-1, the labels, floats as their shortest repr."""
    head = ([""] if index else []) + [str(k) for k in range(probs.shape[1])] + ["target"]
    lines = [delimiter.join(head)]
    for i, (row, label) in enumerate(zip(probs, labels)):
        lines.append(delimiter.join(([str(i)] if index else []) + [repr(float(v)) for v in row] + [str(int(label))]))
    path.write_text("\n".join(lines) + "\n")


def test_a_pandas_csv_export_gives_the_npz_report_to_the_bit(tmp_path):
    import json

    from conftest import SAMPLE

    from calib.core.numerics import softmax

    data = np.load(SAMPLE / "cifar10_test.npz")
    probs, labels = softmax(data["logits"][:1000].astype(np.float64)), data["labels"][:1000]
    _to_csv(tmp_path / "p.csv", probs, labels)
    _to_csv(tmp_path / "p.tsv", probs, labels, delimiter="\t", index=False)
    np.savez(tmp_path / "p.npz", probs=probs, labels=labels)

    def report(*args):
        done = subprocess.run(
            [sys.executable, "-m", "calib", "evaluate", *args, "--no-vece", "--bootstrap", "0", "--json", "-"],
            capture_output=True,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["metrics"]

    expected = report(str(tmp_path / "p.npz"))
    assert report(str(tmp_path / "p.csv"), "--label-column", "target") == expected
    assert report(str(tmp_path / "p.tsv"), "--label-column", "target") == expected
    preds = read_predictions(str(tmp_path / "p.csv"), label_column="target")
    assert preds.passthrough is None and np.array_equal(np.asarray(preds.scores), probs)
    assert preds.scores.dtype == np.float64 and "float32" not in preds.kind_reason
    # a float32 export (pandas writes float32's shortest decimals) reads back as those float32 values
    logits = data["logits"][:1000]
    lines = [",".join(["", *map(str, range(10)), "target"])]
    lines += [",".join([str(i), *(str(v) for v in row), str(int(y))]) for i, (row, y) in enumerate(zip(logits, labels))]
    (tmp_path / "f32.csv").write_text("\n".join(lines) + "\n")
    np.savez(tmp_path / "f32.npz", logits=logits, labels=labels)
    single = read_predictions(str(tmp_path / "f32.csv"), label_column="target")
    assert single.scores.dtype == np.float32 and np.array_equal(np.asarray(single.scores), logits)
    assert "scores read as float32" in single.kind_reason
    assert report(str(tmp_path / "f32.csv"), "--label-column", "target") == report(str(tmp_path / "f32.npz"))


def test_csv_scores_refuse_bad_cells_naming_the_line(tmp_path):
    from calib.errors import InputError

    cases = {
        "empty.csv": ("a,b,label\n0.5,0.5,0\n0.2,,1\n", "line 3: score column 'b' is empty"),
        "typo.csv": ("a,b,label\n0.5,0.5,0\n0.2,xx,1\n", "line 3: column 'b' holds numbers and 'xx'"),
        "nohead.csv": ("0.5,0.5,0\n0.2,0.8,1\n", "the first line holds numbers, not column names"),
        "prefix.csv": ("a,b,label\n0.5,0.5,0\n", "no column starts with 'p_'"),
    }
    for file, (text, message) in cases.items():
        (tmp_path / file).write_text(text)
        with pytest.raises(InputError, match=message):
            read_predictions(str(tmp_path / file), score_prefix="p_" if file == "prefix.csv" else None)
    (tmp_path / "meta.csv").write_text("id,source,p_0,p_1,label\n1,a,0.5,0.5,0\n2,b,0.2,0.8,1\n")
    preds = read_predictions(str(tmp_path / "meta.csv"))
    assert preds.k == 2 and preds.passthrough.column_names == ["id", "source"]
    (tmp_path / "y.csv").write_text("1\n0\n")  # a labels file of its own is still one label a line
    from calib.io import read_labels

    assert read_labels(str(tmp_path / "y.csv")).tolist() == [1.0, 0.0]


def test_safetensors_files_read_as_the_npz_does_and_interoperate_with_the_reference(tmp_path):
    """A .safetensors file of the CIFAR-10 sample gives the .npz's arrays (memory-mapped, no extra
    package); the reference implementation reads what calib writes and calib reads what it writes."""
    from conftest import SAMPLE

    from calib.io.formats.safetensors import safetensors_bytes

    data = np.load(SAMPLE / "cifar10_test.npz")
    ours = tmp_path / "ours.safetensors"
    ours.write_bytes(safetensors_bytes({"logits": data["logits"], "labels": data["labels"]}))
    preds = read_predictions(str(ours))
    assert preds.kind == "logits" and np.array_equal(np.asarray(preds.scores), data["logits"])
    assert np.array_equal(preds.labels, data["labels"]) and isinstance(preds.scores, np.memmap)
    write_matrix(str(tmp_path / "out.safetensors"), data["logits"][:5].astype(np.float64), "probs", labels=data["labels"][:5])
    back = read_predictions(str(tmp_path / "out.safetensors"), input_kind="logits")
    assert np.array_equal(np.asarray(back.scores), data["logits"][:5].astype(np.float64))
    needs("safetensors")
    from safetensors.numpy import load_file, save_file

    theirs = tmp_path / "theirs.safetensors"
    save_file({"predictions": data["logits"][:50], "ground_truth": data["labels"][:50]}, str(theirs))
    picked = read_predictions(str(theirs))  # the one-matrix, one-vector rule
    assert np.array_equal(np.asarray(picked.scores), data["logits"][:50]) and np.array_equal(picked.labels, data["labels"][:50])
    loaded = load_file(str(ours))
    assert np.array_equal(loaded["logits"], data["logits"]) and np.array_equal(loaded["labels"], data["labels"])


def test_safetensors_refuse_bad_files_in_one_line(tmp_path):
    import json
    import struct

    from calib.errors import InputError
    from calib.io.formats.safetensors import safetensors_bytes

    good = safetensors_bytes({"logits": np.ones((4, 3), dtype=np.float32)})
    (tmp_path / "cut.safetensors").write_bytes(good[:-8])
    header = json.dumps({"logits": {"dtype": "BF16", "shape": [4, 3], "data_offsets": [0, 24]}}).encode()
    (tmp_path / "bf16.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(24))
    (tmp_path / "text.safetensors").write_text("logits,label\n")
    for file, message in (
        ("cut.safetensors", "tensor 'logits' is truncated"),
        ("bf16.safetensors", "tensor 'logits' is BF16, which NumPy cannot hold"),
        ("text.safetensors", "not a .safetensors file"),
    ):
        with pytest.raises(InputError, match=message):
            read_predictions(str(tmp_path / file))


def test_json_lines_read_as_the_npz_does_and_refuse_bad_rows(tmp_path):
    """One object per row (an evaluation harness's export): the same scores and labels as the
    .npz; --scores/--label-column name other fields; ragged lists, a null label and a cut last
    line are one-line errors."""
    import json

    from conftest import SAMPLE

    from calib.errors import InputError

    data = np.load(SAMPLE / "cifar10_test.npz")
    logits, labels = data["logits"][:200].astype(np.float64), data["labels"][:200]
    rows = [{"question": i, "logits": row.tolist(), "label": int(y)} for i, (row, y) in enumerate(zip(logits, labels))]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    preds = read_predictions(str(tmp_path / "t.jsonl"))
    assert preds.kind == "logits" and np.array_equal(np.asarray(preds.scores), logits) and np.array_equal(preds.labels, labels)
    assert preds.passthrough.column_names == ["question"]
    renamed = [{"option_loglik": r["logits"], "answer": r["label"]} for r in rows]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in renamed))
    named = read_predictions(str(tmp_path / "r.jsonl"), scores="option_loglik", label_column="answer", input_kind="logits")
    assert np.array_equal(np.asarray(named.scores), logits)
    bad = {
        "ragged.jsonl": ('{"probs":[0.5,0.5],"label":0}\n{"probs":[1.0],"label":0}\n', "ragged rows in column 'probs'"),
        "null.jsonl": ('{"probs":[0.5,0.5],"label":0}\n{"probs":[0.2,0.8],"label":null}\n', "row 1 has no label"),
        "cut.jsonl": ('{"probs":[0.5,0.5],"label":0}\n{"probs":[0.2,0.8],"lab', "not a readable JSON-lines file"),
    }
    for file, (text, message) in bad.items():
        (tmp_path / file).write_text(text)
        with pytest.raises(InputError, match=message):
            read_predictions(str(tmp_path / file), require_labels=True)


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_text_outputs_round_trip_to_the_bit_with_their_carried_columns(tmp_path, suffix):
    """apply's CSV, TSV and JSON-lines outputs: floats in their shortest round-trip decimals, so the
    probabilities read back are the ones written; the kind prefix names the wide columns; carried
    columns and labels follow; a set mask writes each row's classes."""
    from calib.core.numerics import softmax

    rng = np.random.default_rng(2)
    probs, labels = softmax(rng.normal(size=(60, 5)) * 3), rng.integers(0, 5, 60)
    carried = pa.table({"id": np.arange(60), "source": ["a", "b"] * 30})
    path = tmp_path / f"out{suffix}"
    write_matrix(str(path), probs, "probs", labels=labels, passthrough=carried)
    back = read_predictions(str(path))
    assert back.kind == "probs" and np.array_equal(np.asarray(back.scores), probs) and np.array_equal(back.labels, labels)
    assert back.passthrough.column("source").to_pylist() == ["a", "b"] * 30
    if suffix != ".jsonl":
        assert path.read_text().splitlines()[0].replace('"', "").startswith("prob_0")
    sets = tmp_path / f"sets{suffix}"
    write_matrix(str(sets), probs > 0.2, "sets", labels=labels)
    first = sets.read_text().splitlines()[0 if suffix == ".jsonl" else 1]  # CSV and TSV have a header line
    expected = np.flatnonzero(probs[0] > 0.2).tolist()
    if suffix == ".jsonl":
        assert json_loads(first)["set"] == expected
    else:
        cells = first.split("\t" if suffix == ".tsv" else ",")[:5]
        assert [k for k, cell in enumerate(cells) if cell == "1"] == expected


def json_loads(text):
    import json

    return json.loads(text)


@pytest.mark.parametrize(
    "arrow_type, dtype",
    [
        (pa.int8(), np.int8),
        (pa.int16(), np.int16),
        (pa.int32(), np.int32),
        (pa.int64(), np.int64),
        (pa.uint8(), np.uint8),
        (pa.uint32(), np.uint32),
        (pa.uint64(), np.uint64),
        (pa.float16(), np.float16),
        (pa.float32(), np.float32),
        (pa.float64(), np.float64),
    ],
)
def test_plain_numbers_reads_each_numeric_type_from_its_buffer(arrow_type, dtype):
    """The same numbers and dtype as Arrow's to_numpy, for a whole array, a slice (an offset into
    the buffer) and a chunked array of several chunks."""
    from calib.io.formats.columns import plain_numbers

    values = np.array([0, 1, 2, 3, 5, 8, 13, 21, 34, 55], dtype=dtype)
    array = pa.array(values, type=arrow_type)
    for part, expected in ((array, values), (array.slice(3, 4), values[3:7]), (array.slice(10), values[10:])):
        got = plain_numbers(part)
        assert got.dtype == dtype and np.array_equal(got, expected)
    chunked = pa.chunked_array([array.slice(0, 4), array.slice(4)])
    assert np.array_equal(plain_numbers(chunked), values)


def test_plain_numbers_of_an_array_without_a_data_buffer_is_empty():
    """An empty array built from buffers may have none at all: zero values of its own dtype."""
    from calib.io.formats.columns import plain_numbers

    got = plain_numbers(pa.Array.from_buffers(pa.float32(), 0, [None, None]))
    assert got.shape == (0,) and got.dtype == np.float32


def test_plain_numbers_leaves_other_arrays_to_arrow():
    from calib.io.formats.columns import plain_numbers

    assert plain_numbers(pa.array([1.0, None, 3.0])) is None  # nulls
    assert plain_numbers(pa.array(["a", "b"])) is None
    assert plain_numbers(pa.array([True, False])) is None  # bit-packed


def test_parquet_labels_with_missing_rows_read_as_nan(tmp_path):
    from calib.io.formats.columns import label_column_values

    assert np.array_equal(label_column_values(pa.chunked_array([[0, None], [2]])), [0.0, np.nan, 2.0], equal_nan=True)
    assert label_column_values(pa.chunked_array([["cat", "dog"]])).tolist() == ["cat", "dog"]


def test_reading_a_parquet_file_does_not_import_pandas(tmp_path):
    """Arrow's to_numpy imports pandas on first use (0.5 s and 47 MiB resident); the parquet reader
    takes the numbers from Arrow's buffers instead."""
    z = np.arange(12, dtype=np.float32).reshape(4, 3)
    table = pa.table({"logits": pa.FixedSizeListArray.from_arrays(pa.array(z.ravel()), 3), "label": [0, 1, 2, 0]})
    pq.write_table(table, tmp_path / "z.parquet", row_group_size=2)
    code = (
        "import sys, numpy as np\n"
        "from calib.io import read_predictions\n"
        f"preds = read_predictions({str(tmp_path / 'z.parquet')!r})\n"
        "assert np.array_equal(preds.logits(slice(None)), np.arange(12.0).reshape(4, 3))\n"
        "assert preds.labels.tolist() == [0, 1, 2, 0]\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False", done.stderr


def test_the_same_frame_reads_alike_as_csv_parquet_and_feather(run, tmp_path):
    """A DataFrame of predict_proba's columns and a label column, written by pandas as CSV, parquet
    and feather: each reads with no score option (every floating-point column but the label and the
    index), the same numbers; parquet and feather say which columns were taken."""
    pandas = needs("pandas")
    rng = np.random.default_rng(0)
    frame = pandas.DataFrame(rng.dirichlet(np.ones(3), 60), columns=["setosa", "versicolor", "virginica"])
    frame["target"] = rng.integers(0, 3, 60)
    frame.to_csv(tmp_path / "f.csv")
    frame.to_parquet(tmp_path / "f.parquet")
    frame.to_feather(tmp_path / "f.feather")
    values = {}
    for name in ("f.csv", "f.parquet", "f.feather"):
        code, out, err = run(
            "evaluate", tmp_path / name, "--label-column", "target", "--no-vece", "--metrics", "nll,ece", "--json", "-"
        )
        assert code == 0, err
        values[name] = json.loads(out)["metrics"]
        if name != "f.csv":
            assert "the 3 floating-point columns setosa ... virginica" in err
    assert values["f.csv"] == values["f.parquet"] == values["f.feather"]


def test_a_suffix_of_two_parts_names_its_format(monkeypatch):
    """suffix_of takes the longest registered suffix a name ends with, so a format registered
    under ".jsonl.gz" is found for "x.JSONL.GZ" (not ".gz"), and writers and readers agree."""
    from calib.io import formats
    from calib.io.formats import BY_SUFFIX, JSON_LINES, suffix_of

    assert suffix_of("/a.b/preds.NPZ") == ".npz" and suffix_of("preds") == "" and suffix_of("x.tar.gz") == ".gz"
    monkeypatch.setattr(formats, "BY_SUFFIX", {**BY_SUFFIX, ".jsonl.gz": JSON_LINES})
    assert suffix_of("runs/x.JSONL.GZ") == ".jsonl.gz" and suffix_of("x.jsonl") == ".jsonl"
    assert suffix_of(".jsonl.gz") == ".gz"  # a name that is only the suffix has none of it


def test_labels_written_as_text_are_named_as_the_cause(run, tmp_path):
    """An .npz of a score matrix and a vector of class names: the refusal names the text labels,
    not "no score array"."""
    np.savez(
        tmp_path / "s.npz", preds=np.random.default_rng(0).normal(size=(50, 3)), y=np.array(["a", "b", "c"] * 16 + ["a", "b"])
    )
    code, _, err = run("evaluate", tmp_path / "s.npz", "--no-vece")
    assert code == 2 and "'y' holds text (<U1), not class indices" in err and "no score array" not in err, err


@pytest.mark.parametrize(
    "content, says", [("text", "it holds csv text: read it as csv"), ("npz", "it holds npz data: read it as npz")]
)
def test_an_unknown_suffix_says_what_the_file_holds_and_how_to_read_it(run, tmp_path, content, says):
    path = tmp_path / "p.txt"
    if content == "text":
        path.write_text("a,b,label\n0.2,0.8,1\n0.6,0.4,0\n")
    else:
        np.savez(tmp_path / "p.npz", logits=np.zeros((3, 2)), labels=np.zeros(3, int))
        (tmp_path / "p.npz").rename(path)
    code, _, err = run("evaluate", path, "--no-vece")
    assert code == 2 and says in err and "--input-format" in err and len(err.strip().splitlines()) == 1, err
