"""The package version, in a module of its own so every layer can read it without importing the package."""

__version__ = "0.1.0"


def version_line() -> str:
    """What ``calib --version`` prints: the version and the kernels' path (compiled or numpy),
    found without importing NumPy (:func:`calib.core.backend.choose_backend`)."""
    from .core.backend import choose_backend

    return f"calib {__version__} (kernels: {choose_backend()[1]})"
