"""Every bad input of docs/cli.md: one stderr line naming the file and the problem, exit 2, no output."""

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest


@pytest.fixture
def good(tmp_path):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(50, 3)).astype(np.float32)
    labels = rng.integers(0, 3, 50)
    np.savez(tmp_path / "good.npz", logits=logits, labels=labels)
    return tmp_path, logits, labels


def _bad_files(tmp_path, logits, labels):
    """(name, path, extra args, words the message must contain)"""
    cases = []

    def add(name, filename, writer, words, extra=()):
        path = tmp_path / filename
        writer(path)
        cases.append((name, path, list(extra), words))

    add("missing", "nope.npz", lambda p: None, ["no such file"])
    add("truncated npy", "trunc.npy", lambda p: p.write_bytes(_npy_bytes(logits)[:100]), ["truncated"])
    add("garbage npz", "garbage.npz", lambda p: p.write_bytes(b"PK\x03\x04 not really a zip"), ["not a readable .npz"])
    add("garbage parquet", "garbage.parquet", lambda p: p.write_bytes(b"PAR1 nonsense"), ["not a readable parquet"])
    add("unknown type", "scores.xlsx", lambda p: p.write_text("1,2\n"), ["unknown file type"])
    add("headerless csv", "scores.csv", lambda p: p.write_text("1,2\n"), ["needs a header line"])
    add("object dtype", "obj.npy", lambda p: np.save(p, np.array([[1, "a"]], dtype=object), allow_pickle=True), ["objects"])
    add(
        "integer scores",
        "ints.npz",
        lambda p: np.savez(p, logits=np.ones((5, 3), dtype=np.int64), labels=np.zeros(5, int)),
        ["floating point"],
    )
    add(
        "string labels",
        "strlab.npz",
        lambda p: np.savez(p, logits=logits, labels=np.array(["a"] * 50)),
        ["class indices", "strings"],
    )
    add(
        "fractional labels",
        "fraclab.npz",
        lambda p: np.savez(p, logits=logits, labels=labels.astype(float) + np.r_[0.0, 0.5, np.zeros(48)]),
        ["row 1", "1.5", "class index"],
    )
    add(
        "missing label",
        "nanlab.npz",
        lambda p: np.savez(p, logits=logits, labels=np.r_[labels[:7].astype(float), np.nan, labels[8:]]),
        ["row 7", "no label"],
    )
    add(
        "ragged parquet",
        "ragged.parquet",
        lambda p: pq.write_table(pa.table({"logits": pa.array([[1.0, 2.0], [1.0]]), "label": [0, 1]}), p),
        ["ragged"],
    )
    add("N = 0", "empty.npz", lambda p: np.savez(p, logits=np.zeros((0, 3), np.float32), labels=np.zeros(0, int)), ["N = 0"])
    add("K = 0", "k0.npz", lambda p: np.savez(p, logits=np.zeros((4, 0), np.float32), labels=np.zeros(4, int)), ["K = 0"])
    add("3-d", "cube.npz", lambda p: np.savez(p, logits=np.zeros((4, 3, 2), np.float32), labels=np.zeros(4, int)), ["shape"])
    nan = logits.copy()
    nan[7, 1] = np.nan
    add("NaN", "nan.npz", lambda p: np.savez(p, logits=nan, labels=labels), ["NaN", "row 7", "column 1"])
    inf = logits.copy()
    inf[3, 0] = np.inf
    add("inf", "inf.npz", lambda p: np.savez(p, logits=inf, labels=labels), ["inf", "row 3"])
    probs = np.full((50, 3), 1 / 3)
    outside = probs.copy()
    outside[2] = [1.2, -0.1, -0.1]
    add("probs outside [0,1]", "outside.npz", lambda p: np.savez(p, probs=outside, labels=labels), ["[0, 1]", "row 2"])
    unnormalised = probs.copy()
    unnormalised[4] = [0.5, 0.5, 0.5]
    add("probs not summing to 1", "unnorm.npz", lambda p: np.savez(p, probs=unnormalised, labels=labels), ["sum to 1", "row 4"])
    add(
        "log-probs not normalised",
        "lp.npz",
        lambda p: np.savez(p, log_probs=np.full((50, 3), -0.1), labels=labels),
        ["logsumexp"],
    )
    bad_labels = labels.copy()
    bad_labels[9] = 3
    add("label >= K", "lab.npz", lambda p: np.savez(p, logits=logits, labels=bad_labels), ["[0, 3)", "row 9"])
    negative = labels.copy()
    negative[0] = -1
    add("label < 0", "neg.npz", lambda p: np.savez(p, logits=logits, labels=negative), ["[0, 3)", "row 0"])
    add("N mismatch", "mismatch.npz", lambda p: np.savez(p, logits=logits, labels=labels[:-1]), ["49 labels for 50 rows"])
    add("no labels", "nolabels.npz", lambda p: np.savez(p, logits=logits), ["no labels"])
    add("two score arrays", "two.npz", lambda p: np.savez(p, logits=logits, probs=logits, labels=labels), ["several"])
    return cases


