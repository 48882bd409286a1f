"""Crash-safe writes: everything goes to a temporary sibling first and is renamed into place.

A reader (or a process killed mid-write) sees the old file or the new one, never a truncated one.
The files and directories end with the modes ``open()`` and ``mkdir`` would give them under the
umask.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from ..errors import CalibError


def umask() -> int:
    """The process's umask (read by setting it and setting it back: there is no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str):
    """Yield a temporary path beside ``path``; on success fsync it and rename it onto ``path``.

    Only regular files are replaced this way. An existing special file (``/dev/null``,
    ``/dev/stdout``, a named pipe) is written in place: renaming onto it would replace the device.
    """
    if os.path.exists(path) and not os.path.isfile(path):
        if os.path.isdir(path):
            raise CalibError(f"{path}: is a directory, expected a file")
        yield path
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CalibError(f"{path}: the folder {directory} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~umask())  # what open() would have created (mkstemp makes 0600)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_bytes_atomic(path: str, data: bytes) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        handle.write(data)


def check_output_directory(path: str, *, force: bool) -> str:
    """The absolute ``path`` of an output directory that :func:`atomic_directory` may write: its
    parent exists, and it is not a file, nor a non-empty directory unless ``force``. Commands call it
    before their work too, so that a bad output path is refused at once."""
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise CalibError(f"{path}: exists and is not a directory")
    if os.path.isdir(path) and os.listdir(path) and not force:
        raise CalibError(f"{path}: directory exists and is not empty; replacing it must be asked for", cli_hint="--force")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise CalibError(f"{path}: the folder {parent} does not exist")
    return path


def check_output_file(path: str, *, force: bool) -> None:
    """An output file an artifact is written to (calibrated scores, a model): an existing one is
    replaced only with ``force``, as an existing bundle or report directory is
    (:func:`check_output_directory`); a directory in its place is refused."""
    if os.path.isdir(path):
        raise CalibError(f"{path}: is a directory; name the file to write")
    if os.path.exists(path) and not force:
        raise CalibError(f"{path}: exists; replacing it must be asked for", cli_hint="--force")


@contextlib.contextmanager
def atomic_directory(path: str, *, force: bool):
    """Yield a fresh temporary directory; on success it replaces ``path``.

    An existing non-empty ``path`` is refused unless ``force``; then the old directory is moved
    aside, the new one renamed in, and only then the old one deleted.
    """
    path = check_output_directory(path, force=force)
    parent = os.path.dirname(path)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=parent)
    try:
        yield tmp
        for name in os.listdir(tmp):
            with open(os.path.join(tmp, name), "rb") as handle:
                os.fsync(handle.fileno())
        os.chmod(tmp, 0o777 & ~umask())  # what mkdir would have created (mkdtemp makes 0700)
        if os.path.isdir(path) and os.listdir(path):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".old", dir=parent)
            os.replace(path, os.path.join(old, "bundle"))
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)  # rename(2) may replace an empty directory
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp)
