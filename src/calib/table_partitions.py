"""The rows of a table, one part at a time (a Spark DataFrame's partition, a Ray dataset's block), read
as calib reads a file: the driver makes a :class:`TablePlan` once (which columns hold the scores, the
labels, the groups and the row ids; the scores' kind; the bundle's bytes; what to compute), and every
worker runs it on its parts: :func:`part_state` evaluates a part into the bytes of a metric state
file, :func:`applied_part` adds the calibrated column to it. :func:`merged_report` adds the parts'
states up on the driver into the report one evaluation of all the rows gives (docs/engines.md).

A part's bootstrap clusters are keyed by each row's own id (the plan's ``row_id`` column, unique
integers), never by the row's place in the part, so any partitioning and any row order give the
same replicates; without a row id there are no replicates (a table has no row order to key them by).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import tempfile
import threading

import numpy as np

from .bootstrap import BootstrapConfig
from .errors import InputError, UsageError

#: What a part's state travels as: one binary column of this name, one row per part.
STATE_COLUMN = "calib_state"
#: The output columns an apply adds, by what it writes (the names a parquet apply writes).
OUTPUT_COLUMNS = {"probs": "probs", "log-probs": "log_probs", "sets": "set"}


@dataclasses.dataclass(frozen=True)
class TablePlan:
    """What every part of a table is read and evaluated (or applied) with.

    ``scores``: one list (or Spark ML vector) column, or one column per class in class order;
    ``kind``: the scores' kind (logits, probs, log-probs), decided once on the driver and checked on
    every part; ``labels``, ``group_by``, ``row_id``: column names or None; ``bundle``: (sha256,
    {file name: bytes}) of a verified bundle, or None; ``keys``, ``bins``, ``cmce_bins``: the streamed
    metrics and their bins; ``bootstrap``: the replicates (None: none); ``what``: what an apply adds;
    ``task``: as calib.io.readers.predictions_from_arrays takes it (a multi-label bundle's: multilabel)."""

    scores: tuple[str, ...]
    kind: str
    labels: str | None = None
    group_by: str | None = None
    row_id: str | None = None
    bundle: tuple[str, dict[str, bytes]] | None = None
    keys: tuple[str, ...] = ()
    bins: int | None = None  # an evaluation's, from its request
    cmce_bins: int | None = None
    bootstrap: BootstrapConfig | None = None
    what: str = "probs"
    task: str = "auto"


def bundle_bytes(path: str) -> tuple[str, dict[str, bytes]]:
    """(sha256, {file name: bytes}) of the bundle directory ``path``, verified here first (a corrupt
    or unknown bundle fails on the driver, before any part is read)."""
    from .bundle import MANIFEST, read_bundle
    from .registry import CALIBRATORS

    bundle = read_bundle(path, CALIBRATORS)
    names = [MANIFEST, *bundle.manifest["files"]]
    files = {}
    for name in names:
        with open(os.path.join(path, name), "rb") as handle:
            files[name] = handle.read()
    return bundle.sha256, files


_CALIBRATORS: dict[str, object] = {}
_CALIBRATORS_LOCK = threading.Lock()


def plan_calibrator(plan: TablePlan):
    """The plan's bundle as a calibrator, loaded (and verified) once per worker process."""
    if plan.bundle is None:
        return None
    from .pipeline import load_calibrator

    sha256, files = plan.bundle
    with _CALIBRATORS_LOCK:
        if sha256 not in _CALIBRATORS:
            with tempfile.TemporaryDirectory(prefix="calib-bundle-") as directory:
                for name, data in files.items():
                    target = os.path.join(directory, name)
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    with open(target, "wb") as handle:
                        handle.write(data)
                _CALIBRATORS[sha256] = load_calibrator(directory)[0]
        return _CALIBRATORS[sha256]


def score_matrix(table, columns: tuple[str, ...], name: str) -> np.ndarray:
    """The (N, K) scores of ``table``: a list column, a Spark ML vector column (its Arrow struct
    of type, size, indices and values; dense or sparse), or one floating-point column per class."""
    import pyarrow as pa

    from .io.formats.columns import list_column_to_matrix, wide_columns_to_matrix

    if len(columns) > 1:
        return wide_columns_to_matrix(table, list(columns), name)
    column = table.column(columns[0])
    if pa.types.is_struct(column.type) and {"type", "size", "indices", "values"} <= {f.name for f in column.type}:
        return _vector_matrix(column.combine_chunks(), name, columns[0])
    if (
        not pa.types.is_list(column.type)
        and not pa.types.is_large_list(column.type)
        and not pa.types.is_fixed_size_list(column.type)
    ):
        raise InputError(f"{name}: the score column {columns[0]!r} must hold a list or a vector per row; got {column.type}")
    return list_column_to_matrix(column, name, columns[0])


def _vector_matrix(vectors, name: str, column: str) -> np.ndarray:
    """Spark ML vectors as an (N, K) matrix: a dense row (type 1) is its values; a sparse row (type
    0) places its values at its indices in a row of ``size`` zeros. Every row must be K wide."""
    if vectors.null_count:
        raise InputError(f"{name}: the vector column {column!r} has {vectors.null_count} missing rows")
    fields = dict(zip((field.name for field in vectors.type), vectors.flatten()))  # flatten: the struct's offset kept
    dense = fields["type"].to_numpy(zero_copy_only=False) == 1
    values = fields["values"]
    offsets = values.offsets.to_numpy()
    lengths = np.diff(offsets)
    sizes = fields["size"].fill_null(0).to_numpy(zero_copy_only=False)
    widths = set(lengths[dense].tolist()) | set(sizes[~dense].tolist())
    if len(widths) != 1:
        raise InputError(f"{name}: the vectors of column {column!r} have different sizes ({sorted(widths)})")
    flat = np.asarray(values.flatten().to_numpy(zero_copy_only=False), dtype=np.float64)
    rows = np.repeat(np.arange(len(vectors)), lengths)
    columns = np.arange(len(flat)) - (offsets[:-1] - offsets[0])[rows]  # a dense row's value j is class j
    sparse = ~dense[rows]
    columns[sparse] = fields["indices"].flatten().to_numpy(zero_copy_only=False)
    out = np.zeros((len(vectors), widths.pop()))
    out[rows, columns] = flat
    return out


def part_predictions(table, plan: TablePlan, name: str):
    """(the part's predictions, checked as a file's are with the plan's kind, its row ids or None)."""
    from .io.formats.columns import labels_of
    from .io.readers import predictions_from_arrays

    scores = score_matrix(table, plan.scores, name)
    labels = None if plan.labels is None else labels_of([table.column(plan.labels)])
    preds = predictions_from_arrays(scores, labels, kind=plan.kind, name=name, task=plan.task)
    preds.skip_digest()  # a part has no file; its rows are named by their ids
    row_ids = None
    if plan.row_id is not None:
        row_ids = preds.output_layout.pair_keys(row_id_values(table.column(plan.row_id), name, plan.row_id))
    return preds, row_ids


def row_id_values(column, name: str, key: str) -> np.ndarray:
    """A row id column as unsigned 64-bit keys: integers, each row's own (no missing one)."""
    import pyarrow as pa

    if not pa.types.is_integer(column.type):
        raise InputError(f"{name}: the row id column {key!r} must hold integers (a unique id per row); got {column.type}")
    if column.null_count:
        raise InputError(f"{name}: the row id column {key!r} has {column.null_count} missing ids")
    return np.asarray(column.to_numpy(), dtype=np.int64).view(np.uint64)


def part_state(table, plan: TablePlan, name: str) -> bytes | None:
    """The bytes of the metric state file of one part (None for a part without rows): its streamed
    metrics after the plan's bundle, per group of the plan's column, with the per-cluster sums of
    the plan's replicates keyed by the rows' ids."""
    from .evaluation.groups import groups_for, groups_from_values
    from .evaluation.states import state_arrays, state_header
    from .evaluation.streaming import stream_metrics
    from .io.formats.npz import npz_bytes
    from .metrics import MetricConfig

    if table.num_rows == 0:
        return None
    preds, row_ids = part_predictions(table, plan, name)
    calibrator = plan_calibrator(plan)
    if calibrator is not None:
        from .pipeline import check_fits

        check_fits(preds, *_bundle_fit(plan.bundle), calibrator=calibrator)
    groups = None
    if plan.group_by is not None:
        groups = groups_from_values(table.column(plan.group_by).to_numpy(zero_copy_only=False), table.num_rows, plan.group_by)
    groups = groups_for(preds, groups)
    config = MetricConfig(bins=plan.bins, cmce_bins=plan.cmce_bins)
    keys = list(plan.keys)
    streamed = stream_metrics(preds, keys, config, calibrator, bootstrap=plan.bootstrap, groups=groups, row_ids=row_ids)
    header = state_header(keys, config, preds, None, groups, plan.bootstrap, row_ids=row_ids)
    arrays = {"header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8), **state_arrays(streamed)}
    return npz_bytes(arrays)


def _bundle_fit(bundle: tuple[str, dict[str, bytes]]) -> tuple:
    """(n_classes, input_kind, what, n_labels) of a plan's bundle (its manifest's), for
    calib.pipeline.check_fits."""
    manifest = json.loads(bundle[1]["manifest.json"])
    return manifest["n_classes"], manifest["input_kind"], "the bundle", manifest.get("n_labels")


def parse_state(data: bytes, name: str) -> tuple[dict, dict]:
    """(header, arrays) of :func:`part_state`'s bytes."""
    from .evaluation.states import read_metric_state

    return read_metric_state(io.BytesIO(data), name)


def applied_part(table, plan: TablePlan, name: str):
    """``table`` with the plan's bundle applied: the column of :data:`OUTPUT_COLUMNS` [what] added
    after the others (each row's probabilities or log-probabilities as a list, or its conformal set
    as the list of its class indices, ascending), the rows in their order."""
    import pyarrow as pa

    from .pipeline import apply_calibrator, check_fits

    column = OUTPUT_COLUMNS[plan.what]
    if table.num_rows == 0:  # a part without rows (a filtered block): the column, empty
        return table.append_column(column, pa.array([], pa.list_(pa.int64() if plan.what == "sets" else pa.float64())))
    preds, _ = part_predictions(table, plan, name)
    calibrator = plan_calibrator(plan)
    check_fits(preds, *_bundle_fit(plan.bundle), calibrator=calibrator)
    values = list_array(apply_calibrator(calibrator, preds, plan.what)[0])
    return table.append_column(column, values)


def list_array(matrix: np.ndarray):
    """An (N, K) matrix as an Arrow list column (a boolean mask: each row's true indices, ascending)."""
    import pyarrow as pa

    if matrix.dtype == bool:
        rows, classes = np.nonzero(matrix)
        offsets = np.concatenate([[0], np.cumsum(matrix.sum(axis=1))]).astype(np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(classes.astype(np.int64)))
    matrix = np.ascontiguousarray(matrix, dtype=np.float64)
    offsets = np.arange(0, matrix.size + 1, matrix.shape[1], dtype=np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(matrix.reshape(-1)))


def merged_report(states: list[bytes], request, description: str, plan: TablePlan):
    """The report of all the parts' rows from their states (None for a part without rows), the
    request's gates checked: the numbers of one evaluation of all the rows, whatever the
    partitioning, up to the order of float sums (1e-12); the input named ``description``."""
    from .evaluation import apply_gates, merge_metric_states

    parsed = [parse_state(data, f"part {i}") for i, data in enumerate(states) if data is not None]
    if not parsed:
        raise InputError(f"{description}: no rows to evaluate")
    report = merge_metric_states(parsed, [f"part {i}" for i in range(len(parsed))], request.min_group_rows)
    report.input = dataclasses.replace(report.input, path=description, kind=plan.kind, merged_from=None)
    return apply_gates(report, request.gates)


def mergeable_request(request, what: str = "a table's parts"):
    """The streamed metric keys of ``request`` (its metrics and gated ones), refusing what parts
    cannot merge: whole-sample metrics, "auto" bins, a state file, a first row."""
    from .metrics import DEFAULT_METRICS, METRICS, check_metric_keys
    from .metrics.definitions import AUTO_BINS

    keys = check_metric_keys(list(request.metrics or DEFAULT_METRICS) + request.gates.metrics)
    whole_sample = [key for key in keys if not METRICS[key].streamed]
    if whole_sample:
        raise UsageError(f"{whole_sample[0]} needs every row at once and cannot be merged from {what}; pick streamed metrics")
    if AUTO_BINS in (request.bins, request.cmce_bins):
        raise UsageError(f"bins 'auto' depend on all the rows at once, which {what} see apart; give a number of bins")
    if request.emit_state is not None:
        raise UsageError(f"{what} are evaluated without a state file of their own: each one's state merges into one report")
    if request.bootstrap.first_row:
        raise UsageError(f"{what} key their rows themselves; first_row is for one file")
    return keys


#: Rows the driver reads to decide the scores' kind and check the bundle before any part runs.
SAMPLE_ROWS = 1000


@dataclasses.dataclass(frozen=True)
class TableColumns:
    """Which columns of a table hold what: ``scores`` (a column name, a list of them, or None: found
    by name as in a file, a ``logits``, ``log_probs`` or ``probs`` list column, or the columns of
    ``score_prefix``), ``labels`` (None: ``label`` or ``labels``), ``group_by`` (values that group
    the rows) and ``row_id`` (unique integer row ids, which key the bootstrap replicates)."""

    scores: str | list[str] | tuple[str, ...] | None = None
    score_prefix: str | None = None
    labels: str | None = None
    group_by: str | None = None
    row_id: str | None = None


def make_plan(
    names: list[str],
    sample,
    description: str,
    columns: TableColumns,
    *,
    bundle: str | None = None,
    kind: str = "auto",
    request=None,
    what: str = "probs",
    need_labels: bool = True,
) -> TablePlan:
    """The plan of a table of columns ``names`` (``sample``: an Arrow table of its first rows), decided
    on the driver: the ``columns`` found, the kind (``kind``, else detected on the sample and checked
    on every part), the bundle verified and checked against the sample's classes, and with
    ``request`` what to evaluate (its streamed metrics, bins and replicates; replicates need a row id
    column)."""
    from .io.formats.columns import label_columns, score_columns
    from .pipeline import check_fits

    for key, column in (("group_by", columns.group_by), ("row_id", columns.row_id)):
        if column is not None and column not in names:
            raise InputError(f"{description}: no column named {column!r} ({key}; found {', '.join(names)})")
    if isinstance(columns.scores, (list, tuple)):
        missing = [column for column in columns.scores if column not in names]
        if missing:
            raise InputError(f"{description}: no column named {missing[0]!r} (found {', '.join(names)})")
        used = list(columns.scores)
    else:
        used = score_columns(names, columns.score_prefix, description, columns.scores, None, ())[0]
    label_keys = label_columns([n for n in names if n not in used], columns.labels, description)
    if len(label_keys) > 1:
        raise InputError(f"{description}: the labels must be one column (a list column for a multi-label input); name it")
    label_key = label_keys[0] if label_keys else None
    if need_labels and label_key is None:
        raise InputError(f"{description}: evaluation needs labels; no label column found", cli_hint="--label-column NAME")
    shipped = None if bundle is None else bundle_bytes(bundle)
    task = "multilabel" if shipped is not None and _bundle_fit(shipped)[3] is not None else "auto"
    label_key = label_key if need_labels else None
    plan = TablePlan(tuple(used), kind, label_key, columns.group_by, columns.row_id, shipped, what=what, task=task)
    preds, _ = part_predictions(sample, plan, f"{description} (its first {sample.num_rows} rows)")
    plan = dataclasses.replace(plan, kind=preds.kind)
    if shipped is not None:
        check_fits(preds, *_bundle_fit(shipped), calibrator=plan_calibrator(plan))
    if request is None:
        return plan
    bootstrap = request.bootstrap.resolve(preds.n, preds.k, request.gates)
    if bootstrap is not None and columns.row_id is None:
        raise UsageError(
            f"{description}: bootstrap replicates key each row by its own id, and a table's rows have no order to key them "
            "by; name a column of unique integer row ids (row_id), or draw none (bootstrap=0: gates then read the values alone)"
        )
    keys = tuple(mergeable_request(request, "a table's parts"))
    return dataclasses.replace(plan, keys=keys, bins=request.bins, cmce_bins=request.cmce_bins, bootstrap=bootstrap)


def apply_plan(names: list[str], sample, description: str, bundle: str, columns: TableColumns, what: str, kind: str) -> TablePlan:
    """The plan of an apply of ``bundle`` to a table of columns ``names`` (its first rows
    ``sample``): :func:`make_plan` without labels, once ``what`` is known and its output column
    (:data:`OUTPUT_COLUMNS`) is not one of the table's."""
    if what not in OUTPUT_COLUMNS:
        raise UsageError(f"what must be one of {', '.join(OUTPUT_COLUMNS)}; got {what!r}")
    if OUTPUT_COLUMNS[what] in names:
        raise InputError(f"{description}: already has a column {OUTPUT_COLUMNS[what]!r}; rename it first")
    return make_plan(names, sample, description, columns, bundle=bundle, kind=kind, what=what, need_labels=False)
