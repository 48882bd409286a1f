"""Metric state files: the additive state behind an evaluation's streamed metrics, written per shard
and merged into the numbers of all rows (no pickle: an .npz of numeric arrays and a JSON header)."""

from __future__ import annotations

import json
import zipfile

import numpy as np

from .. import __version__
from ..errors import InputError
from ..io.predictions import Predictions
from ..metrics import MetricConfig
from ..metrics.metric_set import MetricSet
from .streaming import check_metric_keys

#: Metric state files: an .npz of numeric arrays, the header as JSON bytes (no pickle anywhere).
STATE_FORMAT = "calib-metric-state"


STATE_VERSION = 1


def state_header(keys: list[str], config: MetricConfig, preds: Predictions, bundle_path: str | None) -> dict:
    """What a metric state must agree on to merge (metrics, settings, K), and where it came from."""
    return {
        "format": STATE_FORMAT,
        "format_version": STATE_VERSION,
        "calib_version": __version__,
        "keys": keys,
        "config": {"bins": config.bins, "cmce_bins": config.cmce_bins},
        "k": preds.k,
        "n": preds.n,
        "inputs": [{"path": preds.name, "sha256": preds.sha256}],
        "bundle": bundle_path,
    }


def write_metric_state(
    path: str, metric_set: MetricSet, keys: list[str], config: MetricConfig, preds: Predictions, bundle_path: str | None
) -> None:
    """The additive state behind this evaluation's streamed metrics (V-ECE is not additive: left out)."""
    from ..io.atomic import write_bytes_atomic
    from ..io.writers import npz_bytes

    header = state_header(keys, config, preds, bundle_path)
    arrays = {"header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8), **metric_set.state()}
    write_bytes_atomic(path, npz_bytes(arrays))


def read_metric_state(path: str) -> tuple[dict, dict]:
    """(header, state arrays) of a file written by ``evaluate --emit-state``."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
        header = json.loads(arrays.pop("header").tobytes())
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path}: not a calib metric state file ({exc.__class__.__name__})") from None
    if header.get("format") != STATE_FORMAT or header.get("format_version", 99) > STATE_VERSION:
        raise InputError(f"{path}: not a calib metric state file of a version this calib reads")
    return header, arrays


def merge_metric_states(states: list[tuple[dict, dict]], names: list[str]) -> dict:
    """Add up metric states (same metrics, settings and K) in the given order and compute the
    metrics of all their rows together: the same numbers as one run over every row."""
    merged = headers = None
    for (header, arrays), name in zip(states, names):
        if merged is None:
            headers = {**header, "inputs": list(header["inputs"])}
            merged = MetricSet(check_metric_keys(header["keys"]), MetricConfig(**header["config"]), int(header["k"]))
        elif (header["keys"], header["config"], header["k"]) != (headers["keys"], headers["config"], headers["k"]):
            raise InputError(f"{name}: its metrics, settings or K differ from {names[0]}'s; states cannot be merged")
        else:
            headers["n"] += header["n"]
            headers["inputs"] += header["inputs"]
        merged.absorb(arrays)
    return {
        "calib_version": __version__,
        "input": {"merged_from": headers["inputs"], "n": headers["n"], "k": headers["k"]},
        "bundle": headers["bundle"],
        "metrics": merged.results(),
        "gates": [],
        "passed": True,
    }
