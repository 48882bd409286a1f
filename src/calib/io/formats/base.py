"""What every input format shares: the :class:`Format` interface a format module implements, the
:class:`Contents` of a predictions file, how an array or column is picked by name, and the errors a
parser of an untrusted file may raise."""

from __future__ import annotations

import dataclasses
import tokenize
import zipfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ...errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa

#: Array / column names and the kind of scores they hold (docs/cli.md).
SCORE_NAMES = {"logits": "logits", "log_probs": "log-probs", "probs": "probs"}
#: Where labels are found inside a predictions file (array of a .npz, column of a .parquet) when no
#: name is given.
LABEL_NAMES = ("label", "labels")

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


class ScoresOnDemand(Protocol):
    """Scores a reader reads a block of rows at a time (a parquet file's score column): their
    shape and dtype, and ``scores[rows]`` as an array."""

    shape: tuple[int, int]
    dtype: np.dtype

    def __getitem__(self, rows) -> np.ndarray: ...


@dataclasses.dataclass
class Contents:
    """What a predictions file holds: the scores (maybe memory-mapped or read on demand), the
    labels if found, the kind the score array's name says, columns to carry through, and the names
    of every array or column (for error messages)."""

    scores: np.ndarray | ScoresOnDemand
    labels: np.ndarray | None
    kind: str | None
    passthrough: pa.Table | None
    names: tuple[str, ...]
    #: How the scores and labels were picked when no name said it (for the input-kind line)
    picked: str | None = None
    #: What the scores are, said by the reader instead of the kind's own reason (``picked`` is then it)
    reader_says: bool = False
    #: The carried column that groups the rows when no grouping is asked for
    groups_by: str | None = None
    #: (N, K) True where a row has no such class: a column the reader padded (rows of fewer choices)
    absent: np.ndarray | None = None
    #: The scores are stated confidences in answers, the labels whether each answer was right
    answers: bool = False


#: How far below a row's least log-score the choices it lacks are padded: probability 0 to
#: float64's precision (exp(-1000) underflows)
PAD_BELOW = 1000.0


