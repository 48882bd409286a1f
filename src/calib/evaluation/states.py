"""Metric state files: the additive state behind an evaluation's streamed metrics, written per shard
and merged into the numbers of all rows (no pickle: an .npz of numeric arrays and a JSON header)."""

from __future__ import annotations

import json
import zipfile

import numpy as np

from .._version import __version__
from ..bootstrap import (
    CLUSTER_DRAW,
    GROUPS,
    MAX_GROUPS_WITH_REPLICATES,
    BootstrapConfig,
    BootstrapStates,
    add_fingerprints,
    groups_fingerprint,
    intervals,
    rows_fingerprint,
)
from ..errors import InputError, UsageError
from ..io.predictions import Predictions
from ..metrics import MetricConfig, check_metric_keys
from ..metrics.metric_set import MetricSet
from .groups import Groups, group_section, group_sort_key
from .report_types import BootstrapSection, EvaluationReport, InputSection, entries_from_json
from .resolution import floors_section
from .streaming import StreamedMetrics, as_report_list

#: Metric state files: an .npz of numeric arrays, the header as JSON bytes (no pickle anywhere).
STATE_FORMAT = "calib-metric-state"


STATE_VERSION = 1


def state_header(
    keys: list[str],
    config: MetricConfig,
    preds: Predictions,
    bundle_path: str | None,
    groups: Groups | None = None,
    bootstrap: BootstrapConfig | None = None,
    first_row: int = 0,
    row_ids: np.ndarray | None = None,
) -> dict:
    """What a metric state must agree on to merge (metrics, settings, K), where it came from, and
    its groups (source, names, rows per group) when the rows were grouped; with ``bootstrap``, the
    replicates its per-cluster sums draw, the global index of its first row (None where the rows
    carry their own ``row_ids``) and the fingerprint of its rows' labels
    (:func:`calib.bootstrap.rows_fingerprint`, which adds up over merged states)."""
    grouped = {}
    if groups is not None:
        grouped = {"groups": {"source": groups.source, "names": groups.names, "n": groups.counts.tolist()}}
    label_layout = preds.output_layout.to_json()
    if label_layout is not None:  # a multi-label input's {"rows": N, "labels": L}
        grouped["multilabel"] = label_layout
    if bootstrap is not None:
        row_keys = range(first_row, first_row + preds.n) if row_ids is None else row_ids
        grouped["bootstrap"] = {
            "replicates": bootstrap.replicates,
            "seed": bootstrap.seed,
            "level": bootstrap.level,
            "clusters": GROUPS,
            "first_row": first_row if row_ids is None else None,
            "labels_fingerprint": rows_fingerprint(row_keys, preds.required_labels()),
        }
        if groups is not None and len(groups.names) <= MAX_GROUPS_WITH_REPLICATES:  # each group's sums are kept too
            grouped["bootstrap"]["groups_fingerprint"] = groups_fingerprint(row_keys, groups.names, groups.codes)
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
#: The per-cluster sums of the bootstrap are stored under this prefix: "clusters:0/count".
CLUSTER_PREFIX = "clusters:"
#: Group i's own per-cluster sums (when the groups have replicates of their own) under this one.
GROUP_CLUSTER_PREFIX = "group_clusters{}:"


def state_arrays(streamed: StreamedMetrics) -> dict[str, np.ndarray]:
    """The arrays of a state file: the overall state, each group's under its prefix, the per-cluster
    sums of the bootstrap (summed over the groups) under theirs, and each group's own per-cluster
    sums where the groups have replicates of their own (at most MAX_GROUPS_WITH_REPLICATES groups)."""
    arrays = streamed.state.state()
    for i, group_set in enumerate(streamed.group_states or []):
        arrays.update({GROUP_PREFIX.format(i) + key: value for key, value in group_set.state().items()})
    clustered = streamed.bootstrap_states
    if clustered is not None:
        arrays.update({CLUSTER_PREFIX + key: np.ascontiguousarray(value) for key, value in clustered.cluster_state().items()})
        if clustered.strata is not None:
            for i, part in enumerate(clustered.stratum_states()):
                prefix = GROUP_CLUSTER_PREFIX.format(i)
                arrays.update({prefix + key: np.ascontiguousarray(value) for key, value in part.items()})
    return arrays


