"""Where the tasks of a directory of shards run (one task per file): in this process, or on a Dask,
Spark or Ray cluster (a local one by default). Every engine runs the same function on the same
arguments, so the outputs and numbers are the same whichever ran them (docs/engines.md)."""

from __future__ import annotations

import contextlib
import logging

from .core import extras
from .errors import InputError, UsageError

ENGINES = ("local", "dask", "spark", "ray")


def check_engine(engine: str) -> None:
    """Refuse an engine that is not one of :data:`ENGINES`, before any shard is read or written."""
    if engine not in ENGINES:
        raise UsageError(
            f"the engine must be one of {', '.join(ENGINES)}; got {engine!r}", cli_hint="--engine local|dask|spark|ray"
        )


@contextlib.contextmanager
def task_runner(engine: str, address: str | None = None):
    """A runner of tasks on ``engine`` (at ``address``: a Dask scheduler, a Spark master URL or a
    Ray cluster; None: a local cluster, started here and stopped after the block, or the Spark or
    Ray session already running in this process): ``run(function, calls, on_result=None)`` returns
    [function(*call) for call in calls], each call one task, and calls ``on_result(i, result)``
    here as task i's result arrives (on Spark: once all of them have finished)."""
    check_engine(engine)
    if engine == "local":
        if address is not None:
            raise UsageError("the local engine runs in this process and takes no cluster address")
        yield _runner(lambda function, calls, arrived: [arrived(i, function(*call)) for i, call in enumerate(calls)])
    elif engine == "dask":
        distributed = extras.require("dask.distributed")
        with _dask_client(distributed, address) as client:

            def on_dask(function, calls, arrived):
                futures = {client.submit(function, *call, pure=False): i for i, call in enumerate(calls)}
                for future in distributed.as_completed(futures):
                    arrived(futures[future], future.result())

            yield _runner(on_dask)
    elif engine == "spark":
        from .spark import session, worker_errors

        with session(address) as spark:

            def on_spark(function, calls, arrived):
                tasks = spark.sparkContext.parallelize(list(enumerate(calls)), max(1, len(calls)))
                with worker_errors():
                    for i, result in tasks.map(lambda task: (task[0], function(*task[1]))).collect():
                        arrived(i, result)

            yield _runner(on_spark)
    else:
        from .ray import started, worker_errors

        with started(address) as ray:

            def on_ray(function, calls, arrived):
                remote = ray.remote(num_cpus=1)(function)
                pending = {remote.remote(*call): i for i, call in enumerate(calls)}
                with worker_errors():
                    while pending:
                        done, _ = ray.wait(list(pending), num_returns=1)
                        arrived(pending.pop(done[0]), ray.get(done[0]))

            yield _runner(on_ray)


def _runner(submit):
    """run(function, calls, on_result=None) over ``submit(function, calls, arrived)``."""

    def run(function, calls: list[tuple], on_result=None) -> list:
        results: list = [None] * len(calls)

        def arrived(i: int, result) -> None:
            results[i] = result
            if on_result is not None:
                on_result(i, result)

        submit(function, calls, arrived)
        return results

    return run


@contextlib.contextmanager
def _dask_client(distributed, scheduler: str | None):
    """A client of the scheduler at ``scheduler``, or of a local cluster of two single-threaded
    worker processes on loopback (closed after), its logs quiet."""
    cluster = None
    if scheduler is None:
        cluster = distributed.LocalCluster(  # a failed task is raised here, not logged by its worker too
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=logging.CRITICAL,
        )
    try:
        try:
            client = distributed.Client(cluster if cluster is not None else scheduler)
        except OSError as exc:
            raise InputError(f"cannot reach the Dask scheduler {scheduler}: {exc}") from None
        with client:
            yield client
    finally:
        if cluster is not None:
            cluster.close()
