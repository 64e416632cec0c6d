"""A system's kernels, compiled (or NumPy-backed), as capsules the numeric core can call."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from nhfast import _jit
from nhfast._abi import SYMBOL
from nhfast.codegen import generate_c, numpy_kernels

if TYPE_CHECKING:
    from nhfast.vectorfield import VectorField


@dataclass
class CompiledSystem:
    """Kernels of one system for one set of companions.

    Attributes
    ----------
    backend : str
        ``"c"`` (generated, compiled, cached) or ``"numpy"``.
    kernels : dict
        Kernel family -> (capsule, ctx); ``ctx`` is None for C kernels.
    n_out : dict
        Kernel family -> number of outputs.
    key : str or None
        Content hash of the C library (C backend).
    cache_hit : bool
        Whether the library came from the cache.
    timings : dict
        Seconds spent generating the source and compiling/loading it.
    """

    system: VectorField
    backend: str
    kernels: dict[str, tuple[Any, Any]]
    n_out: dict[str, int]
    key: str | None = None
    path: Any = None
    cache_hit: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    _keepalive: Any = None

    def has(self, kind: str) -> bool:
        return kind in self.kernels

    def evaluate(self, kind: str, x, t=0.0, params=None, threads: int = 1) -> np.ndarray:
        """Evaluate kernel family ``kind`` at states ``x`` of shape (..., n_state).

        ``t`` broadcasts against the leading shape of ``x``; ``params`` has shape
        (n_params,) or (..., n_params) matching the leading shape of ``x``.
        """
        from nhfast import _core

        if kind not in self.kernels:
            raise ValueError(f"kernel {kind!r} was not generated; compiled: {sorted(self.kernels)}")
        vf = self.system
        x = np.asarray(x, dtype=float)
        if x.ndim == 0 or x.shape[-1] != vf.n_state:
            raise ValueError(f"x must have shape (..., {vf.n_state}), got {x.shape}")
        lead = x.shape[:-1]
        rows = int(np.prod(lead, dtype=np.int64))
        # struct-of-arrays in and out: the kernels run on the columns in place
        xs = np.ascontiguousarray(x.reshape(rows, vf.n_state).T)
        tr = np.ascontiguousarray(np.broadcast_to(np.asarray(t, dtype=float), lead).reshape(rows))
        if vf.n_params == 0:
            par = np.zeros((0, rows))
        else:
            if params is None:
                raise ValueError(f"params are required: {', '.join(map(str, vf.params))}")
            par = np.asarray(params, dtype=float)
            if par.shape == (vf.n_params,):
                par = np.broadcast_to(par[:, None], (vf.n_params, rows))
            elif par.shape == (*lead, vf.n_params):
                par = par.reshape(rows, vf.n_params).T
            else:
                raise ValueError(
                    f"params must have shape ({vf.n_params},) or {(*lead, vf.n_params)}"
                )
            par = np.ascontiguousarray(par)
            vf.check_params(par.T)
        vf.check_domain(x.reshape(rows, vf.n_state), par.T, "x")
        nout = self.n_out[kind]
        out = np.empty((nout, rows))
        cap, ctx = self.kernels[kind]
        _core.eval_soa(cap, ctx, tr, xs, par, out, threads=threads)
        out = out.T
        if kind == "jacobian":
            return out.reshape(*lead, vf.n_state, vf.n_state)
        return out.reshape(*lead, nout)


def compile_system(vf: VectorField, companions: list[str]) -> CompiledSystem:
    """Generate and build the kernels of ``vf`` with the given companions."""
    from nhfast import _core

    t0 = time.perf_counter()
    ks = vf.kernel_set(companions)
    n_out = {k: len(v) for k, v in ks.kernels.items()}
    backend = _jit.backend()
    if backend == "numpy":
        nk = numpy_kernels(ks)
        cap = _core.python_kernel_capsule()
        kernels = {k: (cap, obj) for k, obj in nk.items()}
        return CompiledSystem(
            vf, "numpy", kernels, n_out, timings={"generate": time.perf_counter() - t0}
        )
    source = generate_c(ks)
    t1 = time.perf_counter()
    lib, hit = _jit.build(source)
    t2 = time.perf_counter()
    expect = (vf.n_state, vf.n_params, ks.n_obs, ks.flags, ks.n_q)
    if lib.info[1:] != expect:
        raise RuntimeError(f"kernel library {lib.path} reports {lib.info[1:]}, expected {expect}")
    kernels = {k: (_core.kernel_capsule(lib.address(SYMBOL[k])), None) for k in ks.kernels}
    return CompiledSystem(
        vf,
        "c",
        kernels,
        n_out,
        key=lib.key,
        path=lib.path,
        cache_hit=hit,
        timings={"generate": t1 - t0, "compile": t2 - t1},
        _keepalive=lib,
    )
