"""The in-memory view of a predictions file: raw scores (possibly memory-mapped), their kind, labels."""

from __future__ import annotations

import functools
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np

from ..core.numerics import LOG_PROB_FLOOR, log1mexp, log_of_probs, log_softmax, release_rows, row_chunks
from ..core.validation import repair_probs
from ..errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa

#: Which rows: a slice of them (a chunk), or their indices (rows read in group order).
Rows = slice | np.ndarray


def task_name(k: int | None, label_layout: dict | None) -> str:
    """The problem a report's input section describes (its K and its label layout,
    :meth:`LabelLayout.to_json`): "multi-label (L labels)", "binary" or "K-class"."""
    if label_layout:
        return f"multi-label ({label_layout.get('labels')} labels)"
    return "binary" if k == 2 else f"{k}-class"


@dataclass(frozen=True)
class RowLayout:
    """How a calibrated output of N rows of K classes is laid out: an (N, K) matrix, each chunk's
    block as it is (probabilities, log-probabilities, or the boolean set mask)."""

    n: int
    k: int

    @property
    def shape(self) -> tuple[int, int]:
        return self.n, self.k

    @property
    def width(self) -> int:
        """Columns of the output per row the calibrator sees."""
        return self.k

    def dtype(self, what: str) -> type:
        return bool if what == "sets" else np.float64

    def block(self, block: np.ndarray, what: str) -> np.ndarray:
        return block

    def labels(self, labels: np.ndarray | None) -> np.ndarray | None:
        return labels

    def describe(self) -> str:
        return f"{self.n} rows"

    def pair_labels(self, rows) -> None:
        """Rows of classes have no pair labels."""
        return None

    def pair_keys(self, row_keys: np.ndarray) -> np.ndarray:
        """The keys of the predictions of rows keyed ``row_keys``: the rows' own."""
        return row_keys

    #: Rows of classes have no labels of their own: each row is one prediction over K classes.
    n_labels = None

    @property
    def pairs_per_row(self) -> int:
        """Predictions per row of the input: one (its rows are independent of each other)."""
        return 1

    def to_json(self) -> None:
        """Rows of classes need nothing beyond the report's own n and k."""
        return None

    def task(self) -> str:
        """The problem the rows pose: "binary" or "K-class"."""
        return task_name(self.k, None)


#: Why a multi-label input takes no features or training rows.
PER_ROW_ONLY = "features and training rows are per row; the calibrators of a multi-label input's pairs take neither"

#: The code of a label's conformal set over {0, 1} in a multi-label input's (N, L) sets:
#: {0} -> 0 (absent), {1} -> 1 (present), {0, 1} -> 2 (either), {} -> -1 (empty).
LABEL_SET_CODES = {"absent": 0, "present": 1, "either": 2, "empty": -1}


#: What the rows predict: ``auto`` decides from the labels (a (N, L) 0/1 matrix of the scores'
#: shape: multilabel; else one class index per row: binary for K = 2, multiclass above).
TASKS = ("auto", "multiclass", "binary", "multilabel")


def is_label_matrix(labels) -> bool:
    """Whether ``labels`` is a (N, L) matrix with L > 1: a multi-label input's."""
    return np.ndim(labels) == 2 and np.shape(labels)[1] > 1


def multilabel_pairs(scores, labels, name: str, label_name: str) -> tuple[np.ndarray, np.ndarray | None, int]:
    """A multi-label input's (row, label) pairs: the (N, L) scores as one column of N L values (a
    view of a C-ordered array), the (N, L) 0/1 labels likewise (None without labels), and L.
    Labels may be booleans, integers or integral floats, each 0 or 1; a missing or other value is
    refused naming its row and label."""
    scores = scores if isinstance(scores, np.ndarray) else np.asarray(scores[slice(None)])  # scores read on demand
    if scores.ndim != 2:
        raise InputError(f"{name}: a multi-label input's scores are a (N, L) matrix; got shape {scores.shape}")
    if labels is not None:
        labels = np.asarray(labels)
        if scores.shape != labels.shape:
            raise InputError(
                f"{label_name}: a multi-label input needs a 0/1 label per score: labels {labels.shape}, scores {scores.shape}"
            )
        if not (np.issubdtype(labels.dtype, np.number) or labels.dtype == np.bool_):
            raise InputError(f"{label_name}: multi-label labels must be 0 or 1; got dtype {labels.dtype}")
        bad = ~((labels == 0) | (labels == 1))  # NaN included
        if bad.any():
            row, label = (int(i) for i in np.argwhere(bad)[0])
            value = labels[row, label].item()
            raise InputError(f"{label_name}: row {row}, label {label} is {value!r}; multi-label labels are 0 or 1")
        labels = labels.astype(np.int64).reshape(-1)
    return np.ascontiguousarray(scores).reshape(-1), labels, int(scores.shape[1])


