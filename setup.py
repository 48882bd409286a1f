"""The optional C extension calib._kernels: built where a C compiler with GCC's vector extensions
(GCC or Clang) and Python's headers are present, skipped with a warning elsewhere (MSVC, no
compiler), in which case calib uses its pure NumPy path (calib.core.kernels). Everything else is in
pyproject.toml."""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Builds the kernels when it can; a failure (or MSVC, which lacks the vector extensions) only warns."""

    def build_extension(self, ext):
        if self.compiler.compiler_type == "msvc" or os.environ.get("CALIB_NO_EXTENSION"):
            print(f"calib: skipping the optional C extension {ext.name}; the NumPy path will be used", file=sys.stderr)
            return
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - any compiler failure leaves the pure path
            print(
                f"calib: could not build the optional C extension {ext.name} ({exc}); the NumPy path will be used",
                file=sys.stderr,
            )


# Python's limited API (3.11): one abi3 wheel per platform serves every CPython from 3.11 on.
LIMITED_API = "0x030B0000"

setup(
    ext_modules=[
        Extension(
            "calib._kernels",
            ["src/calib/_kernels.c"],
            optional=True,
            py_limited_api=True,
            define_macros=[("Py_LIMITED_API", LIMITED_API)],
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
