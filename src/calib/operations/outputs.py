"""Writing a command's report outputs (JSON, HTML, JUnit XML): atomically, honouring the umask."""

from __future__ import annotations


def write_output(path: str, data: bytes | str) -> None:
    """Write ``data`` (text is written as UTF-8) to the file ``path`` atomically: a reader sees
    the old file or the new one, never a part (calib.io.atomic)."""
    from ..io.atomic import write_bytes_atomic

    write_bytes_atomic(path, data.encode() if isinstance(data, str) else data)
