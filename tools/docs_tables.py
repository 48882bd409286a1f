"""The lists in README.md and docs/ that the registries hold: written from them, never by hand.

Each generated block sits between ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->``
in its file; ``python tools/docs_tables.py`` rewrites every block, ``--check`` exits 1 naming the
blocks that differ (tests/contracts/test_docs.py runs it). Adding a metric (calib.metrics.METRICS), a
calibrator (calib.registry.CALIBRATORS), a conformal score (calib.calibrators.scores.SCORES) or a
file format (calib.io.formats.FORMATS) updates these lists by running this script.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _keys(keys) -> str:
    return ", ".join(f"`{key}`" for key in keys)


def metric_list() -> str:
    """README's paragraph of every metric key, by how it is computed."""
    from calib.metrics import METRICS

    kinds = [
        ("streamed in bounded-memory chunks of rows", lambda m: m.streamed and not m.binary and not m.needs_truth),
        ("binary models (K = 2), on the positive class", lambda m: m.streamed and m.binary),
        ("with the true probabilities (`--true-probs`)", lambda m: m.needs_truth),
        ("on every row at once (a seeded subsample above `--vece-max-rows`; `--no-vece` skips V-ECE)", lambda m: not m.streamed),
    ]
    parts = [f"{what}: {_keys(key for key, metric in METRICS.items() if rule(metric))}" for what, rule in kinds]
    return "Metrics (`calib methods` describes each): " + "; ".join(parts) + "."


def metric_table() -> str:
    """docs/metrics.md's table of every metric key and what it measures."""
    from calib.metrics import METRICS

    rows = [f"| `{key}` | {metric.summary.replace('|', '/')} |" for key, metric in METRICS.items()]
    return "\n".join(["| key | what it measures |", "|---|---|", *rows])


def method_list() -> str:
    """README's paragraph of every calibrator and the values of the options that have a fixed set."""
    from calib.registry import CALIBRATORS, OPTION_CHOICES

    options = "; ".join(f"`--{name}` {' | '.join(values)}" for name, values in OPTION_CHOICES.items())
    return f"Methods (`calib fit --method NAME`; `calib methods` describes each): {_keys(CALIBRATORS)}. Their options with fixed values: {options}."


def format_list() -> str:
    """README's list of the file suffixes read, and of those ``apply`` writes."""
    from calib.io.formats import FORMATS

    read = _keys(suffix for fmt in FORMATS for suffix in fmt.suffixes)
    written = _keys(suffix for fmt in FORMATS if fmt.writable for suffix in fmt.suffixes)
    return f"File suffixes read: {read}; written by `apply`: {written}."


#: block name -> (file, generator)
BLOCKS = {
    "metrics": ("README.md", metric_list),
    "methods": ("README.md", method_list),
    "formats": ("README.md", format_list),
    "metric-table": ("docs/metrics.md", metric_table),
}


def rewritten(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- generated: {re.escape(name)} -->\n)(?:.*?\n)?(<!-- end generated: {re.escape(name)} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"no block 'generated: {name}' to write")
    return pattern.sub(lambda match: match.group(1) + body + "\n" + match.group(2), text)


def stale_blocks(write: bool) -> list[str]:
    """The blocks whose text differs from what the registries give; rewritten when ``write``."""
    stale = []
    for name, (path, generate) in BLOCKS.items():
        file = ROOT / path
        text = file.read_text()
        new = rewritten(text, name, generate())
        if new != text:
            stale.append(f"{path}: {name}")
            if write:
                file.write_text(new)
                text = new
    return stale


if __name__ == "__main__":
    check = "--check" in sys.argv[1:]
    stale = stale_blocks(write=not check)
    if stale:
        print(("stale: " if check else "rewrote: ") + ", ".join(stale))
    sys.exit(1 if check and stale else 0)
