"""How calib runs, pinned: the kernel path chosen by CALIB_KERNELS, the worker count chosen by
CALIB_THREADS, chunks of rows of the documented size, the thread pool's order and bound on pending
work, and SelectTau's categories when a row's mass meets its target exactly at an end of the
temperature range."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from calib.calibrators.select_tau import tempered_distribution
from calib.core import kernels
from calib.core.kernels import FEASIBLE, TOO_LARGE, UNREACHABLE
from calib.core.numerics import CHUNK_ELEMENTS, map_in_order, row_chunks, worker_count


@pytest.mark.parametrize(
    "setting, backend",
    [("numpy", "numpy"), (" NumPy ", "numpy"), ("", "auto"), ("auto", "auto")],
)
def test_calib_kernels_chooses_the_path(setting, backend):
    """CALIB_KERNELS=numpy always takes the NumPy path; unset, empty or auto the compiled one
    where it is built."""
    env = {**os.environ, "CALIB_KERNELS": setting}
    done = subprocess.run(
        [sys.executable, "-c", "import calib.core.kernels as k; print(k.BACKEND, k._compiled is None)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    chosen, no_compiled = done.stdout.split()
    if backend == "numpy":
        assert (chosen, no_compiled) == ("numpy", "True")
    else:
        assert chosen in ("numpy", "compiled") and (chosen == "numpy") == (no_compiled == "True")


def test_a_compiled_log_is_never_called_on_the_numpy_path(monkeypatch):
    """With no compiled module the log is NumPy's, whatever the CPU flag says."""
    monkeypatch.setattr(kernels, "_compiled", None)
    monkeypatch.setattr(kernels, "_COMPILED_LOG", True)
    out = np.empty(3)
    kernels.log(np.array([1.0, np.e, 0.0]), 0.0, 0.0, out)
    assert out[0] == 0.0 and out[1] == pytest.approx(1.0, abs=1e-15) and out[2] == -np.inf


def test_chunks_hold_2_to_the_20_values():
    """2**20 values a chunk (8 MiB of float64): 2**20 rows of one column are one chunk, one more
    row makes two; 1,000 columns give 1,048 rows a chunk; a row wider than a chunk is a chunk."""
    assert CHUNK_ELEMENTS == 2**20
    assert list(row_chunks(2**20, 1)) == [slice(0, 2**20)]
    assert list(row_chunks(2**20 + 1, 1)) == [slice(0, 2**20), slice(2**20, 2**20 + 1)]
    assert next(row_chunks(5000, 1000)) == slice(0, 1048)
    assert list(row_chunks(3, 2**21)) == [slice(0, 1), slice(1, 2), slice(2, 3)]
    assert list(row_chunks(3, 0, chunk_elements=2)) == [slice(0, 2), slice(2, 3)]


def test_calib_threads_sets_the_worker_count(monkeypatch):
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    for setting, expected in (("3", 3), ("1", 1), (" 2 ", 2), ("0", cpus), ("-2", cpus), ("two", cpus), ("", cpus)):
        monkeypatch.setenv("CALIB_THREADS", setting)
        assert worker_count() == expected, setting
    monkeypatch.delenv("CALIB_THREADS")
    assert worker_count() == cpus


def test_one_worker_runs_in_the_calling_thread_and_more_on_a_pool():
    names = lambda item: threading.current_thread().name  # noqa: E731
    assert set(map_in_order(names, range(4), values=0, workers=1)) == {threading.current_thread().name}
    assert set(map_in_order(names, range(4), values=0, workers=0)) == {threading.current_thread().name}
    on_pool = list(map_in_order(names, range(8), values=0, workers=2))
    assert all(name.startswith("calib") for name in on_pool)


def test_at_most_twice_the_workers_are_pending_and_the_order_is_kept():
    """With 2 workers, 4 items are submitted before the first result is taken."""
    taken = []

    def items():
        for i in range(10):
            taken.append(i)
            yield i

    results = map_in_order(lambda i: i * i, items(), values=0, workers=2)
    assert next(results) == 0 and len(taken) == 4
    assert list(results) == [i * i for i in range(1, 10)]


def test_selecttau_at_a_mass_equal_to_its_target_at_either_end():
    """Row 0: every score equal, 2 of 4 classes in the set: the mass is 1/2 at every temperature;
    a target of exactly 1/2 is already met at the largest temperature: "set too large" (mass >= target).
    Row 1: scores (1, 1, 0, 0), set {0}: the mass rises to exactly 1/2 as tau -> 0 (the two top
    scores share it); a target of 1/2 is reached there, so the row is feasible, not unreachable
    (unreachable means a mass below the target even at the smallest temperature)."""
    scores = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    in_set = np.array([[True, True, False, False], [True, False, False, False]])
    dist, tau, category = tempered_distribution(scores, in_set, np.array([0.5, 0.5]))
    assert category.tolist() == [TOO_LARGE, FEASIBLE]
    assert (dist[1] * in_set[1]).sum() >= 0.5
    _, _, category = tempered_distribution(scores[1:], in_set[1:], np.array([0.5 + 1e-6]))
    assert category.tolist() == [UNREACHABLE]


