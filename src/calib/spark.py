"""calib on Apache Spark: apply a bundle to a DataFrame, and evaluate one into the report a local run
of the same rows gives (docs/engines.md).

:func:`apply` adds the calibrated probabilities (or log-probabilities, or conformal sets) as a column,
partition by partition through ``mapInArrow`` (Arrow batches, no pandas), the bundle shipped as bytes
and loaded once per worker. :func:`evaluate` turns every partition into one metric state (the bytes
of a state file) and adds them up on the driver: metrics, groups, gates and, keyed by a row id
column, bootstrap intervals, whatever the partitioning. :func:`session` starts the local session calib
needs when none is running: its Python workers on this interpreter, no web UI, quiet logs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import warnings

from .core import extras
from .errors import CalibError, UsageError, error_from_worker
from .evaluation.request import EvaluationRequest
from .table_partitions import (
    OUTPUT_COLUMNS,
    SAMPLE_ROWS,
    STATE_COLUMN,
    TableColumns,
    applied_part,
    apply_plan,
    make_plan,
    merged_report,
    part_state,
)

#: The master of the session calib starts when none is running and no URL is given.
LOCAL_MASTER = "local[2]"
#: The driver's log configuration calib's own session starts with: warnings and errors only.
LOG4J_PROPERTIES = os.path.join(os.path.dirname(__file__), "spark_log4j2.properties")


def _pyspark():
    try:
        import pyspark
    except ImportError:
        raise extras.MissingExtra("the spark engine needs pyspark: pip install 'calib-cli[spark]'") from None
    return pyspark


@contextlib.contextmanager
def session(master: str | None = None):
    """The running Spark session (kept running after the block), or, where none runs, one calib
    starts at ``master`` (default :data:`LOCAL_MASTER`) and stops after the block: its Python
    workers run this interpreter (which has calib and pyarrow; left alone, Spark starts the
    system's ``python3``), no web UI, logs at warnings."""
    _pyspark()
    from pyspark.sql import SparkSession

    running = SparkSession.getActiveSession()
    if running is not None and master is None:
        yield running
        return
    if running is not None:
        raise UsageError(f"a Spark session is already running in this process; it is used as it is, not a new one at {master}")
    spark = start_session(master)
    try:
        yield spark
    finally:
        spark.stop()


def start_session(master: str | None = None):
    """A new Spark session as :func:`session` starts one (the caller stops it)."""
    _pyspark()
    from pyspark.sql import SparkSession

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise UsageError(
            "the spark engine needs Java 17 or later: install a JDK (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    master = master or LOCAL_MASTER
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no lookup of this host's name
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName("calib")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{LOG4J_PROPERTIES}")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark's "pandas >= 3 not fully supported": calib uses Arrow
        try:
            spark = builder.getOrCreate()
        except Exception as exc:  # the JVM did not start: one line, not its log
            raise UsageError(f"Spark did not start at {master}: {str(exc).splitlines()[0]}") from None
    spark.sparkContext.setLogLevel("FATAL")  # a task's error is raised on the driver as one line (worker_errors)
    return spark


@contextlib.contextmanager
def worker_errors():
    """A calib error raised in a task (bad input in one partition) raised here as itself, one line,
    instead of Spark's Java stack trace around it; pyspark's warning on pandas versions (calib
    exchanges Arrow batches, not pandas frames) kept quiet."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield
    except CalibError:
        raise
    except Exception as exc:
        error = error_from_worker(str(exc))
        if error is None:
            raise
        raise error from None


def _sample(df):
    """An Arrow table of the first :data:`SAMPLE_ROWS` rows."""
    with worker_errors():
        return df.limit(SAMPLE_ROWS).toArrow()


def evaluate(
    df,
    request: EvaluationRequest | None = None,
    *,
    bundle: str | None = None,
    scores=None,
    score_prefix: str | None = None,
    labels: str | None = None,
    group_by: str | None = None,
    row_id: str | None = None,
    kind: str = "auto",
    description: str = "DataFrame",
):
    """The report of the rows of the Spark DataFrame ``df`` (after ``bundle`` when given), as
    ``request`` asks: one metric state per partition, merged on the driver, the gates checked;
    the same report as :func:`calib.evaluate` of all the rows (streamed metrics only). ``scores``: a
    list or Spark ML vector column, or a list of one column per class (default: found by name as in
    a parquet file); ``labels``: the label column (default ``label``); ``group_by``: a column whose
    values group the rows; ``row_id``: a column of unique integer row ids, which key the bootstrap
    replicates (needed for intervals and noise-aware gates)."""
    import pyarrow as pa

    request = request or EvaluationRequest()
    columns = TableColumns(scores, score_prefix, labels, group_by, row_id)
    plan = make_plan(df.columns, _sample(df), description, columns, bundle=bundle, kind=kind, request=request)

    def states(batches):
        name = f"{description} partition {_partition()}"
        state = part_state(pa.Table.from_batches(batches), plan, name)  # None for batches without rows
        yield pa.RecordBatch.from_arrays([pa.array([state], pa.binary())], [STATE_COLUMN])

    with worker_errors():
        rows = df.mapInArrow(_whole_part(states), f"{STATE_COLUMN} binary").collect()
    return merged_report([row[STATE_COLUMN] for row in rows], request, description, plan)


def _partition() -> int:
    """The index of the partition this task reads."""
    from pyspark import TaskContext

    return TaskContext.get().partitionId()


def _whole_part(function):
    """``function`` of a partition's batches, skipping a partition without any."""

    def run(batches):
        batches = list(batches)
        if batches:
            yield from function(batches)

    return run


def apply(
    df,
    bundle: str,
    *,
    scores=None,
    score_prefix: str | None = None,
    what: str = "probs",
    kind: str = "auto",
    description: str = "DataFrame",
):
    """``df`` with ``bundle`` applied: its columns and a column of each row's calibrated
    probabilities (``what``: probs; log-probs: ``log_probs``; sets: ``set``, the class indices in
    each row's conformal set), as an array of doubles (sets: of longs); the bundle is verified and
    checked against ``df``'s first rows here, before any partition is read."""
    import pyarrow as pa
    from pyspark.sql.types import ArrayType, DoubleType, LongType, StructField, StructType

    plan = apply_plan(df.columns, _sample(df), description, bundle, TableColumns(scores, score_prefix), what, kind)
    column = OUTPUT_COLUMNS[what]
    element = LongType() if what == "sets" else DoubleType()
    schema = StructType([*df.schema.fields, StructField(column, ArrayType(element, False), False)])

    def applied(batches):
        name = f"{description} partition {_partition()}"
        for batch in batches:
            yield from applied_part(pa.Table.from_batches([batch]), plan, name).to_batches()

    with worker_errors():  # and pyspark's warning on pandas, which mapInArrow does not use
        return df.mapInArrow(applied, schema)