def padded_rows(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
    """Rows of log-scores over each row's own choices (an evaluation log's rows have 2 to K), as
    one (N, K) matrix, K the most choices: a row's missing columns, and its entries of -inf (a
    choice the log gave no score), :data:`PAD_BELOW` below its least finite score; and where a row
    has no such choice ((N, K) True beyond its own choices), or None when every row has K."""
    widths = np.array([len(row) for row in rows])
    matrix = np.empty((len(rows), int(widths.max())))
    for i, row in enumerate(rows):
        least = row[np.isfinite(row)].min()
        matrix[i, : len(row)] = np.where(np.isfinite(row), row, least - PAD_BELOW)
        matrix[i, len(row) :] = least - PAD_BELOW
    absent = np.arange(matrix.shape[1])[None, :] >= widths[:, None]
    return matrix, (absent if absent.any() else None)


class Format:
    """One input/output format: a module of ``calib.io.formats`` defines a subclass and one
    instance, listed in ``calib.io.formats.FORMATS``. What a format cannot do it leaves to these
    defaults, which refuse in one line."""

    #: Short name and what the help texts call it
    name: str = ""
    #: File name endings, lower case, with the dot
    suffixes: tuple[str, ...] = ()
    #: The first bytes of every file of the format (how stdin is told apart); None: no magic
    magic: bytes | None = None
    #: Whether a directory of such files can be evaluated shard by shard
    shards: bool = False
    #: Whether it holds predictions (scores), or only labels or group values
    holds_predictions: bool = True
    #: Whether ``apply`` can write it
    writable: bool = True
    #: Whether columns beside the scores and labels travel with the rows (to outputs, to groups)
    carries_columns: bool = False
    #: Whether a labels or group-values file of this format is read as text (one value a line, an
    #: optional header) rather than by its named columns
    values_as_text: bool = False

    def sniff(self, start: bytes) -> bool:
        """Whether a stream starting with ``start`` (at least calib.io.formats.MAGIC_LENGTH bytes when the
        stream has them) is of this format: by default, its magic number."""
        return self.magic is not None and start.startswith(self.magic)

    def read_predictions(
        self, path: str, name: str, score_prefix: str | None, label_column: str | None, scores: str | None = None
    ) -> Contents:
        """The scores, labels and carried columns of a predictions file; ``scores`` names the array
        or column holding the scores, ``label_column`` the labels'."""
        raise InputError(f"{name}: a {self.name} file holds no predictions")

    def names(self, path: str) -> tuple[str, ...] | None:
        """The names of the file's arrays or columns; None for a file of one unnamed array."""
        return None

    def read_named(self, path: str, key: str | None, *, labels: bool = False) -> np.ndarray:
        """The array or column ``key`` as a 1-D array (``labels``: missing entries become NaN,
        which the label check refuses naming the row); a file of one unnamed array (``key`` None)
        returns it."""
        raise InputError(f"{path}: a {self.name} file has no named arrays")

    def read_matrix(self, path: str, names: Sequence[str]) -> np.ndarray:
        """The first of ``names`` the file holds, as an (N, K) matrix (true probabilities, features)."""
        raise InputError(f"{path}: a {self.name} file holds no matrix")

    def write(self, path: str, name: str, matrix: np.ndarray, labels, passthrough) -> None:
        """Write ``matrix`` (under ``name`` where the format names arrays), ``labels`` if known and
        carried columns, atomically."""
        raise InputError(f"{path}: calib does not write {self.name} files")


def pick_name(names, wanted: str | None, path: str, *, preferred=(), sole: bool = False, hint: str | None = None) -> str | None:
    """Which of ``names`` (a file's arrays or columns) holds something: ``wanted`` when given (an
    error listing ``names`` when absent), else the one of ``preferred`` present (an error when
    several are), else, with ``sole``, the file's only one; None when nothing fits (``hint`` names
    the option that says which)."""
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
    return None


def required_name(
    names, wanted: str | None, path: str, what: str, *, preferred=(), sole: bool = False, hint: str | None = None
) -> str:
    """:func:`pick_name` where something must fit: else an error asking which array or column
    holds the ``what``."""
    name = pick_name(names, wanted, path, preferred=preferred, sole=sole, hint=hint)
    if name is None:
        raise InputError(f"{path}: which array or column holds the {what}? (found {', '.join(names) or 'none'})", cli_hint=hint)
    return name


def label_name(names, wanted: str | None, path: str) -> str | None:
    """The array or column of a predictions file holding the labels: ``wanted``, else ``label`` or
    ``labels``, else None."""
    return pick_name(names, wanted, path, preferred=LABEL_NAMES, hint="--label-column NAME")


def labels_key(names, column: str | None, path: str) -> str:
    """The array or column of a labels file that holds them: ``column``, else ``label`` or
    ``labels``, else the file's only one."""
    return required_name(names, column, path, "labels", preferred=LABEL_NAMES, sole=True, hint="--label-column NAME")


def group_key(names, column: str | None, path: str) -> str:
    """The array or column of a values file that holds the group values: ``column``, else the only one."""
    return required_name(names, column, path, "group values", sole=True, hint="--group-by COLUMN")


def unreadable(path: str, suffix: str, exc: Exception) -> InputError:
    """The error for a file its reader could not parse; numpy's advice to unpickle is never passed on."""
    if "pickle" in str(exc).lower():
        return InputError(f"{path}: not a readable {suffix} file (not a zip archive of arrays; pickled data is never loaded)")
    return InputError(f"{path}: not a readable {suffix} file ({exc})")


def listed_names(names, shown: int = 12) -> str:
    """Names for a one-line message: all of them up to ``shown``, else the first ``shown`` and how
    many more (a table of 177 columns is not one line of 1,500 characters)."""
    names = list(names)
    if not names:
        return "none"
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"
