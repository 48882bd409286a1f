"""Readers for .npy (memory-mapped), .npz, .parquet and a .npy stream on stdin (docs/cli.md, "Inputs").

Every failure becomes an :class:`InputError` naming the file and the problem.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import os
import re
import struct
import sys
import tempfile
import threading
import tokenize
import zipfile

import numpy as np

from ..errors import InputError
from ..validation import UnitIntervalScores, as_array, check_labels, check_score_array, check_true_probs, resolve_kind
from .predictions import Predictions

#: Array / column names and the kind of scores they hold (docs/cli.md).
SCORE_NAMES = {"logits": "logits", "log_probs": "log-probs", "probs": "probs"}
#: Wide parquet columns tried when no --score-prefix is given.
WIDE_PREFIXES = {"logit_": "logits", "log_prob_": "log-probs", "prob_": "probs"}
#: Where labels are found inside a predictions file (array of a .npz, column of a .parquet) when no
#: name is given.
LABEL_NAMES = ("label", "labels")


@dataclasses.dataclass
class Contents:
    """What a predictions file holds: the scores (maybe memory-mapped or read on demand), the
    labels if found, the kind the score array's name says, parquet columns to carry through, and
    the names of every array or column (for error messages)."""

    scores: object
    labels: np.ndarray | None
    kind: str | None
    passthrough: object | None
    names: tuple[str, ...]


def pick_name(
    names, wanted: str | None, path: str, *, preferred=(), sole: bool = False, what: str | None = None, hint: str | None = None
) -> str | None:
    """Which of ``names`` (a file's arrays or columns) holds something: ``wanted`` when given (an
    error listing ``names`` when absent), else the one of ``preferred`` present (an error when
    several are), else, with ``sole``, the file's only one. None when nothing fits, or with
    ``what`` an error asking which (``hint`` names the option that says it)."""
    found = ", ".join(names) or "none"
    if wanted is not None:
        if wanted not in names:
            raise InputError(f"{path}: no array or column named {wanted!r} (found {found})")
        return wanted
    present = [n for n in preferred if n in names]
    if len(present) > 1:
        raise InputError(f"{path}: both {' and '.join(map(repr, present))} are present; name the one to use", cli_hint=hint)
    if present:
        return present[0]
    if sole and len(names) == 1:
        return names[0]
    if what is not None:
        raise InputError(f"{path}: which array or column holds the {what}? (found {found})", cli_hint=hint)
    return None


def label_name(names, wanted: str | None, path: str) -> str | None:
    """The array or column of a predictions file holding the labels: ``wanted``, else ``label`` or
    ``labels``, else None."""
    return pick_name(names, wanted, path, preferred=LABEL_NAMES, hint="--label-column NAME")


def file_sha256(path: str) -> str:
    """sha256 of a file's bytes, read in blocks: no mapping, so hashing after the scores were read
    through a memory map adds nothing to the peak resident memory."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def read_predictions(
    path: str,
    *,
    labels_path: str | None = None,
    input_kind: str = "auto",
    score_prefix: str | None = None,
    label_column: str | None = None,
    require_labels: bool = False,
    renormalise: bool = False,
) -> Predictions:
    """Read and validate a predictions file; ``path == "-"`` reads stdin, whose format (.npy, .npz
    or .parquet bytes) is told by its magic number.

    Labels come from ``labels_path`` when given (its array or column ``label_column``), else from
    the file: the array or column ``label_column``, by default ``label`` or ``labels``. ``renormalise``
    reads probabilities whose rows sum to less than 1 (top-k truncated), each row divided by its sum."""
    name = "<stdin>" if path == "-" else path
    in_file = None if labels_path is not None else label_column  # names the labels file's column otherwise
    if path == "-":
        stream = sys.stdin.buffer
        head = stream.read(max(map(len, MAGIC)))
        suffix = format_of_bytes(head, name)
        digest = hashlib.sha256(head)
        with tempfile.TemporaryDirectory(prefix="calib-stdin-") as folder:  # the readers take a path
            staged = os.path.join(folder, "stdin" + suffix)
            with open(staged, "wb") as handle:  # copied a block at a time: the stream is never whole in memory
                handle.write(head)
                for block in iter(functools.partial(stream.read, STDIN_BLOCK), b""):
                    digest.update(block)
                    handle.write(block)
            sha = digest.hexdigest()
            contents = READ_PREDICTIONS[suffix](staged, name, score_prefix, in_file)
            if not isinstance(contents.scores, np.ndarray):
                contents.scores = contents.scores[:]
            elif isinstance(contents.scores, np.memmap) and os.name != "posix":
                contents.scores = np.array(contents.scores)  # Windows deletes no file that a mapping holds
            # elsewhere a mapping outlives the deleted file: the .npy stays mapped, read a chunk at a time
    else:
        _require_file(path)
        sha = functools.partial(file_sha256, path)
        contents = READ_PREDICTIONS[format_of(path)](path, name, score_prefix, in_file)
    labels, label_name = contents.labels, name
    if labels_path is not None:
        labels, label_name = read_labels(labels_path, label_column), labels_path
    preds = _validated(
        name, contents.scores, contents.kind, input_kind, sha, contents.passthrough, labels, label_name, renormalise
    )
    if preds.labels is None and require_labels:
        found = ", ".join(contents.names) or "none"
        raise InputError(
            f"{name}: no labels in the file (no array or column named label or labels; found {found}); "
            "name the one that holds them or give a labels file",
            cli_hint="--label-column NAME or --labels FILE",
        )
    return preds


