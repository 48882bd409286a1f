"""Hostile inputs and crash safety (issue: robustness)."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import SAMPLE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calib.errors import CalibError
from calib.io import read_predictions


def _real_npy_bytes(tmp_path_factory):
    data = np.load(SAMPLE / "cifar10_val.npz")
    path = tmp_path_factory.mktemp("src") / "v.npy"
    np.save(path, data["logits"][:200])
    return path.read_bytes()


@pytest.fixture(scope="module")
def npy_bytes(tmp_path_factory):
    return _real_npy_bytes(tmp_path_factory)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cut=st.integers(min_value=0, max_value=8128), flips=st.lists(st.tuples(st.integers(0, 8127), st.integers(0, 255)), max_size=6)
)
def test_truncated_or_mutated_npy_never_crashes(tmp_path, npy_bytes, cut, flips):
    """Any prefix of a real .npy, with some bytes overwritten, reads cleanly or fails with one CalibError."""
    data = bytearray(npy_bytes[:cut] if cut < len(npy_bytes) else npy_bytes)
    for position, value in flips:
        if position < len(data):
            data[position] = value
    path = tmp_path / "fuzz.npy"
    path.write_bytes(bytes(data))
    try:
        preds = read_predictions(str(path), input_kind="auto")
    except CalibError as exc:
        assert str(exc).startswith(str(path))
        return
    logits = preds.logits()  # a file that reads must give finite, usable scores
    assert np.isfinite(logits).all() and logits.shape[0] == preds.n


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    scores=st.lists(
        st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=1, max_size=4), min_size=1, max_size=5
    )
)
def test_arbitrary_small_matrices(tmp_path, scores):
    width = len(scores[0])
    rows = [r for r in scores if len(r) == width]
    array = np.array(rows, dtype=np.float32)
    path = tmp_path / "m.npy"
    np.save(path, array)
    try:
        preds = read_predictions(str(path))
    except CalibError:
        return
    assert np.isfinite(preds.logits()).all()


@pytest.mark.slow
def test_sigkill_mid_write_leaves_the_old_file_or_none(tmp_path):
    """`apply` writes to a temporary file and renames it: killing it at any moment never leaves a
    truncated output."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(150_000, 100)).astype(np.float32)
    np.save(tmp_path / "big.npy", logits)
    np.save(tmp_path / "labels.npy", rng.integers(0, 100, 150_000))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "calib",
            "fit",
            str(tmp_path / "big.npy"),
            "--labels",
            str(tmp_path / "labels.npy"),
            "--method",
            "ts",
            "--out",
            str(tmp_path / "b"),
        ],
        check=True,
        capture_output=True,
    )
    out = tmp_path / "out.npy"
    old = np.arange(6.0).reshape(2, 3)
    np.save(out, old)
    outcomes = set()
    for delay in (0.2, 0.5, 1.0, 1.5, 2.0, 3.0):  # 0.2 s: before the write even on a fast machine
        process = subprocess.Popen(
            [sys.executable, "-m", "calib", "apply", str(tmp_path / "b"), str(tmp_path / "big.npy"), "--out", str(out)],
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        result = np.load(out)
        if result.shape == old.shape:
            assert np.array_equal(result, old)
            outcomes.add("old")
        else:
            assert result.shape == (150_000, 100) and np.isfinite(result).all()
            outcomes.add("new")
            np.save(out, old)
    assert "old" in outcomes  # at least one kill landed mid-run
    leftovers = [name for name in os.listdir(tmp_path) if name.startswith(".out.npy.")]
    for name in leftovers:  # a killed writer may leave its temporary file, never the target
        assert name.endswith(".tmp")


@pytest.fixture(scope="module")
def real_files(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = np.load(SAMPLE / "cifar10_val.npz")
    folder = tmp_path_factory.mktemp("real")
    np.savez(folder / "v.npz", logits=data["logits"][:100], labels=data["labels"][:100])
    fixed = pa.FixedSizeListArray.from_arrays(pa.array(data["logits"][:100].reshape(-1)), 10)
    pq.write_table(pa.table({"logits": fixed, "label": data["labels"][:100]}), folder / "v.parquet")
    return {suffix: (folder / f"v{suffix}").read_bytes() for suffix in (".npz", ".parquet")}


@pytest.mark.parametrize("suffix", [".npz", ".parquet"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fraction=st.floats(0.0, 1.0), flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 255)), max_size=8))
def test_truncated_or_mutated_archives_never_crash(tmp_path, real_files, suffix, fraction, flips):
    original = real_files[suffix]
    data = bytearray(original[: int(fraction * len(original))] if fraction < 0.999 else original)
    for position, value in flips:
        if data:
            data[int(position * (len(data) - 1))] = value
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(bytes(data))
    try:
        preds = read_predictions(str(path))
    except CalibError as exc:
        assert str(exc).startswith(str(path))
        return
    assert np.isfinite(preds.logits()).all()


