"""A type checker's errors on a ratchet that only goes down: mypy over src/calib, its errors
counted per file and compared with tools/type_ratchet.json (the count each file may have at most).

    python tools/type_ratchet.py            # exit 1 when a file has more errors than its entry allows
    python tools/type_ratchet.py --update   # write the counts found now (only ever lower them)

A file without an entry may have none; the folders and modules in ``CLEAN`` must stay at none
(an entry cannot allow errors there).
When a file's count falls below its entry, the check says so: lower the entry (``--update``) in the
same change, so that no later change can spend the difference.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RATCHET = ROOT / "tools" / "type_ratchet.json"
#: mypy's settings: its defaults, with imports of packages without type information left unchecked.
MYPY = [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--no-error-summary", "src/calib"]
#: Folders and modules held at no error at all: no entry of the ratchet may name a file in them.
CLEAN = (
    "src/calib/api.py",
    "src/calib/cli/",
    "src/calib/operations/",
    "src/calib/drift/",
    "src/calib/evaluation/",
    "src/calib/io/",
)
_ERROR = re.compile(r"^(?P<path>[^:]+\.py):\d+: error: ")


def error_counts() -> Counter:
    """{file: mypy's errors in it} over src/calib."""
    found = subprocess.run(MYPY, cwd=ROOT, capture_output=True, text=True)
    ran = found.returncode == 0 or (found.returncode == 1 and "error: " in found.stdout)  # 1: errors found
    if not ran:
        raise SystemExit(f"mypy did not run: {found.stderr.strip() or found.stdout.strip()}")
    return Counter(match["path"] for line in found.stdout.splitlines() if (match := _ERROR.match(line)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="write the counts found now")
    args = parser.parse_args(argv)
    counts = error_counts()
    allowed = json.loads(RATCHET.read_text()) if RATCHET.exists() else {}
    kept_clean = sorted(path for path in counts if path.startswith(CLEAN))
    for path in kept_clean:
        print(f"{path}: {counts[path]} type errors, in a part of the package kept at none (CLEAN)")
    if kept_clean:
        return 1
    if args.update:
        risen = {path: n for path, n in counts.items() if n > allowed.get(path, 0)}
        if risen and allowed:
            print(f"not updated: more errors than allowed in {', '.join(sorted(risen))}", file=sys.stderr)
            return 1
        RATCHET.write_text(json.dumps(dict(sorted(counts.items())), indent=1) + "\n")
        print(f"{sum(counts.values())} errors in {len(counts)} files written to {RATCHET.relative_to(ROOT)}")
        return 0
    over = {path: (n, allowed.get(path, 0)) for path, n in counts.items() if n > allowed.get(path, 0)}
    under = {path: (counts.get(path, 0), n) for path, n in allowed.items() if counts.get(path, 0) < n}
    for path, (n, limit) in sorted(over.items()):
        print(f"{path}: {n} type errors, at most {limit} allowed (tools/type_ratchet.json)")
    for path, (n, limit) in sorted(under.items()):
        print(f"{path}: {n} type errors, {limit} allowed: lower its entry (python tools/type_ratchet.py --update)")
    print(f"type errors: {sum(counts.values())} in {len(counts)} files (allowed {sum(allowed.values())})")
    return 1 if over or under else 0


if __name__ == "__main__":
    sys.exit(main())
