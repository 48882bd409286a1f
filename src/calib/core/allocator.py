"""The C allocator's settings for the `calib` process and the workers it starts (Linux with glibc
only; elsewhere nothing).

calib works a chunk of rows at a time (2^20 values, 8 MiB of float64 per array), and every step
of a chunk allocates and frees arrays of that size on two worker threads. glibc returns such
blocks to the kernel when they are freed (above its mmap threshold, or by trimming the heap's top),
so the next chunk's arrays are faulted in page by page again: on `calib apply` of 40,000 x 1,000
rows that was 0.3 to 0.8 s of system time in a 1.4 to 2.0 s run. Serving blocks up to 32 MiB from
the heap and keeping up to 1 GiB of freed memory for reuse removes nearly all of it (system time
0.1 s) with the same peak memory: the arrays kept are the ones the next chunk needs again.

One heap for all threads: glibc gives each thread that allocates its own heap (arena), and memory
freed in one is kept there, not reused by another thread, so with the thresholds above each worker
kept its own chunk-sized blocks. With one heap, `calib apply` of 40,000 x 1,000 writes the same
bytes in the same time with a peak of 268 instead of 276 MB, and `calib evaluate --no-vece` of a
.npy, .npz or stdin peaks 8-12 MiB lower (docs/benchmarks.md, "Where the time goes").

Only the command line sets this (a process-wide setting is the program's to choose, not a
library's); `calib` as a library leaves the host process's allocator alone. The worker processes of
the local Ray that calib starts get the same settings through glibc's environment variables
(:func:`worker_environment`): with glibc's defaults a worker that ran file after file kept each
thread's heap, and its own memory grew from 307 to 678 MB between 4 and 40 files of 250,000 x 100
logits; with these, 307 and 326 MB, and the run took 52 s instead of 55 s (docs/benchmarks.md,
"Shards on Spark and Ray").
"""

from __future__ import annotations

import ctypes
import sys

#: mallopt's parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
#: Blocks up to this size come from the heap (glibc's largest allowed value on 64-bit systems).
MMAP_THRESHOLD = 32 << 20
#: Freed memory kept by the process for reuse before the heap's top is returned to the kernel.
TRIM_THRESHOLD = 1 << 30
#: Heaps (arenas) the threads share: one, so a block freed by one thread is reused by the next.
ARENA_MAX = 1


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds and its number of heaps (module docstring), before any
    thread allocates; True if they were set."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc only: other C libraries' mallopt differs or is a stub
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_ARENA_MAX, ARENA_MAX))
    return all([bool(mallopt(parameter, value)) for parameter, value in settings])  # a list: every one is set


def worker_environment() -> dict[str, str]:
    """The settings of :func:`keep_freed_memory` as glibc reads them from the environment at a
    process's start, for the worker processes calib starts: {variable: value}."""
    return {
        "MALLOC_ARENA_MAX": str(ARENA_MAX),
        "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD),
        "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD),
    }
