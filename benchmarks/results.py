"""Where every benchmark writes: results/<name>.json (the rows) and results/<name>.md (a table)."""

from __future__ import annotations

import json
from pathlib import Path


def write_results(out: Path, name: str, rows: list[dict]) -> None:
    """The rows as JSON, and as a Markdown table with one column per key of the first row."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(rows, indent=1))
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if row.get(h) is None else str(row[h]) for h in header) + " |" for row in rows]
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
