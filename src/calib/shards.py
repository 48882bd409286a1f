"""Evaluate, or apply a bundle to, a directory of shards, in this process or on a Dask, Spark or Ray
cluster (docs/cli.md, docs/engines.md).

Each file is evaluated on its own into the additive metric state that ``--emit-state`` writes (bin
counts and sums, per-row values for the equal-mass and smooth ECEs); the states are added in the
sorted order of the file names, so the numbers equal one evaluation over all the rows up to float
summation order (1e-12), and two runs give the same bytes whichever worker finished first. The
whole-sample estimators (V-ECE, KDE-ECE) are not additive and are refused here. Bootstrap
replicates come the same way: each shard's per-cluster sums, its rows keyed by their global index
(its first row: the rows of the files before it), so the intervals equal those of one evaluation
over all the rows.

Applying writes one output per shard, under the shard's name in the output directory, by the
function that applies a single file (so the bytes are the same), each atomically. A ledger
(:data:`LEDGER`) beside the outputs records every finished shard with the bundle's sha256, what was
written, the input's size and modification time and the output's sha256; a rerun skips the shards
whose record still holds and redoes the others (``force`` redoes all).
"""

from __future__ import annotations

import dataclasses
import json
import os

from . import pipeline
from .errors import InputError
from .evaluation import merge_metric_states, state_header, stream_metrics
from .evaluation.report_types import EvaluationReport
from .evaluation.request import EvaluationRequest
from .evaluation.states import state_arrays
from .io.formats import listed, shard_formats
from .io.readers import Reading, file_sha256
from .metrics import MetricConfig
from .task_engines import check_engine, task_runner


def shard_files(directory: str) -> list[str]:
    """The files of ``directory`` in a format that can be evaluated shard by shard, in name order."""
    suffixes = tuple(suffix for fmt in shard_formats() for suffix in fmt.suffixes)
    files = sorted(os.path.join(directory, name) for name in os.listdir(directory) if name.lower().endswith(suffixes))
    if not files:
        raise InputError(f"{directory}: a directory input needs {listed(shard_formats())} files in it; found none")
    return files


def shard_state(
    path: str,
    keys: list[str],
    bins: int,
    cmce_bins: int,
    bundle: str | None,
    input_kind: str,
    score_prefix: str | None,
    label_column: str | None = None,
    group_by: str | None = None,
    scores: str | None = None,
    request: EvaluationRequest | None = None,
    first_row: int = 0,
) -> tuple[dict, dict]:
    """(header, additive state) of one file's streamed metrics (after ``bundle`` if given), with a
    state per group of the column ``group_by`` when given, and the per-cluster sums of the
    replicates ``request`` asks for (its bootstrap settings and gates), the file's rows keyed from
    the global index ``first_row``."""
    from .evaluation.groups import read_groups

    preds, calibrator = _read_shard(path, bundle, input_kind, score_prefix, label_column, scores)
    groups = read_groups(preds, path, group_by, None, label_column)
    config = MetricConfig(bins=bins, cmce_bins=cmce_bins)
    bootstrap = None if request is None else request.bootstrap.resolve(preds.n, preds.k, request.gates)
    streamed = stream_metrics(preds, keys, config, calibrator, bootstrap=bootstrap, groups=groups, first_row=first_row)
    return state_header(keys, config, preds, bundle, groups, bootstrap, first_row), state_arrays(streamed)


def shard_rows(path: str, input_kind: str, score_prefix: str | None, label_column: str | None, scores: str | None) -> int:
    """The rows of one file (a multi-label file's (row, label) pairs), as :func:`shard_state` reads them."""
    return _read_shard(path, None, input_kind, score_prefix, label_column, scores)[0].n


def _read_shard(path: str, bundle: str | None, input_kind: str, score_prefix, label_column, scores):
    """(predictions with labels, the bundle's calibrator or None) of one file."""
    reading = Reading(
        input_kind=input_kind, score_prefix=score_prefix, label_column=label_column, require_labels=True, scores=scores
    )
    return pipeline.read_with_bundle(path, bundle, reading)


