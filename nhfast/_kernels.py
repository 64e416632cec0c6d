"""The one compile path: generated kernels loaded as capsules the numeric core calls.

:func:`compile_kernels` turns a :class:`~nhfast.codegen.KernelSet` (unrolled expressions) or an
:class:`~nhfast.codegen.IndexedProgram` (indexed loops) into a
:class:`CompiledSystem`: C compiled through the content-hash cache of :mod:`nhfast._jit`, or the
NumPy backend when there is no compiler (``_jit.backend()`` warns once). It knows nothing of
the field classes above it: they hand over the generated code, a name and an input check.

Two cache levels make a warm process cheap: the generated C is cached under
:func:`source_key`, a hash of the symbolic input taken before code generation (so CSE and
printing run once per system, not once per process), or under :func:`recipe_key`, a hash of a
field's own description taken before its companion kernels (Jacobian, divergence) are even
derived (:func:`compile_recipe`); the library is cached under the hash of the C
(:func:`nhfast._jit.build`). A :class:`CompiledSystem` pickles as its C source and a few
numbers (:func:`load_compiled` rebuilds it in another process, from that process's cache).
"""

from __future__ import annotations

import ctypes
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import sympy as sp

from nhfast import _jit, _keys, _progress, codegen
from nhfast._abi import (
    ABI_VERSION,
    DERIVE_SYMBOL,
    DERIVED_COUNT_SYMBOL,
    HAS,
    RHS_DERIVED_SYMBOL,
    SYMBOL,
)
from nhfast._validate import params_rows
from nhfast._version import __version__
from nhfast.codegen import (
    IndexedProgram,
    KernelSet,
    generate_c,
    generate_structured_c,
    kernel_set_digest,
    numpy_kernels,
    program_digest,
    structured_numpy_kernels,
    taylor_digest,
)
from nhfast.codegen.taylor import TaylorSize, generate_taylor
from nhfast.errors import CompilationError

__all__: list[str] = []

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
        Seconds spent on the source (``"generate"``: key, first-level lookup and, on a miss,
        code generation; ``"key"``: the key alone, absent on a hit by recipe key) and
        compiling/loading it (``"compile"``).
    name : str
        The system's name (in the banner of the source).
    source : str or None
        The generated C source (C backend); None for the NumPy backend.
    generated : bool
        Whether this process generated the source (ran CSE and printing); False when it came
        from the first cache level or was handed over (:func:`load_compiled`).
    n_obs, flags, n_q : int
        Number of observables, ``NH_HAS_*`` bits of the families, positions (Hamiltonian).
    derived : tuple or None
        C libraries whose right-hand side uses sub-expressions of the parameters alone:
        ``(rhs, derive, count)``, the capsules of ``nh_rhs_derived`` and ``nh_derive`` and the
        number of derived parameters (the integrator computes them once per trajectory);
        None otherwise.
    taylor_size : nhfast.codegen.taylor.TaylorSize or None
        Of a Taylor kernel, its size (what :func:`nhfast.codegen.cost_order` and
        :func:`nhfast.codegen.unroll_pays` take): from its tape, stored with the cached
        source; None for other kernels.
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
    name: str = "system"
    source: str | None = None
    generated: bool = True
    n_obs: int = 0
    flags: int = 0
    n_q: int = 0
    derived: tuple[Any, Any, int] | None = None
    _keepalive: Any = None
    _code: Any = None  # the KernelSet/IndexedProgram of a NumPy-backend system (for pickling)
    taylor_size: TaylorSize | None = None

    @property
    def n_params(self) -> int:
        return len(self.params)

    def meta(self) -> dict[str, Any]:
        """What :func:`load_compiled` needs besides the source: plain, picklable data."""
        return {
            "format": 1,
            "name": self.name,
            "backend": self.backend,
            "n_out": dict(self.n_out),
            "n_state": self.n_state,
            "params": tuple(self.params),
            "n_obs": self.n_obs,
            "flags": self.flags,
            "n_q": self.n_q,
            "abi": ABI_VERSION,
        }

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # C: the source and a few numbers travel (no SymPy); NumPy: the expressions. The
        # input check (a weak reference to its field) does not: the owner re-attaches it.
        code = self._code if self.source is None else None
        return (load_compiled, (self.source, self.meta(), None, code))

    def has(self, kind: str) -> bool:
        return kind in self.kernels

    def integrator_rhs(self) -> tuple[Any, Any, Any, int]:
        """``(rhs, ctx, derive, nderived)`` as the integrator takes them.

        With derived parameters (:attr:`derived`): ``nh_rhs_derived`` and ``nh_derive``, so
        the derived rows are computed once per trajectory; otherwise the ``rhs`` family's
        capsule and ctx, ``None`` and 0.
        """
        if self.derived is not None:
            rhs, derive, count = self.derived
            return rhs, None, derive, count
        cap, ctx = self.kernels["rhs"]
        return cap, ctx, None, 0

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


