"""Nonconformity scores V(x, y) of the conformal methods, one module each, every module of this
package holding one :class:`~.base.Score` named ``SCORE``: found here by listing the package, so a
new score is one file (a parameter of its own is also a field of ``ScoreOptions``)."""

from __future__ import annotations

import importlib
import pkgutil

from .base import Score


def _discover() -> dict[str, Score]:
    found = {}
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        if module.name == "base":
            continue
        score = importlib.import_module(f"{__name__}.{module.name}").SCORE
        found[score.name] = score
    return dict(sorted(found.items(), key=lambda item: item[1].order))


#: name -> score, in the order the documentation lists them
SCORES: dict[str, Score] = _discover()

__all__ = ["SCORES", "Score"]
