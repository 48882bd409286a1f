"""Evaluate a directory of parquet shards, in this process or on a Dask cluster (docs/cli.md; the
robustness issue, "beyond one machine").

Each file is evaluated on its own into the additive metric state that ``--emit-state`` writes (bin
counts and sums, per-row values for the equal-mass and smooth ECEs); the states are added in the
sorted order of the file names, so the numbers equal one evaluation over all the rows up to float
summation order (1e-12), and two runs give the same bytes whichever worker finished first. The
whole-sample estimators (V-ECE, KDE-ECE) are not additive and are refused here.
"""

from __future__ import annotations

import dataclasses
import os

from . import extras, pipeline
from .errors import InputError
from .evaluation import merge_metric_states, state_header, stream_metrics
from .evaluation.report_types import EvaluationReport
from .evaluation.states import state_arrays
from .io.formats import listed, shard_formats
from .metrics import MetricConfig

ENGINES = ("local", "dask")


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
) -> tuple[dict, dict]:
    """(header, additive state) of one file's streamed metrics (after ``bundle`` if given), with a
    state per group of the column ``group_by`` when given."""
    from .evaluation.groups import read_groups

    preds, calibrator = pipeline.read_with_bundle(
        path,
        bundle,
        input_kind=input_kind,
        score_prefix=score_prefix,
        label_column=label_column,
        require_labels=True,
        scores=scores,
    )
    groups = read_groups(preds, path, group_by, None, label_column)
    config = MetricConfig(bins=bins, cmce_bins=cmce_bins)
    streamed = stream_metrics(preds, keys, config, calibrator, groups=groups)
    return state_header(keys, config, preds, bundle, groups), state_arrays(streamed.state, streamed.group_states)


def evaluate_shards(
    directory: str,
    keys: list[str],
    config: MetricConfig,
    *,
    bundle: str | None = None,
    input_kind: str = "auto",
    score_prefix: str | None = None,
    scores: str | None = None,
    label_column: str | None = None,
    group_by: str | None = None,
    min_group_rows: int = 100,
    engine: str = "local",
    scheduler: str | None = None,
) -> EvaluationReport:
    """The merged report of every .parquet file in ``directory`` (per group of the column
    ``group_by`` too, when given: each group's numbers are those of its rows in every file)."""
    files = shard_files(directory)
    args = (keys, config.bins, config.cmce_bins, bundle, input_kind, score_prefix, label_column, group_by, scores)
    if engine == "local":
        states = [shard_state(path, *args) for path in files]
    else:
        states = _on_dask(files, args, scheduler)
    report = merge_metric_states(states, files, min_group_rows)
    report.input = dataclasses.replace(report.input, path=directory)
    return report


def _on_dask(files: list[str], args: tuple, scheduler: str | None) -> list:
    distributed = extras.require("dask.distributed")
    Client, LocalCluster = distributed.Client, distributed.LocalCluster
    cluster = None
    if scheduler is None:  # a local cluster of two single-threaded worker processes on loopback
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None)
    try:
        with Client(cluster if cluster is not None else scheduler) as client:
            futures = client.map(shard_state, files, *[[a] * len(files) for a in args], pure=False)
            return client.gather(futures)
    except OSError as exc:
        raise InputError(f"cannot reach the Dask scheduler {scheduler}: {exc}") from None
    finally:
        if cluster is not None:
            cluster.close()
