"""Reading predictions, labels, group values, true probabilities and features, in any format of
:data:`calib.io.formats.FORMATS` (a file, or a stream on stdin told apart by its magic number).

Every failure becomes an :class:`InputError` naming the file and the problem.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import sys
import tempfile
from collections.abc import Callable

import numpy as np

from ..core.validation import (
    UnitIntervalScores,
    as_array,
    check_labels,
    check_score_array,
    check_true_probs,
    resolve_kind,
)
from ..errors import InputError, UsageError
from .formats import (
    BY_SUFFIX,
    MAGIC_LENGTH,
    TEXT_SNIFF,
    format_by_magic,
    format_named,
    format_of,
    format_of_bytes,
    suffix_of,
)
from .formats.base import LABEL_NAMES, Contents, group_key, labels_key, listed_names, pick_name, required_name
from .formats.columns import column_numbers
from .formats.text import text_labels, text_values
from .logs import find_log
from .predictions import PER_ROW_ONLY, TASKS, LabelLayout, Predictions, is_label_matrix, multilabel_pairs


def file_sha256(path: str) -> str:
    """sha256 of a file's bytes, read in blocks: no mapping, so hashing after the scores were read
    through a memory map adds nothing to the peak resident memory."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _files_sha256(paths: list[str]) -> str:
    """sha256 of several files: of their sha256s in order."""
    return hashlib.sha256("".join(file_sha256(p) for p in paths).encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Reading:
    """How a predictions input is read, as one value: the keyword arguments of
    :func:`read_predictions` (every command that reads predictions takes the same ones).

    >>> import calib
    >>> preds = Reading(input_kind="logits", require_labels=True).read(calib.sample_path("cifar10_val.npz"))
    >>> preds.n, preds.k, preds.kind
    (5000, 10, 'logits')
    """

    labels_path: str | None = None
    input_kind: str = "auto"
    score_prefix: str | None = None
    label_column: str | None = None
    require_labels: bool = False
    renormalise: bool = False
    scores: str | None = None
    task: str = "auto"
    input_format: str | None = None
    confidence_column: str | None = None
    missing_label: int | str | None = None
    missing_confidence: str | None = None

    def read(self, path: str) -> Predictions:
        """:func:`read_predictions` of ``path`` as this reading says."""
        return read_predictions(path, **dataclasses.asdict(self))


def read_predictions(
    path: str,
    *,
    labels_path: str | None = None,
    input_kind: str = "auto",
    score_prefix: str | None = None,
    label_column: str | None = None,
    require_labels: bool = False,
    renormalise: bool = False,
    scores: str | None = None,
    task: str = "auto",
    input_format: str | None = None,
    confidence_column: str | None = None,
    missing_label: int | str | None = None,
    missing_confidence: str | None = None,
) -> Predictions:
    """Read and validate a predictions file, once: everything after takes the result as it is.

    Parameters
    ----------
    path : str
        A file in a format of :data:`calib.io.formats.FORMATS`, or "-" for stdin (its format told
        by its magic number, else read as text: JSON lines when it starts with "{", else CSV, or TSV
        when its header line holds tabs and no comma).
    labels_path : str, optional
        A labels file (its array or column ``label_column``); else the labels come from ``path``.
    input_kind : str
        "auto", "logits", "probs" or "log-probs".
    score_prefix : str, optional
        Wide score columns by this name prefix (column formats).
    label_column : str, optional
        The array or column holding the labels; by default ``label`` or ``labels``.
    require_labels : bool
        Refuse a file without labels.
    renormalise : bool
        Read probabilities whose rows sum to less than 1 (top-k truncated), each row divided by its sum.
    scores : str, optional
        The array or column holding the scores; by default the one named logits, log_probs or
        probs (or, in a .npz of one 2-D floating array, that one: the input-kind line says so).
    task : str
        auto (decided from the labels), multiclass, binary or multilabel (labels a (N, L) 0/1
        matrix, read as the N L (row, label) pairs).
    missing_label : int or "null", optional
        Rows may lack a label: a null (NaN) label, or also this value, marks one; such rows get
        :data:`calib.core.validation.MISSING_LABEL`. None refuses a row without a label.
    missing_confidence : str, optional
        An evaluation log's sample without a stated confidence is refused; "browsecomp" sets it to
        1.0 as BrowseComp's grader does (:mod:`calib.io.stated`), the input-kind line counting them.

    Returns
    -------
    Predictions
        Scores (memory-mapped or read on demand where the format allows), labels, the kind and why.
    """
    name = "<stdin>" if path == "-" else path
    sha: str | Callable[[], str]  # the input's sha256, or how to compute it when it is asked for
    in_file = None if labels_path is not None else label_column  # names the labels file's column otherwise
    if path == "-":
        stream = sys.stdin.buffer
        head = stream.read(MAGIC_LENGTH)
        if input_format is None and format_by_magic(head) is None and b"\n" not in head:
            head += stream.readline(TEXT_SNIFF)  # text is told by its first line
        fmt, suffix = format_named(input_format, name) if input_format is not None else format_of_bytes(head, name)
        digest = hashlib.sha256(head)
        with tempfile.TemporaryDirectory(prefix="calib-stdin-") as folder:  # the readers take a path
            staged = os.path.join(folder, "stdin" + suffix)
            with open(staged, "wb") as handle:  # copied a block at a time: the stream is never whole in memory
                handle.write(head)
                for block in iter(functools.partial(stream.read, STDIN_BLOCK), b""):
                    digest.update(block)
                    handle.write(block)
            sha = digest.hexdigest()
            contents = _read_staged(fmt, staged, name, (score_prefix, in_file, scores, confidence_column))
    elif input_format is not None:
        _require_file(path)
        sha = functools.partial(file_sha256, path)
        fmt, suffix = format_named(input_format, name)
        with tempfile.TemporaryDirectory(prefix="calib-named-") as folder:  # the readers tell the format by the name
            staged = os.path.join(folder, "input" + suffix)
            os.symlink(os.path.abspath(path), staged)
            contents = _read_staged(fmt, staged, name, (score_prefix, in_file, scores, confidence_column))
    elif log := find_log(path):  # an evaluation tool's outputs (calib.io.logs)
        reader, outputs = log
        sha = functools.partial(_files_sha256, reader.files(outputs))
        contents = reader.read(outputs, name, scores, missing_confidence)
    else:
        _require_file(path)
        sha = functools.partial(file_sha256, path)
        contents = _contents(format_of(path), path, name, (score_prefix, in_file, scores, confidence_column))
    labels, label_name = contents.labels, name
    if labels_path is not None:
        labels, label_name = read_labels(labels_path, label_column), labels_path
    preds = _validated(
        name,
        contents.scores,
        contents.kind,
        input_kind,
        sha,
        contents.passthrough,
        labels,
        label_name,
        renormalise,
        task,
        missing_label,
    )
    if contents.reader_says and contents.picked is not None:  # a confidence column, a harness log: the reader says
        preds.kind_reason = contents.picked
    elif contents.picked is not None:  # said in the input-kind line: no name told which arrays these are
        preds.kind_reason = f"{preds.kind_reason}; {contents.picked}"
    preds.groups_by, preds.absent, preds.answers = contents.groups_by, contents.absent, contents.answers
    if preds.labels is None and require_labels:
        found = listed_names(contents.names)
        raise InputError(
            f"{name}: no labels in the file (no array or column named label or labels; found {found}); "
            "name the one that holds them or give a labels file",
            cli_hint="--label-column NAME or --labels FILE",
        )
    return preds


def _read_staged(fmt, staged: str, name: str, picks: tuple) -> Contents:
    """:func:`_contents` of a file under a temporary name (stdin copied to it, or a link naming a
    file's format), read while the name exists: scores read on demand are read now; a memory map
    (of a .npy) outlives the name on POSIX, and is copied elsewhere (Windows deletes no file that a
    mapping holds)."""
    contents = _contents(fmt, staged, name, picks)
    if not isinstance(contents.scores, np.ndarray):
        contents.scores = contents.scores[:]
    elif isinstance(contents.scores, np.memmap) and os.name != "posix":
        contents.scores = np.array(contents.scores)
    return contents


def _contents(fmt, path: str, name: str, picks: tuple) -> Contents:
    """What the predictions file ``path`` of format ``fmt`` holds, picked by ``picks`` = (score
    prefix, label column, scores, confidence column)."""
    score_prefix, label_column, scores, confidence_column = picks
    if confidence_column is None:
        return fmt.read_predictions(path, name, score_prefix, label_column, scores)
    if score_prefix is not None or scores is not None:
        raise UsageError("a confidence column is the scores; name the scores once")
    names = fmt.names(path) or ()
    correct = pick_name(names, label_column, name, preferred=CORRECT_NAMES) or required_name(
        names, None, name, "0/1 correctness", preferred=LABEL_NAMES, hint="--correct-column NAME"
    )
    confidence = np.asarray(fmt.read_named(path, required_name(names, confidence_column, name, "confidences")), dtype=np.float64)
    if confidence.ndim != 1:
        raise InputError(f"{name}: the confidence column {confidence_column!r} holds lists; it takes one number per row")
    finite = confidence[np.isfinite(confidence)]
    if finite.size and finite.max() > 1.0 and finite.max() <= 100.0 and finite.min() >= 0.0:
        raise InputError(
            f"{name}: the confidence column {confidence_column!r} holds values up to {finite.max():g}, above 1; "
            "if they are percentages, divide them by 100"
        )
    correctness = np.asarray(fmt.read_named(path, correct, labels=True))
    if correctness.dtype == np.bool_:
        correctness = correctness.astype(np.int64)
    picked = f"confidence column {confidence_column!r} read as P(correct), column {correct!r} as correct (1) or not (0)"
    return Contents(confidence, correctness, "probs", None, tuple(names), picked, reader_says=True, answers=True)


#: The column of 0/1 correctness beside a confidence column, when none is named
CORRECT_NAMES = ("correct", "is_correct")


def predictions_from_arrays(
    scores, labels=None, *, kind: str = "auto", name: str = "scores", renormalise: bool = False, task: str = "auto"
) -> Predictions:
    """Arrays checked exactly as a file's are: ``scores`` (N, K) (or a binary column) of logits,
    probabilities or log-probabilities (``kind``, or detected from the values), ``labels`` (N,)
    integers in [0, K) or None; ``renormalise`` as for :func:`read_predictions`. The digest (a bundle's ``fitted_on``) is the sha256 of the scores'
    bytes in C order."""
    scores = as_array(scores, name)
    if labels is not None:
        labels = as_array(labels, "labels")

    def digest() -> str:
        return hashlib.sha256(np.ascontiguousarray(scores).tobytes()).hexdigest()

    return _validated(name, scores, None, kind, digest, None, labels, "labels", renormalise, task)


def _validated(
    name, scores, named_kind, input_kind, sha, passthrough, labels, label_name, renormalise=False, task="auto", missing_label=None
) -> Predictions:
    """The checks every input gets, whatever it came from: shape and dtype, every value against
    its kind (detected, named by the array, or declared), and the labels. A (N, L) matrix of 0/1
    labels makes a multi-label input, read as its N L (row, label) pairs (``task``: auto, or the
    task the caller declares, checked)."""
    if task not in TASKS:
        raise UsageError(f"task must be one of {', '.join(TASKS)}; got {task!r}", cli_hint="--task")
    layout = None
    matrix = labels is not None and is_label_matrix(labels)
    if matrix or (task == "multilabel" and labels is None):
        if task in ("multiclass", "binary"):
            raise InputError(
                f"{label_name}: labels are a (N, L) matrix, a multi-label input, but the task is declared {task}",
                cli_hint="--task multilabel",
            )
        n_rows = int(np.shape(scores)[0])
        scores, labels, n_labels = multilabel_pairs(scores, labels, name, label_name)  # without labels: to apply to
        layout = LabelLayout(n_rows, tuple(map(str, range(n_labels))))
    elif task == "multilabel":
        raise InputError(
            f"{label_name}: a multi-label input needs labels as a (N, L) matrix of 0/1, one per score; "
            "these are one class index per row"
        )
    check_score_array(scores, name)
    if renormalise:
        kind, reason = resolve_kind(scores, input_kind, name, renormalise=True)
    elif named_kind == "logits" and input_kind == "auto":
        kind, reason = _named_logits(scores, name)
    elif named_kind is not None and input_kind == "auto":  # the array name says the kind: check it holds
        kind, reason = resolve_kind(scores, named_kind, name, given_by=f"the array is named for {named_kind}")
    else:
        if input_kind == "logits" and named_kind == "probs":
            _refuse_probabilities_declared_logits(scores, name)
        kind, reason = resolve_kind(scores, input_kind, name, given_by="as declared")
    preds = Predictions(name, scores, kind, reason, None, sha, passthrough, multilabel=layout)
    if labels is not None:
        preds.labels = check_labels(labels, preds.n, preds.k, label_name, missing=missing_label if layout is None else None)
    if task == "binary" and preds.k != 2:
        raise InputError(f"{name}: the task is declared binary but the scores have K = {preds.k} classes")
    if layout is not None:  # the binary-column wording of the kind, said of the labels
        reason = preds.kind_reason.replace("the class-1 logit of a binary model", "per-label logits")
        reason = reason.replace("P(class 1) of a binary model", "per-label probabilities P(y_l = 1)")
        preds.kind_reason = (
            f"{reason}; multi-label: {layout.n_rows} rows x {layout.n_labels} labels, read as {preds.n} (row, label) pairs"
        )
    return preds


def _refuse_probabilities_declared_logits(scores, name) -> None:
    """Scores named probs that are probabilities (every row in [0, 1] summing to 1) declared logits:
    read as logits, softmax(p) would flatten every row (an ECE of 0.72 where 0.026 is right), so
    this is refused like logits named for probabilities; scores named probs that are not on the
    simplex may be declared anything."""
    try:
        detected, _ = resolve_kind(scores, "auto", name)
    except UnitIntervalScores:
        return
    if detected == "probs":
        raise InputError(
            f"{name}: the scores are named probs and are probabilities (every value in [0, 1], every row summing to 1), "
            "but are declared logits, which would read them as logits and give wrong numbers; read them as probabilities "
            "(a bundle fitted on logits applies to them through log p where its method allows it), or rename the "
            "array if they really are logits",
            cli_hint="drop --input-kind logits",
        )


def _named_logits(scores, name) -> tuple[str, str]:
    """The kind of an array or column named for logits: a name is easily wrong (probabilities saved
    under ``logits=``), so values that look like probabilities are refused, saying so: every row in
    [0, 1] summing to 1, or to a value in (0, 1] (the top k classes of probabilities). Other values
    are logits (log-probabilities are logits up to a constant per row)."""
    try:
        detected, _ = resolve_kind(scores, "auto", name)
    except UnitIntervalScores as exc:  # a [0, 1] matrix whose rows do not sum to 1
        detected = "truncated probs" if exc.mass_missing else "logits"
    if detected in ("probs", "truncated probs"):
        looks = (
            "probabilities (every value in [0, 1], every row summing to 1)"
            if detected == "probs"
            else "probabilities with mass missing (every value in [0, 1], every row summing to at most 1)"
        )
        raise InputError(
            f"{name}: the scores are named logits but look like {looks}; declare the input kind: "
            "probs to read them as probabilities, logits to confirm the name",
            cli_hint="--input-kind probs (with --renormalise for rows that sum to less than 1) or --input-kind logits",
        )
    return "logits", "the array is named for logits"


#: Array / column holding the true conditional probabilities in synthetic-data files.
TRUE_PROBS = "true_probs"


def read_true_probs(path: str, preds: Predictions) -> np.ndarray:
    """True probabilities for ``preds``: a .npy matrix, the ``true_probs`` array of a .npz, or the
    ``true_probs`` list column of a .parquet; checked as probabilities of shape (N, K)."""
    _require_file(path)
    truth = format_of(path).read_matrix(path, (TRUE_PROBS,))
    return check_true_probs(truth, preds.n, preds.k, path)


#: Arrays a .npz may hold features under (synthetic data stores its 2-d inputs as "points").
FEATURE_NAMES = ("features", "points")


def read_features(path: str | None, preds: Predictions) -> np.ndarray | None:
    """Per-row features (N, d) that adaptive thresholds condition on: a .npy matrix, or the
    ``features`` (else ``points``) array of a .npz. Finite floats, one row per row of ``preds``
    (a multi-label input's pairs take none). No path, no features (None)."""
    if path is None:
        return None
    if preds.multilabel is not None:
        raise InputError(f"{path}: {PER_ROW_ONLY}", cli_hint="drop --features")
    n_rows = preds.n
    _require_file(path)
    features = np.asarray(format_of(path).read_matrix(path, FEATURE_NAMES))
    if not np.issubdtype(features.dtype, np.number) or features.dtype == np.bool_:
        raise InputError(f"{path}: features must be numeric; got dtype {features.dtype}")
    features = features.reshape(len(features), -1).astype(np.float64)
    if len(features) != n_rows:
        raise InputError(f"{path}: {len(features)} feature rows for {n_rows} rows of scores")
    if not np.isfinite(features).all():
        raise InputError(f"{path}: features contain NaN or inf")
    return features


def read_labels(path: str, column: str | None = None) -> np.ndarray:
    """Labels from a file of their own: a file of one array (.npy); the ``column`` (else ``label``
    or ``labels``, else the only) array or column of a file that names them (.npz, .parquet); or text
    (.txt, .csv), one label a line, with an optional header line naming the columns (``column``
    picks one of several). Labels are checked (integers, or integral floats, in [0, K)) against the
    scores."""
    _require_file(path)
    fmt = BY_SUFFIX.get(suffix_of(path))
    if fmt is None or fmt.values_as_text:
        return text_labels(path, column)
    names = fmt.names(path)
    key = None if names is None else labels_key(names, column, path)
    return fmt.read_named(path, key, labels=True)


def read_group_values(
    preds: Predictions, pred_path: str, column: str | None, path: str | None, label_column: str | None = None
) -> tuple[np.ndarray, str]:
    """(one group value per row, where they came from): the array or column ``column`` of a
    values file ``path`` (a file of one array: it; a file of named arrays or columns: ``column`` or
    the only one; .txt, one value a line; .csv, a header line then rows, ``column`` or the only
    column), or without ``path`` the column ``column`` of the predictions file (a column carried
    beside the scores, a named array, or the labels' own column: calibration per class)."""
    if path is not None:
        _require_file(path)
        fmt = BY_SUFFIX.get(suffix_of(path))
        source = path if column is None else f"{path}:{column}"
        if fmt is None or fmt.values_as_text:
            return text_values(path, column), source
        names = fmt.names(path)
        if names is None:
            return fmt.read_named(path, None), source
        key = group_key(names, column, path)
        return fmt.read_named(path, key), f"{path}:{key}"
    if column is None:
        raise UsageError(f"{preds.name}: which column groups the rows? name a column of the file or a values file")
    if preds.labels is not None and column == (label_column or next((n for n in LABEL_NAMES if n == column), None)):
        return preds.labels, column
    if preds.passthrough is not None and column in preds.passthrough.column_names:
        return column_numbers(preds.passthrough.column(column)), column
    if pred_path != "-":
        fmt = format_of(pred_path)
        if not fmt.carries_columns and fmt.names(pred_path) is not None:
            return np.asarray(fmt.read_matrix(pred_path, (column,))), column
    found = ", ".join(preds.passthrough.column_names) if preds.passthrough is not None else "none"
    raise InputError(f"{preds.name}: no column {column!r} beside the scores (found {found})")


def _require_file(path: str) -> None:
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, expected a file")


#: Bytes of stdin copied at a time to the file the readers read.
STDIN_BLOCK = 1 << 22
