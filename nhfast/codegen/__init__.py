"""SymPy expressions to plain C99 kernels of the kernel ABI, or to NumPy callables.

Pure code generation: expressions in, C text or NumPy kernels out. Compiling, caching and
loading are :mod:`nhfast._jit`'s job. Two inputs: a :class:`KernelSet` (one SymPy expression
per output, unrolled; :func:`generate_c`) and an :class:`IndexedProgram` (statements over
length-``n`` vectors, for large ``n``; :func:`generate_structured_c`). The kernel ABI header
the generated sources include ships in ``nhfast/codegen/include``.
"""

from nhfast.codegen._printer import unprintable
from nhfast.codegen.ckernels import DerivSpec, KernelSet, SolveSpec, generate_c, kernel_set_digest
from nhfast.codegen.indexed import IndexedProgram, Statement
from nhfast.codegen.numpy_backend import (
    NumpyKernel,
    StructuredNumpyKernel,
    numpy_kernels,
    numpy_rows,
    structured_numpy_kernels,
)
from nhfast.codegen.structured import UNROLL_MAX_N, generate_structured_c, program_digest
from nhfast.codegen.taylor import cost_order, generate_taylor_c, taylor_digest, unroll_pays

__all__ = [
    "UNROLL_MAX_N",
    "DerivSpec",
    "IndexedProgram",
    "KernelSet",
    "NumpyKernel",
    "SolveSpec",
    "Statement",
    "StructuredNumpyKernel",
    "cost_order",
    "generate_c",
    "generate_structured_c",
    "generate_taylor_c",
    "kernel_set_digest",
    "numpy_kernels",
    "numpy_rows",
    "program_digest",
    "structured_numpy_kernels",
    "taylor_digest",
    "unprintable",
    "unroll_pays",
]