@dataclass(frozen=True)
class LabelLayout:
    """A multi-label input read as its (row, label) pairs: ``n_rows`` rows of L = ``len(names)``
    labels, pair (i, l) at position i L + l, each pair a binary prediction (a P(y_l = 1) or a
    logit of it) with its 0/1 label (docs/multilabel.md). A calibrated output is the (N, L) matrix
    of each pair's P(y_l = 1) (or its log), or of its set's code (:data:`LABEL_SET_CODES`)."""

    n_rows: int
    names: tuple[str, ...]

    @property
    def n_labels(self) -> int:
        return len(self.names)

    @property
    def pairs_per_row(self) -> int:
        """Predictions per row of the input: its L labels' pairs, which are not independent of each
        other (the bootstrap resamples rows, and intervals that take pairs as independent rows do not
        apply to them)."""
        return self.n_labels

    def task(self) -> str:
        """The problem the pairs pose: "multi-label (L labels)"."""
        return task_name(2, self.to_json())

    def codes(self) -> np.ndarray:
        """The label of every pair, in pair order: 0, 1, ..., L - 1, 0, 1, ..."""
        return np.tile(np.arange(self.n_labels), self.n_rows)

    def positions(self, rows) -> np.ndarray:
        """The positions of the pairs ``rows`` (a slice or indices) selects."""
        return np.arange(*rows.indices(self.n_rows * self.n_labels)) if isinstance(rows, slice) else np.asarray(rows)

    def pair_labels(self, rows) -> np.ndarray:
        """The label of each pair ``rows`` selects: pair p is row p // L's label p % L."""
        return self.positions(rows) % self.n_labels

    def pair_rows(self, rows) -> np.ndarray:
        """The row of each pair ``rows`` selects: p // L."""
        return self.positions(rows) // self.n_labels

    def pair_keys(self, row_keys: np.ndarray) -> np.ndarray:
        """The keys of the pairs of rows keyed ``row_keys`` (unsigned): row r's label l is r L + l,
        so a key divided by L is its row's (the bootstrap draws a row's pairs together)."""
        per_row = np.uint64(self.n_labels)
        labels = np.tile(np.arange(self.n_labels, dtype=np.uint64), len(row_keys))
        return np.repeat(np.asarray(row_keys, dtype=np.uint64) * per_row, self.n_labels) + labels

    def to_json(self) -> dict:
        """The layout as a report's input section and a metric state hold it."""
        return {"rows": self.n_rows, "labels": self.n_labels}

    @property
    def shape(self) -> tuple[int, int]:
        return self.n_rows, self.n_labels

    @property
    def width(self) -> int:
        """One output per pair: the calibrator sees each pair as a row of two classes."""
        return 1

    def dtype(self, what: str) -> type:
        return np.int8 if what == "sets" else np.float64

    def block(self, block: np.ndarray, what: str) -> np.ndarray:
        """The pairs' output from their (pairs, 2) block, as a column: P(y_l = 1) (or its log), or
        the code of each pair's set over {0, 1}."""
        if what != "sets":
            return block[:, 1:]
        has_0, has_1 = block[:, 0], block[:, 1]
        codes = has_1.astype(np.int8) + (has_0 & has_1)  # {0}: 0, {1}: 1, {0, 1}: 2
        codes[~(has_0 | has_1)] = LABEL_SET_CODES["empty"]
        return codes[:, None]

    def labels(self, labels: np.ndarray | None) -> np.ndarray | None:
        """The pairs' labels as the (N, L) matrix they were read from."""
        return None if labels is None else labels.reshape(self.shape)

    def describe(self) -> str:
        return f"{self.n_rows} rows x {self.n_labels} labels"


