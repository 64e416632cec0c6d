"""The one compile path: generated kernels loaded as capsules the numeric core calls.

:func:`compile_kernels` turns a :class:`~nhfast.codegen.KernelSet` (unrolled expressions) or an
:class:`~nhfast.codegen.IndexedProgram` (indexed loops) into a
:class:`CompiledSystem`: C compiled through the content-hash cache of :mod:`nhfast._jit`, or the
NumPy backend when there is no compiler (``_jit.backend()`` warns once). It knows nothing of
the field classes above it: they hand over the generated code, a name and an input check.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from nhfast import _jit
from nhfast._abi import HAS, SYMBOL
from nhfast._validate import params_rows
from nhfast.codegen import (
    IndexedProgram,
    KernelSet,
    generate_c,
    generate_structured_c,
    numpy_kernels,
    structured_numpy_kernels,
)

__all__ = ["CompiledSystem", "InputCheck", "c_source", "compile_kernels"]

#: ``check(x, params, name)`` on rows ``(m, n_state)`` and ``(m, n_params)``; raises ValueError.
InputCheck = Callable[[np.ndarray, np.ndarray, str], None]
Code = KernelSet | IndexedProgram


@dataclass
class CompiledSystem:
    """Kernels of one system, loaded.

    Attributes
    ----------
    backend : str
        ``"c"`` (generated, compiled, cached) or ``"numpy"``.
    kernels : dict
        Kernel family -> (capsule, ctx); ``ctx`` is None for C kernels.
    n_out : dict
        Kernel family -> number of outputs.
    n_state : int
    params : tuple of sympy.Symbol
        The parameters, in the order of a parameter row.
    check : callable or None
        Checks states and parameter rows before an evaluation (see :data:`InputCheck`).
    key : str or None
        Content hash of the C library (C backend).
    cache_hit : bool
        Whether the library came from the cache.
    timings : dict
        Seconds spent generating the source and compiling/loading it.
    """

    backend: str
    kernels: dict[str, tuple[Any, Any]]
    n_out: dict[str, int]
    n_state: int
    params: tuple[sp.Symbol, ...] = ()
    check: InputCheck | None = None
    key: str | None = None
    path: Any = None
    cache_hit: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    _keepalive: Any = None

    @property
    def n_params(self) -> int:
        return len(self.params)

    def has(self, kind: str) -> bool:
        return kind in self.kernels

    def evaluate(self, kind: str, x, t=0.0, params=None, threads: int = 1) -> np.ndarray:
        """Evaluate kernel family ``kind`` at states ``x`` of shape (..., n_state).

        ``t`` broadcasts against the leading shape of ``x``; ``params`` has shape
        (n_params,) or (..., n_params) matching the leading shape of ``x``. The result has
        shape (..., n_out), for the Jacobian (..., n_state, n_state).
        """
        from nhfast import _core  # the compiled core loads on first use

        if kind not in self.kernels:
            raise ValueError(f"kernel {kind!r} was not generated; compiled: {sorted(self.kernels)}")
        n = self.n_state
        x = np.asarray(x, dtype=float)
        if x.ndim == 0 or x.shape[-1] != n:
            raise ValueError(f"x must have shape (..., {n}), got {x.shape}")
        lead = x.shape[:-1]
        rows = int(np.prod(lead, dtype=np.int64))
        xr = x.reshape(rows, n)
        par = np.broadcast_to(params_rows(params, self.params, lead), (rows, self.n_params))
        if self.check is not None:
            self.check(xr, par, "x")
        # struct-of-arrays in and out: the kernels run on the columns in place
        xs = np.ascontiguousarray(xr.T)
        tr = np.ascontiguousarray(np.broadcast_to(np.asarray(t, dtype=float), lead).reshape(rows))
        nout = self.n_out[kind]
        out = np.empty((nout, rows))
        cap, ctx = self.kernels[kind]
        _core.eval_soa(cap, ctx, tr, xs, np.ascontiguousarray(par.T), out, threads=threads)
        out = out.T
        if kind == "jacobian":
            return out.reshape(*lead, n, n)
        return out.reshape(*lead, nout)


def c_source(code: Code, name: str) -> str:
    """The C source of ``code`` (its banner names the system ``name``)."""
    provenance = {"system": name}
    if isinstance(code, IndexedProgram):
        return generate_structured_c(code, provenance=provenance)
    return generate_c(code, provenance=provenance)


def compile_kernels(
    code: Code, name: str = "system", check: InputCheck | None = None
) -> CompiledSystem:
    """Generate, compile (or fetch from the cache) and load every kernel family of ``code``.

    Parameters
    ----------
    code : KernelSet or IndexedProgram
        The kernels' expressions: unrolled (one per output) or an indexed program.
    name : str
        The system's name, written into the generated source's banner.
    check : callable, optional
        Input check run by :meth:`CompiledSystem.evaluate`. It must not hold a strong
        reference to an object that memoises the result (see :mod:`nhfast._cache`).

    Returns
    -------
    CompiledSystem
    """
    from nhfast import _core

    t0 = time.perf_counter()
    if isinstance(code, IndexedProgram):
        n_out = {k: code.n_out(k) for k in code.outputs}
        n_state, params, n_q = code.n_state, tuple(code.param_symbols), 0
        flags = sum(HAS[k] for k in code.outputs)
        n_obs = n_out.get("observables", 0)
    else:
        n_out = {k: len(v) for k, v in code.kernels.items()}
        n_state, params, n_q = len(code.states), tuple(code.params), code.n_q
        flags, n_obs = code.flags, code.n_obs
    common = {"n_out": n_out, "n_state": n_state, "params": params, "check": check}
    if _jit.backend() == "numpy":
        if isinstance(code, IndexedProgram):
            nk = structured_numpy_kernels(code)
        else:
            nk = numpy_kernels(code)
        cap = _core.python_kernel_capsule()
        kernels = {k: (cap, obj) for k, obj in nk.items()}
        return CompiledSystem(
            "numpy", kernels, timings={"generate": time.perf_counter() - t0}, **common
        )
    source = c_source(code, name)
    t1 = time.perf_counter()
    lib, hit = _jit.build(source)
    t2 = time.perf_counter()
    expect = (n_state, len(params), n_obs, flags, n_q)
    if lib.info[1:] != expect:
        raise RuntimeError(f"kernel library {lib.path} reports {lib.info[1:]}, expected {expect}")
    kernels = {k: (_core.kernel_capsule(lib.address(SYMBOL[k])), None) for k in n_out}
    return CompiledSystem(
        "c",
        kernels,
        key=lib.key,
        path=lib.path,
        cache_hit=hit,
        timings={"generate": t1 - t0, "compile": t2 - t1},
        _keepalive=lib,
        **common,
    )
