"""What the `calib` process never imports: the notebook packages (IPython, ipywidgets).

CatBoost imports its notebook widget on `import catboost` when IPython is installed, which pulls in
IPython, ipywidgets and traitlets: 0.3 to 0.9 s of a command's start of V-ECE (of 0.9 to 1.9 s for
the whole import, measured with `python -X importtime`), for a widget that only draws in a
notebook. CatBoost catches the failed import and goes on without the widget. A command line has no
notebook, so the command makes both packages unimportable before anything imports them: a finder
first on ``sys.meta_path`` refuses them (ImportError), leaving ``sys.modules`` without them (Ray
imports IPython whenever its name is in ``sys.modules``, so an entry of None would break Ray).

Only the command line does this (a process-wide choice is the program's, not a library's): calib
used as a library in a notebook leaves IPython alone.
"""

from __future__ import annotations

import sys

#: Packages that only a notebook uses.
NOTEBOOK_PACKAGES = ("IPython", "ipywidgets")


class _NotebookPackages:
    """A meta path finder that refuses the ``packages`` (and their submodules): their import raises
    ModuleNotFoundError, as for a package not installed."""

    def __init__(self, packages: list[str]):
        self.packages = tuple(packages)

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.packages:
            raise ModuleNotFoundError(f"No module named {name!r} (the calib command imports no notebook package)", name=name)
        return None


def skip_notebook_imports() -> list[str]:
    """Make the notebook packages not yet imported unimportable (an import of them then raises
    ImportError); returns their names."""
    marked = [name for name in NOTEBOOK_PACKAGES if name not in sys.modules]
    if marked and not any(isinstance(finder, _NotebookPackages) for finder in sys.meta_path):
        sys.meta_path.insert(0, _NotebookPackages(marked))
    return marked
