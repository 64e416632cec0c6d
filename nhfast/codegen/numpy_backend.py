"""NumPy evaluation of kernel families: the slow, always-available backend.

Each :class:`NumpyKernel` is a callable with the calling convention of the compiled core's
Python trampoline (``nhfast._core.python_kernel_capsule``), so the C integrators drive it
like any generated kernel. It follows the same phases as the generated C (linear solves,
their derivative solves, outputs), with ``numpy.linalg.solve`` for the solves.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import sympy as sp

from nhfast.codegen.ckernels import KernelSet


def _lam(args: list, exprs: Sequence[sp.Expr]):
    return sp.lambdify(args, list(exprs), modules="numpy", cse=True)


class NumpyKernel:
    """One kernel family evaluated with NumPy on struct-of-arrays buffers."""

    def __init__(self, name: str, exprs: Sequence[sp.Expr], ks: KernelSet) -> None:
        self.nin = len(ks.states)
        self.npar = len(ks.params)
        self.nout = len(exprs)
        self.error: BaseException | None = None
        tsym = ks.time if ks.time is not None else sp.Dummy("t")
        args: list = [tsym, *ks.states, *ks.params]
        n = self.nin
        self._phases = []
        derivs = name in ks.needs_derivs
        for k, sv in enumerate(ks.solves):
            f = _lam(args, [*sv.matrix, *sv.rhs])
            self._phases.append(("solve", sv.r, f))
            args = args + list(sv.unknowns)
            if derivs:
                cols = ks.derivs[k].columns
                fd = _lam(args, [cols[j][a] for j in range(n) for a in range(sv.r)])
                self._phases.append(("deriv", sv.r, fd))
                args = args + [ks.derivs[k].symbols[a][j] for j in range(n) for a in range(sv.r)]
        self._f = _lam(args, exprs)

    def __call__(self, t, x, par, out, nl: int, ld: int) -> None:
        """Evaluate on lanes ``0..nl-1`` of flat SoA buffers with lane stride ``ld``."""
        tv = np.asarray(t)[:nl]
        xv = _rows(x, self.nin, nl, ld)
        pv = _rows(par, self.npar, nl, ld) if self.npar else ()
        ov = _rows(out, self.nout, nl, ld) if self.nout else None
        vals = [tv, *xv, *pv]
        mats: list[np.ndarray] = []
        for kind, r, f in self._phases:
            got = [np.broadcast_to(np.asarray(v, dtype=float), (nl,)) for v in f(*vals)]
            if kind == "solve":
                K = np.stack(got[: r * r]).reshape(r, r, nl).transpose(2, 0, 1)
                b = np.stack(got[r * r :]).T
                mats.append(K)
                u = _solve(K, b[..., None])[..., 0]
                vals += list(u.T)
            else:
                K = mats[-1]
                rhs = np.stack(got).reshape(self.nin, r, nl).transpose(2, 1, 0)  # (nl, r, n)
                du = _solve(K, rhs)  # (nl, r, n): du[:, a, j]
                vals += [du[:, a, j] for j in range(self.nin) for a in range(r)]
        for j, v in enumerate(self._f(*vals)):
            ov[j, :nl] = np.broadcast_to(np.asarray(v, dtype=float), (nl,))


def _rows(buf, k: int, nl: int, ld: int) -> np.ndarray:
    """(k, nl) view of a flat buffer holding row i at offset i * ld."""
    a = np.asarray(buf)
    return np.lib.stride_tricks.as_strided(a, shape=(k, nl), strides=(ld * a.itemsize, a.itemsize))


def _solve(K: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Batched solve; a singular lane gets NaN (as in the C kernels)."""
    try:
        return np.linalg.solve(K, b)
    except np.linalg.LinAlgError:
        out = np.full(b.shape, np.nan)
        for i in range(K.shape[0]):
            try:
                out[i] = np.linalg.solve(K[i], b[i])
            except np.linalg.LinAlgError:
                pass
        return out


def numpy_kernels(ks: KernelSet) -> dict[str, NumpyKernel]:
    """Build a :class:`NumpyKernel` for every family of ``ks``."""
    return {name: NumpyKernel(name, exprs, ks) for name, exprs in ks.kernels.items()}
