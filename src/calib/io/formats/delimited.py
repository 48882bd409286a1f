"""CSV and TSV tables with a header line: the scores in wide numeric columns (a name prefix, or every
floating-point column but the labels'), the labels in a column by name. What
``pd.DataFrame(model.predict_proba(X)).assign(target=y).to_csv(path)`` writes reads with
``--label-column target`` (the unnamed index column pandas writes is left out).

The file is parsed a block at a time (pyarrow's streaming CSV reader) into a memory-mapped staging
file, so a file of many gigabytes evaluates in bounded memory; errors name the line.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from ...errors import InputError
from .base import Contents, Format, listed_names
from .columns import INDEX_NAMES, column_numbers, label_columns, named_column_values, stacked_labels

#: Names pandas gives its index column when it writes one.
#: Bytes parsed at a time.
BLOCK_BYTES = 1 << 24


def _reader(path: str, delimiter: str, column_types: dict | None = None, name: str | None = None):
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        return pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(delimiter=delimiter),
            convert_options=pacsv.ConvertOptions(column_types=column_types or {}, strings_can_be_null=True),
        )
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"{name or path}: not a readable {_what(delimiter)} file ({exc})") from None


def _what(delimiter: str) -> str:
    return "TSV" if delimiter == "\t" else "CSV"


def _score_names(
    schema, score_prefix: str | None, scores: str | None, label: list[str], path: str
) -> tuple[list[str], str | None]:
    """(the score columns, the kind the prefix says): the columns of ``score_prefix`` (or of a
    prefix naming a kind: logit_, log_prob_, prob_), else every floating-point column but the
    labels and pandas' index."""

    from .columns import WIDE_PREFIXES, _order_wide, floating_columns

    names = schema.names
    if scores is not None:
        raise InputError(f"{path}: a CSV holds one score per column; name them by their prefix, not as one column {scores!r}")
    prefixes = {score_prefix: None} if score_prefix is not None else WIDE_PREFIXES
    for prefix, kind in prefixes.items():
        used = [n for n in names if n.startswith(prefix)]
        if used:
            return _order_wide(used), kind
    if score_prefix is not None:
        raise InputError(f"{path}: no column starts with {score_prefix!r} (found {', '.join(names)})")
    used = floating_columns(schema, label)
    if not used:
        other = next((mark for mark in (";", "|", "\t", ",") if len(names) == 1 and mark in names[0]), None)
        if other is not None:  # one column whose name holds another separator: the file is not this one's format
            raise InputError(
                f"{path}: the header is one column, {names[0][:80]!r}, which looks {other!r}-separated; calib reads "
                f".csv files separated by commas and .tsv files by tabs: convert it (for example tr {other!r} ',')"
            )
        raise InputError(
            f"{path}: no floating-point score columns (found {listed_names(names)})", cli_hint="--score-prefix PREFIX"
        )
    return used, None


class Delimited(Format):
    name = "csv"
    suffixes = (".csv", ".tsv")
    magic = None
    shards = True
    carries_columns = True
    values_as_text = True

    def read_predictions(self, path, name, score_prefix, label_column, scores=None):
        import pyarrow as pa

        delimiter = "\t" if path.lower().endswith(".tsv") else ","
        schema = _reader(path, delimiter, name=name).schema
        if all(_is_number(n) for n in schema.names):
            raise InputError(
                f"{name}: the first line holds numbers, not column names; a {_what(delimiter)} of scores needs a header line"
            )
        label = label_columns(schema.names, label_column, name)
        if score_prefix is None:
            _refuse_numbers_with_text(path, delimiter, schema, label, name)
        used, kind = _score_names(schema, score_prefix, scores, label, name)
        dtype, said = _text_precision(path, delimiter, used)
        types = {n: pa.from_numpy_dtype(dtype) for n in used}
        staged, labels, carried = _stage(path, delimiter, types, used, label, name, dtype)
        return Contents(staged, labels, kind, carried, tuple(schema.names), said)

    def names(self, path):
        return tuple(_reader(path, "\t" if path.lower().endswith(".tsv") else ",").schema.names)

    def write(self, path, name, matrix, labels, passthrough):
        write_delimited(path, name, matrix, labels, passthrough)

    def read_named(self, path, key, *, labels=False):
        import pyarrow.csv as pacsv

        delimiter = "\t" if path.lower().endswith(".tsv") else ","
        table = pacsv.read_csv(
            path,
            parse_options=pacsv.ParseOptions(delimiter=delimiter),
            convert_options=pacsv.ConvertOptions(include_columns=[key]),
        )
        column = table.column(key)
        return named_column_values(column, labels=labels)


def _text_precision(path: str, delimiter: str, used: list[str]) -> tuple[np.dtype, str | None]:
    """float32 when every score of the first block has at most 9 significant digits, as a float32
    export writes its shortest decimals (read as float32, they are its values to the bit), else
    float64; the first is said in the input-kind line."""
    import pyarrow as pa

    try:
        batch = _reader(path, delimiter, {n: pa.string() for n in used}).read_next_batch()
    except StopIteration:
        return np.dtype(np.float64), None
    texts = [text for n in used for text in batch.column(n).to_pylist()[:FLOAT32_SAMPLE] if text]
    if texts and max(map(_significant_digits, texts)) <= FLOAT32_DIGITS:
        return (
            np.dtype(np.float32),
            f"scores read as float32: every one of the first rows has at most {FLOAT32_DIGITS} significant digits, as a float32 export writes them",
        )
    return np.dtype(np.float64), None


