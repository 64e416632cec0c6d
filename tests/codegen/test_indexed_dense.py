"""Dense per-lane linear algebra of indexed programs: ``param_matrix``, ``matvec``, ``solve``.

Both C kernel shapes and the NumPy backend are compared with ``numpy.linalg.solve`` /
``slogdet`` on the system matrix assembled independently here, with ``H @ e`` for the
matrix-vector products, and (at small ``n``) with the program's unrolled SymPy form; a
program with a solve is integrated and compared with SciPy's DOP853.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp

import nhfast as nh
from nhfast import _jit
from nhfast._abi import SYMBOL
from nhfast.codegen import (
    IndexedProgram,
    generate_structured_c,
    program_digest,
    structured,
    structured_numpy_kernels,
)
from nhfast.structured_field import StructuredVectorField

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

NLANES, LD = 21, 26  # lanes and lane stride of the direct kernel calls
SINGULAR, NONFINITE = 3, 5  # lanes given a singular / a non-finite system matrix


def dense_program(n: int) -> IndexedProgram:
    """Two solves (SPD and nonsymmetric K) and two matrix-vector products.

    y1: (diag(d) + u u^T + B) y1 = x / a                 (B an SPD parameter matrix)
    y2: (diag(d + s) + diag(p) M diag(q) + u w^T + s/2 1 1^T + s 1 q^T / 8) y2 = w + idx
    z1 = B (x * y2),  z2 = M^T (x + s)
    """
    prog = IndexedProgram(n)
    x = prog.state_vector("x")
    w = prog.state_vector("w")
    v = prog.state_vector("v")
    a = prog.param_vector("a")
    d = prog.param_vector("d")
    u = prog.param_vector("u")
    p = prog.param_vector("p")
    q = prog.param_vector("q")
    s = prog.param_scalar("s")
    B = prog.param_matrix("B")
    M = prog.param_matrix("M")
    y1, ld1 = prog.solve("y1", x / a, diag=d, terms=[(u, None, u), (1, B, 1)], logdet="ld1")
    y2, ld2 = prog.solve(
        "y2",
        w + prog.index,
        diag=d + s,
        terms=[(p, M, q), (u, None, w), (s / 2, None, 1), (s, None, q / 8)],
        logdet="ld2",
    )
    z1 = prog.matvec("z1", B, x * y2)
    z2 = prog.matvec("z2", M, x + s, transpose=True)
    prog.output("rhs", [y1, y2 - v, z1 + z2])
    prog.output("observables", [ld1, ld2], names=["ld1", "ld2"])
    return prog


def _unpack(n: int, xs: np.ndarray, par: np.ndarray):
    """Per-lane NumPy arrays of the inputs of dense_program (lanes first)."""
    x, w = xs[:n].T, xs[n : 2 * n].T
    v = xs[2 * n : 3 * n].T
    a, d, u, p, q = (par[k * n : (k + 1) * n].T for k in range(5))
    s = par[5 * n]
    B = par[5 * n + 1 : 5 * n + 1 + n * n].T.reshape(-1, n, n)
    M = par[5 * n + 1 + n * n :].T.reshape(-1, n, n)
    return x, w, v, a, d, u, p, q, s, B, M


def reference(n: int, xs: np.ndarray, par: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """rhs and observables of dense_program, assembled and solved lane by lane with NumPy."""
    x, w, v, a, d, u, p, q, s, B, M = _unpack(n, xs, par)
    rhs, obs = [], []
    for k in range(x.shape[0]):
        K1 = np.diag(d[k]) + np.outer(u[k], u[k]) + B[k]
        K2 = np.diag(d[k] + s[k]) + p[k][:, None] * M[k] * q[k][None, :] + np.outer(u[k], w[k])
        K2 += s[k] / 2 + s[k] * q[k][None, :] / 8
        ys, lds = [], []
        for K, b in ((K1, x[k] / a[k]), (K2, w[k] + np.arange(n))):
            if not np.all(np.isfinite(K)) or np.linalg.slogdet(K)[0] == 0:
                ys.append(np.full(n, np.nan))
                lds.append(np.nan)
            else:
                ys.append(np.linalg.solve(K, b))
                lds.append(np.linalg.slogdet(K)[1])
        z = B[k] @ (x[k] * ys[1]) + M[k].T @ (x[k] + s[k])
        rhs.append(np.concatenate([ys[0], ys[1] - v[k], z]))
        obs.append(lds)
    return np.array(rhs).T, np.array(obs).T


def inputs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t, x, par) buffers of lane stride LD (padding NaN); lane SINGULAR has K1 = 0 and
    lane NONFINITE an infinite entry of M."""
    rng = np.random.default_rng(seed)
    n_state, n_params = 3 * n, 5 * n + 1 + 2 * n * n  # those of dense_program(n)
    xs = np.full((n_state, LD), np.nan)
    par = np.full((n_params, LD), np.nan)
    xs[:, :NLANES] = rng.normal(size=(n_state, NLANES))
    a = rng.uniform(0.5, 2.0, size=(n, NLANES))
    d = rng.uniform(0.5, 2.0, size=(n, NLANES))
    u = rng.normal(size=(n, NLANES))
    p, q = rng.normal(size=(2, n, NLANES)) / 2
    s = rng.uniform(0.5, 1.0, size=(1, NLANES)) + 2 * n  # K2 safely invertible
    G = rng.normal(size=(NLANES, n, n)) / np.sqrt(n)
    B = G @ G.transpose(0, 2, 1)  # SPD
    M = rng.normal(size=(NLANES, n, n)) / np.sqrt(n)
    d[:, SINGULAR] = 0.0
    u[:, SINGULAR] = 0.0
    B[SINGULAR] = 0.0
    M[NONFINITE, 0, n - 1] = np.inf
    flat = [B.reshape(NLANES, -1).T, M.reshape(NLANES, -1).T]
    par[:, :NLANES] = np.concatenate([a, d, u, p, q, s, *flat])
    t = np.full(LD, np.nan)
    t[:NLANES] = 0.0
    return t, xs, par