@dataclass
class Predictions:
    """An (N, K) score matrix with its resolved kind and optional labels.

    ``scores`` is kept as read (float16/32/64, maybe a read-only memmap) and converted to float64
    one chunk of rows at a time. A binary column (N,) or (N, 1) is presented as K = 2.
    """

    name: str
    scores: np.ndarray
    kind: str
    kind_reason: str
    labels: np.ndarray | None
    #: sha256 hex of the file, how to compute it, its pending result, or None (not to be computed)
    digest: str | Callable[[], str] | Future | None
    passthrough: pa.Table | None = None  # columns carried beside the scores (through `apply`, to group by)
    true_probs: np.ndarray | None = None  # (N, K) true conditional probabilities (synthetic data)
    #: A multi-label input: its layout, the scores and labels being its (row, label) pairs.
    multilabel: LabelLayout | None = None
    #: The carried column whose values group the rows when no grouping is asked for (the task of
    #: each row of a harness results directory), or None
    groups_by: str | None = None
    #: (N, K) True where a row has no such class (a harness row of fewer choices, padded to K), or
    #: None: such entries are the reader's padding, not the model's scores
    absent: np.ndarray | None = None
    #: Stated confidences in answers: a binary input whose class 1 is "the answer is right" (a
    #: confidence column, an evaluation log's confidences), each row's answer being class 1
    answers: bool = False

    @property
    def task_of_its_kind(self) -> str:
        """The task to read another input of the same problem with: "multilabel" for a multi-label
        input (scores without labels are its pairs too), else "auto"."""
        return "auto" if self.multilabel is None else "multilabel"

    @property
    def output_layout(self) -> RowLayout | LabelLayout:
        """How a calibrated output of these rows is laid out: (N, K), or a multi-label input's (N, L)."""
        return self.multilabel if self.multilabel is not None else RowLayout(self.n, self.k)

    @functools.cached_property
    def sha256(self) -> str | None:
        """sha256 of the input file, hashed on first use (apply never needs it: 0.15 s per 200 MB, or
        1 s on a CPU without SHA instructions); None after :meth:`skip_digest`."""
        if isinstance(self.digest, Future):
            return self.digest.result()
        return self.digest if self.digest is None or isinstance(self.digest, str) else self.digest()

    def skip_digest(self) -> None:
        """Never hash the input file: for a caller that shows nothing holding the digest (the
        evaluate command's table without a JSON report or a metric state); ``sha256`` is then None."""
        if not isinstance(self.digest, str):
            self.digest = None

    def hash_in_background(self) -> None:
        """Start hashing the input file on another thread (hashlib releases the GIL), for commands
        that report the sha256 after computing something else meanwhile (evaluate)."""
        if callable(self.digest):
            pool = ThreadPoolExecutor(1, thread_name_prefix="calib-sha256")
            self.digest = pool.submit(self.digest)  # an error is raised where the hash is read
            pool.shutdown(wait=False)

    @property
    def n(self) -> int:
        return int(self.scores.shape[0])

    @property
    def binary_column(self) -> bool:
        return self.scores.ndim == 1 or self.scores.shape[1] == 1

    @property
    def k(self) -> int:
        return 2 if self.binary_column else int(self.scores.shape[1])

    def chunks(self) -> Iterator[slice]:
        return row_chunks(self.n, self.k)

    def release(self, rows) -> None:
        """Drop the pages of ``rows`` of a memory-mapped input once read (:func:`calib.core.numerics.release_rows`)."""
        release_rows(self.scores, rows)

    def required_labels(self) -> np.ndarray:
        """The labels, for what cannot go on without them: else an error naming the input."""
        if self.labels is None:
            raise InputError(f"{self.name}: evaluation needs labels; none in the file and none given", cli_hint="--labels FILE")
        return self.labels

    def logits(self, rows: Rows = slice(None)) -> np.ndarray:
        """Float64 log-space scores whose softmax is the model's probability vector.

        logits: as given; log-probs: log-softmax of them (exact renormalisation);
        probs: log(max(p, 1e-12)) of :meth:`probs_as_given`. A binary column becomes two columns:
        [0, z] for a logit, [log(1-p), log p] for a probability, and [log(1 - e^l), l] for a
        log-probability l, computed in the log domain (:func:`calib.core.numerics.log1mexp`), so
        l = -40 stays -40 and its complement's log is exact (only an exact 0 is floored, at log 1e-12).
        """
        return self.logits_and_given(rows)[0]

    def logits_and_given(self, rows: Rows = slice(None)) -> tuple[np.ndarray, np.ndarray | None]:
        """(:meth:`logits`, :meth:`probs_as_given`) of ``rows`` from one read and one repair."""
        if self.kind == "probs":
            given = self._repaired_probs(rows)
            return log_of_probs(given), given
        raw = np.asarray(self.scores[rows], dtype=np.float64)
        if self.binary_column:
            raw = raw.reshape(-1)
            if self.kind == "logits":
                return np.stack([np.zeros_like(raw), raw], axis=1), None
            log_p1 = np.minimum(raw, 0.0)
            log_p0 = log1mexp(log_p1)
            log_p0[np.isneginf(log_p0)] = LOG_PROB_FLOOR  # an exact 0, floored as for probability inputs
            return np.stack([log_p0, log_p1], axis=1), None
        if self.kind == "log-probs":
            return log_softmax(raw), None
        return raw, None

    def probs_as_given(self, rows: Rows = slice(None)) -> np.ndarray | None:
        """The probability matrix as the file gives it (kind probs), else None: rows within
        tolerance of the simplex but off it are clipped and renormalised (:func:`repair_probs`),
        the others are exactly the file's values."""
        return self._repaired_probs(rows) if self.kind == "probs" else None

    def _repaired_probs(self, rows: Rows) -> np.ndarray:
        raw = repair_probs(np.asarray(self.scores[rows], dtype=np.float64))
        if self.binary_column:
            raw = raw.reshape(-1)
            return np.stack([1.0 - raw, raw], axis=1)
        return raw

    def true_probs_rows(self, rows: Rows) -> np.ndarray | None:
        return None if self.true_probs is None else np.asarray(self.true_probs[rows], dtype=np.float64)

    def take(self, rows: np.ndarray) -> "Predictions":
        """The predictions of ``rows`` (an index array) alone, in memory, of the same kind."""
        labels = None if self.labels is None else self.labels[rows]
        return Predictions(
            f"{self.name} (rows subset)",
            np.asarray(self.scores[rows]),
            self.kind,
            self.kind_reason,
            labels,
            "",
            true_probs=None if self.true_probs is None else self.true_probs[rows],
            answers=self.answers,
        )

    def all_logits(self) -> np.ndarray:
        """Every row at once (for fitting, where the calibration split is held in memory)."""
        return self.logits(slice(None))