def write_metric_state(
    path: str,
    streamed: StreamedMetrics,
    preds: Predictions,
    bundle_path: str | None,
    groups: Groups | None = None,
    bootstrap: BootstrapConfig | None = None,
    first_row: int = 0,
) -> None:
    """The additive state behind this evaluation's streamed metrics (V-ECE is not additive: left
    out), with one state per group when the rows were grouped, and the bootstrap's per-cluster sums
    when it drew replicates (``bootstrap``; rows keyed from ``first_row``)."""
    from ..io.atomic import write_bytes_atomic
    from ..io.formats.npz import npz_bytes

    header = state_header(streamed.keys, streamed.config, preds, bundle_path, groups, bootstrap, first_row)
    arrays = {"header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8), **state_arrays(streamed)}
    write_bytes_atomic(path, npz_bytes(arrays))


def read_metric_state(path, name: str | None = None) -> tuple[dict, dict]:
    """(header, state arrays) of a file written by ``evaluate --emit-state`` (``path``: its path, or
    a binary stream of its bytes named ``name``)."""
    name = path if name is None else name
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
        header = json.loads(arrays.pop("header").tobytes())
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise InputError(f"{name}: not a calib metric state file ({exc.__class__.__name__})") from None
    if header.get("format") != STATE_FORMAT or header.get("format_version", 99) > STATE_VERSION:
        raise InputError(f"{name}: not a calib metric state file of a version this calib reads")
    return header, arrays


def merge_metric_states(states: list[tuple[dict, dict]], names: list[str], min_group_rows: int = 100) -> EvaluationReport:
    """Add up metric states (same metrics, settings and K) in the given order and compute the
    metrics of all their rows together: the same numbers as one run over every row. Grouped states
    merge group by group (by name): a group's numbers are those of its rows in every state."""
    if not states:
        raise UsageError("merging metric states needs at least one state")
    first = states[0][0]
    headers: dict = {**first, "n": 0, "inputs": []}
    merged = MetricSet(check_metric_keys(first["keys"]), MetricConfig(**first["config"]), int(first["k"]))
    group_sets: dict[str, MetricSet] = {}
    group_rows: dict[str, int] = {}
    sources = set()
    seen: dict[str, str] = {}  # input digest -> the state that brought it
    for index, ((header, arrays), name) in enumerate(zip(states, names)):
        if (header["keys"], header["config"], header["k"]) != (headers["keys"], headers["config"], headers["k"]):
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
        headers["n"] += header["n"]
        headers["inputs"] += header["inputs"]
        if index:  # the first state's multi-label section is the start
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
        overall = {key: value for key, value in arrays.items() if not key.startswith(("group", CLUSTER_PREFIX))}
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
    values = merged.results()
    gated = {group: group_sets[group] for group in group_sets if group_rows[group] >= min_group_rows}
    bootstrap = merged_replicates(states, names, merged, values, gated)
    report = EvaluationReport(__version__, inputs, headers["bundle"], entries_from_json(values))
    if bootstrap is not None:
        report.bootstrap, report.warnings = bootstrap
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


def merged_replicates(
    states: list[tuple[dict, dict]], names: list[str], merged: MetricSet, values: dict, group_sets: dict | None = None
):
    """(the bootstrap section, warnings) of merged states that all hold per-cluster sums of the same
    replicates (count, seed, level, clusters), with each metric's interval added to ``values``;
    None when any state has none. The per-cluster sums add up like the rest of the state: states
    of shards evaluated with their first rows (disjoint ranges of global row indices), or of parts
    whose rows carry their own ids, give the replicates of one evaluation of all their rows;
    overlapping ranges give replicates as valid (each cluster a seeded draw of rows) but other ones,
    and a warning says so. Where every state kept its groups' own sums and there are at most
    MAX_GROUPS_WITH_REPLICATES groups, each group gets its replicates too (by name), and the gated
    ``group_sets`` ({group: merged metric set}) their floors."""
    kept = [header.get("bootstrap") for header, _ in states]
    settings: list[dict] = [found for found in kept if found is not None]
    if len(settings) < len(kept):
        return None
    own = ("first_row", "labels_sha256", "labels_fingerprint", "groups_fingerprint")  # each state's; the rest must agree
    drawn = {key: value for key, value in settings[0].items() if key not in own}
    for found, name in zip(settings, names):
        if {key: value for key, value in found.items() if key not in own} != drawn:
            raise InputError(
                f"{name}: its bootstrap replicates (count, seed, level) differ from {names[0]}'s; evaluate every shard alike"
            )
    config = BootstrapConfig(drawn["replicates"], drawn["seed"], drawn["level"])
    keys, k = check_metric_keys(states[0][0]["keys"]), int(states[0][0]["k"])

    def new_set(clusters: int | None = None) -> MetricSet:
        return MetricSet(keys, merged.config, k, clusters)

    clustered = BootstrapStates(new_set, config.seed, drawn["clusters"])
    for _, arrays in states:
        clustered.metric_set.absorb(
            {key[len(CLUSTER_PREFIX) :]: value for key, value in arrays.items() if key.startswith(CLUSTER_PREFIX)}
        )
    replicates = clustered.replicate_values(config)
    estimates = {key: entry.get("value") for key, entry in values.items()}
    for key, interval in intervals(replicates, config.level, estimates).items():
        values[key]["ci"] = interval
    if states[0][0].get("multilabel") is None:  # the analytic intervals of one evaluation (rows, not pairs)
        for key, interval in merged.intervals(config.level).items():
            values[key]["ci_analytic"] = interval
    spans = sorted(
        (found["first_row"], found["first_row"] + header["n"], name)
        for found, (header, _), name in zip(settings, states, names)
        if found.get("first_row") is not None
    )
    warnings = [
        f"{later}'s rows (from global row {start}) overlap {earlier}'s (to row {end}): the intervals are valid but not those "
        "of one evaluation of all rows; evaluate each shard with its first row"
        for (_, end, earlier), (start, _, later) in zip(spans, spans[1:])
        if start < end
    ][:1]
    # the labels' fingerprint of the merged rows, the sum of the states' own: a merged report pairs
    # with another of the same rows however they were split (states of an earlier calib have none)
    parts = [found.get("labels_fingerprint") for found in settings]
    known = [part for part in parts if part is not None]
    fingerprint = add_fingerprints(known) if len(known) == len(parts) else None
    by_group, groups_fingerprint_ = _merged_group_replicates(states, new_set, config, drawn["clusters"])
    of_pairs = states[0][0].get("multilabel") is not None  # a multi-label input's (row, label) pairs
    floor_groups = group_sets if by_group is not None else None
    gaps = (not of_pairs, not of_pairs or (states[0][0].get("groups") or {}).get("source") == "labels")
    floors = floors_section(keys, merged, floor_groups, config.level, config.seed, gaps)
    section = BootstrapSection(
        config.replicates,
        config.seed,
        config.level,
        sum(header["n"] for header, _ in states),
        drawn["clusters"],
        fingerprint,
        [],
        {key: as_report_list(values) for key, values in replicates.items()},
        by_group,
        groups_fingerprint_,
        floors=floors,
        draw=CLUSTER_DRAW,
    )
    return section, warnings or None


def _merged_group_replicates(states: list[tuple[dict, dict]], new_set, config: BootstrapConfig, clusters: int):
    """({group: {metric: replicate values}}, the groups' fingerprint) of merged states that all kept
    their groups' own per-cluster sums, at most MAX_GROUPS_WITH_REPLICATES groups in all; (None,
    None) otherwise."""
    if any("groups_fingerprint" not in header.get("bootstrap", {}) for header, _ in states):
        return None, None
    names = sorted({name for header, _ in states for name in header["groups"]["names"]}, key=group_sort_key)
    if len(names) > MAX_GROUPS_WITH_REPLICATES:
        return None, None
    sums = {name: BootstrapStates(new_set, config.seed, clusters) for name in names}
    for header, arrays in states:
        for i, name in enumerate(header["groups"]["names"]):
            prefix = GROUP_CLUSTER_PREFIX.format(i)
            sums[name].metric_set.absorb({key[len(prefix) :]: value for key, value in arrays.items() if key.startswith(prefix)})
    by_group = {
        name: {key: as_report_list(values) for key, values in sums[name].replicate_values(config).items()} for name in names
    }
    return by_group, add_fingerprints([header["bootstrap"]["groups_fingerprint"] for header, _ in states])