def predictions_from_arrays(
    scores, labels=None, *, kind: str = "auto", name: str = "scores", renormalise: bool = False
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

    return _validated(name, scores, None, kind, digest, None, labels, "labels", renormalise)


def _validated(name, scores, named_kind, input_kind, sha, passthrough, labels, label_name, renormalise=False) -> Predictions:
    """The checks every input gets, whatever it came from: shape and dtype, every value against
    its kind (detected, named by the array, or declared), and the labels."""
    check_score_array(scores, name)
    if renormalise:
        kind, reason = resolve_kind(scores, input_kind, name, renormalise=True)
    elif named_kind == "logits" and input_kind == "auto":
        kind, reason = _named_logits(scores, name)
    elif named_kind is not None and input_kind == "auto":  # the array name says the kind: check it holds
        kind, reason = resolve_kind(scores, named_kind, name, given_by=f"the array is named for {named_kind}")
    else:
        kind, reason = resolve_kind(scores, input_kind, name, given_by="as declared")
    preds = Predictions(name, scores, kind, reason, None, sha, passthrough)
    if labels is not None:
        preds.labels = check_labels(labels, preds.n, preds.k, label_name)
    return preds


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
    truth = READ_ARRAY[format_of(path)](path, (TRUE_PROBS,))
    return check_true_probs(truth, preds.n, preds.k, path)


#: Arrays a .npz may hold features under (synthetic data stores its 2-d inputs as "points").
FEATURE_NAMES = ("features", "points")


def read_features(path: str | None, n_rows: int) -> np.ndarray | None:
    """Per-row features (N, d) that adaptive thresholds condition on: a .npy matrix, or the
    ``features`` (else ``points``) array of a .npz. Finite floats, one row per prediction row.
    No path, no features (None)."""
    if path is None:
        return None
    _require_file(path)
    features = np.asarray(READ_ARRAY[format_of(path)](path, FEATURE_NAMES))
    if not np.issubdtype(features.dtype, np.number) or features.dtype == np.bool_:
        raise InputError(f"{path}: features must be numeric; got dtype {features.dtype}")
    features = features.reshape(len(features), -1).astype(np.float64)
    if len(features) != n_rows:
        raise InputError(f"{path}: {len(features)} feature rows for {n_rows} rows of scores")
    if not np.isfinite(features).all():
        raise InputError(f"{path}: features contain NaN or inf")
    return features


def _npz_array(path: str, names: tuple[str, ...]) -> np.ndarray:
    """The first of ``names`` that a .npz holds; a clear error when it holds none or is unreadable."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            key = next((k for k in names if k in archive.files), None)
            if key is None:
                raise InputError(f"{path}: no array named {' or '.join(names)} (found {', '.join(archive.files) or 'none'})")
            return archive[key]
    except PARSE_ERRORS as exc:
        raise _unreadable(path, ".npz", exc) from None


def read_labels(path: str, column: str | None = None) -> np.ndarray:
    """Labels from a file of their own: a .npy array; the ``column`` (else ``label`` or ``labels``,
    else the only) array of a .npz or column of a .parquet; or text (.txt, .csv), one label a
    line, with an optional header line naming the columns (``column`` picks one of several).
    Labels are checked (integers, or integral floats, in [0, K)) against the scores."""
    _require_file(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".npy":
        return np.asarray(_load_npy(path, path, mmap=False))
    if suffix in (".npz", ".parquet"):
        key = _labels_file_key(_array_names(path, suffix), column, path)
        if suffix == ".npz":
            return np.asarray(_npz_array(path, (key,)))
        import pyarrow.parquet as pq

        return _label_column(pq.read_table(path, columns=[key]).column(key))
    return _text_labels(path, column)


def read_group_values(
    preds: Predictions, pred_path: str, column: str | None, path: str | None, label_column: str | None = None
) -> tuple[np.ndarray, str]:
    """(one group value per row, where they came from): the array or column ``column`` of a
    values file ``path`` (.npy; .npz or .parquet: ``column`` or the only one; .txt, one value a
    line; .csv, a header line then rows, ``column`` or the only column), or without ``path`` the
    column ``column`` of the predictions file (a parquet column carried beside the scores, an
    array of a .npz, or the labels' own column: calibration per class)."""
    if path is not None:
        _require_file(path)
        suffix = os.path.splitext(path)[1].lower()
        source = path if column is None else f"{path}:{column}"
        if suffix == ".npy":
            return np.asarray(_load_npy(path, path, mmap=False)), source
        if suffix in (".npz", ".parquet"):
            key = _group_key(_array_names(path, suffix), column, path)
            return _named_values(path, suffix, key), f"{path}:{key}"
        return _text_values(path, column), source
    if preds.labels is not None and column == (label_column or next((n for n in LABEL_NAMES if n == column), None)):
        return preds.labels, column
    if preds.passthrough is not None and column in preds.passthrough.column_names:
        return preds.passthrough.column(column).to_numpy(zero_copy_only=False), column
    if pred_path != "-" and format_of(pred_path) == ".npz":
        return np.asarray(_npz_array(pred_path, (column,))), column
    found = ", ".join(preds.passthrough.column_names) if preds.passthrough is not None else "none"
    raise InputError(f"{preds.name}: no column {column!r} beside the scores (found {found})")


def _named_values(path: str, suffix: str, key: str) -> np.ndarray:
    if suffix == ".npz":
        return np.asarray(_npz_array(path, (key,)))
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=[key]).column(key).to_numpy(zero_copy_only=False)


def _group_key(names, column: str | None, path: str) -> str:
    return pick_name(names, column, path, sole=True, what="group values", hint="--group-by COLUMN")


def _text_values(path: str, column: str | None) -> np.ndarray:
    """Values as text: .csv has a header line naming its columns, any other text file one value a
    line (an empty line is a missing value)."""
    if not path.lower().endswith(".csv"):
        return np.array([row[0] for row in _text_rows(path, split=False)], dtype=object)
    rows = _text_rows(path, split=True)
    if not rows:
        return np.array([], dtype=object)
    names = [name.strip() for name in rows[0]]
    index = names.index(_group_key(names, column, path))
    return np.array([row[index] if index < len(row) else "" for row in rows[1:]], dtype=object)


def _text_rows(path: str, *, split: bool) -> list[list[str]]:
    """The lines of a text file, split into cells as a CSV (``split``) or each a single cell."""
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return list(csv.reader(handle)) if split else [[line.rstrip("\r\n")] for line in handle]
    except (UnicodeDecodeError, OSError, csv.Error) as exc:
        raise InputError(f"{path}: cannot read it as text ({exc.__class__.__name__})") from None


def _labels_file_key(names, column: str | None, path: str) -> str:
    """The array or column of a labels file that holds them: as for a predictions file, or the
    file's only one."""
    return pick_name(names, column, path, preferred=LABEL_NAMES, sole=True, what="labels", hint="--label-column NAME")


def _array_names(path: str, suffix: str) -> tuple[str, ...]:
    """The arrays of a .npz or the columns of a .parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                return tuple(archive.files)
        return tuple(pq.ParquetFile(path).schema_arrow.names)
    except (pa.ArrowException, *PARSE_ERRORS) as exc:
        raise _unreadable(path, suffix, exc) from None


def _text_labels(path: str, column: str | None) -> np.ndarray:
    """Labels from text: one a line, cells split by commas (a CSV), an optional header naming the
    columns. Integral numbers only ("2" or "2.0"); an empty or other cell is refused naming its line."""
    lines = [row for row in _text_rows(path, split=True) if any(cell.strip() for cell in row)]
    header = lines[0] if lines and not all(_is_number(cell) for cell in lines[0] if cell.strip()) else None
    rows = lines[1:] if header else lines
    if header is None:
        width = max((len(row) for row in rows), default=1)
        if width > 1:
            raise InputError(f"{path}: {width} columns and no header line naming them; keep one label a line")
        if column is not None:
            raise InputError(f"{path}: no header line, so no column named {column!r}")
        index = 0
    else:
        names = [cell.strip() for cell in header]
        index = names.index(_labels_file_key(names, column, path))
    values = np.empty(len(rows), dtype=np.float64)
    first_line = 2 if header else 1
    for i, row in enumerate(rows):
        cell = row[index].strip() if index < len(row) else ""
        if not _is_number(cell):
            raise InputError(f"{path}: line {i + first_line}: label {cell[:40]!r} is not a class index (an integer in [0, K))")
        values[i] = float(cell)
    return values


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _require_file(path: str) -> None:
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, expected a file")


#: What a parser of an untrusted file may raise besides ValueError / OSError: numpy parses .npy
#: headers with ast and tokenize, so a corrupted header surfaces as SyntaxError or TokenError.
PARSE_ERRORS = (
    ValueError,
    OSError,
    EOFError,
    SyntaxError,
    tokenize.TokenError,
    TypeError,
    KeyError,
    IndexError,
    OverflowError,
    UnicodeDecodeError,
    zipfile.BadZipFile,
)


def _load_npy(source, name: str, *, mmap: bool) -> np.ndarray:
    try:
        return np.load(source, mmap_mode="r" if mmap else None, allow_pickle=False)
    except PARSE_ERRORS as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise InputError(f"{name}: holds Python objects (pickled data is never loaded); need a numeric array") from None
        raise InputError(f"{name}: not a readable .npy file (truncated or corrupt: {exc.__class__.__name__}: {exc})") from None


def _read_npz(path: str, name: str, score_prefix: str | None, label_column: str | None) -> Contents:
    try:
        archive = np.load(path, allow_pickle=False)
    except PARSE_ERRORS as exc:
        raise _unreadable(name, ".npz", exc) from None
    with archive:
        names = tuple(archive.files)
        labels_key = label_name(names, label_column, name)
        present = [key for key in SCORE_NAMES if key in names]
        if len(present) > 1:
            raise InputError(f"{name}: several score arrays ({', '.join(present)}); keep one")
        if present:
            key, kind = present[0], SCORE_NAMES[present[0]]
        elif set(names) - {labels_key} == {"arr_0"}:
            key, kind = "arr_0", None
        else:
            raise InputError(
                f"{name}: no score array; expected one named logits, log_probs or probs (found {', '.join(sorted(names)) or 'none'})"
            )
        try:
            scores = _mapped_member(path, archive.zip, key)
            if scores is None:
                scores = archive[key]
            labels = archive[labels_key] if labels_key is not None else None
        except PARSE_ERRORS as exc:
            raise InputError(f"{name}: array {key!r} is unreadable ({exc})") from None
    return Contents(scores, labels, kind, None, names)


def _mapped_member(path: str, archive: zipfile.ZipFile, key: str) -> np.ndarray | None:
    """Array ``key`` of a .npz memory-mapped in place when its member is stored uncompressed (what
    ``np.savez`` writes), so a large score matrix is neither copied nor CRC-checked up front (0.7 s
    per 200 MB); None for a compressed member, which is read the ordinary way."""
    info = archive.getinfo(f"{key}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        local = handle.read(30)  # the local file header: its name and extra-field lengths are at 26
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise ValueError("bad local header")
        name_length, extra_length = struct.unpack("<HH", local[26:30])
        start = info.header_offset + 30 + name_length + extra_length
        handle.seek(start)
        version = np.lib.format.read_magic(handle)
        shape, fortran_order, dtype = (
            np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        )(handle)
        offset = handle.tell()
    if dtype.hasobject:
        raise ValueError("object arrays are never loaded")
    if offset - start + int(np.prod(shape)) * dtype.itemsize > info.file_size:
        raise ValueError("the member is truncated")
    if int(np.prod(shape)) == 0:
        return np.zeros(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=shape, order="F" if fortran_order else "C", offset=offset)


def _read_parquet(path: str, name: str, score_prefix: str | None, label_column: str | None) -> Contents:
    """The scores stay in the file and are decoded a row group at a time (:class:`ParquetScores`);
    labels and pass-through columns are read whole."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        columns = parquet.schema_arrow.names
        labels_key = label_name(columns, label_column, name)
        labels = None if labels_key is None else _label_column(parquet.read(columns=[labels_key]).column(labels_key))
    except (pa.ArrowException, *PARSE_ERRORS) as exc:
        raise InputError(f"{name}: not a readable parquet file ({exc})") from None
    list_names = [c for c in SCORE_NAMES if c in columns]
    if score_prefix is None and list_names:
        if len(list_names) > 1:
            raise InputError(f"{path}: several score columns ({', '.join(list_names)}); keep one")
        used, kind = [list_names[0]], SCORE_NAMES[list_names[0]]
    else:
        prefixes = {score_prefix: None} if score_prefix is not None else WIDE_PREFIXES
        used, kind = [], None
        for prefix, prefix_kind in prefixes.items():
            used = [c for c in columns if c.startswith(prefix)]
            if used:
                kind = prefix_kind
                break
        if not used:
            raise InputError(
                f"{path}: no score column; expected a list column logits, log_probs or probs, or wide columns by a name prefix",
                cli_hint="--score-prefix PREFIX",
            )
        used = _order_wide(used)
    scores = ParquetScores(parquet, used, wide=not (score_prefix is None and list_names), path=path)
    keep = [c for c in columns if c not in used and c != labels_key]
    passthrough = parquet.read(columns=keep) if keep else None
    return Contents(scores, labels, kind, passthrough, tuple(columns))


def _label_column(column) -> np.ndarray:
    """A parquet label column as an array; missing entries become NaN, which the label check
    refuses naming the row."""
    import pyarrow as pa

    if column.null_count and (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        column = column.cast(pa.float64())
    return column.to_numpy(zero_copy_only=False)


class ParquetScores:
    """The (N, K) score matrix of a parquet file, read on demand a row group at a time.

    Supports what the pipeline asks of a score array: ``shape``, ``ndim``, ``dtype``, ``reshape`` to
    its own shape, and row indexing by a slice or an index array. Decoding one row group at a time
    (the last one cached) keeps memory at the row groups a chunk of rows touches, so a file written
    with row groups is streamed like a memory-mapped .npy; a file with one huge row group is not.
    """

    def __init__(self, parquet, columns: list[str], *, wide: bool, path: str):
        self.parquet, self.columns, self.wide, self.path = parquet, columns, wide, path
        sizes = [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)]
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._cached: tuple[int, np.ndarray] | None = None
        self._lock = threading.Lock()
        first = self._group(0) if sizes and sizes[0] else self._decode(parquet.read(columns=columns))
        self.dtype = first.dtype
        self.shape = (int(self.starts[-1]), int(first.shape[1]))
        self.ndim = 2

    def _decode(self, table) -> np.ndarray:
        if self.wide:
            return _wide_columns_to_matrix(table, self.columns, self.path)
        return _list_column_to_matrix(table.column(self.columns[0]), self.path, self.columns[0])

    def _group(self, index: int) -> np.ndarray:
        """Row group ``index`` decoded; one reader at a time (chunks are read from worker threads),
        and the cache is read and replaced whole, so a thread never returns another's group."""
        import pyarrow as pa

        cached = self._cached
        if cached is not None and cached[0] == index:
            return cached[1]
        with self._lock:
            try:
                table = self.parquet.read_row_group(index, columns=self.columns)
            except (pa.ArrowException, *PARSE_ERRORS) as exc:
                raise InputError(f"{self.path}: row group {index} is unreadable ({exc})") from None
            matrix = self._decode(table)
        if index and matrix.shape[1] != self.shape[1]:
            raise InputError(
                f"{self.path}: row group {index} has {matrix.shape[1]} scores per row, the first has {self.shape[1]}"
            )
        self._cached = (index, matrix)
        return matrix

    def reshape(self, *shape):
        if shape in ((self.shape[0], -1), (self.shape,), (self.shape[0], self.shape[1])):
            return self
        raise ValueError(f"ParquetScores cannot take shape {shape}")

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self[:], dtype=dtype)

    def __getitem__(self, rows) -> np.ndarray:
        if isinstance(rows, slice):
            start, stop, step = rows.indices(self.shape[0])
            if step != 1:
                return self[np.arange(start, stop, step)]
            first = int(np.searchsorted(self.starts, start, side="right")) - 1
            parts, position = [], start
            for group in range(max(first, 0), len(self.starts) - 1):
                if position >= stop:
                    break
                lo, hi = self.starts[group], self.starts[group + 1]
                block = self._group(group)
                parts.append(block[position - lo : min(stop, hi) - lo])
                position = min(stop, hi)
            if not parts:
                return np.empty((0, self.shape[1]), dtype=self.dtype)
            return parts[0] if len(parts) == 1 else np.concatenate(parts)
        index = np.asarray(rows)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        out = np.empty((len(index), self.shape[1]), dtype=self.dtype)
        group_of = np.searchsorted(self.starts, index, side="right") - 1
        for group in np.unique(group_of):
            chosen = group_of == group
            out[chosen] = self._group(int(group))[index[chosen] - self.starts[group]]
        return out