def test_special_files_are_written_in_place_never_replaced(tmp_path, run):
    """--json /dev/stdout or a named pipe must receive the bytes, not be renamed over (as root that
    would replace the device itself)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    import threading

    received = []
    reader = threading.Thread(target=lambda: received.append(open(fifo, "rb").read()))
    reader.start()
    code, _, err = run("evaluate", "--no-vece", SAMPLE / "cifar10_test.npz", "--metrics", "ece", "--json", fifo)
    reader.join(timeout=30)
    assert code == 0, err
    assert b'"ece"' in received[0]
    assert not os.path.isfile(fifo)  # still a pipe


FAST_METHODS = [
    "ts",
    "cmce-ts",
    "mr",
    "conformal-ts",
    "ats-gq",
    "ats-mgq",
    "platt",
    "quadratic",
    "beta",
    "isotonic",
    "hist",
    "dirichlet",
    "svs",
    "sms",
    "venn-abers",
]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_extreme_logits_and_narrow_floats_stay_finite(tmp_path, run, dtype, scale):
    """|z| up to 3e4 (float16 included): every fast calibrator fits and gives finite, normalised
    probabilities, and evaluate reports no NaN."""
    from calib import calibrator_class

    rng = np.random.default_rng(0)
    logits = (rng.normal(size=(400, 5)) * scale).astype(dtype)
    labels = rng.integers(0, 5, 400)
    z = logits.astype(np.float64)
    assert np.isfinite(z).all()
    for method in FAST_METHODS:
        cls = calibrator_class(method)
        calibrator = cls(cls.parse_options({})).fit(z, labels, seed=0)
        probs = calibrator.predict_proba(z)
        assert np.isfinite(probs).all() and np.allclose(probs.sum(1), 1.0), method
    np.save(tmp_path / "z.npy", logits)
    np.save(tmp_path / "y.npy", labels)
    code, out, err = run("evaluate", tmp_path / "z.npy", "--labels", tmp_path / "y.npy", "--no-vece", "--json", "-")
    assert code == 0, err
    values = [entry["value"] for entry in json.loads(out)["metrics"].values()]
    assert all(v is None or np.isfinite(v) for v in values)


@pytest.mark.parametrize("method", ["ts", "platt", "isotonic", "mr", "venn-abers", "dirichlet", "svs"])
def test_single_class_labels_and_two_classes(method):
    from calib import calibrator_class

    rng = np.random.default_rng(1)
    cls = calibrator_class(method)
    for logits, labels in (
        (rng.normal(size=(200, 4)), np.zeros(200, dtype=int)),
        (rng.normal(size=(200, 2)), rng.integers(0, 2, 200)),
    ):
        probs = cls(cls.parse_options({})).fit(logits, labels, seed=0).predict_proba(logits)
        assert np.isfinite(probs).all() and np.allclose(probs.sum(1), 1.0)


def peak_rss_mib(calib_args: list[str]) -> float:
    """Peak resident memory (MiB) of ``python -m calib *calib_args`` run on one thread.

    One thread, because with several the chunks in flight at the peak depend on timing (the pool
    keeps up to 2 per thread plus the one being consumed): on this suite's two tests that moved a
    difference of two peaks by up to 90 MB between runs, against about 10 MB on one thread. The
    pool's window is bounded whatever the row count; what these tests measure is the rest."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)"
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapper, sys.executable, "-m", "calib", *calib_args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CALIB_THREADS": "1"},
    )
    return float(done.stdout)


