"""NumPy evaluation of kernel families: the slow, always-available backend.

:class:`NumpyKernel` (a :class:`~nhfast.codegen.ckernels.KernelSet` family) and
:class:`StructuredNumpyKernel` (an :class:`~nhfast.codegen.indexed.IndexedProgram` output)
are callables with the calling convention of the compiled core's Python trampoline
(``nhfast._core.python_kernel_capsule``), so the C integrators drive them like any generated
kernel. They follow the same phases as the generated C (linear solves, their derivative
solves, outputs; statements of the program), with ``numpy.linalg.solve`` for the solves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sympy as sp
from sympy.printing.numpy import NumPyPrinter

from nhfast.codegen.ckernels import KernelSet
from nhfast.codegen.indexed import DENSE_KINDS, IndexedProgram

__all__ = [
    "numpy_kernels",
]


class _ShallowPrinter(NumPyPrinter):
    """NumPy printer whose long sums and products nest in groups of :data:`_GROUP`, so that
    Python's compiler (recursive over ``a + b + c ...``) takes ``n`` in the thousands."""

    def _grouped(self, parts: list[str], op: str) -> str:
        while len(parts) > 1:
            parts = [f"({op.join(parts[i : i + _GROUP])})" for i in range(0, len(parts), _GROUP)]
        return parts[0]

    def _print_Add(self, expr: sp.Add, order: Any = None) -> str:
        if len(expr.args) <= _GROUP:
            return super()._print_Add(expr, order)
        return self._grouped([self._print(a) for a in expr.args], " + ")

    def _print_Mul(self, expr: sp.Mul) -> str:
        if len(expr.args) <= _GROUP:
            return super()._print_Mul(expr)
        return self._grouped([f"({self._print(a)})" for a in expr.args], "*")


#: Terms per group of :class:`_ShallowPrinter`.
_GROUP = 32


def _lambdify(args: list, exprs: Sequence[sp.Expr], cse: bool = True) -> Callable:
    printer = _ShallowPrinter({"fully_qualified_modules": False, "inline": True,
                               "allow_unknown_functions": True, "user_functions": {}})  # fmt: skip
    return sp.lambdify(args, list(exprs), modules="numpy", cse=cse, printer=printer)


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
            f = _lambdify(args, [*sv.matrix, *sv.rhs])
            self._phases.append(("solve", sv.r, f))
            args = args + list(sv.unknowns)
            if derivs:
                cols = ks.derivs[k].columns
                fd = _lambdify(args, [cols[j][a] for j in range(n) for a in range(sv.r)])
                self._phases.append(("deriv", sv.r, fd))
                args = args + [ks.derivs[k].symbols[a][j] for j in range(n) for a in range(sv.r)]
        self._f = _lambdify(args, exprs)

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
    """Build a :class:`NumpyKernel` for every family of ``ks``.

    Parameters
    ----------
    ks : KernelSet
        The generated kernel families (:meth:`VectorField.kernel_set`).

    Returns
    -------
    dict of str to NumpyKernel
        One evaluator per family.
    """
    return {name: NumpyKernel(name, exprs, ks) for name, exprs in ks.kernels.items()}


class StructuredNumpyKernel:
    """One output family of an :class:`IndexedProgram`, evaluated with NumPy.

    Callable as ``kernel(t, x, par, out, nlanes, ld)`` on flat struct-of-arrays buffers (the
    convention of ``nhfast._core.python_kernel_capsule``); vectors are ``(n, nlanes)`` arrays.
    """

    def __init__(self, prog: IndexedProgram, family: str) -> None:
        self.prog = prog
        self.family = family
        self.nin = prog.n_state
        self.npar = prog.n_params
        self.nout = prog.n_out(family)
        self.error: BaseException | None = None
        need = prog.needed(prog.outputs[family])
        self._plan = []
        for st in prog.statements:
            if need & set(st.targets):
                args = sorted(set().union(*(e.free_symbols for e in st.exprs)), key=str)
                self._plan.append((st, args, _lambdify(args, st.exprs, cse=False)))
        self._out = []
        for b in prog.outputs[family]:
            args = sorted(b.free_symbols, key=str)
            self._out.append((prog.is_indexed(b), args, _lambdify(args, [b], cse=False)))

    def _values(self, args: list[sp.Symbol], env: dict, nl: int) -> list[np.ndarray]:
        prog = self.prog
        vals = []
        for s in args:
            if s == prog.index:
                vals.append(np.arange(prog.n, dtype=float)[:, None])
            elif s in prog.owners:
                v, k = prog.owners[s]
                vals.append(env[v][k])
            else:
                vals.append(env[s])
        return vals

    def evaluate(self, t: np.ndarray, x: np.ndarray, par: np.ndarray) -> np.ndarray:
        """Outputs for ``x`` of shape (n_state, nl), ``par`` (n_params, nl), ``t`` (nl,)."""
        prog = self.prog
        n = prog.n
        nl = x.shape[1]
        env: dict[sp.Symbol, np.ndarray] = {}
        for sym, inp in prog.inputs.items():
            src = x if inp.where == "x" else par
            if inp.where == "t":
                env[sym] = np.asarray(t, dtype=float)
            elif inp.vector:
                env[sym] = src[inp.offset : inp.offset + n]
            elif inp.matrix:
                env[sym] = src[inp.offset : inp.offset + n * n]
            else:
                env[sym] = src[inp.offset]
        for st, args, f in self._plan:
            kind, target = st.kind, st.target
            got = f(*self._values(args, env, nl))
            if kind in DENSE_KINDS:
                ops = [np.broadcast_to(np.asarray(g, dtype=float), (n, nl)) for g in got]
                mats = [None if m is None else env[m].reshape(n, n, nl) for m in st.matrices]
                if kind == "matvec":
                    H = env[st.matrices[0]].reshape(n, n, nl)
                    env[target] = _matvec(H, ops[0], st.transpose)
                else:
                    env[target], logdet = _dense_solve(ops, mats)
                    if st.logdet is not None:
                        env[st.logdet] = logdet
            elif kind == "reduce":
                env[target] = np.sum(np.broadcast_to(got[0], (n, nl)), axis=0)
            elif kind == "vector":
                env[target] = np.broadcast_to(got[0], (n, nl))
            elif kind == "scalar":
                env[target] = np.broadcast_to(got[0], (nl,))
            else:
                env[target] = np.stack([np.broadcast_to(g, (nl,)) for g in got])
        rows = []
        for indexed, args, f in self._out:
            got = f(*self._values(args, env, nl))[0]
            rows.append(np.broadcast_to(got, (n, nl) if indexed else (1, nl)))
        return np.concatenate(rows, axis=0)

    def __call__(self, t, x, par, out, nl: int, ld: int) -> None:
        """Evaluate on lanes ``0..nl-1`` of flat SoA buffers with lane stride ``ld``."""
        tv = np.asarray(t)[:nl]
        xv = _rows(x, self.nin, nl, ld)
        pv = _rows(par, self.npar, nl, ld) if self.npar else np.zeros((0, nl))
        ov = _rows(out, self.nout, nl, ld)
        ov[:, :nl] = self.evaluate(tv, xv, pv)


