"""Apache Arrow IPC files (Feather version 2): the columns of a Parquet file, memory-mapped, so the
score column is read in place; other columns are carried through to the outputs."""

from __future__ import annotations

from ...errors import InputError
from ..atomic import atomic_path
from .base import PARSE_ERRORS, Contents, Format, unreadable
from .columns import (
    floating_note,
    label_columns,
    labels_of,
    list_column_to_matrix,
    matrix_columns,
    named_column_values,
    output_table,
    score_columns,
    wide_columns_to_matrix,
)


def _table(path: str, name: str):
    """The file's table, memory-mapped (the buffers stay in the file until read)."""
    import pyarrow as pa

    try:
        with pa.memory_map(path) as source:
            return pa.ipc.open_file(source).read_all()
    except (pa.ArrowException, *PARSE_ERRORS) as exc:
        raise unreadable(name, ".arrow", exc) from None


class Arrow(Format):
    name = "arrow"
    suffixes = (".arrow", ".feather")
    magic = b"ARROW1"
    shards = True
    carries_columns = True

    def read_predictions(self, path, name, score_prefix, label_column, scores=None):
        table = _table(path, name)
        columns = table.column_names
        label_keys = label_columns(columns, label_column, name)
        labels = labels_of([table.column(key) for key in label_keys])
        used, kind, wide = score_columns(columns, score_prefix, path, scores, table.schema, label_keys)
        picked = floating_note(used, kind, wide, score_prefix)
        if wide:
            matrix = wide_columns_to_matrix(table, used, path)
        else:
            matrix = list_column_to_matrix(table.column(used[0]), path, used[0])
        keep = [c for c in columns if c not in used and c not in label_keys]
        return Contents(matrix, labels, kind, table.select(keep) if keep else None, tuple(columns), picked)

    def names(self, path):
        return tuple(_table(path, path).column_names)

    def read_named(self, path, key, *, labels=False):
        column = _table(path, path).column(key)
        return named_column_values(column, labels=labels)

    def read_matrix(self, path, names):
        table = _table(path, path)
        key = next((k for k in names if k in table.column_names), None)
        if key is None:
            raise InputError(f"{path}: no column named {' or '.join(names)} (found {', '.join(table.column_names) or 'none'})")
        return list_column_to_matrix(table.column(key), path, key)

    def write(self, path, name, matrix, labels, passthrough):
        import pyarrow as pa

        table = output_table(matrix_columns(name, matrix), labels, passthrough)
        with atomic_path(path) as tmp, pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)


ARROW = Arrow()
