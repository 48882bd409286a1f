"""Which path the kernels take (:mod:`calib.core.kernels`), without NumPy: ``calib --version`` names
it and starts no faster than this module imports."""

from __future__ import annotations

import os


def choose_backend():
    """(the compiled module or None, its name "compiled" or "numpy"): ``CALIB_KERNELS=numpy`` (or
    ``compiled``) chooses; by default the compiled one where the extension ``calib._kernels`` is
    built and importable."""
    wanted = os.environ.get("CALIB_KERNELS", "auto").strip().lower() or "auto"
    if wanted not in ("auto", "compiled", "numpy"):
        raise ValueError(f"CALIB_KERNELS must be auto, compiled or numpy; got {wanted!r}")
    if wanted == "numpy":
        return None, "numpy"
    try:
        from .. import _kernels
    except ImportError:
        if wanted == "compiled":
            raise ImportError(
                "CALIB_KERNELS=compiled but the C extension calib._kernels is not built "
                "(reinstall calib-cli with a C compiler, or unset CALIB_KERNELS)"
            ) from None
        return None, "numpy"
    return _kernels, "compiled"