@pytest.mark.slow
def test_evaluate_memory_grows_no_faster_than_the_mapped_input(tmp_path):
    """Peak RSS of `calib evaluate` at K = 10,000 for 2,000 and 8,000 rows: the extra rows cost at
    most 1.25x their own bytes (the memory-mapped pages themselves), so everything else is a fixed
    chunk workspace. benchmarks/evaluate_speed measures the full 20,000 x 10,000 figure."""
    rng = np.random.default_rng(0)
    peaks, sizes = [], []
    for rows in (2000, 8000):  # growth of 229 MB
        scores, labels = tmp_path / f"z{rows}.npy", tmp_path / f"y{rows}.npy"
        np.save(scores, (rng.normal(size=(rows, 10_000)) * 3).astype(np.float32))
        np.save(labels, rng.integers(0, 10_000, rows))
        peaks.append(
            peak_rss_mib(["evaluate", str(scores), "--labels", str(labels), "--no-vece", "--json", str(tmp_path / "r.json")])
        )
        sizes.append(os.path.getsize(scores) / 2**20)
    assert peaks[1] - peaks[0] <= 1.25 * (sizes[1] - sizes[0]), (peaks, sizes)


@pytest.mark.slow
def test_parquet_is_streamed_by_row_groups(tmp_path, run):
    """A parquet input is decoded a row group at a time: 4x the rows cost under half their bytes in
    peak memory (reading the table whole costs at least twice: arrow buffers plus the matrix), and
    the metrics equal those of the same matrix as .npy."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    peaks, sizes = [], []
    for rows in (4000, 16000):  # 4 and 16 row groups of 1,000 rows
        z = (rng.normal(size=(rows, 2000)) * 3).astype(np.float32)
        labels = rng.integers(0, 2000, rows)
        path = tmp_path / f"p{rows}.parquet"
        table = pa.table({"logits": pa.FixedSizeListArray.from_arrays(pa.array(z.ravel()), 2000), "label": labels})
        pq.write_table(table, path, row_group_size=1000)
        peaks.append(peak_rss_mib(["evaluate", str(path), "--no-vece", "--json", str(tmp_path / "r.json")]))
        sizes.append(z.nbytes / 2**20)
    assert peaks[1] - peaks[0] <= 0.5 * (sizes[1] - sizes[0]), (peaks, sizes)  # read whole: >= 2x
    np.save(tmp_path / "z.npy", z)
    np.save(tmp_path / "y.npy", labels)
    from_parquet = json.loads((tmp_path / "r.json").read_text())["metrics"]
    code, out, _ = run("evaluate", tmp_path / "z.npy", "--labels", tmp_path / "y.npy", "--no-vece", "--json", "-")
    assert code == 0
    for key, entry in json.loads(out)["metrics"].items():
        assert from_parquet[key]["value"] == entry["value"], key


def test_map_in_order_keeps_order_for_any_worker_count():
    from calib.core.numerics import map_in_order

    items = list(range(37))
    for workers in (1, 2, 5):
        assert list(map_in_order(lambda i: i * i, items, values=10**9, workers=workers)) == [i * i for i in items]


@pytest.mark.parametrize(
    "workers, values, pending",
    [
        (1, 0, 1),  # one worker draws as it goes
        (2, 0, 4),  # 64 MiB: two chunks of 32 MiB computed at once, two pending each
        (16, 50_000 * 1_000, 4),  # 0.3 x 4 bytes x 5e7 = 60 MB < 64 MiB: still two
        (16, 83_886_079, 4),  # 1.2 bytes a value: just under 3 x 32 MiB
        (16, 83_886_080, 6),  # exactly 3 x 32 MiB = 100,663,296 bytes: three
        (64, 10**9, 70),  # 1.2 GB: 35 threads
        (4, 10**9, 8),  # never more than the workers
    ],
)
def test_map_in_order_keeps_one_memory_budget_whatever_the_workers(workers, values, pending):
    """The bound on memory whatever the number of chunks or workers: threads compute chunks at once
    within a budget of 64 MiB or 30% of the values as float32, 32 MiB a chunk; when the consumer
    takes result i, items i to i + pending - 1 have been drawn, pending = two per thread (so none
    waits)."""
    from calib.core.numerics import map_in_order

    drawn = []

    def items():
        for i in range(200):
            drawn.append(i)
            yield i

    ahead = [
        len(drawn) - position for position, _ in enumerate(map_in_order(lambda i: i, items(), values=values, workers=workers))
    ]
    assert max(ahead) == pending and ahead[-1] == 1


def test_conformal_apply_is_the_same_bytes_on_one_thread_and_many(tmp_path, monkeypatch):
    from calib.calibrators.ats import ATSGlobal
    from calib.core.numerics import CHUNK_ELEMENTS

    rng = np.random.default_rng(5)
    logits = 3 * rng.normal(size=(3 * CHUNK_ELEMENTS // 40 + 7, 40))
    labels = rng.integers(0, 40, len(logits))
    fitted = ATSGlobal(ATSGlobal.parse_options({})).fit(logits[:500], labels[:500])
    from calib.io.predictions import Predictions
    from calib.pipeline import apply_calibrator

    preds = Predictions("x", logits, "logits", "", labels, "")
    outputs = []
    for threads in ("1", "3"):
        monkeypatch.setenv("CALIB_THREADS", threads)
        outputs.append(apply_calibrator(fitted, preds)[0])
    assert outputs[0].tobytes() == outputs[1].tobytes()


def test_parquet_row_groups_read_from_several_threads_give_the_right_rows(tmp_path, monkeypatch):
    """Chunks are decoded on worker threads: each must get its own row groups back."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(1)
    z = (rng.normal(size=(6000, 300)) * 3).astype(np.float32)
    path = tmp_path / "many_groups.parquet"
    pq.write_table(
        pa.table({"logits": pa.FixedSizeListArray.from_arrays(pa.array(z.ravel()), 300), "label": rng.integers(0, 300, 6000)}),
        path,
        row_group_size=700,
    )
    monkeypatch.setenv("CALIB_THREADS", "4")
    preds = read_predictions(str(path))
    from calib.core.numerics import map_in_order

    chunks = list(
        map_in_order(
            lambda rows: (rows, preds.logits(rows)), [slice(s, s + 450) for s in range(0, 6000, 450)], values=preds.n * preds.k
        )
    )
    for rows, block in chunks:
        assert np.array_equal(block, z[rows].astype(np.float64))


