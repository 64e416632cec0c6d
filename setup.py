"""Extension definitions for nhfast's compiled core, with an optional-OpenMP probe.

Everything else (metadata, dependencies, tool configuration) lives in pyproject.toml.
Set NHFAST_NO_OPENMP=1 to force a serial build.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CSRC = ["csrc/driver.c", "csrc/rk.c", "csrc/symplectic.c", "csrc/events.c", "csrc/taylor.c"]
#: Headers shipped with the package for run-time kernel compiles (nh_abi.h: the kernel ABI).
INCLUDE = "nhfast/codegen/include"
PROBE = "#include <omp.h>\nint main(void) { return omp_get_max_threads() > 0 ? 0 : 1; }\n"


def _openmp_flags(compiler) -> tuple[list[str], list[str]]:
    """Compile and link a tiny OpenMP program; return (compile, link) flags that work."""
    if os.environ.get("NHFAST_NO_OPENMP"):
        return [], []
    if sys.platform == "win32":
        candidates = [(["/openmp"], [])]
    elif sys.platform == "darwin":
        candidates = [(["-Xpreprocessor", "-fopenmp"], ["-lomp"]), (["-fopenmp"], ["-fopenmp"])]
    else:
        candidates = [(["-fopenmp"], ["-fopenmp"])]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text(PROBE)
        for cflags, lflags in candidates:
            try:
                objs = compiler.compile([str(src)], output_dir=tmp, extra_postargs=cflags)
                compiler.link_executable(objs, "probe", output_dir=tmp, extra_postargs=lflags)
            except Exception:  # noqa: BLE001 - any failure means: no OpenMP here
                continue
            return cflags, lflags
    return [], []


class BuildExt(build_ext):
    def build_extensions(self) -> None:
        cflags, lflags = _openmp_flags(self.compiler)
        state = "enabled " + " ".join(cflags) if cflags else "not found: serial build"
        print(f"nhfast: OpenMP {state}")
        msvc = self.compiler.compiler_type == "msvc"
        std = [] if msvc else ["-std=c99", "-O3", "-Wno-psabi"]
        for ext in self.extensions:
            ext.extra_compile_args = std + cflags + ext.extra_compile_args
            ext.extra_link_args = lflags + ext.extra_link_args
        super().build_extensions()


setup(
    ext_modules=[
        Extension(
            "nhfast._core",
            sources=["nhfast/_core.pyx", *CSRC],
            include_dirs=["csrc", INCLUDE, numpy.get_include()],
            # the NumPy C API of the oldest NumPy nhfast supports (1.24), with none of its
            # deprecated names
            define_macros=[
                ("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
                ("NPY_TARGET_VERSION", "NPY_1_24_API_VERSION"),
            ],
            depends=[f"{INCLUDE}/nh_abi.h", "csrc/nh_core.h", "csrc/nh_block.h", "csrc/tableaux.h"],
        )
    ],
    cmdclass={"build_ext": BuildExt},
)
