"""Picking the scores and labels among a file's named arrays (.npz, safetensors) by their names,
shapes and dtypes: the naming convention (``logits``, ``log_probs``, ``probs``; ``label``,
``labels``), a name given, or a file of one 2-D floating array and one 1-D integer array."""

from __future__ import annotations

from ...errors import InputError
from .base import SCORE_NAMES, label_name


def _held(headers: dict) -> str:
    """What a file holds, for an error: each array's name, shape and dtype."""
    return ", ".join(f"{key} {shape} {dtype}" for key, (shape, dtype) in sorted(headers.items())) or "none"


def score_key(headers: dict, labels_key: str | None, name: str, scores: str | None) -> tuple[str, str | None, str | None]:
    """(the score array, the kind its name says, how it was picked when no name said it):
    ``scores`` when given; else one of SCORE_NAMES; else a lone unnamed ``arr_0``; else, when the
    file holds one 2-D floating array and at most one 1-D integer array besides the named labels,
    that matrix. Anything else is refused, listing what the file holds."""
    if scores is not None:
        if scores not in headers:
            raise InputError(f"{name}: no array named {scores!r} (found {_held(headers)})")
        return scores, SCORE_NAMES.get(scores), None
    present = [key for key in SCORE_NAMES if key in headers]
    if len(present) > 1:
        raise InputError(f"{name}: several score arrays ({', '.join(present)}); keep one", cli_hint="--scores NAME")
    if present:
        return present[0], SCORE_NAMES[present[0]], None
    if set(headers) - {labels_key} == {"arr_0"}:
        return "arr_0", None, None
    others = {k: v for k, v in headers.items() if k != labels_key}
    matrices = [k for k, (shape, dtype) in others.items() if len(shape) == 2 and dtype.kind == "f"]
    vectors = [k for k, (shape, dtype) in others.items() if len(shape) == 1 and dtype.kind in "iu"]
    if len(matrices) == 1 and len(others) == 1 + (labels_key is None and len(vectors) == 1):
        return matrices[0], None, f"scores: the only 2-D floating array, {matrices[0]!r}"
    texts = [k for k, (shape, dtype) in others.items() if len(shape) == 1 and dtype.kind in "USO"]
    if len(matrices) == 1 and texts:  # labels written as class names block the pick: say so, not "no scores"
        shape, dtype = others[texts[0]]
        raise InputError(
            f"{name}: {texts[0]!r} holds text ({dtype}), not class indices: labels are integers in [0, K), "
            f"the index of each row's class among the score columns of {matrices[0]!r}; write the classes as indices"
        )
    raise InputError(
        f"{name}: no score array; expected one named logits, log_probs or probs, or a single 2-D floating array "
        f"(found {_held(headers)}); name the one that holds the scores",
        cli_hint="--scores NAME",
    )


def label_key(headers: dict, score_key: str, wanted: str | None, name: str, conventional: bool) -> tuple[str | None, str | None]:
    """(the labels array, how it was picked when no name said it): ``wanted``, else ``label`` or
    ``labels``, else, in a file that does not follow the naming convention (``conventional``: the
    scores named logits, log_probs or probs) and holds just the scores and one 1-D integer array,
    that array."""
    key = label_name(tuple(headers), wanted, name)
    if key is not None or wanted is not None or conventional:
        return key, None
    others = [k for k in headers if k != score_key]
    if len(others) == 1 and len(headers[others[0]][0]) == 1 and headers[others[0]][1].kind in "iu":
        return others[0], f"labels: the only 1-D integer array, {others[0]!r}"
    return None, None