_minimum = np.minimum.reduce
_all = np.logical_and.reduce


class InputChecks:
    """A system's input checks, prepared once, that accept states and parameter rows fast.

    :meth:`accept` returns True only when every value certainly passes the system's own
    checks (``VectorField.check_params``: parameters that contradict their SymPy assumptions;
    ``VectorField.check_domain``: states outside a ``domain`` condition ``expr > 0``); on
    False the caller runs those checks, which raise the error with its message (or pass, for
    a case this test leaves to them). Per call it costs one NumPy reduction per kind of
    assumption, not one per parameter, and for a single state the domain conditions are
    evaluated on Python floats (a ``math`` lambdification, built once) instead of NumPy
    arrays of one element.

    Parameters
    ----------
    states, params : sequence of sympy.Symbol
        The system's states and parameters, in the order of a row.
    domain : mapping of str to sympy.Expr
        The ``domain`` conditions (``expr > 0``).
    """

    def __init__(
        self, states: list[sp.Symbol], params: list[sp.Symbol], domain: Mapping[str, sp.Expr]
    ) -> None:
        # a positive value is also nonnegative and nonzero: one rule per column suffices
        kinds: dict[str, list[int]] = {"positive": [], "nonnegative": [], "nonzero": []}
        for k, sym in enumerate(params):
            if sym.is_positive:
                kinds["positive"].append(k)
                continue
            if sym.is_nonnegative:
                kinds["nonnegative"].append(k)
            if sym.is_nonzero:
                kinds["nonzero"].append(k)
        npar = len(params)
        self.rules = [
            (kind, None if len(cols) == npar else np.array(cols, dtype=np.intp))
            for kind, cols in kinds.items()
            if cols
        ]
        self.has_domain = bool(domain)
        self.domain: Callable[..., Any] | None = None
        if domain:
            try:
                self.domain = sp.lambdify([*states, *params], list(domain.values()), "math")
            except Exception:  # noqa: BLE001 - not lambdifiable: the system's check decides
                self.domain = None

    def accept(self, x: np.ndarray, par: np.ndarray) -> bool:
        """Whether states ``x`` (m, n_state) and parameter rows ``par`` (1 or m, n_params)
        certainly pass the system's checks (False: run them)."""
        for kind, cols in self.rules:
            sub = par if cols is None else par[:, cols]
            if sub.size == 0:
                continue
            # the ufuncs' reductions directly (ndarray.min/all add a Python layer)
            if kind == "positive":
                ok = _minimum(sub, axis=None) > 0
            elif kind == "nonnegative":
                ok = _minimum(sub, axis=None) >= 0
            else:
                ok = _all(sub, axis=None)
            if not ok:
                return False
        if not self.has_domain:
            return True
        if self.domain is None or x.shape[0] != 1 or par.shape[0] != 1:
            return False  # several rows: NumPy's vectorised check is the fast one
        try:
            vals = self.domain(*x.tolist()[0], *par.tolist()[0])
            return all(v > 0 for v in vals)
        except Exception:  # noqa: BLE001 - math domain errors, complex values: let it decide
            return False


