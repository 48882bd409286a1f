"""What an estimation keeps of a batch's rows, additive over shards: the sums of each score's
expectation and variance under the calibrated probabilities (exact for any number of rows), the
labelled rows' realised scores, the rows outside the map's support, and a uniform sample of the rows
themselves, of bounded size, for what needs rows (EM's priors, the test beyond label shift, the
labelled rows' calibration test).

The sample is a bottom-k sample (Cohen and Kaplan 2007): each row gets the key splitmix64 of its
global index (calib.bootstrap.splitmix64), and the sample is the k rows of the smallest keys, sorted
by global index. The bottom k of a union is the bottom k of the parts' bottom k, so the sample of
merged shards is the sample one pass over all their rows takes: merged states give the numbers of
one estimation of all the rows. k is :data:`SAMPLE_ROWS`, fewer where the classes are many (at most
:data:`SAMPLE_CELLS` probabilities); below k rows every row is kept.

Every sum is kept per group (one group, "", without groups).
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass

import numpy as np

from .._version import __version__
from ..bootstrap import splitmix64
from ..core.validation import MISSING_LABEL, lacks_labels
from ..errors import InputError
from .checks import outside_support
from .expectations import SCORES, expected, predicted_class, realised
from .reference import ReferenceRows, margins

SAMPLE_ROWS = 20_000
SAMPLE_CELLS = 2_000_000
#: The seed of the rows' sample keys
SAMPLE_SEED = 67
STATE_FORMAT, STATE_VERSION = "calib-estimation-state", 1
#: The arrays of a state other than the sample's and the reference's
SUMS = ("unlabelled", "labelled", "expected_sums", "variance_sums", "realised_sums", "outside")
SAMPLE = ("keys", "rows", "probs", "margins", "labels", "predicted", "groups")


def sample_size(n_classes: int) -> int:
    return max(1, min(SAMPLE_ROWS, SAMPLE_CELLS // n_classes))


def sample_keys(rows: np.ndarray) -> np.ndarray:
    key = np.random.SeedSequence([SAMPLE_SEED, 1]).generate_state(1, np.uint64)[0]
    return splitmix64(key, np.asarray(rows, dtype=np.uint64))


@dataclass
class BatchState:
    """The additive state of an estimation (module docstring): ``names`` the groups; ``sums``
    {name in SUMS: (G,) or (G, scores)}; ``sample`` {name in SAMPLE: per kept row}; the reference
    rows' record (None for a map that keeps none)."""

    n_classes: int
    names: list[str]
    sums: dict[str, np.ndarray]
    sample: dict[str, np.ndarray]
    reference: ReferenceRows | None

    @classmethod
    def of(cls, probs, logits, labels, reference, *, groups=None, first_row: int = 0, predicted=None) -> BatchState:
        """The state of a batch: calibrated probabilities (n, K), uncalibrated log-space scores,
        labels (None, or :data:`MISSING_LABEL` where a row has none), the map's reference record,
        the rows' groups (calib.evaluation.groups.Groups or None), the global index of the first
        row, and the model's predicted classes (default: the argmax of ``probs``)."""
        probs = np.asarray(probs, dtype=np.float64)
        n, k = probs.shape
        labels = np.full(n, MISSING_LABEL) if labels is None else np.asarray(labels, dtype=np.int64)
        predicted = predicted_class(probs) if predicted is None else np.asarray(predicted, dtype=np.int64)
        names, codes = ([""], np.zeros(n, dtype=np.int64)) if groups is None else (list(groups.names), np.asarray(groups.codes))
        missing = labels == MISSING_LABEL
        row_margins = margins(logits)
        per_row = expected(probs, predicted)
        known = np.flatnonzero(~missing)
        values = realised(probs[known], predicted[known], labels[known])

        def by_group(weights=None, rows=None):
            chosen = codes if rows is None else codes[rows]
            return np.bincount(chosen, weights=weights, minlength=len(names))

        unlabelled = np.flatnonzero(missing)
        outside = (
            outside_support(row_margins[unlabelled], reference.margins)
            if reference is not None
            else np.zeros(len(unlabelled), bool)
        )
        sums = {
            "unlabelled": by_group(rows=unlabelled).astype(np.float64),
            "labelled": by_group(rows=known).astype(np.float64),
            "expected_sums": np.stack([by_group(per_row[s][0][unlabelled], unlabelled) for s in SCORES], axis=1),
            "variance_sums": np.stack([by_group(per_row[s][1][unlabelled], unlabelled) for s in SCORES], axis=1),
            "realised_sums": np.stack([by_group(values[s], known) for s in SCORES], axis=1),
            "outside": by_group(outside.astype(np.float64), unlabelled),
        }
        rows = first_row + np.arange(n, dtype=np.int64)
        sample = {"keys": sample_keys(rows), "rows": rows, "probs": probs, "margins": row_margins}
        sample.update(labels=labels, predicted=predicted, groups=codes)
        return cls(k, names, sums, _bottom(sample, sample_size(k)), reference)

    def group(self, code: int | None) -> BatchState:
        """The state of one group's rows (None: of all rows)."""
        if code is None:
            sums = {name: value.sum(axis=0, keepdims=True) for name, value in self.sums.items()}
            return BatchState(
                self.n_classes,
                [""],
                sums,
                {**self.sample, "groups": np.zeros(len(self.sample["rows"]), np.int64)},
                self.reference,
            )
        kept = self.sample["groups"] == code
        sample = {name: value[kept] for name, value in self.sample.items()}
        sample["groups"] = np.zeros(int(kept.sum()), np.int64)
        return BatchState(
            self.n_classes,
            [self.names[code]],
            {name: value[code : code + 1] for name, value in self.sums.items()},
            sample,
            self.reference,
        )

    def to_bytes(self, settings: dict) -> bytes:
        """The state file (an .npz of numeric arrays, its header as JSON bytes; no pickle)."""
        from ..io.formats.npz import npz_bytes

        header = {
            "format": STATE_FORMAT,
            "format_version": STATE_VERSION,
            "calib_version": __version__,
            "n_classes": self.n_classes,
            "groups": self.names,
            "settings": settings,
            "reference": None if self.reference is None else self.reference.to_manifest(),
        }
        arrays = {"header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)}
        arrays.update({f"sum_{name}": value for name, value in self.sums.items()})
        arrays.update({f"sample_{name}": value for name, value in self.sample.items()})
        if self.reference is not None:
            arrays.update(self.reference.arrays())
        return npz_bytes(arrays)

    @classmethod
    def read(cls, path: str) -> tuple[BatchState, dict]:
        """(the state, the settings it was written with) of a file of :meth:`to_bytes`."""
        try:
            with np.load(path, allow_pickle=False) as archive:
                arrays = {key: archive[key] for key in archive.files}
            header = json.loads(arrays.pop("header").tobytes())
            if header.get("format") != STATE_FORMAT or header.get("format_version", 99) > STATE_VERSION:
                raise InputError(f"{path}: not a calib estimation state file of a version this calib reads")
            reference = (
                None
                if header["reference"] is None
                else ReferenceRows.from_bundle({"reference": header["reference"]}, arrays, path)
            )
            state = cls(
                int(header["n_classes"]),
                list(header["groups"]),
                {name: arrays[f"sum_{name}"] for name in SUMS},
                {name: arrays[f"sample_{name}"] for name in SAMPLE},
                reference,
            )
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise InputError(f"{path}: not a calib estimation state file ({exc.__class__.__name__})") from None
        return state, header["settings"]


def batch_state(
    calibrator,
    reference: ReferenceRows | None,
    preds,
    *,
    groups=None,
    features=None,
    first_row: int = 0,
    n_labels: int | None = None,
) -> BatchState:
    """The state of the predictions ``preds`` (calib.io.Predictions, checked to fit ``calibrator``,
    a fitted calib.calibrators.base.Calibrator) under that calibrator, its labels as read (with
    :data:`MISSING_LABEL` where a row has none). ``n_labels``: the labels of a multi-label fit,
    which estimates without labels do not take."""
    from ..errors import UsageError
    from ..pipeline import apply_calibrator

    if n_labels is not None or preds.output_layout.n_labels is not None:
        raise UsageError("estimates without labels are for single-label inputs; this one is multi-label")
    probs = apply_calibrator(calibrator, preds, "probs", features)[0]
    return BatchState.of(probs, preds.logits(), preds.labels, reference, groups=groups, first_row=first_row)


def _bottom(sample: dict[str, np.ndarray], size: int) -> dict[str, np.ndarray]:
    """The ``size`` rows of the smallest keys, in global-index order."""
    if len(sample["keys"]) > size:
        kept = np.argpartition(sample["keys"], size - 1)[:size]
        sample = {name: value[kept] for name, value in sample.items()}
    order = np.argsort(sample["rows"], kind="stable")
    return {name: value[order] for name, value in sample.items()}


def _same_reference(first: ReferenceRows | None, other: ReferenceRows | None) -> bool:
    if first is None or other is None:
        return first is other
    return first.n == other.n and all(np.array_equal(a, b) for a, b in zip(first.arrays().values(), other.arrays().values()))


def merge_states(states: list[BatchState], names: list[str]) -> BatchState:
    """The state of all the rows of ``states`` (files ``names``): sums added, groups matched by name,
    the bottom-k sample of the union. States of other class counts or other maps are refused."""
    from ..evaluation.groups import group_sort_key

    first = states[0]
    for state, name in zip(states[1:], names[1:]):
        if state.n_classes != first.n_classes:
            raise InputError(f"{name}: a state of {state.n_classes} classes; {names[0]} has {first.n_classes}")
        if not _same_reference(state.reference, first.reference):
            raise InputError(f"{name}: estimated with another calibration map than {names[0]}; merge states of one map")
    groups = sorted({g for state in states for g in state.names}, key=group_sort_key)
    sums = {name: np.zeros((len(groups), *first.sums[name].shape[1:])) for name in SUMS}
    parts = []
    for state in states:
        where = np.array([groups.index(g) for g in state.names], dtype=np.int64)
        for name in SUMS:
            np.add.at(sums[name], where, state.sums[name])
        parts.append({**state.sample, "groups": where[state.sample["groups"]]})
    sample = {name: np.concatenate([part[name] for part in parts]) for name in SAMPLE}
    if len(np.unique(sample["rows"])) < len(sample["rows"]):
        raise InputError(
            "the states share rows (the same global row index twice): give each shard the global index of its first row",
            cli_hint="--first-row",
        )
    return BatchState(first.n_classes, groups, sums, _bottom(sample, sample_size(first.n_classes)), first.reference)


def is_state_file(path: str) -> bool:
    """True for a file of :meth:`BatchState.to_bytes` (an estimation's state, not a metric state)."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            return json.loads(archive["header"].tobytes()).get("format") == STATE_FORMAT
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return False


__all__ = ["MISSING_LABEL", "BatchState", "batch_state", "is_state_file", "lacks_labels", "merge_states"]