def _matvec(H: np.ndarray, e: np.ndarray, transpose: bool) -> np.ndarray:
    """``H e`` (or ``H^T e``) per lane: ``H`` of shape (n, n, nl), ``e`` (n, nl)."""
    return np.einsum("jil,jl->il" if transpose else "ijl,jl->il", H, e)


def _dense_solve(ops: list[np.ndarray], mats: list) -> tuple[np.ndarray, np.ndarray]:
    """Solution (n, nl) and ``log|det K|`` (nl,) of the ``solve`` statement's systems.

    ``ops`` are the element-wise operands ``rhs, diag, left_1, right_1, ...`` (each (n, nl))
    and ``mats`` the terms' matrices (n, n, nl) or ``None``. A lane whose matrix is singular
    or whose solution is not finite gets NaN in both (as in the C kernels).
    """
    rhs, diag = ops[0], ops[1]
    n, nl = rhs.shape
    K = np.zeros((nl, n, n))
    K[:, np.arange(n), np.arange(n)] = diag.T
    for t, m in enumerate(mats):
        left, right = ops[2 + 2 * t].T, ops[3 + 2 * t].T  # (nl, n)
        outer = left[:, :, None] * right[:, None, :]
        K += outer if m is None else outer * m.transpose(2, 0, 1)
    with np.errstate(all="ignore"):
        x = _solve(K, rhs.T[..., None])[..., 0]  # (nl, n)
        _, logdet = np.linalg.slogdet(K)
    bad = ~np.all(np.isfinite(x), axis=1) | ~np.isfinite(logdet)
    x[bad] = np.nan
    logdet = np.where(bad, np.nan, logdet)
    return np.ascontiguousarray(x.T), logdet


def structured_numpy_kernels(prog: IndexedProgram) -> dict[str, StructuredNumpyKernel]:
    """A :class:`StructuredNumpyKernel` for every output family of ``prog``."""
    return {family: StructuredNumpyKernel(prog, family) for family in prog.outputs}


def numpy_rows(args: Sequence[sp.Symbol], exprs: Sequence[sp.Expr]) -> Callable[..., np.ndarray]:
    """NumPy function of ``exprs`` evaluated row by row.

    The result ``f(*blocks)`` takes arrays of shape ``(m, k_i)`` (or ``(1, k_i)``, broadcast)
    whose columns, in order, are the values of ``args``, and returns shape
    ``(m, len(exprs))``; constant expressions broadcast, and invalid operations give NaN
    without a warning.
    """
    exprs = list(exprs)
    f = _lambdify(list(args), exprs, cse=False) if exprs else None

    def rows(*blocks: np.ndarray) -> np.ndarray:
        blocks = tuple(np.asarray(b, dtype=float) for b in blocks)
        m = max((b.shape[0] for b in blocks), default=1)
        if f is None:
            return np.zeros((m, 0))
        cols = [c for b in blocks for c in np.broadcast_to(b, (m, b.shape[1])).T]
        with np.errstate(all="ignore"):
            vals = f(*cols)
        return np.stack([np.broadcast_to(np.asarray(v, dtype=float), (m,)) for v in vals], 1)

    return rows