def _list_column_to_matrix(column, path: str, key: str) -> np.ndarray:
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type) or pa.types.is_fixed_size_list(array.type)):
        raise InputError(f"{path}: column {key!r} must be a list of numbers per row; got {array.type}")
    if array.null_count:
        raise InputError(f"{path}: column {key!r} has {array.null_count} missing rows")
    if len(array) == 0:
        return np.zeros((0, 0), dtype=np.float64)
    if pa.types.is_fixed_size_list(array.type):
        width = array.type.list_size
    else:
        lengths = array.value_lengths().to_numpy()
        width = int(lengths[0])
        if (lengths != width).any():
            row = int(np.argmax(lengths != width))
            raise InputError(f"{path}: ragged rows in column {key!r}: row 0 has {width} scores, row {row} has {lengths[row]}")
    values = array.flatten()
    if values.null_count:
        raise InputError(f"{path}: column {key!r} has {values.null_count} missing scores")
    if not pa.types.is_floating(values.type):
        raise InputError(f"{path}: column {key!r} must hold floating-point scores; got {values.type}")
    return values.to_numpy(zero_copy_only=False).reshape(len(array), width)


def _order_wide(names: list[str]) -> list[str]:
    """Wide columns in the order of their numeric suffix when every suffix is an integer."""
    suffixes = [re.search(r"(\d+)$", n) for n in names]
    if all(suffixes):
        return [n for _, n in sorted(zip((int(s.group(1)) for s in suffixes), names))]
    return names