def c_source(code: Code, name: str) -> str:
    """The C source of ``code`` (its banner names the system ``name``)."""
    provenance = {"system": name}
    if isinstance(code, IndexedProgram):
        return generate_structured_c(code, provenance=provenance)
    return generate_c(code, provenance=provenance)


@lru_cache(maxsize=1)
def _generator_fingerprint() -> str:
    """:func:`nhfast._keys.code_fingerprint` of the code that writes C (``nhfast/codegen/**.py``,
    ``_abi``, this module) and the versions of nhfast, its ABI, SymPy, mpmath and Python."""
    import mpmath

    here = Path(__file__)
    files = sorted(Path(codegen.__file__).parent.rglob("*.py")) + [here, here.with_name("_abi.py")]
    versions = (__version__, f"abi={ABI_VERSION}", sp.__version__, mpmath.__version__, sys.version)
    return str(_keys.code_fingerprint(files, versions))


def source_key(code: Code, name: str) -> str:
    """Key of the generated C of ``code``: a hash of its symbolic input, taken before generation.

    It covers everything the source depends on: the states, parameters and time (names and
    assumptions, in order), every kernel family's expressions (in order), the solves, ``n_q``
    and the derivative flags (:func:`nhfast.codegen.kernel_set_digest`), or the indexed
    program (:func:`nhfast.codegen.program_digest`); the generator, ``name`` (in the
    source's banner), and the versions of nhfast, its ABI, SymPy, mpmath and Python, and
    the generator's own code. Much cheaper than generating the source (no CSE, no printing:
    each shared subtree is hashed once).

    Parameters
    ----------
    code : KernelSet or IndexedProgram
    name : str
        The system's name.

    Returns
    -------
    str
        A SHA-256 hex digest.
    """
    if isinstance(code, IndexedProgram):
        kind, digest = "generate_structured_c(unroll=None)", program_digest(code)
    else:
        kind, digest = "generate_c", kernel_set_digest(code)
    return _keys.source_key(_generator_fingerprint(), kind, digest, name)


def recipe_key(parts: Iterable[str], name: str) -> str:
    """Key of the generated C of a system given by its recipe, before its kernels are derived.

    The recipe is what the caller builds the kernels from (a field's states, parameters,
    right-hand side, solves, requested companions, and the code that derives the kernels):
    ``parts`` are strings (digests) that must determine the kernels' expressions. The key adds
    the generator's fingerprint (as :func:`source_key` does) and ``name``.

    Parameters
    ----------
    parts : iterable of str
    name : str
        The system's name (in the source's banner).

    Returns
    -------
    str
        A SHA-256 hex digest.
    """
    return _keys.recipe_key(_generator_fingerprint(), parts, name)


def _shape(code: Code) -> dict[str, Any]:
    """Sizes of the library of ``code``: what ``nh_info`` must report, and the outputs."""
    if isinstance(code, IndexedProgram):
        n_out = {k: code.n_out(k) for k in code.outputs}
        return {
            "n_out": n_out,
            "n_state": code.n_state,
            "params": tuple(code.param_symbols),
            "n_q": 0,
            "flags": sum(HAS[k] for k in code.outputs),
            "n_obs": n_out.get("observables", 0),
        }
    return {
        "n_out": {k: len(v) for k, v in code.kernels.items()},
        "n_state": len(code.states),
        "params": tuple(code.params),
        "n_q": code.n_q,
        "flags": code.flags,
        "n_obs": code.n_obs,
    }


def _numpy_system(code: Code, shape: Mapping[str, Any], name: str, check) -> CompiledSystem:
    from nhfast import _core

    t0 = time.perf_counter()
    n_expr = sum(shape["n_out"].values())
    with _progress.stage(f"generating NumPy kernels for {name!r} ({n_expr} expressions)"):
        if isinstance(code, IndexedProgram):
            nk = structured_numpy_kernels(code)
        else:
            nk = numpy_kernels(code)
    cap = _core.python_kernel_capsule()
    kernels = {k: (cap, obj) for k, obj in nk.items()}
    return CompiledSystem(
        "numpy",
        kernels,
        check=check,
        timings={"generate": time.perf_counter() - t0},
        name=name,
        _code=code,
        **shape,
    )