def _npy_bytes(array):
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _assert_one_line_error(code, out, err, *words):
    assert code == 2, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("calib: error: "), err
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_every_bad_input_fails_cleanly_in_every_command(good, run):
    tmp_path, logits, labels = good
    code, _, err = run("fit", tmp_path / "good.npz", "--method", "ts", "--out", tmp_path / "bundle")
    assert code == 0, err
    for name, path, extra, words in _bad_files(tmp_path, logits, labels):
        out_dir = tmp_path / f"b_{name.replace(' ', '_')}"
        out_file = tmp_path / f"o_{name.replace(' ', '_')}.npy"
        _assert_one_line_error(*run("fit", path, "--method", "ts", "--out", out_dir, *extra), str(path.name), *words)
        assert not out_dir.exists(), name
        _assert_one_line_error(*run("evaluate", "--no-vece", path, *extra), str(path.name), *words)
        if name not in ("no labels", "N mismatch", "label >= K", "label < 0", "string labels", "float labels"):
            _assert_one_line_error(*run("apply", tmp_path / "bundle", path, "--out", out_file, *extra), str(path.name), *words)
            assert not out_file.exists(), name


def test_bundle_for_another_k_or_kind(good, run):
    tmp_path, logits, labels = good
    assert run("fit", tmp_path / "good.npz", "--method", "ts", "--out", tmp_path / "b")[0] == 0
    np.savez(tmp_path / "k4.npz", logits=np.zeros((5, 4), np.float32), labels=np.zeros(5, int))
    _assert_one_line_error(*run("apply", tmp_path / "b", tmp_path / "k4.npz", "--out", tmp_path / "o.npy"), "K = 4", "K = 3")
    probs = np.full((5, 3), 1 / 3)
    np.savez(tmp_path / "p.npz", probs=probs, labels=np.zeros(5, int))
    # ts reads logits only through their softmax: it applies to probabilities through log p
    code, _, err = run("evaluate", "--no-vece", tmp_path / "p.npz", "--bundle", tmp_path / "b")
    assert code == 0 and "applies through log p" in err
    # Platt scaling reads the raw logits: refused, with refitting as the way out
    assert run("fit", tmp_path / "good.npz", "--method", "platt", "--out", tmp_path / "platt")[0] == 0
    _assert_one_line_error(
        *run("evaluate", "--no-vece", tmp_path / "p.npz", "--bundle", tmp_path / "platt"), "probs", "fit it on probs"
    )
    assert not (tmp_path / "o.npy").exists()