def evaluate_shards(
    directory: str,
    request: EvaluationRequest = EvaluationRequest(),
    *,
    bundle: str | None = None,
    input_kind: str = "auto",
    score_prefix: str | None = None,
    scores: str | None = None,
    label_column: str | None = None,
    group_by: str | None = None,
    engine: str = "local",
    scheduler: str | None = None,
) -> EvaluationReport:
    """The merged report of every shard in ``directory`` as ``request`` asks, its gates checked (per
    group of the column ``group_by`` too, when given: each group's numbers are those of its rows in
    every file). Only streamed metrics merge, so the request's metrics (default: the streamed
    default table) must all be streamed and its bins a number. Its replicates (as the request asks,
    "auto": with gates) are the shards' per-cluster sums added up, each shard's rows keyed by their
    global index: the intervals of one evaluation of all the rows. Each shard is read as the other
    parameters say: a ``bundle`` applied first, the scores' ``input_kind``, their columns
    (``score_prefix`` or ``scores``), ``label_column``; ``engine`` "local" or "dask" (a Dask
    ``scheduler``'s address, or a local cluster).

    >>> import calib, numpy as np, os, tempfile
    >>> from calib.io.writers import write_matrix
    >>> test, folder = np.load(calib.sample_path("cifar10_test.npz")), tempfile.mkdtemp()
    >>> for part, rows in enumerate(np.array_split(np.arange(len(test["labels"])), 2)):
    ...     write_matrix(os.path.join(folder, f"{part}.parquet"), test["logits"][rows], "logits", labels=test["labels"][rows])
    >>> from calib.shards import evaluate_shards
    >>> report = evaluate_shards(folder, calib.EvaluationRequest(metrics=("accuracy",)))
    >>> round(report.to_json()["metrics"]["accuracy"]["value"], 4)
    0.9452
    """
    from .table_partitions import mergeable_request

    check_engine(engine)
    keys = mergeable_request(request, "a directory's shards")
    files = shard_files(directory)
    args = (keys, request.bins, request.cmce_bins, bundle, input_kind, score_prefix, label_column, group_by, scores)
    reading = (input_kind, score_prefix, label_column, scores)
    if engine == "local":  # each file's rows keyed from the rows of the files before it, counted as they are evaluated
        states = []
        for path in files:
            states.append(shard_state(path, *args, request, sum(header["n"] for header, _ in states)))
        return _merged(states, files, directory, request)
    with task_runner(engine, scheduler) as run:
        first_rows = [0] * len(files)
        if request.bootstrap.may_draw(request.gates):  # the files' rows counted first
            rows = run(shard_rows, [(path, *reading) for path in files])
            first_rows = [sum(rows[:i]) for i in range(len(files))]
        states = run(shard_state, [(path, *args, request, first_row) for path, first_row in zip(files, first_rows)])
    return _merged(states, files, directory, request)


def _merged(states: list, files: list[str], directory: str, request: EvaluationRequest) -> EvaluationReport:
    """The report of the shards' states, in the files' order, its gates checked."""
    from .evaluation import apply_gates

    report = merge_metric_states(states, files, request.min_group_rows)
    report.input = dataclasses.replace(report.input, path=directory)
    return apply_gates(report, request.gates)


#: The record of the finished shards that an apply keeps in its output directory.
LEDGER = "calib-apply.json"


@dataclasses.dataclass
class ShardsApplied:
    """What :func:`apply_shards` did: the shards written and skipped (file names), the rows written
    and the method's summed row counts (infeasible rows, ...) of the written shards."""

    written: list[str]
    skipped: list[str]
    rows: int
    counts: dict


def apply_shard(path: str, out_path: str, bundle: str, what: str, reading: Reading) -> dict:
    """Apply ``bundle`` to the file ``path`` and write ``what`` to ``out_path`` (atomically), as a
    single file is applied; {"rows", "counts", "output_sha256"}. Runs on a worker."""
    preds, calibrator = pipeline.read_with_bundle(path, bundle, reading)
    counts = pipeline.write_applied(calibrator, preds, out_path, what)
    return {"rows": preds.n, "counts": counts, "output_sha256": file_sha256(out_path)}


