"""NumPy evaluation of kernel families: the slow, always-available backend.

Each :class:`NumpyKernel` is a callable with the calling convention of the compiled core's
Python trampoline (``nhfast._core.python_kernel_capsule``), so the C integrators drive it
like any generated kernel.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import sympy as sp

from nhfast.codegen.ckernels import KernelSet


class NumpyKernel:
    """One kernel family evaluated with NumPy on struct-of-arrays buffers."""

    def __init__(self, exprs: Sequence[sp.Expr], ks: KernelSet) -> None:
        self.nin = len(ks.states)
        self.npar = len(ks.params)
        self.nout = len(exprs)
        self.error: BaseException | None = None
        tsym = ks.time if ks.time is not None else sp.Dummy("t")
        args = [tsym, *ks.states, *ks.params]
        self._f = sp.lambdify(args, list(exprs), modules="numpy", cse=True)

    def __call__(self, t, x, par, out, nl: int, ld: int) -> None:
        """Evaluate on lanes ``0..nl-1`` of flat SoA buffers with lane stride ``ld``."""
        tv = np.asarray(t)[:nl]
        xv = np.asarray(x).reshape(self.nin, ld)[:, :nl]
        pv = np.asarray(par).reshape(self.npar, ld)[:, :nl] if self.npar else ()
        ov = np.asarray(out).reshape(self.nout, ld)
        vals = self._f(tv, *xv, *pv)
        for j, v in enumerate(vals):
            ov[j, :nl] = np.broadcast_to(np.asarray(v, dtype=float), (nl,))


def numpy_kernels(ks: KernelSet) -> dict[str, NumpyKernel]:
    """Build a :class:`NumpyKernel` for every family of ``ks``."""
    return {name: NumpyKernel(exprs, ks) for name, exprs in ks.kernels.items()}
