"""calib on Ray Data: apply a bundle to a dataset, and evaluate one into the report a local run of the
same rows gives (docs/engines.md).

:func:`apply` adds the calibrated column block by block (``map_batches`` on Arrow tables), the
bundle shipped as bytes and loaded once per worker. :func:`evaluate` turns every block into one
metric state (the bytes of a state file) and adds them up on the driver: metrics, groups, gates and,
keyed by a row id column, bootstrap intervals, whatever the blocks. :func:`started` starts the local
Ray calib needs when none is running: no dashboard, workers' logs kept off the terminal.
"""

from __future__ import annotations

import contextlib
import logging

from .core import extras
from .errors import UsageError, error_from_worker
from .evaluation.request import EvaluationRequest
from .table_partitions import (
    SAMPLE_ROWS,
    STATE_COLUMN,
    TableColumns,
    applied_part,
    apply_plan,
    make_plan,
    merged_report,
    part_state,
)

#: CPUs of the local Ray calib starts when none is running and no address is given.
LOCAL_CPUS = 2


def _ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise extras.MissingExtra("the ray engine needs ray[data]: pip install 'calib-cli[ray]'") from None
    return ray


@contextlib.contextmanager
def started(address: str | None = None):
    """The ray module connected: to the Ray already started in this process (kept after the
    block), to the cluster at ``address``, or to a local Ray of :data:`LOCAL_CPUS` CPUs that calib
    starts and shuts down after the block, with no dashboard and its workers' logs off the terminal."""
    ray = _ray()
    if ray.is_initialized():
        if address is not None:
            raise UsageError(f"Ray is already started in this process; it is used as it is, not the cluster at {address}")
        yield ray
        return
    quiet()
    from .core.allocator import worker_environment

    # the local workers get the command's allocator settings: flat memory over many tasks
    local = {} if address is not None else {"num_cpus": LOCAL_CPUS, "runtime_env": {"env_vars": worker_environment()}}
    try:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.ERROR,
            configure_logging=True,
            **local,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UsageError(f"Ray did not start{'' if address is None else ' at ' + address}: {str(exc).splitlines()[0]}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def quiet() -> None:
    """Ray Data's progress bars and log lines off (Ray's own errors still shown)."""
    ray = _ray()
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    logging.getLogger("ray").setLevel(logging.ERROR)
    logging.getLogger("ray.data").setLevel(logging.CRITICAL)  # a failed task's error is raised as one line (worker_errors)


@contextlib.contextmanager
def worker_errors():
    """A calib error raised in a task raised here as itself, one line, instead of the traceback Ray
    wraps it in."""
    try:
        yield
    except Exception as exc:  # a remote task's calib error arrives as a subclass of it, with the traceback as its text
        error = error_from_worker(str(exc))
        if error is None:
            raise
        raise error from None


def _sample(ds):
    """An Arrow table of the first :data:`SAMPLE_ROWS` rows."""
    with worker_errors():
        return ds.take_batch(SAMPLE_ROWS, batch_format="pyarrow")


def evaluate(
    ds,
    request: EvaluationRequest | None = None,
    *,
    bundle: str | None = None,
    scores=None,
    score_prefix: str | None = None,
    labels: str | None = None,
    group_by: str | None = None,
    row_id: str | None = None,
    kind: str = "auto",
    description: str = "Dataset",
):
    """The report of the rows of the Ray dataset ``ds`` (after ``bundle`` when given), as
    ``request`` asks: one metric state per block, merged on the driver, the gates checked; the same
    report as :func:`calib.evaluate` of all the rows (streamed metrics only). The columns as
    :func:`calib.spark.evaluate` takes them; ``row_id`` keys the bootstrap replicates."""
    import pyarrow as pa

    request = request or EvaluationRequest()
    quiet()
    columns = TableColumns(scores, score_prefix, labels, group_by, row_id)
    plan = make_plan(ds.schema().names, _sample(ds), description, columns, bundle=bundle, kind=kind, request=request)

    def states(table: pa.Table) -> pa.Table:
        return pa.table({STATE_COLUMN: pa.array([part_state(table, plan, f"{description} block")], pa.binary())})

    with worker_errors():
        parts = ds.map_batches(states, batch_format="pyarrow", batch_size=None, zero_copy_batch=True).take_all()
    return merged_report([part[STATE_COLUMN] for part in parts], request, description, plan)


def apply(
    ds,
    bundle: str,
    *,
    scores=None,
    score_prefix: str | None = None,
    what: str = "probs",
    kind: str = "auto",
    description: str = "Dataset",
):
    """``ds`` with ``bundle`` applied, lazily: its columns and the calibrated column of
    :func:`calib.spark.apply` (probs, log_probs, or set); the bundle is verified and checked against
    ``ds``'s first rows here, before any block is read."""
    quiet()
    plan = apply_plan(ds.schema().names, _sample(ds), description, bundle, TableColumns(scores, score_prefix), what, kind)
    return ds.map_batches(lambda table: applied_part(table, plan, f"{description} block"), batch_format="pyarrow")