def apply_shards(
    bundle: str,
    directory: str,
    out_dir: str,
    *,
    what: str = "probs",
    reading: Reading = Reading(),
    engine: str = "local",
    scheduler: str | None = None,
    force: bool = False,
) -> ShardsApplied:
    """Apply ``bundle`` to every shard of ``directory``, writing ``out_dir``/<shard name> in the
    shard's format, each read as ``reading`` says: one task per shard (``engine``:
    calib.task_engines.ENGINES), finished shards recorded in the ledger as they finish, shards
    recorded with this bundle and unchanged skipped unless ``force``."""
    from .bundle import read_bundle
    from .io.atomic import write_bytes_atomic
    from .registry import CALIBRATORS

    check_engine(engine)
    files = shard_files(directory)
    # a bundle that does not fit the shards (its class count, input kind) is refused here, before
    # any output is written or any task starts
    pipeline.read_with_bundle(files[0], bundle, reading)
    if os.path.exists(out_dir) and os.path.samefile(out_dir, directory):
        raise InputError(f"{out_dir}: is the input directory; the outputs would replace the shards")
    os.makedirs(out_dir, exist_ok=True)
    bundle_sha256 = read_bundle(bundle, CALIBRATORS).sha256
    ledger_path = os.path.join(out_dir, LEDGER)
    ledger = _read_ledger(ledger_path, bundle_sha256, what)
    if not force and ledger is None and any(name != LEDGER for name in os.listdir(out_dir)):
        raise InputError(
            f"{out_dir}: holds files that no ledger of this bundle lists (another bundle's outputs, or other files); "
            "replacing them must be asked for",
            cli_hint="--force",
        )
    ledger = ledger or {"bundle_sha256": bundle_sha256, "what": what, "shards": {}}
    todo, skipped = [], []
    for path in files:
        name = os.path.basename(path)
        out_path = os.path.join(out_dir, name)
        if not force and _still_holds(ledger["shards"].get(name), path, out_path):
            skipped.append(name)
        else:
            ledger["shards"].pop(name, None)
            todo.append((path, out_path))
    done = ShardsApplied([], skipped, 0, {})

    def finished(path: str, out_path: str, result: dict) -> None:
        name = os.path.basename(path)
        ledger["shards"][name] = {**_input_record(path), "output_sha256": result["output_sha256"]}
        write_bytes_atomic(ledger_path, (json.dumps(ledger, indent=2, sort_keys=True) + "\n").encode())
        done.written.append(name)
        done.rows += result["rows"]
        pipeline.add_counts(done.counts, result["counts"])

    calls = [(path, out_path, bundle, what, reading) for path, out_path in todo]
    with task_runner(engine, scheduler) as run:
        run(apply_shard, calls, lambda i, result: finished(*todo[i], result))
    done.written.sort()
    return done


def _read_ledger(path: str, bundle_sha256: str, what: str) -> dict | None:
    """The ledger of an output directory written with this bundle and output, or None when there is
    none, it cannot be read, or it was written for another bundle or output (whose records do not
    hold here)."""
    try:
        with open(path, "rb") as handle:
            ledger = json.loads(handle.read())
    except (OSError, ValueError):
        return None
    if not isinstance(ledger, dict) or ledger.get("bundle_sha256") != bundle_sha256 or ledger.get("what") != what:
        return None
    return ledger if isinstance(ledger.get("shards"), dict) else None


def _input_record(path: str) -> dict:
    """What the ledger keeps of a shard's input: its size and modification time."""
    stat = os.stat(path)
    return {"input_size": stat.st_size, "input_mtime_ns": stat.st_mtime_ns}


def _still_holds(record: dict | None, path: str, out_path: str) -> bool:
    """Whether a shard's ledger record holds: its input unchanged and its output on disk with the
    recorded sha256 (the output is hashed only when the input matches)."""
    if record is None or not os.path.exists(out_path):
        return False
    if {key: record.get(key) for key in ("input_size", "input_mtime_ns")} != _input_record(path):
        return False
    return record.get("output_sha256") == file_sha256(out_path)