def test_threads_waiting_for_the_same_parquet_row_group_decode_it_once(tmp_path, monkeypatch):
    """Two threads reading either side of a row group boundary both ask for the next group: the one
    that waited for the lock takes the group the other decoded (before, each decoded it, and a pass
    over the rows on two threads decoded most groups twice)."""
    import threading

    import pyarrow as pa
    import pyarrow.parquet as pq

    from calib.io.formats.parquet import ParquetScores

    rng = np.random.default_rng(2)
    z = (rng.normal(size=(3000, 50)) * 3).astype(np.float32)
    path = tmp_path / "groups.parquet"
    table = pa.table({"logits": pa.FixedSizeListArray.from_arrays(pa.array(z.ravel()), 50), "label": np.zeros(3000, np.int64)})
    pq.write_table(table, path, row_group_size=1000)
    decoded = []
    original = ParquetScores._decode_in_batches
    monkeypatch.setattr(ParquetScores, "_decode_in_batches", lambda self, index: decoded.append(index) or original(self, index))
    scores = ParquetScores(pq.ParquetFile(path), ["logits"], wide=False, path=str(path))
    lock, arrived = scores._lock, threading.Condition()
    waiting = []

    class CountedLock:
        """The reader's lock, counting the threads that came to take it."""

        def __enter__(self):
            with arrived:
                waiting.append(threading.current_thread())
                arrived.notify_all()
            return lock.__enter__()

        def __exit__(self, *exc):
            return lock.__exit__(*exc)

    scores._lock = CountedLock()
    blocks = {}
    readers = [
        threading.Thread(target=lambda start=start: blocks.update({start: scores[start : start + 200]})) for start in (900, 1100)
    ]
    with lock:  # both readers miss the cache and wait here
        for reader in readers:
            reader.start()
        with arrived:
            arrived.wait_for(lambda: len(waiting) == 2)
    for reader in readers:
        reader.join()
    assert decoded == [0, 1], decoded  # group 0 when opened, group 1 once
    for start, block in blocks.items():
        assert np.array_equal(block, z[start : start + 200])


