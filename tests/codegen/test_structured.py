"""Structured (looped) code generation: IndexedProgram -> C kernels of the kernel ABI.

The structured Veselova kernels are compared with the fully unrolled SymPy code of
``veselova(n, form="embedded")`` (generic code generator, independent expressions); the generic
mechanism is compared with its own unrolled SymPy form and with the NumPy interpreter.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from references.veselova_hand import veselova_program

import nhfast as nh
from nhfast import _jit
from nhfast._abi import SYMBOL
from nhfast.codegen import (
    UNROLL_MAX_N,
    IndexedProgram,
    generate_structured_c,
    structured,
    structured_numpy_kernels,
)
from nhfast.structured_field import StructuredVectorField
from nhfast.systems import veselova
from nhfast.systems.veselova_body.embedded import structured_program


def potential(gamma: list) -> sp.Expr:
    n = len(gamma)
    quad = sum(sp.Rational(k + 1, 3) * gamma[k] ** 2 for k in range(n)) / 2
    return quad + sp.Rational(1, 2) * gamma[0] - sp.Rational(1, 4) * gamma[-1] * gamma[1]


def hand_structured(n: int, pot=None) -> StructuredVectorField:
    """The engine's program through the structured code generator (the same equations as
    ``veselova(n, form="embedded")``, which unrolls them through the generic one)."""
    return StructuredVectorField(structured_program(n, pot), name=f"veselova_engine_{n}")


def _points(n: int, rows: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 2 * n))  # anywhere in R^{2n}, not only on T*S^{n-1}
    a = rng.uniform(0.5, 3.0, size=(rows, n))
    return x, a


@pytest.mark.parametrize("n", [4, 5, 6])
@pytest.mark.parametrize("family", ["rhs", "observables", "divergence"])
def test_structured_veselova_matches_unrolled_embedded(n, family):
    """Same values as the unrolled SymPy field (generic codegen) to round-off."""
    vf = hand_structured(n, potential)
    ref = veselova(n, potential, form="embedded")
    x, a = _points(n, 37, seed=n)
    got = vf.evaluate(family, x, params=a)
    want = ref.evaluate(family, x, params=a)
    if family == "observables":
        got = got[:, :4]  # the embedded form has the first four (same names and order)
        assert list(ref.observables) == list(vf.observables)[:4]
    scale = np.max(np.abs(want), axis=-1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.max(scale))


def test_sympy_unrolling_equals_embedded_expressions():
    """to_sympy of the program is the embedded field (exactly, after cancellation)."""
    n = 4
    vf = hand_structured(n, potential)
    ref = veselova(n, potential, form="embedded")
    assert vf.states == ref.states and vf.params == ref.params
    for e1, e2 in zip(vf.rhs, ref.rhs, strict=True):
        assert sp.cancel(sp.together(e1 - e2)) == 0


def test_integrate_agrees_with_unrolled_path_and_odd_lane_counts():
    """Through nhfast.integrate (lane stride ld != nlanes inside blocks): same trajectories."""
    n = 6
    rng = np.random.default_rng(7)
    g = rng.normal(size=(5, n))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    m = rng.normal(size=(5, n))
    m -= np.sum(m * g, axis=1, keepdims=True) * g
    a = rng.uniform(0.7, 2.0, size=(5, n))
    t = np.linspace(0.0, 2.0, 9)
    x0 = np.concatenate([g, m], axis=1)
    kw = {"params": a, "method": "rk4", "h": 0.01, "block": 4}
    got = nh.integrate(hand_structured(n, potential), x0, t, **kw)
    ref = nh.integrate(veselova(n, potential, form="embedded"), x0, t, **kw)
    np.testing.assert_allclose(got.y, ref.y, rtol=0, atol=1e-12)
    for k in ref.observables:
        np.testing.assert_allclose(got.observables[k], ref.observables[k], atol=1e-12)


def kernels(src: str) -> str:
    """The exported kernel functions of a generated source (from the first one on)."""
    return src[src.index("NH_EXPORT int nh_") :]


def test_code_size_does_not_grow_with_n():
    """Looped kernels: the same source up to the loop bound; unrolled ones grow like n."""
    small = generate_structured_c(veselova_program(8), unroll=False)
    large = generate_structured_c(veselova_program(64), unroll=False)
    assert abs(len(large) - len(small)) < 200  # loop bounds and chunk offsets only
    assert "i < 64; ++i" in large and "i < 8; ++i" in small
    # the kernels, without the fixed-size banner and includes
    unrolled = [
        len(kernels(generate_structured_c(veselova_program(k), unroll=True))) for k in (4, 8)
    ]
    assert 1.6 < unrolled[1] / unrolled[0] < 2.4  # O(n), not O(n^2)
    assert "++i" not in generate_structured_c(veselova_program(4), unroll=True)
    # the unrolled SymPy path grows like n^2 (O(n) terms in each of 2n components)
    size = [sum(sp.count_ops(e) for e in veselova(k, form="embedded").rhs) for k in (8, 16)]
    assert size[1] > 3 * size[0]


def test_default_shape_switches_at_unroll_max_n():
    n = UNROLL_MAX_N
    assert "(unrolled)" in generate_structured_c(veselova_program(n))
    assert "(looped)" in generate_structured_c(veselova_program(n + 1))
    with pytest.raises(TypeError, match="unroll must be a bool"):
        generate_structured_c(veselova_program(4), unroll=1)


def test_loop_fusion_and_register_temporaries():
    """Dot products share one loop; the rhs needs two passes over the index."""
    src = generate_structured_c(veselova_program(16), unroll=False)
    rhs = src[src.index("int nh_rhs(") : src.index("int nh_observables(")]
    assert rhs.count("for (int64_t i = 0; i < 16; ++i)") == 2
    # the reciprocal 1/a is formed in the first pass (with the dot products) and stored
    assert "indexed group 0: reduce, reduce, vector, reduce, reduce, reduce" in rhs


def test_one_division_per_component_and_no_allocation():
    """Per lane and component one division (1/a_i, kept for the second pass); no malloc."""
    src = generate_structured_c(veselova_program(32), unroll=False)
    rhs = src[src.index("int nh_rhs(") : src.index("int nh_observables(")]
    indexed = rhs.split("for (int64_t i = 0;")[1:]
    assert len(indexed) == 2
    first, second = (part.split("/*")[0] for part in indexed)  # loop bodies, no comments
    assert first.count("/") == 1 and "1.0 / " in first
    assert "/" not in second
    assert "malloc" not in rhs


# ------------------------------------------------------------ generic mechanism ----


def _toy_program(n: int) -> IndexedProgram:
    """x' = -a x / (A x, x) + idx * s + y[0] e,  s' = sum x_i^2 - s, with time and components."""
    prog = IndexedProgram(n)
    x = prog.state_vector("x")
    s = prog.state_scalar("s")
    a = prog.param_vector("a")
    b = prog.param_scalar("b")
    t = prog.time_symbol()
    q = prog.reduce("q", a * x**2)
    x0 = prog.components(x)[0]
    y = prog.unrolled("y", [x0 * b + k for k in range(n)])
    h = prog.scalar("h", sp.sin(t) * prog.components(y)[n - 1] / q)
    z = prog.vector("z", -a * x / q + prog.index * s)
    zz = prog.reduce("zz", z * y)
    prog.output("rhs", [z + h + zz * 0, prog.components(y)[0] - s])
    prog.output("observables", [q, sp.exp(-s) * zz], names=["q", "w"])
    prog.output("divergence", [sp.Integer(0) * q - 1])
    return prog


def test_toy_program_c_numpy_and_sympy_agree():
    n = 5
    prog = _toy_program(n)
    vf = StructuredVectorField(prog, name="toy")
    plain = vf.unrolled()  # generic unrolled code path of the same program
    rng = np.random.default_rng(1)
    x = rng.normal(size=(11, n + 1))
    par = rng.uniform(0.5, 2.0, size=(11, n + 1))
    tt = rng.uniform(0, 3, size=11)
    nk = structured_numpy_kernels(prog)
    for fam in ("rhs", "observables"):
        got = vf.evaluate(fam, x, t=tt, params=par)
        want = plain.evaluate(fam, x, t=tt, params=par)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
        npv = nk[fam].evaluate(tt, x.T.copy(), par.T.copy()).T
        np.testing.assert_allclose(npv, want, rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(vf.evaluate("divergence", x, t=tt, params=par), -1.0)


@pytest.fixture(scope="module")
def dot_program():
    n = 7
    prog = IndexedProgram(n)
    x = prog.state_vector("x")
    y = prog.state_vector("y")
    d = prog.reduce("d", x * y)
    nx = prog.reduce("nx", x * x)
    prog.output("rhs", [y - d / nx * x, x * d])
    prog.output("observables", [d, nx], names=["d", "nx"])
    return StructuredVectorField(prog, name="dot")


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, (3, 14), elements=st.floats(-1e3, 1e3, allow_nan=False)))
def test_reductions_are_dot_products(dot_program, x):
    """Property: the compiled reductions are the dot products, any data."""
    xv, yv = x[:, :7], x[:, 7:]
    obs = dot_program.evaluate("observables", x)
    d = np.sum(xv * yv, axis=1)
    nx = np.sum(xv * xv, axis=1)
    np.testing.assert_allclose(obs[:, 0], d, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(obs[:, 1], nx, rtol=1e-12, atol=1e-9)
    rhs = dot_program.evaluate("rhs", x)
    np.testing.assert_allclose(rhs[:, 7:], xv * d[:, None], rtol=1e-12, atol=1e-6)


def test_numpy_backend_without_compiler(monkeypatch):
    """NHFAST_BACKEND=numpy: the same program is interpreted with NumPy inside integrate."""
    n = 4
    x0 = np.r_[0.6, 0.0, 0.0, 0.8, 0.0, 0.3, 0.1, 0.0]
    a = np.array([1.0, 1.5, 2.0, 2.5])
    t = np.linspace(0.0, 0.5, 3)
    ref = nh.integrate(veselova(n, form="structured"), x0, t, params=a, method="rk4", h=0.05)
    monkeypatch.setenv("NHFAST_BACKEND", "numpy")
    vf = veselova(n, form="structured")
    assert vf.compile().backend == "numpy"
    got = nh.integrate(vf, x0, t, params=a, method="rk4", h=0.05)
    np.testing.assert_allclose(got.y, ref.y, rtol=0, atol=1e-14)


def test_content_hash_cache_is_shared():
    n = 11
    first = veselova(n, form="structured").compile()
    second = veselova(n, form="structured").compile()
    assert second.key == first.key and second.cache_hit


def test_bad_programs():
    prog = IndexedProgram(3)
    x = prog.state_vector("x")
    with pytest.raises(ValueError, match="not defined in this program"):
        prog.reduce("r", x * sp.Symbol("u"))
    with pytest.raises(ValueError, match="used outside an element-wise expression"):
        prog.scalar("s", x + 1)
    with pytest.raises(ValueError, match="needs 3 expressions"):
        prog.unrolled("u", [1, 2])
    with pytest.raises(ValueError, match="already defined"):
        prog.reduce("x", x)
    with pytest.raises(ValueError, match="only defined in indexed loops"):
        prog.scalar("s2", prog.index)
    with pytest.raises(ValueError, match="unknown kernel family"):
        prog.output("hessian", [x])
    with pytest.raises(ValueError, match="positive int"):
        IndexedProgram(0)
    with pytest.raises(ValueError, match="needs an 'rhs' output"):
        generate_structured_c(prog)
    prog.output("rhs", [x, x])
    with pytest.raises(ValueError, match="6 rows for 3 states"):
        generate_structured_c(prog)
    with pytest.raises(ValueError, match="6 rows for 3 states"):
        StructuredVectorField(prog)
    with pytest.raises(TypeError, match="IndexedProgram"):
        StructuredVectorField("not a program")
    prog.output("rhs", [x])
    prog.output("observables", [x])
    with pytest.raises(ValueError, match="named scalar blocks"):
        StructuredVectorField(prog)
    prog2 = IndexedProgram(2)
    y = prog2.state_vector("y")
    prog2.output("rhs", [y])
    vf = StructuredVectorField(prog2)
    with pytest.raises(ValueError, match="no divergence output"):
        vf.with_divergence()
    with pytest.raises(AttributeError, match="defined by its program"):
        vf.rhs = []


# ------------------------------------------------------- kernel shapes, direct calls ----

_KERNEL = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.c_int64,
)


def _division_program(n: int) -> IndexedProgram:
    """Divisions by an input vector (twice, and squared), a built vector and a scalar."""
    prog = IndexedProgram(n)
    x = prog.state_vector("x")
    y = prog.state_vector("y")
    a = prog.param_vector("a")
    t = prog.time_symbol()
    z = prog.vector("z", x**2 + 2 + prog.index)
    r = prog.reduce("r", y / z**2 + x / a)
    q = prog.reduce("q", a * y**2 + 1)
    prog.output("rhs", [x / a - r * y / a**2 + sp.cos(t) / q, y / z - x * r / q])
    prog.output("observables", [r, q / r], names=["r", "ratio"])
    return prog


def _call(address: int, t, xs, par, nout: int, nlanes: int) -> tuple[int, np.ndarray]:
    """Call a kernel on SoA buffers with lane stride ``xs.shape[1]``; padding set to 7.25."""
    ld = xs.shape[1]
    out = np.full((nout, ld), 7.25)
    rc = _KERNEL(address)(None, t.ctypes.data, xs.ctypes.data, par.ctypes.data, out.ctypes.data,
                          nlanes, ld)  # fmt: skip
    return rc, out


@pytest.mark.parametrize("which", ["veselova", "toy", "division"])
@pytest.mark.parametrize("shape", ["unrolled", "looped", "looped-heap"])
def test_kernel_shapes_on_odd_lane_counts(monkeypatch, which, shape):
    """Both kernel shapes, across lane chunks (chunk 8, 21 lanes, stride 26) and with the
    heap workspace, equal the NumPy interpretation of the program; padding lanes untouched."""
    monkeypatch.setattr(structured, "_CHUNK", 8)
    if shape == "looped-heap":
        monkeypatch.setattr(structured, "_STACK_DOUBLES", 16)
    prog = {
        "veselova": lambda: veselova_program(6, potential),
        "toy": lambda: _toy_program(5),
        "division": lambda: _division_program(5),
    }[which]()
    src = generate_structured_c(prog, unroll=shape == "unrolled")
    assert ("malloc(" in src) == (shape == "looped-heap")
    lib, _ = _jit.build(src)
    nlanes, ld = 21, 26
    rng = np.random.default_rng(5)
    xs = np.full((prog.n_state, ld), np.nan)
    par = np.full((prog.n_params, ld), np.nan)
    xs[:, :nlanes] = rng.normal(size=(prog.n_state, nlanes))
    par[:, :nlanes] = rng.uniform(0.5, 2.0, size=(prog.n_params, nlanes))
    t = np.full(ld, np.nan)
    t[:nlanes] = rng.uniform(0.0, 3.0, size=nlanes)
    kernels = structured_numpy_kernels(prog)
    for family in prog.outputs:
        nout = prog.n_out(family)
        rc, out = _call(lib.address(SYMBOL[family]), t, xs, par, nout, nlanes)
        assert rc == 0
        want = kernels[family].evaluate(t[:nlanes], xs[:, :nlanes], par[:, :nlanes])
        np.testing.assert_allclose(out[:, :nlanes], want, rtol=1e-13, atol=1e-13)
        np.testing.assert_array_equal(out[:, nlanes:], 7.25)
        assert _call(lib.address(SYMBOL[family]), t, xs, par, nout, 0)[0] == 0
        bad = np.ascontiguousarray(xs[:, :4])  # ld = 4 < nlanes
        assert _call(lib.address(SYMBOL[family]), t, bad, par, nout, 5)[0] == -1


def test_division_program_matches_its_sympy_unrolling():
    """The reciprocal rewrite keeps the values of x/a, y/a^2, 1/z^2 (both shapes)."""
    n = 4
    prog = _division_program(n)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(9, 2 * n))
    par = rng.uniform(0.5, 2.0, size=(9, n))
    tt = rng.uniform(0, 3, size=9)
    plain = StructuredVectorField(prog, name="division").unrolled()
    want = plain.evaluate("rhs", x, t=tt, params=par)
    for unroll in (True, False):
        lib, _ = _jit.build(generate_structured_c(prog, unroll=unroll))
        xs = np.ascontiguousarray(x.T)
        ps = np.ascontiguousarray(par.T)
        rc, out = _call(lib.address(SYMBOL["rhs"]), np.ascontiguousarray(tt), xs, ps, 2 * n, 9)
        assert rc == 0
        np.testing.assert_allclose(out.T, want, rtol=1e-13, atol=1e-13)
