"""The input and output formats, one module each: a format is one :class:`~.base.Format` object
(suffixes, magic bytes, how to list its arrays or columns, read scores, read one named column,
write). Readers, writers, stdin detection, directories of shards, error messages and help texts are
built from :data:`FORMATS`; a new format is one module and one entry here.
"""

from __future__ import annotations

import os

from ...errors import InputError
from .arrow import ARROW
from .base import Contents, Format
from .delimited import DELIMITED
from .jsonl import JSON_LINES
from .npy import NPY
from .npz import NPZ
from .parquet import PARQUET
from .safetensors import SAFETENSORS

#: Every format, in the order help texts list them
FORMATS: tuple[Format, ...] = (NPY, NPZ, PARQUET, ARROW, SAFETENSORS, DELIMITED, JSON_LINES)
#: suffix -> format
BY_SUFFIX = {suffix: fmt for fmt in FORMATS for suffix in fmt.suffixes}


def listed(formats=FORMATS, last: str = "or") -> str:
    """The formats' suffixes as prose, each once: ".npy, .npz or .parquet" (a format reached under
    each of its suffixes, as a table of writers by suffix has it, is listed once)."""
    suffixes = list(dict.fromkeys(suffix for fmt in formats for suffix in fmt.suffixes))
    return suffixes[0] if len(suffixes) == 1 else f"{', '.join(suffixes[:-1])} {last} {suffixes[-1]}"


def shard_formats() -> list[Format]:
    """The formats a directory of shards may hold."""
    return [fmt for fmt in FORMATS if fmt.shards]


def suffix_of(path: str) -> str:
    """The suffix that names ``path``'s format, lower case: the longest registered suffix the name
    ends with (".jsonl.gz" before ".gz"), else its last extension ("" for none)."""
    name = os.path.basename(path).lower()
    known = [suffix for suffix in BY_SUFFIX if name.endswith(suffix) and len(name) > len(suffix)]
    return max(known, key=len) if known else os.path.splitext(name)[1]


def format_of(path: str) -> Format:
    """The format of predictions file ``path`` by its suffix; an existing file must also start with
    that format's magic number (a text file named .npz is refused as such, before any reader sees it)."""
    suffix = suffix_of(path)
    fmt = BY_SUFFIX.get(suffix)
    if fmt is None or not fmt.holds_predictions:
        found = _content_format(path)
        held = "" if found is None else f"; it holds {found[0]} {found[1]}: read it as {found[0]}"
        raise InputError(
            f"{path}: unknown file type {suffix or '(none)'}; expected {', '.join(BY_SUFFIX)}{held}",
            cli_hint=None if found is None else f"--input-format {found[0]}",
        )
    if _sniffs(fmt) and os.path.isfile(path):
        with open(path, "rb") as handle:
            start = handle.read(MAGIC_LENGTH)
        if not fmt.sniff(start):
            if not start:
                raise InputError(f"{path}: empty file")
            actual = format_by_magic(start)
            what = (
                f"{actual.suffixes[0]} data; rename it to {actual.suffixes[0]}"
                if actual
                else ("text" if _looks_like_text(start) else f"bytes {start!r}")
            )
            expected = (
                f"starts with {fmt.magic!r}" if fmt.magic is not None else "starts with its header length and a JSON header"
            )
            raise InputError(f"{path}: not a {suffix} file (a {suffix} file {expected}; this one holds {what})")
    return fmt


def _content_format(path: str) -> tuple[str, str] | None:
    """(the format a file of an unknown suffix holds by its first bytes, "data" or "text"): ("csv",
    "text"), ("npz", "data"); None when neither."""
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as handle:
        start = handle.read(TEXT_SNIFF)
    found = format_by_magic(start)
    if found is not None:
        return found.suffixes[0].lstrip("."), "data"
    text = format_of_text(start, path)
    return None if text is None else (text[1].lstrip("."), "text")


def _sniffs(fmt: Format) -> bool:
    """Whether the format can be told by its first bytes (a magic number, or a sniff of its own)."""
    return fmt.magic is not None or type(fmt).sniff is not Format.sniff


def _looks_like_text(start: bytes) -> bool:
    try:
        text = start.decode("utf-8")
    except UnicodeDecodeError as exc:  # a character cut at the end of the bytes read is still text
        if exc.start < len(start) - 3:
            return False
        text = start[: exc.start].decode("utf-8")
    return all(c.isprintable() or c.isspace() for c in text)


#: How much of a stream is read to tell its format (the longest magic number; safetensors' 8-byte
#: length and the brace after it)
MAGIC_LENGTH = 16


def format_by_magic(start: bytes) -> Format | None:
    """The format whose first bytes ``start`` are, or None."""
    return next((fmt for fmt in FORMATS if fmt.sniff(start)), None)


def format_of_bytes(data: bytes, name: str) -> tuple[Format, str]:
    """(the format, the suffix to read it under) of a byte stream: by its magic number, else as
    text (:func:`format_of_text`; ``data`` then holds the stream's first line whole)."""
    fmt = format_by_magic(data)
    if fmt is not None:
        return fmt, fmt.suffixes[0]
    if not data.strip():
        raise InputError(f"{name}: empty input")
    text = format_of_text(data, name)
    if text is not None:
        return text
    with_magic = [fmt for fmt in FORMATS if _sniffs(fmt)]
    raise InputError(
        f"{name}: neither {listed(with_magic)} bytes nor text (CSV, TSV, JSON lines); the stream starts {data[:8]!r}",
        cli_hint="--input-format",
    )


#: Bytes of a text stream's first line read to tell CSV, TSV and JSON lines apart
TEXT_SNIFF = 1 << 20


def format_named(name: str, where: str) -> tuple[Format, str]:
    """(the format, the suffix its reader reads the input under) of an input format named by one of
    its suffixes without the dot ("csv", "tsv", "jsonl", "npz", ...), case aside."""
    suffix = "." + name.lower().lstrip(".")
    fmt = BY_SUFFIX.get(suffix)
    if fmt is None or not fmt.holds_predictions:
        names = ", ".join(s.lstrip(".") for s, f in BY_SUFFIX.items() if f.holds_predictions)
        raise InputError(f"{where}: unknown input format {name!r}; expected one of {names}", cli_hint="--input-format")
    return fmt, suffix


def format_of_text(start: bytes, name: str) -> tuple[Format, str] | None:
    """(the format, the suffix to read it under) of a text stream starting with ``start`` (its
    first line whole, or :data:`TEXT_SNIFF` bytes of it): JSON lines when its first character
    other than white space is "{"; else a header line of names, TSV when it holds a tab and no
    comma, else CSV. None when ``start`` is not UTF-8 text."""
    start = start.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark
    if not _looks_like_text(start[:TEXT_SNIFF]):
        return None
    text = start.decode("utf-8", errors="replace")
    if text.lstrip().startswith("{"):
        return JSON_LINES, ".jsonl"
    first = text.splitlines()[0] if text.strip() else ""
    if not first:
        return None
    return DELIMITED, ".tsv" if "\t" in first and "," not in first else ".csv"


__all__ = [
    "BY_SUFFIX",
    "FORMATS",
    "MAGIC_LENGTH",
    "Contents",
    "Format",
    "format_by_magic",
    "format_of",
    "format_of_bytes",
    "format_of_text",
    "format_named",
    "listed",
]