def _c_system(
    source: str, shape: Mapping[str, Any], name: str, check, timings: dict[str, float]
) -> CompiledSystem:
    """Compile (or fetch) and load ``source``; check its ``nh_info`` against ``shape``."""
    from nhfast import _core

    expect = (shape["n_state"], len(shape["params"]), shape["n_obs"], shape["flags"], shape["n_q"])
    label = f"compiling C for {name!r} ({len(source) // 1000} kB)"
    lib, loaded = _load_library(source, label, expect, "kernel", name, timings)
    kernels = {k: (_core.kernel_capsule(lib.address(SYMBOL[k])), None) for k in shape["n_out"]}
    return CompiledSystem("c", kernels, derived=_derived(lib), check=check, **loaded, **shape)


def _load_library(
    source: str, label: str, expect: tuple, what: str, name: str, timings: dict[str, float]
) -> tuple[_jit.LoadedLibrary, dict[str, Any]]:
    """Compile (or fetch) and load ``source`` (``timings["compile"]``), check its ``nh_info``
    against ``expect``; the library and the :class:`CompiledSystem` fields that describe it."""
    t1 = time.perf_counter()
    lib, hit = _jit.build(source, label=label)
    timings["compile"] = time.perf_counter() - t1
    if lib.info[1:] != expect:
        raise RuntimeError(f"{what} library {lib.path} reports {lib.info[1:]}, expected {expect}")
    loaded = {
        "key": lib.key,
        "path": lib.path,
        "cache_hit": hit,
        "timings": timings,
        "name": name,
        "source": source,
        "_keepalive": lib,
    }
    return lib, loaded


def _derived(lib: _jit.LoadedLibrary) -> tuple[Any, Any, int] | None:
    """The derived-parameter exports of ``lib`` (see :class:`CompiledSystem`), if it has them."""
    from nhfast import _core

    if not lib.has(DERIVED_COUNT_SYMBOL):
        return None
    count = ctypes.CFUNCTYPE(ctypes.c_int64)(lib.address(DERIVED_COUNT_SYMBOL))()
    if count < 1:
        raise RuntimeError(f"kernel library {lib.path} reports {count} derived parameters")
    return (
        _core.kernel_capsule(lib.address(RHS_DERIVED_SYMBOL)),
        _core.kernel_capsule(lib.address(DERIVE_SYMBOL)),
        int(count),
    )


def compile_kernels(
    code: Code, name: str = "system", check: InputCheck | None = None, key: str | None = None
) -> CompiledSystem:
    """Generate, compile (or fetch from the cache) and load every kernel family of ``code``.

    The generated C is cached under :func:`source_key` (first level), the library under the
    hash of the C (:func:`nhfast._jit.build`): a process that finds the source skips code
    generation (``CompiledSystem.generated`` is False). A stage slower than
    ``nhfast._progress.THRESHOLD`` seconds says so on stderr.

    Parameters
    ----------
    code : KernelSet or IndexedProgram
        The kernels' expressions: unrolled (one per output) or an indexed program.
    name : str
        The system's name, written into the generated source's banner.
    check : callable, optional
        Input check run by :meth:`CompiledSystem.evaluate`. It must not hold a strong
        reference to an object that memoises the result (see :mod:`nhfast._cache`).
    key : str, optional
        First-level key to use instead of :func:`source_key` (a :func:`recipe_key`).

    Returns
    -------
    CompiledSystem
    """
    shape = _shape(code)
    if _jit.backend() == "numpy":
        return _numpy_system(code, shape, name, check)
    t0 = time.perf_counter()
    if key is None:
        key = source_key(code, name)
    t_key = time.perf_counter() - t0
    source = _jit.cached_source(key)
    generated = source is None
    if source is None:
        n_expr = sum(shape["n_out"].values())
        with _progress.stage(f"generating C for {name!r} (CSE, {n_expr} expressions)"):
            source = c_source(code, name)
        info = {"system": str(name), "n_state": shape["n_state"], "n_out": shape["n_out"]}
        _jit.store_source(key, source, info)
    timings = {"generate": time.perf_counter() - t0, "key": t_key}
    cs = _c_system(source, shape, name, check, timings)
    cs.generated = generated
    return cs