def test_usage_errors(good, run):
    tmp_path, logits, labels = good
    npz = tmp_path / "good.npz"
    _assert_one_line_error(*run("fit", npz, "--method", "nope", "--out", tmp_path / "x"), "unknown method", "ts")
    _assert_one_line_error(
        *run("fit", npz, "--method", "ts", "--alpha", "0.1", "--out", tmp_path / "x"), "takes no option 'alpha'"
    )
    _assert_one_line_error(*run("evaluate", "--no-vece", npz, "--metrics", "ece,bogus"), "unknown metric 'bogus'")
    _assert_one_line_error(*run("evaluate", "--no-vece", npz, "--fail-if", "cmce>>1"), "--fail-if")
    _assert_one_line_error(*run("evaluate", "--no-vece", npz, "--max-increase", "cmce=0.1"), "--baseline")
    _assert_one_line_error(*run("evaluate", "--no-vece", npz, "--input-kind", "weird"), "--input-kind")
    _assert_one_line_error(*run("apply", tmp_path / "nobundle", npz, "--out", tmp_path / "o.npy"), "nobundle")
    assert not (tmp_path / "x").exists()


def test_apply_never_overwrites_its_input(good, run):
    tmp_path, logits, labels = good
    np.save(tmp_path / "in.npy", logits)
    before = (tmp_path / "in.npy").read_bytes()
    assert run("fit", tmp_path / "good.npz", "--method", "ts", "--out", tmp_path / "b")[0] == 0
    _assert_one_line_error(*run("apply", tmp_path / "b", tmp_path / "in.npy", "--out", tmp_path / "in.npy"), "input")
    assert (tmp_path / "in.npy").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == sorted(["b", "good.npz", "in.npy"])  # no temp files left


def test_a_semicolon_csv_gets_a_hint_and_long_column_lists_are_summarised(run, tmp_path):
    """A ';'-separated CSV reads as one column: the error names the separator and how to convert;
    a table of 177 columns without labels is listed as its first 12 names and a count, one line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "semi.csv").write_text("p0;p1;label\n0.2;0.8;1\n0.6;0.4;0\n")
    code, _, err = run("evaluate", tmp_path / "semi.csv", "--no-vece")
    assert code == 2 and "looks ';'-separated" in err and "tr ';' ','" in err
    rng = np.random.default_rng(0)
    table = {f"c{i}": rng.random(4) for i in range(177)}
    table["probs"] = pa.FixedSizeListArray.from_arrays(rng.dirichlet(np.ones(3), 4).ravel(), 3)
    pq.write_table(pa.table(table), tmp_path / "wide.parquet")
    code, _, err = run("evaluate", tmp_path / "wide.parquet", "--no-vece")
    line = err.strip().splitlines()[-1]
    assert code == 2 and "c0, c1" in line and "c11 and 166 more" in line and len(line) < 400


def test_notebook_containers_a_bfloat16_tensor_and_a_dataframe_of_a_list_column():
    """A bfloat16 tensor raised NumPy's raw TypeError: it is read as float32 (every bfloat16 value
    exactly); a DataFrame whose one column holds each row's scores reads as its Series does."""
    from conftest import needs

    import calib

    torch, pandas = needs("torch"), needs("pandas")
    logits = torch.tensor([[0.5, -1.25], [2.0, 0.75]], dtype=torch.bfloat16)
    assert calib.evaluate(logits, np.array([0, 1]), metrics="accuracy").values["accuracy"] == 0.5
    rows = [np.array([0.2, 0.8]), np.array([0.6, 0.4])]
    frame = calib.evaluate(pandas.DataFrame({"probs": rows}), np.array([1, 0]), metrics="nll").values["nll"]
    assert frame == calib.evaluate(pandas.Series(rows), np.array([1, 0]), metrics="nll").values["nll"]


def test_apply_help_lists_each_output_format_once(run):
    """The writers are a table by suffix (.arrow and .feather are one format, .csv and .tsv one):
    their list, as --out's help gives it, names each suffix once."""
    import re

    from calib.io.formats import listed
    from calib.io.writers import WRITERS

    suffixes = re.findall(r"\.[a-z]+", listed(WRITERS.values()))
    assert sorted(suffixes) == sorted(WRITERS) and len(suffixes) == len(set(suffixes))
    code, out, _ = run("apply", "--help")
    assert code == 0 and ".arrow, .feather, .safetensors" in re.sub(r"[\s│]+", " ", out)
