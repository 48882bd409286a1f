"""Confidences that a model stated in words or numbers ("85%", "0.85", "high", 90), read as
probabilities by one stated rule (docs/llm.md, "Stated confidences in logs"):

- a number followed by ``%`` is a percentage: "85%" is 0.85 (it must lie in [0, 100]);
- a word of :data:`WORDS` is the middle of its fifth of [0, 1]: "very low" 0.1, "low" 0.3,
  "medium" 0.5, "high" 0.7, "very high" 0.9 (case and surrounding white space aside);
- a bare number (written as text or stored as one) is read on the scale of the log: when every bare
  number of the log lies in [0, 1], as a probability; when every one is a whole number in
  [0, 100] and one exceeds 1, as a percentage (BrowseComp's graders store 0-100); a log whose bare
  numbers mix the two (0.85 beside 87) is refused, naming the sample whose number exceeds 1;
- nothing (no such field, null, empty text) is missing: refused, or with ``missing="browsecomp"``
  set to 1.0 as BrowseComp's grader sets a confidence it cannot find (100%), and counted.

Anything else (other words, a number outside its scale, a boolean) is refused naming the sample.
"""

from __future__ import annotations

import math
import re

from ..errors import InputError

#: Confidence words and the probability each stands for: the middle of its fifth of [0, 1]
WORDS = {"very low": 0.1, "low": 0.3, "medium": 0.5, "high": 0.7, "very high": 0.9}
#: How a missing confidence may be filled, by name: the value BrowseComp's grader gives it
MISSING = {"browsecomp": 1.0}
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def parse(value, where: str) -> tuple[str, float] | None:
    """(how ``value`` reads: "percent", "word" or "bare", the number it gives) of one stated
    confidence; None when it is missing. A bare number is returned as written (its scale is the
    log's: :func:`confidences`)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise InputError(f"{where}: confidence {value!r} is a yes/no, not a confidence")
    if isinstance(value, (int, float)):
        return "bare", _bare(float(value), value, where)
    if not isinstance(value, str):
        raise InputError(f"{where}: confidence {value!r} is neither a number nor text")
    text = " ".join(value.strip().lower().split())
    if text in WORDS:
        return "word", WORDS[text]
    if text.endswith("%") and _NUMBER.match(text[:-1].strip()):
        percent = _finite(float(text[:-1]), value, where)
        if not 0.0 <= percent <= 100.0:
            raise InputError(f"{where}: confidence {value!r} is a percentage outside [0, 100]")
        return "percent", percent / 100.0
    if _NUMBER.match(text):
        return "bare", _bare(float(text), value, where)
    raise InputError(
        f"{where}: confidence {value!r} is not one calib reads (a probability like 0.85, a percentage like 85%, "
        f"or one of {', '.join(WORDS)})"
    )


def _bare(number: float, value, where: str) -> float:
    """A bare number, which must be finite and not negative (its scale is the log's)."""
    if _finite(number, value, where) < 0.0:
        raise InputError(f"{where}: confidence {value!r} is negative")
    return number


def _finite(number: float, value, where: str) -> float:
    if not math.isfinite(number):
        raise InputError(f"{where}: confidence {value!r} is not a finite number")
    return number


def confidences(stated: list[tuple[str, object]], missing: str | None, name: str) -> tuple[list[float], str]:
    """The probabilities of a log's stated confidences ``stated`` ((where, value) per row) by the
    module's rule, and a sentence saying how they were read (forms, scale, how many were missing)."""
    if missing is not None and missing not in MISSING:
        raise InputError(f"{name}: a missing confidence is refused or set as {', '.join(MISSING)} sets it; got {missing!r}")
    parsed = [(where, parse(value, where)) for where, value in stated]
    bare = [(where, read[1]) for where, read in parsed if read is not None and read[0] == "bare"]
    percent_scale = _bare_scale(bare)
    values, absent = [], []
    for where, read in parsed:
        if read is None:
            absent.append(where)
            values.append(math.nan)
            continue
        form, number = read
        values.append(number / 100.0 if form == "bare" and percent_scale else number)
    if absent and missing is None:  # refused: nothing says what the model meant
        raise InputError(
            f"{absent[0]}: no stated confidence ({len(absent)} of {len(stated)} rows lack one); a missing confidence is "
            f"refused, or set to {MISSING['browsecomp']:g} as BrowseComp's grader sets it",
            cli_hint="--missing-confidence browsecomp",
        )
    forms = sorted({read[0] for _, read in parsed if read is not None})
    said = f"stated confidences ({', '.join(forms)}"
    said += "; bare numbers on a 0-100 scale)" if percent_scale else ")"
    if absent and missing is not None:
        values = [MISSING[missing] if math.isnan(v) else v for v in values]
        said += f", {len(absent)} missing set to {MISSING[missing]:g} as {missing} sets them"
    return values, said


def _bare_scale(bare: list[tuple[str, float]]) -> bool:
    """Whether a log's bare numbers (none negative) are percentages: every one a whole number, none
    above 100, one above 1. A log mixing probabilities with numbers above 1 is refused, naming the
    first above 1."""
    above = [(where, number) for where, number in bare if number > 1.0]
    if not above:
        return False
    beyond = next(((where, number) for where, number in above if number > 100.0), None)
    if beyond is not None:
        raise InputError(f"{beyond[0]}: confidence {beyond[1]:g} is above 100, neither a probability nor a percentage")
    if all(number.is_integer() for _, number in bare):
        return True
    where, number = above[0]
    probabilities = sum(1 for _, n in bare if n <= 1.0)
    raise InputError(
        f"{where}: confidence {number:g} where {probabilities} other confidences of the log lie in [0, 1]; "
        f"write a percentage as {number:g}% or a probability as {number / 100:g}"
    )
