"""SymPy expressions to plain C99 kernels (and to NumPy functions when no compiler exists).

Importable without the compiled core.
"""

from nhfast.codegen.ckernels import KernelSet, generate_c
from nhfast.codegen.numpy_backend import NumpyKernel, numpy_kernels

__all__ = ["KernelSet", "generate_c", "NumpyKernel", "numpy_kernels"]
