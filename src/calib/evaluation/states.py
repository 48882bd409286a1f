"""Metric state files: the additive state behind an evaluation's streamed metrics, written per shard
and merged into the numbers of all rows (no pickle: an .npz of numeric arrays and a JSON header)."""

from __future__ import annotations

import json
import zipfile

import numpy as np

from .._version import __version__
from ..errors import InputError
from ..io.predictions import Predictions
from ..metrics import MetricConfig, check_metric_keys
from ..metrics.metric_set import MetricSet
from .groups import Groups, group_section, group_sort_key
from .report_types import EvaluationReport, InputSection, entries_from_json

#: Metric state files: an .npz of numeric arrays, the header as JSON bytes (no pickle anywhere).
STATE_FORMAT = "calib-metric-state"


STATE_VERSION = 1


def state_header(
    keys: list[str], config: MetricConfig, preds: Predictions, bundle_path: str | None, groups: Groups | None = None
) -> dict:
    """What a metric state must agree on to merge (metrics, settings, K), where it came from, and
    its groups (source, names, rows per group) when the rows were grouped."""
    grouped = {}
    if groups is not None:
        grouped = {"groups": {"source": groups.source, "names": groups.names, "n": groups.counts.tolist()}}
    label_layout = preds.output_layout.to_json()
    if label_layout is not None:  # a multi-label input's {"rows": N, "labels": L}
        grouped["multilabel"] = label_layout
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
        **grouped,
    }


#: State arrays of group i are stored under this prefix: "group3:0/count".
GROUP_PREFIX = "group{}:"


def state_arrays(metric_set: MetricSet, group_sets: list[MetricSet] | None = None) -> dict[str, np.ndarray]:
    """The arrays of a state file: the overall state, and each group's under its prefix."""
    arrays = metric_set.state()
    for i, group_set in enumerate(group_sets or []):
        arrays.update({GROUP_PREFIX.format(i) + key: value for key, value in group_set.state().items()})
    return arrays


def write_metric_state(
    path: str,
    metric_set: MetricSet,
    keys: list[str],
    config: MetricConfig,
    preds: Predictions,
    bundle_path: str | None,
    groups: Groups | None = None,
    group_sets: list[MetricSet] | None = None,
) -> None:
    """The additive state behind this evaluation's streamed metrics (V-ECE is not additive: left
    out), with one state per group when the rows were grouped."""
    from ..io.atomic import write_bytes_atomic
    from ..io.formats.npz import npz_bytes

    header = state_header(keys, config, preds, bundle_path, groups)
    arrays = {"header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8), **state_arrays(metric_set, group_sets)}
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


def merge_metric_states(states: list[tuple[dict, dict]], names: list[str], min_group_rows: int = 100) -> EvaluationReport:
    """Add up metric states (same metrics, settings and K) in the given order and compute the
    metrics of all their rows together: the same numbers as one run over every row. Grouped states
    merge group by group (by name): a group's numbers are those of its rows in every state."""
    merged = headers = None
    group_sets: dict[str, MetricSet] = {}
    group_rows: dict[str, int] = {}
    sources = set()
    seen: dict[str, str] = {}  # input digest -> the state that brought it
    for (header, arrays), name in zip(states, names):
        if merged is not None and (header["keys"], header["config"], header["k"]) != (
            headers["keys"],
            headers["config"],
            headers["k"],
        ):
            raise InputError(f"{name}: its metrics, settings or K differ from {names[0]}'s; states cannot be merged")
        for source in header["inputs"]:
            digest = source.get("sha256")
            if digest is not None and digest in seen:
                raise InputError(
                    f"{name}: counts the rows of {source.get('path')} (sha256 {digest[:12]}), which {seen[digest]} "
                    "already counts; merging them would count those rows twice"
                )
            if digest is not None:
                seen[digest] = name
        if merged is None:
            headers = {**header, "inputs": list(header["inputs"])}
            merged = MetricSet(check_metric_keys(header["keys"]), MetricConfig(**header["config"]), int(header["k"]))
        else:
            headers["n"] += header["n"]
            headers["inputs"] += header["inputs"]
            labels = [(h.get("multilabel") or {}).get("labels") for h in (header, headers)]
            if labels[0] != labels[1]:
                raise InputError(f"{name}: a multi-label state merges only with multi-label states of as many labels")
            if labels[0] is not None:  # the rows add up, the labels stay
                headers["multilabel"] = {
                    "rows": headers["multilabel"]["rows"] + header["multilabel"]["rows"],
                    "labels": labels[0],
                }
        if ("groups" in header) != ("groups" in headers):
            raise InputError(f"{name}: grouped and ungrouped states cannot be merged")
        overall = {key: value for key, value in arrays.items() if not key.startswith("group")}
        merged.absorb(overall)
        for i, group in enumerate(header.get("groups", {}).get("names", [])):
            if group not in group_sets:
                group_sets[group] = MetricSet(
                    check_metric_keys(headers["keys"]), MetricConfig(**headers["config"]), int(headers["k"])
                )
                group_rows[group] = 0
            prefix = GROUP_PREFIX.format(i)
            group_sets[group].absorb({key[len(prefix) :]: value for key, value in arrays.items() if key.startswith(prefix)})
            group_rows[group] += int(header["groups"]["n"][i])
        if "groups" in header:
            sources.add(header["groups"]["source"])
    inputs = InputSection.from_json(
        {"n": headers["n"], "k": headers["k"], "merged_from": headers["inputs"], "multilabel": headers.get("multilabel")}
    )
    report = EvaluationReport(__version__, inputs, headers["bundle"], entries_from_json(merged.results()))
    if group_sets:
        ordered = sorted(group_sets, key=group_sort_key)
        report.groups = group_section(
            ordered,
            [group_rows[g] for g in ordered],
            " / ".join(sorted(sources)),
            [group_sets[g].results() for g in ordered],
            None,
            min_group_rows,
            of_labels=headers.get("multilabel") is not None,  # a multi-label input's groups are its labels
        )
    return report
