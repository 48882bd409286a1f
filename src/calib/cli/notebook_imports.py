"""What the `calib` process never imports: the notebook packages (IPython, ipywidgets).

CatBoost imports its notebook widget on `import catboost` when IPython is installed, which pulls in
IPython, ipywidgets and traitlets: 0.3 to 0.9 s of a command's start of V-ECE (of 0.9 to 1.9 s for
the whole import, measured with `python -X importtime`), for a widget that only draws in a
notebook. CatBoost catches the failed import and goes on without the widget. A command line has no
notebook, so the command marks both packages as absent before anything imports them.

Only the command line does this (a process-wide choice is the program's, not a library's): calib
used as a library in a notebook leaves IPython alone.
"""

from __future__ import annotations

import sys

#: Packages that only a notebook uses.
NOTEBOOK_PACKAGES = ("IPython", "ipywidgets")


def skip_notebook_imports() -> list[str]:
    """Mark the notebook packages not yet imported as absent (an import of them then raises
    ImportError); returns the names marked."""
    marked = [name for name in NOTEBOOK_PACKAGES if name not in sys.modules]
    for name in marked:
        sys.modules[name] = None
    return marked
