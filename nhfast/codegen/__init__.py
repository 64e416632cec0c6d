"""SymPy expressions to plain C99 kernels of the kernel ABI, or to NumPy callables.

Pure code generation: expressions in, C text or NumPy kernels out. Compiling, caching and
loading are :mod:`nhfast._jit`'s job. Two inputs: a :class:`KernelSet` (one SymPy expression
per output, unrolled; :func:`generate_c`) and an :class:`IndexedProgram` (statements over
length-``n`` vectors, for large ``n``; :func:`generate_structured_c`). The kernel ABI header
the generated sources include ships in ``nhfast/codegen/include``.
"""

from nhfast.codegen._printer import unprintable  # noqa: F401
from nhfast.codegen.ckernels import DerivSpec, KernelSet, SolveSpec, generate_c, kernel_set_digest  # noqa: F401
from nhfast.codegen.indexed import IndexedProgram, Statement  # noqa: F401
from nhfast.codegen.numpy_backend import (
    NumpyKernel,  # noqa: F401
    StructuredNumpyKernel,  # noqa: F401
    numpy_kernels,
    numpy_rows,  # noqa: F401
    structured_numpy_kernels,  # noqa: F401
)
from nhfast.codegen.structured import UNROLL_MAX_N, generate_structured_c, program_digest  # noqa: F401
from nhfast.codegen.taylor import cost_order, generate_taylor_c, taylor_digest, unroll_pays  # noqa: F401

__all__ = [
    "IndexedProgram",
    "KernelSet",
    "generate_c",
    "generate_structured_c",
    "generate_taylor_c",
    "numpy_kernels",
]