def test_small_torch_models_train_on_one_thread_and_restore_the_setting():
    """Calibrators' MLPs and the synthetic classifier run torch on one thread (faster for small
    models, and the same bits on any machine); the caller's setting is back afterwards."""
    from conftest import needs

    torch = needs("torch")
    from calib.calibrators import mlp

    seen = []

    def loss(out, target):
        seen.append(torch.get_num_threads())
        return ((out[:, 0] - target) ** 2).mean()

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        rng = np.random.default_rng(0)
        mlp.train(rng.random((20, 2)), rng.random(20), (4, 1), loss, prefix="t", steps=3, lr=1e-3, batch_size=5, seed=0)
        assert set(seen) == {1} and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the resident size from /proc")
def test_released_rows_of_a_mapped_file_leave_the_process_and_read_back_the_same(tmp_path):
    """64 MiB mapped and read: the process holds them; released, it does not, and a second read
    gives the same values. A plain array is left alone."""
    from calib.core.numerics import release_rows

    path = tmp_path / "a.npy"
    np.save(path, np.arange(8 * 2**20, dtype=np.float64).reshape(2**16, 128))
    mapped = np.load(path, mmap_mode="r")
    before = _rss_mib()
    total = float(mapped.sum())
    assert _rss_mib() - before > 48
    for rows in row_chunks(*mapped.shape):
        release_rows(mapped, rows)
    assert _rss_mib() - before < 16
    assert float(mapped.sum()) == total
    plain = np.ones((4, 4))
    release_rows(plain, slice(0, 2))
    assert plain.sum() == 16.0


@pytest.mark.slow
def test_evaluate_holds_less_than_the_input_at_its_peak(tmp_path):
    """calib evaluate --no-vece on a 200 MB .npy, from the file and from stdin: peak resident
    memory at most 1.3x the file (and 1.5x from stdin), the input's own pages counted."""
    rng = np.random.default_rng(0)
    scores, labels = tmp_path / "z.npy", tmp_path / "y.npy"
    np.save(scores, (rng.normal(size=(50_000, 1_000)) * 3).astype(np.float32))
    np.save(labels, rng.integers(0, 1_000, 50_000))
    size = scores.stat().st_size / 2**20
    wrapper = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, "
        "stdin=open(sys.argv[-1]) if sys.argv[-2] == '--stdin' else None)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n"
    )
    command = [sys.executable, "-m", "calib", "evaluate", "--no-vece", "--labels", str(labels)]
    from_file = subprocess.run([sys.executable, "-c", wrapper, *command, str(scores)], capture_output=True, text=True, check=True)
    assert float(from_file.stdout) <= 1.3 * size
    piped = [sys.executable, "-c", wrapper.replace("sys.argv[1:]", "sys.argv[1:-2]"), *command, "-", "--stdin", str(scores)]
    from_stdin = subprocess.run(piped, capture_output=True, text=True, check=True)
    assert float(from_stdin.stdout) <= 1.5 * size


def test_two_edges_make_one_closed_bin():
    """Edges (0, 1): one bin [0, 1], closed at 1, so 1 and anything above land in bin 0."""
    from calib.core.numerics import edge_index

    assert edge_index(np.array([0.0, 0.5, 1.0, 1.5]), np.array([0.0, 1.0])).tolist() == [0, 0, 0, 0]


def test_worker_count_is_the_cpus_this_process_may_use(monkeypatch):
    """CALIB_THREADS unset: the CPUs of the process's affinity mask, else os.cpu_count(), at least 1."""
    monkeypatch.delenv("CALIB_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2} if pid == 0 else {0}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 5)
    assert worker_count() == 3
    monkeypatch.delattr(os, "sched_getaffinity")
    assert worker_count() == 5
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert worker_count() == 1


def test_calib_kernels_compiled_without_the_extension_is_one_clear_error(monkeypatch):
    """Where the C extension is missing, auto falls back to NumPy and compiled says how to build it."""
    import importlib

    import calib

    monkeypatch.setitem(sys.modules, "calib._kernels", None)  # an import of it now fails
    monkeypatch.delattr(calib, "_kernels", raising=False)
    try:
        monkeypatch.setenv("CALIB_KERNELS", "compiled")
        with pytest.raises(ImportError, match="not built"):
            importlib.reload(kernels)
        monkeypatch.setenv("CALIB_KERNELS", "auto")
        assert importlib.reload(kernels).BACKEND == "numpy"
    finally:
        monkeypatch.undo()
        importlib.reload(kernels)


def test_log_floored_has_no_floor_unless_given_one():
    from calib.core.numerics import log_floored

    assert log_floored(np.array([0.0, 1.0])).tolist() == [-np.inf, 0.0]
    assert log_floored(np.array([0.0, 1.0]), floor=1e-12).tolist() == [np.log(1e-12), 0.0]


def test_values_below_the_first_edge_are_in_the_first_bin():
    from calib.core.numerics import edge_index

    assert edge_index(np.array([-0.5, 0.25]), np.array([0.0, 0.5, 1.0])).tolist() == [0, 0]


def test_release_leaves_index_arrays_and_strided_views_alone(tmp_path):
    from calib.core.numerics import release_rows

    path = tmp_path / "a.npy"
    np.save(path, np.arange(4096.0).reshape(512, 8))
    mapped = np.load(path, mmap_mode="r")
    release_rows(mapped, np.array([0, 1]))
    release_rows(mapped[:, ::2], slice(0, 256))
    assert float(mapped.sum()) == float(np.arange(4096.0).sum())