def compile_recipe(
    key: str,
    shape: Mapping[str, Any],
    make_code: Callable[[], Code],
    name: str = "system",
    check: InputCheck | None = None,
) -> CompiledSystem:
    """:func:`compile_kernels` of ``make_code()``, whose source is cached under ``key``.

    On a hit of the first cache level the stored source is compiled (or found) and loaded
    with ``shape``: ``make_code`` is not called, so nothing is derived or generated. On a
    miss (or with the NumPy backend) the code is made and compiled as by
    :func:`compile_kernels`; its source is stored under ``key`` if its shape is ``shape``
    (else under its :func:`source_key`).

    Parameters
    ----------
    key : str
        A :func:`recipe_key`: it must determine the C of ``make_code()``.
    shape : mapping
        What :func:`load_compiled` reads from its ``meta``: ``n_out`` (family -> outputs),
        ``n_state``, ``params``, ``n_obs``, ``flags``, ``n_q``.
    make_code : callable
        Returns the KernelSet or IndexedProgram (the expensive part: derivatives, ...).
    name : str
    check : callable, optional
        As for :func:`compile_kernels`.

    Returns
    -------
    CompiledSystem
    """
    if _jit.backend() != "numpy":
        t0 = time.perf_counter()
        source = _jit.cached_source(key)
        if source is not None:
            t = time.perf_counter() - t0
            want = {k: shape[k] for k in ("n_out", "n_state", "params", "n_obs", "flags", "n_q")}
            cs = _c_system(source, want, name, check, {"generate": t})
            cs.generated = False
            return cs
    with _progress.stage(f"deriving the kernels of {name!r}"):
        code = make_code()
    got = _shape(code)
    same = got == {k: shape.get(k) for k in got}
    return compile_kernels(code, name, check, key=key if same else None)


_META_KEYS = ("name", "n_out", "n_state", "params", "n_obs", "flags", "n_q", "abi")


def load_compiled(
    source: str | None,
    meta: Mapping[str, Any],
    check: InputCheck | None = None,
    code: Code | None = None,
) -> CompiledSystem:
    """A :class:`CompiledSystem` from its generated C source (e.g. in another process).

    What a pickled :class:`CompiledSystem` becomes: the source is compiled (or found) in this
    process's cache and checked against ``meta``; no SymPy work is done.

    Parameters
    ----------
    source : str or None
        The generated C (:attr:`CompiledSystem.source`); None for a NumPy-backend system.
    meta : mapping
        :meth:`CompiledSystem.meta` of the original.
    check : callable, optional
        The input check (it does not travel with a pickle; the owner passes it again).
    code : KernelSet or IndexedProgram, optional
        The expressions, for the NumPy backend (a ``source`` of None, or no C compiler here).

    Raises
    ------
    ValueError
        If ``meta`` lacks an entry, or neither a source nor the code is given.
    nhfast.errors.CompilationError
        If ``meta`` is of another kernel ABI, or C must be compiled without a compiler.
    """
    missing = [k for k in _META_KEYS if k not in meta]
    if missing:
        raise ValueError(f"meta lacks {', '.join(missing)}: pass CompiledSystem.meta()")
    if meta["abi"] != ABI_VERSION:
        raise CompilationError(
            ["load_compiled"],
            f"the system was generated for kernel ABI {meta['abi']}, this nhfast has "
            f"{ABI_VERSION}: generate it again",
        )
    shape = {
        "n_out": {str(k): int(v) for k, v in meta["n_out"].items()},
        "n_state": int(meta["n_state"]),
        "params": tuple(meta["params"]),
        "n_obs": int(meta["n_obs"]),
        "flags": int(meta["flags"]),
        "n_q": int(meta["n_q"]),
    }
    name = str(meta["name"])
    if source is None or _jit.backend() == "numpy":
        if code is None:
            if source is None:
                raise ValueError("load_compiled needs the C source or the code (NumPy backend)")
            raise CompilationError(
                ["cc"],
                "this process uses the NumPy backend (no C compiler, or NHFAST_BACKEND=numpy) "
                "and got only the system's C source: set CC, or pass the code",
            )
        return _numpy_system(code, shape, name, check)
    cs = _c_system(source, shape, name, check, {"generate": 0.0})
    cs.generated = False
    return cs