def call(lib, family: str, t, xs, par, nout: int, nlanes: int = NLANES):
    out = np.full((nout, LD), 7.25)
    rc = _KERNEL(lib.address(SYMBOL[family]))(
        None, t.ctypes.data, xs.ctypes.data, par.ctypes.data, out.ctypes.data, nlanes, LD
    )
    return rc, out


def check(got: np.ndarray, want: np.ndarray) -> None:
    """Agreement to round-off on the regular lanes, NaN exactly where the reference is."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    scale = np.max(np.abs(want[ok]))
    np.testing.assert_allclose(got[ok], want[ok], rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize(
    ("n", "shape"),
    [(3, "unrolled"), (3, "looped"), (7, "unrolled"), (7, "looped"), (20, "unrolled"),
     (20, "looped"), (64, "looped")],
)  # fmt: skip
def test_dense_kernels_match_numpy_linalg(monkeypatch, n, shape):
    """C kernels (chunks of 8 lanes, stride 26) and the NumPy backend equal
    np.linalg.solve / slogdet / H @ e on independently assembled matrices; singular and
    non-finite lanes give NaN (solution and logdet) without disturbing the others."""
    monkeypatch.setattr(structured, "_CHUNK", 8)
    prog = dense_program(n)
    src = generate_structured_c(prog, unroll=shape == "unrolled")
    assert "nh_dense_solve" in src
    assert ("malloc(" in src) == (shape == "looped" and n >= 20)  # heap workspace when large
    lib, _ = _jit.build(src)
    t, xs, par = inputs(n, seed=n)
    assert (xs.shape[0], par.shape[0]) == (prog.n_state, prog.n_params)
    want = reference(n, xs[:, :NLANES], par[:, :NLANES])
    assert np.isnan(want[0][:n, SINGULAR]).all() and np.isnan(want[1][:, SINGULAR]).any()
    assert np.isnan(want[0][n:, NONFINITE]).all() and np.isnan(want[1][:, NONFINITE]).any()
    kernels = structured_numpy_kernels(prog)
    for family, ref in zip(("rhs", "observables"), want, strict=True):
        rc, out = call(lib, family, t, xs, par, prog.n_out(family))
        assert rc == 0
        check(out[:, :NLANES], ref)
        np.testing.assert_array_equal(out[:, NLANES:], 7.25)
        check(kernels[family].evaluate(t[:NLANES], xs[:, :NLANES], par[:, :NLANES]), ref)
        assert call(lib, family, t, xs, par, prog.n_out(family), nlanes=0)[0] == 0


def test_to_sympy_is_the_dense_algebra():
    """The unrolled SymPy form (explicit sums, LUsolve, log|det|) evaluated numerically
    (n = 2: the nested rational expressions grow fast with n)."""
    n = 2
    prog = dense_program(n)
    t, xs, par = inputs(n, seed=11)
    args = [*prog.state_symbols, *prog.param_symbols]
    want = reference(n, xs[:, :NLANES], par[:, :NLANES])
    for family, ref in zip(("rhs", "observables"), want, strict=True):
        f = sp.lambdify(args, prog.to_sympy(family), modules="numpy")
        lanes = [k for k in range(NLANES) if k not in (SINGULAR, NONFINITE)]
        got = np.array([f(*xs[:, k], *par[:, k]) for k in lanes]).T
        np.testing.assert_allclose(got, ref[:, lanes], rtol=1e-11, atol=1e-11)


def test_param_matrix_layout_and_components():
    """Row-major n*n parameters named name_i_j (1-based); components usable in scalars."""
    prog = IndexedProgram(2)
    x = prog.state_vector("x")
    H = prog.param_matrix("H")
    k = prog.param_scalar("k")
    names = [str(c) for c in prog.param_symbols]
    assert names == ["H_1_1", "H_1_2", "H_2_1", "H_2_2", "k"]
    assert prog.inputs[H].matrix and prog.inputs[k].offset == 4
    h12 = prog.components(H)[1]
    c = prog.scalar("c", h12 * k)
    y = prog.matvec("y", H, x)
    prog.output("rhs", [y + c])
    x1, x2 = prog.state_symbols
    H11, H12, H21, H22 = prog.param_symbols[:4]
    want = [H11 * x1 + H12 * x2 + H12 * k, H21 * x1 + H22 * x2 + H12 * k]
    assert [sp.expand(e - w) for e, w in zip(prog.to_sympy("rhs"), want, strict=True)] == [0, 0]
    rows = [[sp.Symbol(f"r{i}{j}") for j in range(2)] for i in range(2)]
    assert prog.copy().param_matrix("R", rows) is not None  # nested rows accepted
    assert len(prog.param_symbols) == 5  # the copy is independent


def test_digest_sees_dense_statements():
    """Transposing a matvec or asking for logdet changes the generated source and digest."""

    def build(transpose: bool, logdet: str | None) -> IndexedProgram:
        prog = IndexedProgram(4)
        x = prog.state_vector("x")
        H = prog.param_matrix("H")
        y = prog.matvec("y", H, x, transpose=transpose)
        z = prog.solve("z", y, diag=1, terms=[(1, H, 1)], logdet=logdet)
        prog.output("rhs", [z[0] if logdet else z])
        return prog

    progs = [build(False, None), build(True, None), build(False, "ld")]
    digests = {program_digest(p) for p in progs}
    assert len(digests) == 3
    assert program_digest(build(True, None)) == program_digest(progs[1])
    src = generate_structured_c(progs[0])
    assert "looped" in src.split("*/")[0]  # dense programs default to the looped shape


def test_bad_dense_statements():
    prog = IndexedProgram(3)
    x = prog.state_vector("x")
    a = prog.param_vector("a")
    H = prog.param_matrix("H")
    with pytest.raises(ValueError, match="not a matrix handle"):
        prog.matvec("y", a, x)
    with pytest.raises(ValueError, match="matrix H used in an expression"):
        prog.vector("y", H * x)
    with pytest.raises(ValueError, match="a term is"):
        prog.solve("y", x, terms=[(x, H)])
    with pytest.raises(ValueError, match="not a matrix handle"):
        prog.solve("y", x, terms=[(x, a, x)])
    with pytest.raises(ValueError, match="already defined"):
        prog.solve("y", x, diag=1, logdet="x")
    with pytest.raises(ValueError, match="not defined in this program"):
        prog.solve("y", x, diag=sp.Symbol("u"))
    with pytest.raises(TypeError, match="transpose must be a bool"):
        prog.matvec("y", H, x, transpose=1)
    with pytest.raises(ValueError, match="9 sympy Symbols"):
        prog.param_matrix("G", sp.symbols("g1:5"))
    y = prog.solve("y", x, diag=a)  # the names of failed statements stay free
    assert y.name == "y" and prog.statements[-1].kind == "solve"


def test_integrate_linear_system_with_solves():
    """x' = -K^{-1} x + M v,  v' = -v,  K = diag(d) + B (SPD), through nhfast.integrate, vs
    SciPy's DOP853 on the same ODE with np.linalg.solve."""
    n = 5
    prog = IndexedProgram(n)
    x = prog.state_vector("x")
    v = prog.state_vector("v")
    d = prog.param_vector("d")
    B = prog.param_matrix("B")
    M = prog.param_matrix("M")
    y, ld = prog.solve("y", x, diag=d, terms=[(1, B, 1)], logdet="ld")
    mv = prog.matvec("mv", M, v)
    prog.output("rhs", [-y + mv, -v])
    prog.output("observables", [ld, prog.reduce("xx", x * x)], names=["logdet", "xx"])
    vf = StructuredVectorField(prog, name="dense linear")
    rng = np.random.default_rng(3)
    G = rng.normal(size=(n, n)) / np.sqrt(n)
    dd = rng.uniform(0.5, 1.5, size=n)
    Bm = G @ G.T
    Mm = rng.normal(size=(n, n))
    par = np.concatenate([dd, Bm.ravel(), Mm.ravel()])
    x0 = rng.normal(size=2 * n)
    t = np.linspace(0.0, 1.0, 6)
    got = nh.integrate(vf, x0, t, params=par, method="dop853", rtol=1e-12, atol=1e-14)
    K = np.diag(dd) + Bm

    def f(_t, z):
        return np.concatenate([-np.linalg.solve(K, z[:n]) + Mm @ z[n:], -z[n:]])

    ref = solve_ivp(f, (0.0, 1.0), x0, method="DOP853", t_eval=t, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got.y[0], ref.y.T, rtol=0, atol=1e-10)
    np.testing.assert_allclose(got.observables["logdet"][0], np.linalg.slogdet(K)[1], atol=1e-13)