def test_metrics_and_vece_are_the_same_bytes_for_any_thread_count(monkeypatch):
    """The streamed metrics (overall and per group) are filled per chunk on worker threads and the
    V-ECE's CatBoost fits use as many of CatBoost's own threads (one fit at a time): the values are
    the same, to the bit, with one thread or three."""
    import calib
    from calib.core.numerics import CHUNK_ELEMENTS

    rng = np.random.default_rng(7)
    logits = 3 * rng.normal(size=(3 * CHUNK_ELEMENTS // 30 + 11, 30))
    labels = rng.integers(0, 30, len(logits))
    values = []
    for threads in ("1", "3"):
        monkeypatch.setenv("CALIB_THREADS", threads)
        streamed = calib.evaluate(logits, labels).values
        grouped = calib.evaluate(logits, labels, groups=labels % 7).group_values
        vece = calib.evaluate(
            logits[:1500], labels[:1500], request=calib.EvaluationRequest.of(metrics=["vece_l1", "vece_over"], vece=True)
        ).values
        values.append({**streamed, **vece, "groups": grouped})
    assert values[0] == values[1]


def test_replicates_are_the_same_bytes_for_any_thread_count_and_a_failed_chunk_stops_the_pass(monkeypatch):
    """With replicates each worker adds its chunk to the per-cluster sums in the chunk's turn
    (chunks in row order): the report (values, intervals, replicates), with a calibrator's two sides
    and without, and per group, is the same to the bit with one thread or three, over many chunks, where the
    classwise bins of 30 classes are added to in place. A chunk that fails stops the pass with its
    own error; the chunks after it, waiting for its turn, do not hang."""
    import threading

    import calib
    import calib.io.predictions as predictions_module
    from calib.core import numerics
    from calib.evaluation import streaming

    starts = set()

    def chunks(n, k):  # 97 rows a chunk: 31 chunks, the last ragged
        for rows in numerics.row_chunks(n, k, 30 * 97):
            starts.add(rows.start)
            yield rows

    monkeypatch.setattr(predictions_module, "row_chunks", chunks)
    rng = np.random.default_rng(11)
    logits = 3 * rng.normal(size=(3000, 30))
    labels = rng.integers(0, 30, len(logits))
    fitted = calib.calibrator("ts").fit(logits[:500], labels[:500])
    request = calib.EvaluationRequest.of(bootstrap=200)
    reports = []
    for threads in ("1", "3"):
        monkeypatch.setenv("CALIB_THREADS", threads)
        reports.append(
            [
                calib.evaluate(logits, labels, request=request, calibrator=with_calibrator).to_dict()
                for with_calibrator in (None, fitted)
            ]
            + [calib.evaluate(logits, labels, request=request, groups=labels % 7).to_dict()]  # per group too
        )
    assert json.dumps(reports[0]) == json.dumps(reports[1])
    assert (
        len(starts) == 31
        and reports[0][0]["bootstrap"]["replicates"] == 200
        and reports[0][0]["metrics"]["cw_ece"]["ci"] is not None
    )

    read = streaming.uncalibrated_batch

    def fails_on_chunk_five(preds, rows):
        if rows.start == 5 * 97:
            raise RuntimeError("chunk 5 could not be read")
        return read(preds, rows)

    monkeypatch.setattr(streaming, "uncalibrated_batch", fails_on_chunk_five)
    raised = []

    def evaluate():
        try:
            calib.evaluate(logits, labels, request=request)
        except RuntimeError as error:
            raised.append(str(error))

    worker = threading.Thread(target=evaluate, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the pass hung after a failed chunk"
    assert raised == ["chunk 5 could not be read"]