#: float32's shortest decimals have at most this many significant digits
FLOAT32_DIGITS = 9
#: Values of each score column looked at to tell a float32 export
FLOAT32_SAMPLE = 10_000


def _significant_digits(text: str) -> int:
    mantissa = text.strip().lstrip("+-").split("e")[0].split("E")[0].replace(".", "")
    return len(mantissa.lstrip("0")) or 1


def write_delimited(path: str, name: str, matrix: np.ndarray, labels, passthrough) -> None:
    """Wide columns prob_0 .. prob_{K-1} (logit_, log_prob_ by the kind; floats in their shortest round-trip decimals; for the set
    mask 0/1 columns set_0 ..), then ``label`` (a multi-label input's label_0 ..) and the carried
    columns; atomically."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from ..atomic import atomic_path

    prefix = "set" if matrix.dtype == bool else name.removesuffix("s")  # prob_0, log_prob_0, logit_0: the kind prefixes
    values = matrix.astype(np.int8) if matrix.dtype == bool else matrix
    columns = {f"{prefix}_{k}": values[:, k] for k in range(matrix.shape[1])}
    table = pa.table(columns)
    labels = None if labels is None else np.asarray(labels, dtype=np.int64)
    if labels is not None and labels.ndim == 2:  # a multi-label input's labels: label_0 .. label_{L-1}
        for label in range(labels.shape[1]):
            table = table.append_column(f"label_{label}", pa.array(labels[:, label]))
    elif labels is not None:
        table = table.append_column("label", pa.array(labels))
    if passthrough is not None:
        for field_name, column in zip(passthrough.column_names, passthrough.columns):
            table = table.append_column(field_name, column)
    delimiter = "\t" if path.lower().endswith(".tsv") else ","
    with atomic_path(path) as tmp:
        pacsv.write_csv(table, tmp, write_options=pacsv.WriteOptions(delimiter=delimiter, quoting_style="needed"))


def _stage(path: str, delimiter: str, types: dict, used: list[str], label: list[str], name: str, dtype=np.float64):
    """Parse the file a block at a time: the scores into a memory-mapped ``dtype`` staging file (the
    file is removed at once; the mapping keeps it until released), the labels and the other
    columns into memory. Missing or non-numeric scores are refused naming their line."""
    import pyarrow as pa

    reader = _reader(path, delimiter, types)
    folder = tempfile.mkdtemp(prefix="calib-csv-")
    staging = os.path.join(folder, "scores.bin")
    rows, carried = 0, []
    label_parts: list[np.ndarray] = []
    try:
        with open(staging, "wb") as handle:
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                except (pa.ArrowException, ValueError) as exc:
                    raise InputError(f"{name}: near line {rows + 2}: {_short(exc)}") from None
                block = np.column_stack([_scores_of(batch.column(n), n, rows, name) for n in used]) if used else None
                handle.write(np.ascontiguousarray(block, dtype=dtype).tobytes())
                if label:
                    label_parts.append(stacked_labels([batch.column(n) for n in label]))
                others = [n for n in batch.schema.names if n not in used and n not in label and n not in INDEX_NAMES]
                if others:
                    carried.append(pa.Table.from_batches([batch]).select(others))
                rows += batch.num_rows
        scores = np.memmap(staging, dtype=dtype, mode="r", shape=(rows, len(used))) if rows else np.zeros((0, len(used)), dtype)
    finally:
        if os.name == "posix":
            os.unlink(staging)
            os.rmdir(folder)
    labels: np.ndarray | None
    if label_parts:
        labels = np.concatenate(label_parts)
    else:  # no rows: labels of none (a wide label matrix of none), or none given
        labels = (np.zeros((0, len(label))) if len(label) > 1 else np.zeros(0)) if label else None
    return scores, labels, pa.concat_tables(carried) if carried else None


def _scores_of(column, key: str, offset: int, name: str) -> np.ndarray:
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise InputError(f"{name}: line {offset + row + 2}: score column {key!r} is empty")
    return column_numbers(column)


def _refuse_numbers_with_text(path: str, delimiter: str, schema, label: list[str], name: str) -> None:
    """A column of the first block that is mostly numbers but not all (a score with a typo, "nan"
    spelt otherwise) would silently drop out of the scores: refused, naming its first bad line."""
    import pyarrow as pa

    text_columns = [f.name for f in schema if pa.types.is_string(f.type) and f.name not in label and f.name not in INDEX_NAMES]
    if not text_columns:
        return
    try:
        batch = _reader(path, delimiter).read_next_batch()
    except StopIteration:
        return
    for column in text_columns:
        values = batch.column(column).to_pylist()
        numeric = [value is not None and _is_number(value) for value in values]
        if values and sum(numeric) >= len(values) / 2:
            row = numeric.index(False)
            raise InputError(
                f"{name}: line {row + 2}: column {column!r} holds numbers and {values[row]!r}; fix the value or drop the column"
            )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200]


DELIMITED = Delimited()
