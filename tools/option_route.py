"""The calib modules one `calib evaluate` option passes through on its way to the report:

    python tools/option_route.py --bins --min-group-rows --fail-if --group-by

For each option, one `calib evaluate` of the bundled CIFAR-10 test rows runs in this process with
the option set to a value of its own, and every calib module whose function receives that value
(as an argument, or inside an argument: a request, a source, a reading, a dict of flags, a gate) is
listed in call order, until the report's engine (``build_report``) starts. Run it on another
checkout with ``PYTHONPATH=<checkout>/src`` to compare. Not a test.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path

import numpy as np

#: A value of each option that nothing else in the run holds.
VALUES = {"--bins": 13, "--group-by": "shard_sentinel", "--min-group-rows": 37, "--fail-if": "ece>0.4321"}


def holds(value, target, depth: int = 0) -> bool:
    """Whether ``value`` is ``target`` (or its text) or holds it, a few containers deep."""
    try:
        if (
            value is target
            or (type(value) is type(target) and value == target)
            or (isinstance(value, str) and value == str(target))
        ):
            return True
    except Exception:  # noqa: BLE001 - an array's ambiguous truth value: not the option
        return False
    if type(value).__name__ in ("Gate", "ChangeGate"):
        return getattr(value, "expr", None) == target
    if depth >= 6:
        return False
    if isinstance(value, dict):
        return any(holds(v, target, depth + 1) for v in list(value.values())[:200])
    if isinstance(value, (list, tuple)) and len(value) < 50:
        return any(holds(v, target, depth + 1) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(holds(getattr(value, f.name, None), target, depth + 1) for f in dataclasses.fields(value))
    return False


def route(option: str, rows: str) -> list[str]:
    """The modules, in call order (a module repeated where the value comes back to it)."""
    from calib.cli.app import app

    target, path, done = VALUES[option], [], [False]

    def profile(frame, event, arg):
        if done[0] or event != "call" or "/calib/" not in frame.f_code.co_filename:
            return
        code = frame.f_code
        arguments = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if any(holds(frame.f_locals.get(name), target) for name in arguments):
            module = "calib/" + code.co_filename.split("/calib/", 1)[1]
            if not path or path[-1] != module:
                path.append(module)
        if code.co_name == "build_report":
            done[0] = True

    argv = ["evaluate", rows, "--no-vece", "--bootstrap", "0", "--metrics", "accuracy,ece", option, str(target)]
    sys.setprofile(profile)
    try:
        app(argv, standalone_mode=False, prog_name="calib")
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
    return path


def main(options: list[str]) -> None:
    import calib

    test = np.load(calib.sample_path("cifar10_test.npz"))
    with tempfile.TemporaryDirectory() as folder:
        rows = str(Path(folder) / "rows.npz")
        np.savez(rows, logits=test["logits"], labels=test["labels"], shard_sentinel=np.arange(len(test["labels"])) % 3)
        for option in options or list(VALUES):
            path = route(option, rows)
            print(f"{option}: {len(set(path))} modules, {len(path)} entries: {' -> '.join(path)}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