def _wide_columns_to_matrix(table, names: list[str], path: str) -> np.ndarray:
    import pyarrow as pa

    for n in names:
        col = table.column(n)
        if not pa.types.is_floating(col.type):
            raise InputError(f"{path}: score column {n!r} must be floating point; got {col.type}")
        if col.null_count:
            raise InputError(f"{path}: score column {n!r} has {col.null_count} missing values")
    return np.stack([table.column(n).to_numpy() for n in names], axis=1)


def _npy_predictions(path: str, name: str, score_prefix: str | None, label_column: str | None) -> Contents:
    if label_column is not None:
        raise InputError(f"{name}: a .npy file holds one array and no labels; give the labels in a file of their own")
    return Contents(_load_npy(path, name, mmap=True), None, None, None, ())


def _npy_array(path: str, names: tuple[str, ...]) -> np.ndarray:
    return _load_npy(path, path, mmap=True)


def _parquet_array(path: str, names: tuple[str, ...]) -> np.ndarray:
    """The first of ``names`` that a parquet file holds as a list column, as an (N, K) matrix."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        columns = pq.ParquetFile(path).schema_arrow.names
        key = next((k for k in names if k in columns), None)
        if key is None:
            raise InputError(f"{path}: no column named {' or '.join(names)} (found {', '.join(columns) or 'none'})")
        table = pq.read_table(path, columns=[key])
    except (pa.ArrowException, *PARSE_ERRORS) as exc:
        raise InputError(f"{path}: not a readable parquet file ({exc})") from None
    return _list_column_to_matrix(table.column(key), path, key)


#: The formats, one entry each: suffix -> the reader of a predictions file (scores, labels, the
#: kind the array name says, pass-through columns) and of one named array (true probabilities,
#: features). A new format is a reader pair, a writer (calib.io.writers.WRITERS) and its magic.
READ_PREDICTIONS = {".npy": _npy_predictions, ".npz": _read_npz, ".parquet": _read_parquet}
READ_ARRAY = {".npy": _npy_array, ".npz": _npz_array, ".parquet": _parquet_array}
#: Bytes of stdin copied at a time to the file the readers read.
STDIN_BLOCK = 1 << 22
#: The first bytes of each format (how a stream on stdin is told apart).
MAGIC = {b"\x93NUMPY": ".npy", b"PK\x03\x04": ".npz", b"PAR1": ".parquet"}


def format_of(path: str) -> str:
    """The format of ``path`` by its suffix (a key of :data:`READ_PREDICTIONS`); an existing file
    must also start with that format's magic number (a text file named .npz is refused as such,
    before any reader sees it)."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in READ_PREDICTIONS:
        raise InputError(f"{path}: unknown file type {suffix or '(none)'}; expected {', '.join(READ_PREDICTIONS)}")
    if os.path.isfile(path):
        with open(path, "rb") as handle:
            start = handle.read(8)
        expected = next(magic for magic, known in MAGIC.items() if known == suffix)
        if not start.startswith(expected):
            if not start:
                raise InputError(f"{path}: empty file")
            actual = format_by_magic(start)
            what = (
                f"{actual} data; rename it to {actual}" if actual else ("text" if _looks_like_text(start) else f"bytes {start!r}")
            )
            raise InputError(f"{path}: not a {suffix} file (a {suffix} file starts with {expected!r}; this one holds {what})")
    return suffix


def _looks_like_text(start: bytes) -> bool:
    try:
        text = start.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c.isprintable() or c.isspace() for c in text)


def _unreadable(path: str, suffix: str, exc: Exception) -> InputError:
    """The error for a file its reader could not parse; numpy's advice to unpickle is never passed on."""
    if "pickle" in str(exc).lower():
        return InputError(f"{path}: not a readable {suffix} file (not a zip archive of arrays; pickled data is never loaded)")
    return InputError(f"{path}: not a readable {suffix} file ({exc})")


def format_by_magic(start: bytes) -> str | None:
    """The suffix of the format whose magic number ``start`` begins with, or None."""
    return next((suffix for magic, suffix in MAGIC.items() if start.startswith(magic)), None)


def format_of_bytes(data: bytes, name: str) -> str:
    """The format of a byte stream by its magic number."""
    suffix = format_by_magic(data)
    if suffix is not None:
        return suffix
    if not data:
        raise InputError(f"{name}: empty input")
    raise InputError(f"{name}: not .npy, .npz or .parquet bytes (the stream starts {data[:8]!r})")