def compile_taylor(
    code: Code, name: str = "system", order: int | None = None, cached_only: bool = False
) -> CompiledSystem | None:
    """Generate, compile (or fetch from the cache) and load the Taylor kernel of ``code``.

    The kernel (``nh_taylor``, see :func:`nhfast.codegen.generate_taylor_c`) gives the
    normalised Taylor coefficients of the solution to any order up to
    ``NH_TAYLOR_MAX_ORDER``; ``method="taylor"`` of :func:`nhfast.integrate` runs on it. Its
    source is cached under a hash of the ``rhs`` (and solves) of ``code``, the generator and
    ``order``, the library under the hash of the source, as for :func:`compile_kernels`.

    Parameters
    ----------
    code : KernelSet or IndexedProgram
        The system (its ``rhs`` family or output is expanded).
    name : str
        The system's name, written into the source's banner.
    order : int, optional
        Also a pass unrolled for this order (faster there for a small right-hand side; see
        :func:`nhfast.codegen.unroll_pays`); any other order runs the general pass.
    cached_only : bool
        Only what the kernel cache holds: None instead of generating or compiling.

    Returns
    -------
    CompiledSystem
        With one kernel family, ``"taylor"`` (a capsule of type ``nh_taylor_fn``).

    Raises
    ------
    ValueError
        If the right-hand side uses a function the Taylor method cannot expand.
    nhfast.errors.CompilationError
        Without a C compiler (the Taylor method has no NumPy backend).
    """
    from nhfast import _core

    if _jit.backend() == "numpy":
        raise CompilationError(
            ["cc"],
            "method='taylor' needs a C compiler (the NumPy backend has no Taylor kernels): "
            "set CC, or use method='dop853'",
        )
    shape = _shape(code)
    t0 = time.perf_counter()
    key = _keys.taylor_key(_generator_fingerprint(), taylor_digest(code), name, order)
    entry = _jit.cached_source_entry(key)
    source, size = (None, None) if entry is None else (entry[0], entry[1].get("taylor_size"))
    size = None if size is None else TaylorSize.from_meta(size)
    generated = source is None or size is None  # an entry without the tape's size: again
    if cached_only and (generated or _jit.loaded_library(source) is None):
        return None
    if generated:
        with _progress.stage(f"generating the Taylor kernel of {name!r}"):
            source, size = generate_taylor(code, provenance={"system": name}, order=order)
        meta = {"system": str(name), "n_state": shape["n_state"], "taylor_size": size.as_meta()}
        _jit.store_source(key, source, meta)
    timings = {"generate": time.perf_counter() - t0}
    fixed = "" if order is None else f" unrolled for order {order}"
    label = f"compiling the Taylor kernel of {name!r}{fixed} ({len(source) // 1000} kB)"
    expect = (shape["n_state"], len(shape["params"]), 0, _core.HAS["taylor"], 0)
    lib, loaded = _load_library(source, label, expect, "Taylor", name, timings)
    return CompiledSystem(
        "c",
        {"taylor": (_core.taylor_capsule(lib.address("nh_taylor")), None)},
        {"taylor": shape["n_state"]},
        shape["n_state"],
        params=shape["params"],
        generated=generated,
        flags=_core.HAS["taylor"],
        taylor_size=size,
        **loaded,
    )
